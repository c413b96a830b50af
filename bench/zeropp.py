#!/usr/bin/env python3
"""ZeRO++ on GPT-2-small over N ranks (default 4): quantized collectives vs fp32 ZeRO-3.

One invocation, the same machine, threads and inputs for every variant:
  forward   zero-opt --zero-pipeline "stage=3 dp=N prefetch=2 bucket-bytes=B [qwz=8|4]",
            input 1 x S per rank, zero-run --repeat R --warmup 1; time = the median
            of the timed runs on the slowest rank
  training  zero-opt --train --loss causal-lm:labels, ds_config stage 3 with
            DeepSpeed's defaults but stage3_max_reuse_distance 0 (backward re-gathers
            the parameters, ZeRO-3's memory-saving mode, which hpZ keeps in-group)
            (+ zero_quantized_weights, zero_quantized_gradients,
            zero_hpz_partition_size), global batch N x S, AdamW; K steps, the first
            left out; time = the median of the log's time_s
Printed per variant: bytes sent per rank (per forward / per step, by collective kind,
as the runtime counted them), their ratio to fp32, the time ratio to fp32, and for
training the loss after the last step next to fp32's. No timing is asserted: on a
machine with fewer cores than ranks the ranks share cores and the "network" is
shared memory, so fewer bytes buy little time here; the byte ratios are the
hardware-independent result.

Usage: build/pyenv/bin/python bench/zeropp.py [--ranks 4] [--threads 1] [--seq 128]
       [--steps 3] [--repeat 3] [--quick]
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from train_step import sh
from zerokit import mpi, tools

VOCAB = 50257


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=None)
    ap.add_argument("--work", default=None)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="seq 32, 2 steps, 2 repeats")
    ap.add_argument("--skip-train", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.seq, a.steps, a.repeat = 32, 2, 2
    N, S, T = a.ranks, a.seq, a.threads
    model = a.model or os.path.join(a.build, "bench", "gpt2_small.onnx")
    if not os.path.exists(model):
        sys.exit(f"missing {model}; run bench/make_gpt2_small.sh")
    work = a.work or os.path.join(a.build, "bench", "zeropp")
    os.makedirs(work, exist_ok=True)
    zero_opt = os.path.join(a.build, "bin", "zero-opt")
    zero_run = os.path.join(a.build, "bin", "zero-run")
    env = mpi.env(root=True, oversubscribe=True, yield_when_idle=True, threads=T)
    mpirun = mpi.mpirun(N, oversubscribe=False, bind_to="none")
    rows = []

    def sent(report):
        by_kind = {}
        for r in report["ranks"]:
            for k, v in r["bytes_sent"].items():
                by_kind[k] = max(by_kind.get(k, 0), v)
        return {k: v for k, v in by_kind.items() if v}

    # Forward.
    ids = np.random.default_rng(0).integers(0, VOCAB, size=(1, S), dtype=np.int64)
    inp = os.path.join(work, f"ids_1x{S}.npy")
    np.save(inp, ids)
    base = f"stage=3 dp={N} prefetch=2 bucket-bytes=33554432"
    fwd = {}
    for name, extra in [("fp32", ""), ("qwZ int8", " qwz=8"), ("qwZ int4", " qwz=4")]:
        tag = name.replace(" ", "_")
        zrt, w = os.path.join(work, f"fwd_{tag}.zrt"), os.path.join(work, "fwd.safetensors")
        t = time.perf_counter()
        sh(tools.zero_opt(zero_opt, model, {"input_ids": (1, S)},
                          [f"--zero-pipeline={base}{extra}"], zrt, w))
        rep, out = os.path.join(work, f"fwd_{tag}.json"), os.path.join(work, f"fwd_{tag}.out")
        sh(mpirun + [zero_run, zrt, "--weights", w, "--input", f"input_ids={inp}",
                     "--output", out, "--threads", str(T), "--repeat", str(a.repeat),
                     "--warmup", "1", "--report-json", rep], env=env)
        report = json.load(open(rep))
        wall = max(r.get("wall_time_median_s", r["wall_time_s"]) for r in report["ranks"])
        # The counters add up every run (the warm-up and the timed ones).
        fwd[name] = (wall, {k: v // (a.repeat + 1) for k, v in sent(report).items()})
        print(f"forward {name}: {wall:.3f} s, bytes sent per rank per forward "
              f"{fwd[name][1]} ({time.perf_counter() - t:.0f} s)", flush=True)
    for name, (wall, b) in fwd.items():
        total, total0 = sum(b.values()), sum(fwd["fp32"][1].values())
        rows.append((f"forward 1x{S}/rank", name, total, total / total0, wall,
                     wall / fwd["fp32"][0], ""))

    if not a.skip_train:
        from safetensors.numpy import save_file
        K = a.steps
        data = os.path.join(work, f"batches_{N}x{S}_{K}.safetensors")
        tokens = np.random.default_rng(0).integers(0, VOCAB, size=(K, N, S), dtype=np.int64)
        save_file({"input_ids": tokens, "labels": tokens.copy()}, data)
        train = {}
        for name, keys in [("fp32", {}),
                           ("hpZ 2", dict(zero_hpz_partition_size=2)),
                           ("qwZ int8 + qgZ int4", dict(zero_quantized_weights=True,
                                                        zero_quantized_gradients=True)),
                           ("qwZ + qgZ + hpZ 2", dict(zero_quantized_weights=True,
                                                      zero_quantized_gradients=True,
                                                      zero_hpz_partition_size=2))]:
            tag = "".join(c for c in name if c.isalnum())
            cfg = os.path.join(work, f"ds_{tag}.json")
            with open(cfg, "w") as f:
                json.dump({"train_batch_size": N, "train_micro_batch_size_per_gpu": 1,
                           "gradient_accumulation_steps": 1,
                           "zero_optimization": dict(stage=3, stage3_max_reuse_distance=0,
                                                     **keys),
                           "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}, f)
            zrt, w = os.path.join(work, f"train_{tag}.zrt"), os.path.join(work, "init.safetensors")
            t = time.perf_counter()
            sh(tools.zero_opt(zero_opt, model, {"input_ids": (1, S)},
                              ["--train", "--loss", "causal-lm:labels", "--config", cfg], zrt, w))
            log, rep = os.path.join(work, f"log_{tag}.json"), os.path.join(work, f"rep_{tag}.json")
            sh(mpirun + [zero_run, zrt, "--weights", w, "--data", data, "--steps", str(K),
                         "--threads", str(T), "--log-json", log, "--report-json", rep], env=env)
            steps = json.load(open(log))
            report = json.load(open(rep))
            per_step = {k: v // K for k, v in sent(report).items()}
            t_step = statistics.median(s["time_s"] for s in steps[1:]) if K > 1 \
                else steps[0]["time_s"]
            train[name] = (t_step, per_step, steps[-1]["loss"])
            print(f"train {name}: steps {[round(s['time_s'], 2) for s in steps]} s, losses "
                  f"{[round(s['loss'], 4) for s in steps]}, bytes sent per rank per step "
                  f"{per_step} ({time.perf_counter() - t:.0f} s)", flush=True)
        for name, (ts, b, loss) in train.items():
            total, total0 = sum(b.values()), sum(train["fp32"][1].values())
            rows.append((f"train step {N}x{S}", name, total, total / total0, ts,
                         ts / train["fp32"][0], f"{loss:.4f}"))

    print(f"\nGPT-2-small, {N} ranks x {T} thread(s), ZeRO-3 (prefetch, buckets)")
    print("| run | variant | bytes sent / rank | vs fp32 | time (s) | vs fp32 | last loss |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.3f} | {r[4]:.3f} | {r[5]:.2f} | {r[6]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
