#!/usr/bin/env python3
"""zero-run --simulate against real runs of the same programs on this machine.

For each layout (one rank; DP 2 at ZeRO-0 and ZeRO-3; a 2-stage pipeline with
4 micro-batches), the GPT-2 fixture's loss model (test/models/gpt2_loss.onnx)
is compiled once and then
  measured   mpirun -np N zero-run P.zrt --data ... --steps K --threads 1
             --report-json: the step time is the median of --log-json's
             time_s over the steps after the first; the peak is each rank's
             sum of arenas[].peak_live_bytes (of the last step)
  simulated  zero-run P.zrt --simulate MACHINE --report-json: simulation.step_s
             and each rank's simulation.ranks[].peak_bytes
and one line per layout prints both with their ratio. The machine description
(default machines/cpu-2core.json) is hand-written, not calibrated: the time
ratio says how far its round figures are from this machine, nothing more.
--calibrate OUT.json first measures this machine (mpirun -np 2 zero-run
--calibrate OUT.json --threads 1, as the runs use it) and simulates every
layout on that description too, in a second column. No timing is asserted. Real runs use --overlap on (communication beside compute,
as --simulate models it) and the program's main memory plan.

Usage: build/pyenv/bin/python bench/simulate.py [--zero-opt BIN] [--zero-run BIN]
       [--machine machines/cpu-2core.json] [--calibrate OUT.json] [--steps 6]
       [--seq 32 (at most 64: the fixture's positions)] [--work DIR]
"""
import argparse
import json
import os
import statistics
import sys

import numpy as np
from safetensors.numpy import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "kit"))
from zerokit import mpi, tools  # noqa: E402

MICRO = 2  # sequences per rank per micro-batch
LAYOUTS = [  # name, ranks, ds_config's zero stage, gradient accumulation, zero-opt args
    ("1 rank", 1, 0, 1, []),
    ("DP 2, ZeRO-0", 2, 0, 1, []),
    ("DP 2, ZeRO-3", 2, 3, 1, []),
    ("PP 2, 4 micro-batches", 2, 0, 4, ["--zero-pipeline=pp=2 micro-batches=4"]),
]


def ds_config(ranks, stage, accumulation, pipeline):
    dp = 1 if pipeline else ranks
    return {"train_batch_size": MICRO * accumulation * dp,
            "train_micro_batch_size_per_gpu": MICRO,
            "gradient_accumulation_steps": accumulation,
            "zero_optimization": {"stage": stage},
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
            "gradient_clipping": 0}


def measure(args, name, ranks, stage, accumulation, extra):
    work = os.path.join(args.work, name.replace(" ", "").replace(",", "_"))
    os.makedirs(work, exist_ok=True)
    pipeline = bool(extra)
    config = os.path.join(work, "ds.json")
    with open(config, "w") as f:
        json.dump(ds_config(ranks, stage, accumulation, pipeline), f)
    zrt, weights = os.path.join(work, "p.zrt"), os.path.join(work, "w.safetensors")
    shapes = {"input_ids": (MICRO, args.seq), "labels": (MICRO, args.seq)}
    tools.run(tools.zero_opt(args.zero_opt, os.path.join(ROOT, "test/models/gpt2_loss.onnx"),
                             shapes, ["--train", "--config", config, *extra], zrt, weights))
    batch = MICRO * accumulation * (1 if pipeline else ranks)
    rng = np.random.default_rng(0)
    data = os.path.join(work, "data.safetensors")
    save_file({k: rng.integers(0, 100, (args.steps, batch, args.seq)).astype(np.int64)
               for k in shapes}, data)
    report, log = os.path.join(work, "real.json"), os.path.join(work, "log.json")
    cmd = [args.zero_run, zrt, "--weights", weights, "--data", data, "--steps", args.steps,
           "--threads", 1, "--overlap", "on", "--report-json", report, "--log-json", log]
    tools.run(mpi.mpirun(ranks, cmd) if ranks > 1 else cmd)
    times = [s["time_s"] for s in json.load(open(log))][1:]
    real = json.load(open(report))
    real_peaks = [sum(a["peak_live_bytes"] for a in r["arenas"]) for r in real["ranks"]]
    sims = []  # (step_s, peaks) on each machine
    for i, machine in enumerate(args.machines):
        sim_path = os.path.join(work, f"sim{i}.json")
        tools.run([args.zero_run, zrt, "--simulate", machine, "--report-json", sim_path],
                  env=os.environ)
        sim = json.load(open(sim_path))["simulation"]
        sims.append((sim["step_s"], [r["peak_bytes"] for r in sim["ranks"]]))
    return statistics.median(times), sims, real_peaks


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--zero-opt", default=os.path.join(ROOT, "build/bin/zero-opt"))
    p.add_argument("--zero-run", default=os.path.join(ROOT, "build/bin/zero-run"))
    p.add_argument("--machine", default=os.path.join(ROOT, "machines/cpu-2core.json"))
    p.add_argument("--calibrate", metavar="OUT.json",
                   help="measure this machine into OUT.json first and simulate on it too")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--work", default="/tmp/zero-bench-simulate")
    args = p.parse_args()
    args.machines = [args.machine]
    if args.calibrate:
        tools.run(mpi.mpirun(2, [args.zero_run, "--calibrate", args.calibrate,
                                 "--threads", 1]))
        args.machines.append(args.calibrate)
    print(f"machines {', '.join(args.machines)}; gpt2_loss, {MICRO}x{args.seq} tokens per rank and "
          f"micro-batch; {args.steps} steps, median of steps 2..{args.steps}")
    columns = "".join(f" {'simulated s':>12} {'sim/meas':>9}" for _ in args.machines)
    print(f"{'layout':24} {'measured s':>11}{columns}   "
          f"peak bytes per rank: measured / simulated (first machine)")
    for name, ranks, stage, accumulation, extra in LAYOUTS:
        real_t, sims, real_peaks = measure(args, name, ranks, stage, accumulation, extra)
        peaks = ", ".join(f"{r} / {s} ({s / r:.3f})" for r, s in zip(real_peaks, sims[0][1]))
        times = "".join(f" {t:12.5f} {t / real_t:9.3f}" for t, _ in sims)
        print(f"{name:24} {real_t:11.5f}{times}   {peaks}")


if __name__ == "__main__":
    main()
