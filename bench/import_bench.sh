#!/usr/bin/env bash
# Import benchmark: zero-opt on a GPT-2-small-size export (124M parameters,
# made on demand by bench/make_gpt2_small.sh, never committed). Reports wall
# time over several runs and peak memory as a ratio of the weight bytes.
# Targets (issue: compiler foundation): < 5 s, peak RSS < 2x weight bytes.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${ZERO_BUILD_DIR:-$ROOT/build}"
RUNS="${RUNS:-3}"
"$ROOT/bench/make_gpt2_small.sh" "$BUILD/bench" >/dev/null
MODEL="$BUILD/bench/gpt2_small.onnx"
OUT="$BUILD/bench/out"
mkdir -p "$OUT"
best=""; peak=0
for i in $(seq "$RUNS"); do
  /usr/bin/time -f "%e %M" -o "$OUT/time.txt" "$BUILD/bin/zero-opt" "$MODEL" \
    --input-shape input_ids=1x128 -o "$OUT/g.mlir" --weights-out "$OUT/g.safetensors"
  read -r secs kb < "$OUT/time.txt"
  best=$(python3 -c "print(min(float('$secs'), float('${best:-1e9}')))")
  peak=$(( kb > peak ? kb : peak ))
done
weights=$(stat -c %s "$OUT/g.safetensors")
python3 - "$best" "$peak" "$weights" <<'PY'
import sys
secs, kb, weights = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print(f"import gpt2-small (124M params): best wall {secs:.2f} s (target < 5 s)")
print(f"peak RSS {kb*1024/2**20:.0f} MiB, weights {weights/2**20:.0f} MiB, ratio {kb*1024/weights:.2f}x (target < 2x)")
PY
