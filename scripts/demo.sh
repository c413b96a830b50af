#!/usr/bin/env bash
# The main job on the bundled GPT-2 fixture: import the ONNX export, compile it
# for ZeRO-3 over 2 ranks (partition, prefetch, buckets, release), run it under
# mpirun, and check the result against the 1-rank run (bit for bit) and
# onnxruntime's reference; then print each rank's memory and communication
# next to the ZeRO formulas; then train the GPT-2 loss fixture on a real text
# (the GPL as Debian ships it, byte tokens) with ZeRO-3 over 2 ranks, the loss
# falling, evaluated on held-out text every 10 steps, and plot both losses. Builds first (quietly) when needed.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${ZERO_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/build.sh" >/dev/null
"$ROOT/scripts/setup-pyenv.sh" test >/dev/null
PY="$BUILD/pyenv/bin/python"
OUT="$BUILD/demo"
rm -rf "$OUT" && mkdir -p "$OUT"
MODEL="$ROOT/test/models/gpt2.onnx"
REF="$ROOT/test/models/gpt2.ref.safetensors"
eval "$(PYTHONPATH="$ROOT/test/kit" "$PY" -m zerokit.mpi root oversubscribe yield_when_idle)"
show() { echo "\$ $*"; "$@"; }

# The reference inputs the fixture was exported with.
"$PY" - "$REF" "$OUT/input_ids.npy" <<'PYEOF'
import sys, numpy as np
from safetensors.numpy import load_file
np.save(sys.argv[2], load_file(sys.argv[1])["input.input_ids"])
PYEOF

echo "== 1. import and compile: ZeRO-3 over 2 ranks"
show "$BUILD/bin/zero-opt" "$MODEL" --input-shape input_ids=2x8 \
  --zero-pipeline="stage=3 dp=2 prefetch=2 bucket-bytes=65536" --report \
  --emit=zrt -o "$OUT/gpt2-dp2.zrt" --weights-out "$OUT/gpt2.safetensors"
"$BUILD/bin/zero-opt" "$MODEL" --input-shape input_ids=2x8 --emit=zrt \
  -o "$OUT/gpt2-dp1.zrt" --weights-out "$OUT/gpt2-dp1.safetensors"

echo
echo "== 2. run on 2 ranks, and on 1 for comparison"
show mpirun -np 2 "$BUILD/bin/zero-run" "$OUT/gpt2-dp2.zrt" \
  --weights "$OUT/gpt2.safetensors" --input input_ids="$OUT/input_ids.npy" \
  --output "$OUT/out-dp2.safetensors" --report --report-json "$OUT/report.json"
mpirun -np 1 "$BUILD/bin/zero-run" "$OUT/gpt2-dp1.zrt" \
  --weights "$OUT/gpt2-dp1.safetensors" --input input_ids="$OUT/input_ids.npy" \
  --output "$OUT/out-dp1.safetensors"

echo
echo "== 3. check"
"$PY" - "$OUT" "$REF" "$MODEL" <<'PYEOF'
import json, sys
import numpy as np
import onnx
from safetensors.numpy import load_file
out, ref, model = sys.argv[1:4]
dp2 = load_file(f"{out}/out-dp2.safetensors")["logits"]
dp1 = load_file(f"{out}/out-dp1.safetensors")["logits"]
ort = load_file(ref)["ort.logits"]
print(f"2 ranks vs 1 rank: bit-identical = {np.array_equal(dp2, dp1)}")
err = float(np.abs(dp2.astype(np.float64) - ort).max())
print(f"2 ranks vs onnxruntime: max abs error {err:.3g} "
      f"({'ok' if np.allclose(dp2, ort, rtol=1e-4, atol=1e-5) else 'FAIL'})")
# The ZeRO-3 formulas from the ONNX file: every parameter flattened and padded
# to a multiple of N, rank r keeps 1/N; a forward all-gathers the rest.
m = onnx.load(model)
N = 2
psi = sum(int(np.prod(t.dims)) * 4 for t in m.graph.initializer
          if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) > 0)
shard = sum(-(-int(np.prod(t.dims)) // N) * 4 for t in m.graph.initializer
            if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) > 0)
rep = json.load(open(f"{out}/report.json"))
print(f"parameters Psi = {psi} bytes; ZeRO-3 per rank: Psi/N = {psi // N} "
      f"(padded shards {shard}); all-gather per forward (N-1)/N*Psi = {psi * (N - 1) // N}")
for r in rep["ranks"]:
    print(f"  rank {r['rank']}: resident parameters {r['param_bytes_resident']} B, "
          f"all-gather sent {r['bytes_sent']['AllGather']} B, peak gathered "
          f"{r['peak_gathered_bytes']} B (plan {r['planned_peak_gathered_bytes']}), "
          f"peak RSS {r['peak_rss_bytes'] // (1 << 20)} MiB")
ok = np.array_equal(dp2, dp1) and np.allclose(dp2, ort, rtol=1e-4, atol=1e-5) and \
     all(r["param_bytes_resident"] == shard for r in rep["ranks"])
sys.exit(0 if ok else 1)
PYEOF
echo
echo "== training on a real text: the GPT-2 loss fixture, ZeRO-3 over 2 ranks, 60 steps"
# The GNU GPL v3 as Debian ships it (base-files), one token per byte (the
# fixture's vocabulary is 256): nanoGPT's train.bin layout, uint16; every tenth
# 2 KiB chunk held out for evaluation.
TEXT=/usr/share/common-licenses/GPL-3
"$PY" - "$TEXT" "$OUT/gpl3.bin" "$OUT/gpl3-val.bin" <<'PYEOF'
import sys, numpy as np
text = np.frombuffer(open(sys.argv[1], "rb").read(), np.uint8).astype(np.uint16)
held = np.arange(len(text)) // 2048 % 10 == 9
text[~held].tofile(sys.argv[2])
text[held].tofile(sys.argv[3])
print(f"{sys.argv[1]}: {(~held).sum()} byte tokens to train on, {held.sum()} held out")
PYEOF
cat > "$OUT/ds_config.json" <<'JSON'
{
  "train_micro_batch_size_per_gpu": 8,
  "gradient_clipping": 1.0,
  "steps_per_print": 10,
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "weight_decay": 0.01}},
  "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 3e-3,
                                               "warmup_num_steps": 10, "warmup_type": "linear"}},
  "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}
}
JSON
show "$BUILD/bin/zero-opt" "$ROOT/test/models/gpt2_loss.onnx" --input-shape input_ids=8x32 \
    --input-shape labels=8x32 --train --config "$OUT/ds_config.json" --zero-pipeline "dp=2" \
    --emit=zrt -o "$OUT/train.zrt" --weights-out "$OUT/init.safetensors"
show mpirun -np 2 "$BUILD/bin/zero-run" "$OUT/train.zrt" --weights "$OUT/init.safetensors" \
    --tokens "$OUT/gpl3.bin" --seed 1 --steps 60 --threads 1 \
    --eval-tokens "$OUT/gpl3-val.bin" --eval-every 10 --eval-batches 4 \
    --log-json "$OUT/train-log.json" --save "$OUT/final.safetensors"
show "$PY" "$ROOT/scripts/plot_log.py" "$OUT/train-log.json" -o "$OUT/train-log.png" --smooth 5
"$PY" - "$OUT/train-log.json" <<'PYEOF'
import json, sys
records = json.load(open(sys.argv[1]))
log = [r for r in records if "loss" in r]
evals = [r for r in records if "eval_loss" in r]
first = sum(s["loss"] for s in log[:5]) / 5
last = sum(s["loss"] for s in log[-5:]) / 5
print(f"loss {first:.4f} -> {last:.4f} (means of the first and last 5 of {len(log)} steps; "
      f"{'falling' if last < first - 0.5 else 'NOT falling by 0.5 nats'})")
e0, e1 = evals[0]["eval_loss"], evals[-1]["eval_loss"]
print(f"eval loss {e0:.4f} (step {evals[0]['step']}) -> {e1:.4f} (step {evals[-1]['step']}); "
      f"{'falling' if e1 < e0 else 'NOT falling'}")
sys.exit(0 if last < first - 0.5 and e1 < e0 else 1)
PYEOF
echo "demo: outputs in $OUT"
