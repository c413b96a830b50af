#!/usr/bin/env python3
"""zero-opt --plan auto's pick against an exhaustive measured sweep, on this machine.

One invocation:
  calibrate  mpirun -np 2 zero-run --calibrate WORK/cal.json --threads 1
  plan       zero-opt MODEL --plan auto --machine WORK/cal.json --world 2
             --global-batch B --max-memory-per-rank CAP --plan-out WORK/plan
             (the Llama of bench/simulate.py, SEQ tokens a sequence)
  sweep      every layout the planner built (WORK/plan/layouts/N: its ds_config
             and --zero-pipeline string), compiled again with the weights and
             run: mpirun -np 2 zero-run --threads 1 --overlap on --steps K, the
             median of --log-json's time_s over steps 2..K, the least of
             --rounds runs (the rounds go through every layout in turn); its
             peak per rank, the largest sum of --report-json's
             arenas[].peak_live_bytes
Printed: each layout (planned s/step and bytes, measured s/step and bytes,
whether it fits the cap measured and planned), the planner's pick, the best
measured layout within the cap, and the pick's measured time over the best's.
No timing is asserted.

Usage: build/pyenv/bin/python bench/plan_sweep.py [--cap 80MiB] [--global-batch 8]
       [--seq 128] [--steps 6] [--rounds 2] [--work DIR] [--build build]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import sys

import numpy as np
from safetensors.numpy import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "kit"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from zerokit import mpi, tools  # noqa: E402
import simulate  # noqa: E402  (the models and their export)




def parse_bytes(text):
    m = re.fullmatch(r"([0-9.]+)\s*(|KiB|MiB|GiB)", text)
    if not m:
        sys.exit(f"--cap {text}: expected a number of bytes with KiB, MiB or GiB")
    return int(float(m[1]) * {"": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[m[2]])


class Layout:
    def __init__(self, a, model, folder):
        self.folder = folder
        self.config = os.path.join(folder, "ds_config.json")
        self.pipeline = open(os.path.join(folder, "zero-pipeline.txt")).read().strip()
        sim_path = os.path.join(folder, "simulation.json")
        self.built = os.path.exists(sim_path)
        self.times, self.peak = [], None
        if not self.built:
            return
        sim = json.load(open(sim_path))["simulation"]
        self.planned_s = sim["step_s"]
        self.planned_bytes = max(r.get("device_planned_bytes", r["peak_bytes"])
                                 for r in sim["ranks"])
        cfg = json.load(open(self.config))
        self.micro = cfg["train_micro_batch_size_per_gpu"]
        self.name = (f"ZeRO-{cfg['zero_optimization'].get('stage', 0)} micro {self.micro} "
                     f"accumulation {cfg['gradient_accumulation_steps']}"
                     + (" offload" if "offload_optimizer" in cfg["zero_optimization"] else "")
                     + (f" {self.pipeline}" if self.pipeline else ""))
        self.zrt = os.path.join(folder, "run.zrt")
        self.weights = os.path.join(folder, "run.safetensors")
        extra = [f"--zero-pipeline={self.pipeline}"] if self.pipeline else []
        tools.run([a.zero_opt, model, f"--input-shape=input_ids={self.micro}x{a.seq}",
            f"--input-shape=labels={self.micro}x{a.seq}", "--train", "--config", self.config,
            *extra, "--emit=zrt", "-o", self.zrt, "--weights-out", self.weights])

    def measure(self, a):
        log = os.path.join(self.folder, "log.json")
        report = os.path.join(self.folder, "report.json")
        tools.run(mpi.mpirun(2, [a.zero_run, self.zrt, "--weights", self.weights, "--data", a.data,
                          "--steps", a.steps, "--threads", 1, "--overlap", "on",
                          "--log-json", log, "--report-json", report]), env=a.env)
        self.times.append(statistics.median(s["time_s"] for s in json.load(open(log))[1:]))
        ranks = json.load(open(report))["ranks"]
        self.peak = max(sum(x["peak_live_bytes"] for x in r["arenas"]) for r in ranks)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--cap", default="80MiB")
    p.add_argument("--global-batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--work", default=None)
    a = p.parse_args()
    cap = parse_bytes(a.cap)
    a.work = a.work or os.path.join(a.build, "bench", "plan_sweep")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    a.py = os.path.join(a.build, "pyenv", "bin", "python")
    a.zero_opt, a.zero_run = (os.path.join(a.build, "bin", b) for b in ("zero-opt", "zero-run"))
    a.env = mpi.env(root=True, oversubscribe=True)
    model = simulate.export(a, "llama")
    machine = os.path.join(a.work, "cal.json")
    tools.run(mpi.mpirun(2, [a.zero_run, "--calibrate", machine, "--threads", 1]), env=a.env)
    plan = os.path.join(a.work, "plan")
    tools.run([a.zero_opt, model, f"--input-shape=input_ids=1x{a.seq}",
        f"--input-shape=labels=1x{a.seq}", "--plan", "auto", "--machine", machine,
        "--world", 2, "--global-batch", a.global_batch, "--max-memory-per-rank", cap,
        "--plan-out", plan])
    tokens = np.random.default_rng(0).integers(0, simulate.VOCAB,
                                               (a.steps, a.global_batch, a.seq))
    a.data = os.path.join(a.work, "data.safetensors")
    save_file({"input_ids": tokens.astype(np.int64), "labels": tokens.astype(np.int64)},
              a.data)
    base = os.path.join(plan, "layouts")
    layouts = [Layout(a, model, os.path.join(base, d))
               for d in sorted(os.listdir(base), key=int)]
    built = [l for l in layouts if l.built]
    for _ in range(a.rounds):
        for l in built:
            l.measure(a)
    chosen_config = open(os.path.join(plan, "ds_config.json")).read()
    chosen_pipeline = open(os.path.join(plan, "zero-pipeline.txt")).read().strip()
    pick = next(l for l in built if open(l.config).read() == chosen_config
                and l.pipeline == chosen_pipeline)
    fits = [l for l in built if l.peak <= cap]
    best = min(fits, key=lambda l: min(l.times))
    print(f"Llama ~4M, world 2, global batch {a.global_batch} x {a.seq} tokens, cap "
          f"{cap} bytes per rank; calibrated on this machine ({machine}); "
          f"{len(built)} layouts built of {len(layouts)} tried")
    print("| layout | planned s/step | planned bytes/rank | measured s/step | "
          "measured peak bytes/rank | fits (planned / measured) |")
    print("|---|---|---|---|---|---|")
    for l in sorted(built, key=lambda l: min(l.times)):
        mark = " (pick)" if l is pick else ""
        print(f"| {l.name}{mark} | {l.planned_s:.4f} | {l.planned_bytes} | "
              f"{min(l.times):.4f} | {l.peak} | "
              f"{'yes' if l.planned_bytes <= cap else 'no'} / {'yes' if l.peak <= cap else 'no'} |")
    print(f"\npick: {pick.name}: measured {min(pick.times):.4f} s/step, peak {pick.peak} bytes "
          f"({'within' if pick.peak <= cap else 'OVER'} the cap)")
    print(f"best measured within the cap: {best.name}: {min(best.times):.4f} s/step")
    print(f"pick / best: {min(pick.times) / min(best.times):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
