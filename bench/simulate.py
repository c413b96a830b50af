#!/usr/bin/env python3
"""zero-run --simulate on a calibrated description against real runs, layout by layout.

One invocation, this machine:
  calibrate  mpirun -np R zero-run --calibrate WORK/calR.json --threads 1 for
             R = 1 and 2 (the ranks as the runs use the machine: a layout of
             R ranks is simulated on calR.json); for the layout across nodes,
             the same on scripts/cluster.sh's 2 namespace nodes x 1 rank with
             their links shaped to --rate (WORK/cal_nodes.json)
  models     two shapes, exported once into build/bench with
             scripts/export_hf.py --loss (random weights): a Llama (hidden 256,
             4 layers, SwiGLU 688, RoPE, RMSNorm, vocab 2048) and a GPT-2
             (n_embd 256, 4 layers, GELU, LayerNorm, learned positions, tied
             embeddings, vocab 2048), 2 x SEQ tokens per rank and micro-batch
  layouts    1 rank; DP 2 at ZeRO-0/1/2/3; ZeRO-3 with 4 micro-batches;
             pipelines of 2 stages (1F1B and GPipe, 4 micro-batches);
             activation checkpointing; bf16 (1 rank and ZeRO-3); the optimizer
             offloaded to cpu (ZeRO-2) and to nvme (ZeRO-3); ZeRO++ (qwZ + qgZ);
             ZeRO-3 over 2 nodes x 1 rank with a shaped link (skipped, saying
             why, where namespaces cannot be made)
  measured   mpirun -np N zero-run P.zrt --threads 1 --overlap on --steps K:
             the median of --log-json's time_s over steps 2..K, the least of
             --rounds such runs (the rounds go through every layout in turn: a
             burst of other work on this shared machine only ever adds time);
             the peak per rank: the sum of --report-json's
             arenas[].peak_live_bytes
  simulated  zero-run P.zrt --simulate WORK/calR.json --report-json:
             simulation.step_s and simulation.ranks[].peak_bytes
Printed: one row per model and layout (measured, simulated, error; peaks and
their ratio), then per model and over both the median and worst |error| and
Kendall's tau between the measured and the simulated order. No timing is
asserted.

Usage: build/pyenv/bin/python bench/simulate.py [--steps 6] [--seq 128]
       [--rounds 2] [--rate 1gbit] [--models llama,gpt2] [--layouts REGEX]
       [--work DIR] [--build build]
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
from zerokit import cluster, mpi, tools  # noqa: E402

MICRO = 2  # sequences per rank per micro-batch
VOCAB = 2048
MODELS = {
    "llama": ["hidden_size=256", "intermediate_size=688", "num_hidden_layers=4",
              "num_attention_heads=4", "num_key_value_heads=4", f"vocab_size={VOCAB}",
              "max_position_embeddings=512"],
    "gpt2": ["n_embd=256", "n_layer=4", "n_head=4", f"vocab_size={VOCAB}", "n_positions=512"],
}
# The files bench/multinode.py exports too (the same Llama).
MODEL_FILES = {"llama": "llama5m_loss.onnx", "gpt2": "gpt2s_loss.onnx"}


def layouts(work):
    """name, ranks, zero_optimization keys, accumulation, bf16, zero-opt args, nodes."""
    nvme = os.path.join(work, "nvme")
    return [
        ("1 rank", 1, {"stage": 0}, 1, False, [], 0),
        ("DP 2, ZeRO-0", 2, {"stage": 0}, 1, False, [], 0),
        ("DP 2, ZeRO-1", 2, {"stage": 1}, 1, False, [], 0),
        ("DP 2, ZeRO-2", 2, {"stage": 2}, 1, False, [], 0),
        ("DP 2, ZeRO-3", 2, {"stage": 3}, 1, False, [], 0),
        ("DP 2, ZeRO-3, 4 micro-batches", 2, {"stage": 3}, 4, False, [], 0),
        ("PP 2, 1F1B, 4 micro-batches", 2, {"stage": 0}, 4, False,
         ["--zero-pipeline=pp=2 micro-batches=4 schedule=1f1b"], 0),
        ("PP 2, GPipe, 4 micro-batches", 2, {"stage": 0}, 4, False,
         ["--zero-pipeline=pp=2 micro-batches=4 schedule=gpipe"], 0),
        ("1 rank, checkpointing", 1, {"stage": 0}, 1, False,
         ["--zero-pipeline=activation-checkpoint-interval=1"], 0),
        ("1 rank, bf16", 1, {"stage": 0}, 1, True, [], 0),
        ("DP 2, ZeRO-3, bf16", 2, {"stage": 3}, 1, True, [], 0),
        ("DP 2, ZeRO-2, optimizer on cpu", 2,
         {"stage": 2, "offload_optimizer": {"device": "cpu"}}, 1, False, [], 0),
        ("DP 2, ZeRO-3, optimizer on nvme", 2,
         {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": nvme}}, 1, False,
         [], 0),
        ("DP 2, ZeRO++ qwZ + qgZ", 2,
         {"stage": 3, "zero_quantized_weights": True, "zero_quantized_gradients": True}, 1,
         False, [], 0),
        ("2 nodes x 1, ZeRO-3, shaped link", 2, {"stage": 3}, 1, False, [], 2),
    ]




def export(a, name):
    path = os.path.join(a.build, "bench", MODEL_FILES[name])
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        sets = [w for s in MODELS[name] for w in ("--set", s)]
        kind = "llama" if name == "llama" else "gpt2"
        tools.run([a.py, os.path.join(ROOT, "scripts", "export_hf.py"), kind, "--loss",
            "--batch", "2", "--seq", "32", *sets, "-o", path])
    return path


class Case:
    """One model in one layout: compiled, its data made, measured and simulated."""

    def __init__(self, a, model, model_path, layout):
        (self.layout, self.ranks, zero, self.accum, bf16, extra, self.nodes) = layout
        self.model = model
        tag = re.sub(r"[^A-Za-z0-9]+", "_", f"{model}_{self.layout}").strip("_")
        self.work = os.path.join(a.work, tag)
        os.makedirs(self.work, exist_ok=True)
        pipeline = any("pp=" in e for e in extra)
        dp = 1 if pipeline else self.ranks
        config = {"train_batch_size": MICRO * self.accum * dp,
                  "train_micro_batch_size_per_gpu": MICRO,
                  "gradient_accumulation_steps": self.accum,
                  "zero_optimization": zero,
                  "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
                  "gradient_clipping": 1.0}
        if bf16:
            config["bf16"] = {"enabled": True}
        if "nvme_path" in zero.get("offload_optimizer", {}):
            os.makedirs(zero["offload_optimizer"]["nvme_path"], exist_ok=True)
        cfg = os.path.join(self.work, "ds.json")
        with open(cfg, "w") as f:
            json.dump(config, f)
        self.zrt = os.path.join(self.work, "p.zrt")
        self.weights = os.path.join(self.work, "w.safetensors")
        shapes = {"input_ids": (MICRO, a.seq), "labels": (MICRO, a.seq)}
        tools.run(tools.zero_opt(a.zero_opt, model_path, shapes,
                                 ["--train", "--config", cfg, *extra], self.zrt, self.weights))
        batch = MICRO * self.accum * dp
        tokens = np.random.default_rng(0).integers(0, VOCAB, (a.steps, batch, a.seq))
        self.data = os.path.join(self.work, "data.safetensors")
        save_file({"input_ids": tokens.astype(np.int64),
                   "labels": tokens.astype(np.int64)}, self.data)
        self.times = []
        self.peaks = None

    def measure(self, a, launch):
        report = os.path.join(self.work, "real.json")
        log = os.path.join(self.work, "log.json")
        cmd = [a.zero_run, self.zrt, "--weights", self.weights, "--data", self.data,
               "--steps", a.steps, "--threads", 1, "--overlap", "on",
               "--report-json", report, "--log-json", log]
        tools.run(launch(self.ranks, cmd), env=a.env)
        self.times.append(statistics.median(s["time_s"] for s in json.load(open(log))[1:]))
        real = json.load(open(report))
        self.peaks = [sum(x["peak_live_bytes"] for x in r["arenas"]) for r in real["ranks"]]

    def simulate(self, a, machine):
        out = os.path.join(self.work, "sim.json")
        cmd = [a.zero_run, self.zrt, "--simulate", machine, "--report-json", out]
        if self.nodes:
            cmd += ["--nodes", self.nodes]
        tools.run(cmd)
        sim = json.load(open(out))["simulation"]
        self.sim_time = sim["step_s"]
        self.sim_peaks = [r["peak_bytes"] for r in sim["ranks"]]


def kendall_tau(x, y):
    n, s = len(x), 0
    for i in range(n):
        for j in range(i + 1, n):
            s += np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])
    return s / (n * (n - 1) / 2) if n > 1 else float("nan")


def summary(label, cases):
    errors = [c.sim_time / min(c.times) - 1 for c in cases]
    tau = kendall_tau([min(c.times) for c in cases], [c.sim_time for c in cases])
    worst = max(cases, key=lambda c: abs(c.sim_time / min(c.times) - 1))
    print(f"{label}: {len(cases)} layouts, median |error| "
          f"{statistics.median(abs(e) for e in errors):.1%}, worst "
          f"{abs(worst.sim_time / min(worst.times) - 1):.1%} ({worst.model}, {worst.layout}), "
          f"Kendall tau {tau:.3f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--rate", default="1gbit", help="the shaped link of the layout across nodes")
    p.add_argument("--models", default="llama,gpt2")
    p.add_argument("--layouts", default="", help="only the layouts whose name matches")
    p.add_argument("--work", default=None)
    a = p.parse_args()
    a.work = a.work or os.path.join(a.build, "bench", "simulate")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    a.py = os.path.join(a.build, "pyenv", "bin", "python")
    a.zero_opt, a.zero_run = (os.path.join(a.build, "bin", b) for b in ("zero-opt", "zero-run"))
    a.env = mpi.env(root=True, oversubscribe=True)
    why_not_nodes = cluster.unsupported()
    chosen = [l for l in layouts(a.work) if re.search(a.layouts, l[0])
              and not (l[6] and why_not_nodes)]
    if why_not_nodes:
        print(f"skipped: the layout across nodes ({why_not_nodes})")

    machines = {}  # ranks -> the calibration with that many ranks on the node
    for ranks in (1, 2):
        machines[ranks] = os.path.join(a.work, f"cal{ranks}.json")
        tools.run(mpi.mpirun(ranks, [a.zero_run, "--calibrate", machines[ranks], "--threads", 1]),
           env=a.env)
    cases = [Case(a, m, export(a, m), l) for m in a.models.split(",") for l in chosen]
    local = [c for c in cases if not c.nodes]
    across = [c for c in cases if c.nodes]
    for _ in range(a.rounds):
        for c in local:
            c.measure(a, mpi.mpirun)
    for c in local:
        c.simulate(a, machines[c.ranks])
    if across:
        with cluster.cluster(2, 1, rate=a.rate) as cl:
            nodes_machine = os.path.join(a.work, "cal_nodes.json")
            tools.run(cl.mpirun(2, [a.zero_run, "--calibrate", nodes_machine, "--threads", 1],
                         map_by="slot"), env=a.env)
            for _ in range(a.rounds):
                for c in across:
                    c.measure(a, lambda n, cmd: cl.mpirun(n, cmd, map_by="slot"))
        for c in across:
            c.simulate(a, nodes_machine)
        shutil.rmtree(os.path.join(a.work, "nvme"), ignore_errors=True)

    print(f"calibrated on this machine: {', '.join(machines.values())} (1 and 2 ranks); "
          f"{MICRO} x {a.seq} tokens per rank and "
          f"micro-batch, {a.steps} steps, the least of {a.rounds} rounds' medians")
    print("| model | layout | measured s/step | simulated s/step | error | "
          "peak bytes per rank, measured / simulated (ratio) |")
    print("|---|---|---|---|---|---|")
    for c in cases:
        real = min(c.times)
        peaks = ", ".join(f"{r} / {s} ({s / r:.3f})" for r, s in zip(c.peaks, c.sim_peaks))
        print(f"| {c.model} | {c.layout} | {real:.4f} | {c.sim_time:.4f} | "
              f"{c.sim_time / real - 1:+.1%} | {peaks} |")
    print()
    for m in a.models.split(","):
        summary(m, [c for c in cases if c.model == m])
    summary("both", cases)
    worst_peak = max(abs(s / r - 1) for c in cases for r, s in zip(c.peaks, c.sim_peaks))
    print(f"peak bytes: worst |simulated / measured - 1| {worst_peak:.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
