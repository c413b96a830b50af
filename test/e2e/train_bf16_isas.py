#!/usr/bin/env python3
"""bf16 training gives the same bits at every instruction set this CPU runs.

A bf16 program's products are bf16 x bf16 (cpu/kernels/PackedGemm.h's pair kernels):
VDPBF16PS at avx512bf16, the same sequence of fused multiply-adds spelled out (DAZ and
FTZ set) at avx512 and avx2, and in C++ at generic. The GPT-2 loss fixture trained for
12 steps with the config's "bf16" (AdamW, clipping, WarmupLR) at each ISA up to the
CPU's best (ZRT_CPU_ISA), at 1 and 3 threads, must log the same losses, grad norms and
lrs bit for bit as the best ISA at 1 thread, and save the same fp32 masters; each
run's report names the ISA that ran.

Usage: train_bf16_isas.py --zero-opt Z --zero-run R --models DIR --work DIR
"""
import argparse
import json
import os
import sys

import numpy as np

from zerokit.tools import run, zero_opt

ORDER = ["generic", "avx2", "avx512", "avx512bf16"]


def runnable_isas():
    """The ISAs of ORDER up to this CPU's best (scripts/test.sh's reading of cpuinfo)."""
    flags = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = " " + line.split(":", 1)[1].strip() + " "
                break
    except OSError:
        pass
    if " fma " not in flags:
        return ORDER[:1]
    if " avx512f " in flags:
        return ORDER if " avx512_bf16 " in flags else ORDER[:3]
    return ORDER[:2] if " avx2 " in flags else ORDER[:1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    w = a.work
    os.makedirs(w, exist_ok=True)
    cfg = {"bf16": {"enabled": True}, "train_micro_batch_size_per_gpu": 4,
           "gradient_clipping": 1.0,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}},
           "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 4}}}
    with open(os.path.join(w, "ds.json"), "w") as f:
        json.dump(cfg, f)
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 100, size=(12, 4, 8), dtype=np.int64)
    from safetensors.numpy import save_file
    data = os.path.join(w, "data.safetensors")
    save_file({"input_ids": ids, "labels": ids}, data)
    prog = os.path.join(w, "bf16.zrt")
    run(zero_opt(a.zero_opt, os.path.join(a.models, "gpt2_loss.onnx"),
                 {"input_ids": (4, 8), "labels": (4, 8)},
                 ["--train", f"--config={os.path.join(w, 'ds.json')}"], prog,
                 os.path.join(w, "init.safetensors")))
    isas = runnable_isas()
    results = {}
    for isa in reversed(isas):
        for threads in (1, 3):
            tag = f"{isa}_t{threads}"
            log, rep = os.path.join(w, f"log_{tag}.json"), os.path.join(w, f"rep_{tag}.json")
            saved = os.path.join(w, f"final_{tag}.safetensors")
            os.environ["ZRT_CPU_ISA"] = isa
            try:
                run([a.zero_run, prog, "--weights", os.path.join(w, "init.safetensors"),
                     "--data", data, "--steps", "12", "--threads", str(threads),
                     "--log-json", log, "--report-json", rep, "--save", saved])
            finally:
                del os.environ["ZRT_CPU_ISA"]
            ran = json.load(open(rep))["cpu_isa"]
            if ran != isa:
                sys.exit(f"FAIL: ZRT_CPU_ISA={isa} ran {ran}")
            text = open(log).read().strip()
            rows = json.loads(text) if text.startswith("[") else \
                [json.loads(line) for line in text.splitlines()]
            steps = [(r["step"], r["loss"], r["grad_norm"], r["lr"]) for r in rows if "loss" in r]
            if len(steps) != 12:
                sys.exit(f"FAIL: {tag} logged {len(steps)} steps")
            results[tag] = (steps, open(saved, "rb").read())
    best = f"{isas[-1]}_t1"
    want_steps, want_weights = results[best]
    for tag, (steps, weights) in results.items():
        if steps != want_steps:
            bad = next(i for i, (x, y) in enumerate(zip(steps, want_steps)) if x != y)
            sys.exit(f"FAIL: {tag} differs from {best} at step {bad + 1}: "
                     f"{steps[bad]} vs {want_steps[bad]}")
        if weights != want_weights:
            sys.exit(f"FAIL: {tag}'s saved weights differ from {best}'s")
    first, last = want_steps[0][1], want_steps[-1][1]
    if not last < first:
        sys.exit(f"FAIL: the loss did not fall ({first} -> {last})")
    print(f"same bits at {' '.join(isas)} x threads 1 3: 12 losses "
          f"({first:.6f} -> {last:.6f}), grad norms, lrs and saved masters")


if __name__ == "__main__":
    main()
