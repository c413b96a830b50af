#!/usr/bin/env python3
"""zero-run --simulate at cluster scale against throughputs people published.

For each published run below: the model's shape exported with
scripts/export_hf.py llama --loss --no-weights (no weights exist anywhere),
compiled with zero-opt --train --no-weights as a ZeRO-3 (FSDP full-shard) bf16
step of micro-batch 1 x SEQ tokens, 4 gradient-accumulation steps, activation
checkpointing of every layer, over 64 ranks, and simulated on
machines/a100-80gb-sxm-8x.json with --nodes 8. Printed per run: the predicted
step, tokens/s per GPU (4 x SEQ / step), MFU as the simulator counts it, the
peak GiB per rank, and the published tokens/s per GPU beside them with the
ratio. No timing is asserted.

Published figures (tokens/s per GPU = tokens / (GPUs x seconds)):
  Llama-2 7B, 13B  Touvron et al. 2023, "Llama 2: Open Foundation and
                   Fine-Tuned Chat Models", Table 2: 184,320 and 368,640
                   A100-80GB GPU hours for 2.0T tokens of 4096-token sequences
                   (3014 and 1507 tokens/s per GPU; GPU hours count the whole
                   run, so these are lower bounds of the step's throughput)
  MPT-7B           MosaicML, "Introducing MPT-7B" (2023-05-05): 1T tokens on
                   440 A100-40GB in 9.5 days with FSDP (2769 tokens/s per GPU;
                   2048-token sequences). Simulated with Llama-7B's shape (the
                   same parameters and FLOPs per token; MPT's ALiBi and GELU
                   MLP differ) on the 80 GB description.

Usage: build/pyenv/bin/python bench/published.py [--world 64] [--nodes 8]
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "kit"))
from zerokit import tools  # noqa: E402
SHAPES = {
    "7b": ["hidden_size=4096", "intermediate_size=11008", "num_attention_heads=32",
           "num_key_value_heads=32", "num_hidden_layers=32"],
    "13b": ["hidden_size=5120", "intermediate_size=13824", "num_attention_heads=40",
            "num_key_value_heads=40", "num_hidden_layers=40"],
}
RUNS = [  # name, shape, sequence, published tokens/s per GPU
    ("Llama-2 7B", "7b", 4096, 2.0e12 / (184320 * 3600)),
    ("Llama-2 13B", "13b", 4096, 2.0e12 / (368640 * 3600)),
    ("MPT-7B", "7b", 2048, 1.0e12 / (440 * 9.5 * 86400)),
]
ACCUMULATION = 4




def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--world", type=int, default=64)
    ap.add_argument("--nodes", type=int, default=8)
    a = ap.parse_args()
    work = os.path.join(a.build, "bench", "published")
    os.makedirs(work, exist_ok=True)
    py = os.path.join(a.build, "pyenv", "bin", "python")
    zero_opt, zero_run = (os.path.join(a.build, "bin", b) for b in ("zero-opt", "zero-run"))
    machine = os.path.join(ROOT, "machines", "a100-80gb-sxm-8x.json")
    print(f"ZeRO-3 bf16, micro-batch 1, {ACCUMULATION} accumulation steps, checkpointing, "
          f"{a.world} ranks on {a.nodes} nodes of {machine}")
    print("| run | sequence | predicted s/step | predicted tokens/s/GPU | MFU | peak GiB/rank | "
          "published tokens/s/GPU | predicted / published |")
    print("|---|---|---|---|---|---|---|---|")
    for name, shape, seq, published in RUNS:
        model = os.path.join(work, f"llama_{shape}_loss.onnx")
        if not os.path.exists(model):
            sets = [w for s in SHAPES[shape] + ["vocab_size=32000",
                                                "max_position_embeddings=4096"]
                    for w in ("--set", s)]
            tools.run([py, os.path.join(ROOT, "scripts", "export_hf.py"), "llama", "--loss",
                "--no-weights", *sets, "-o", model])
        config = os.path.join(work, f"ds_{shape}_{seq}.json")
        with open(config, "w") as f:
            json.dump({"train_batch_size": a.world * ACCUMULATION,
                       "train_micro_batch_size_per_gpu": 1,
                       "gradient_accumulation_steps": ACCUMULATION,
                       "bf16": {"enabled": True}, "zero_optimization": {"stage": 3},
                       "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
                       "gradient_clipping": 1.0}, f)
        zrt = os.path.join(work, f"{shape}_{seq}.zrt")
        tools.run([zero_opt, model, f"--input-shape=input_ids=1x{seq}",
                   f"--input-shape=labels=1x{seq}", "--train", "--config", config,
                   "--no-weights", "--zero-pipeline=activation-checkpoint-interval=1",
                   "--emit=zrt", "-o", zrt])
        report = os.path.join(work, f"{shape}_{seq}.json")
        tools.run([zero_run, zrt, "--simulate", machine, "--nodes", a.nodes,
                   "--report-json", report])
        sim = json.load(open(report))["simulation"]
        tokens = ACCUMULATION * seq / sim["step_s"]
        peak = max(r["peak_bytes"] for r in sim["ranks"]) / 2**30
        print(f"| {name} | {seq} | {sim['step_s']:.2f} | {tokens:.0f} | {sim['mfu']:.3f} | "
              f"{peak:.1f} | {published:.0f} | {tokens / published:.2f} |", flush=True)
        os.remove(zrt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
