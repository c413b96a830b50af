#!/usr/bin/env python3
"""ZeRO++ where it was made for: 2 nodes x 2 ranks with a slow link between them.

One invocation, the same machine, model, data and threads for every row:
  model     a ~5M-parameter Llama loss model (scripts/export_hf.py llama --loss,
            hidden 256, 4 layers, 4 heads, intermediate 688, vocab 2048), exported
            once into build/bench/llama5m_loss.onnx
  programs  ds_config ZeRO-3 (stage3_max_reuse_distance 0: backward re-gathers)
            plain, and qwZ (int8 weights) + hpZ 2 + qgZ (int4 gradients); 2 x SEQ
            tokens per rank, AdamW
  settings  one node (4 ranks, shared memory: the compute floor), then
            scripts/cluster.sh's 2 nodes x 2 with every node's link shaped to each
            --rates value (htb)
  measured  step time = the median of zero-run's log time_s over the steps after
            the first; bytes on the wire per step = the nodes' link counters over
            the run / steps; zero-run's bytes_sent_across_nodes per step
Printed: a table per setting (plain, ZeRO++, ratio) and, for the shaped links,
the best ratio this machine allows, one node's time / plain ZeRO-3's: the ranks
share this machine's cores, so the compute of a step is a floor no fewer bytes
on the link can go below. No timing is asserted.

Usage: build/pyenv/bin/python bench/multinode.py [--rates 1gbit,10gbit,100gbit]
       [--steps 5] [--seq 128] [--threads 1] [--quick]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "kit"))
from zerokit import cluster, mpi, tools  # noqa: E402

VOCAB = 2048
LLAMA = ["hidden_size=256", "intermediate_size=688", "num_hidden_layers=4",
         "num_attention_heads=4", "num_key_value_heads=4", f"vocab_size={VOCAB}",
         "max_position_embeddings=512"]
VARIANTS = [("ZeRO-3", {}),
            ("qwZ + hpZ 2 + qgZ", dict(zero_quantized_weights=True, zero_hpz_partition_size=2,
                                       zero_quantized_gradients=True))]


def sh(cmd, env=None):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(map(str, cmd))}\n"
                 f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


def export_model(build, py):
    path = os.path.join(build, "bench", "llama5m_loss.onnx")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        sets = [w for s in LLAMA for w in ("--set", s)]
        sh([py, os.path.join(ROOT, "scripts", "export_hf.py"), "llama", "--loss",
            "--batch", "2", "--seq", "32", *sets, "-o", path])
    return path


def compile_programs(zero_opt, model, work, ranks, seq):
    programs = {}
    for name, keys in VARIANTS:
        tag = "".join(c for c in name if c.isalnum())
        cfg = os.path.join(work, f"ds_{tag}.json")
        with open(cfg, "w") as f:
            json.dump({"train_batch_size": 2 * ranks, "train_micro_batch_size_per_gpu": 2,
                       "gradient_accumulation_steps": 1,
                       "zero_optimization": dict(stage=3, stage3_max_reuse_distance=0, **keys),
                       "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}, f)
        zrt, w = os.path.join(work, f"{tag}.zrt"), os.path.join(work, f"init_{tag}.safetensors")
        sh(tools.zero_opt(zero_opt, model, {"input_ids": (2, seq), "labels": (2, seq)},
                          ["--train", "--config", cfg], zrt, w))
        programs[name] = (tag, zrt, w)
    return programs


def train(launch, zero_run, program, data, a, env, tag):
    name_tag, zrt, w = program
    log = os.path.join(a.work, f"log_{name_tag}_{tag}.json")
    rep = os.path.join(a.work, f"rep_{name_tag}_{tag}.json")
    sh(launch(a.ranks, [zero_run, zrt, "--weights", w, "--data", data, "--steps", str(a.steps),
                        "--threads", str(a.threads), "--log-json", log, "--report-json", rep]),
       env=env)
    steps = json.load(open(log))
    report = json.load(open(rep))
    t = statistics.median(s["time_s"] for s in steps[1:]) if len(steps) > 1 else steps[0]["time_s"]
    return t, report.get("bytes_sent_across_nodes"), steps[-1]["loss"]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--rates", default="1gbit,10gbit,100gbit")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="seq 32, 3 steps, 1gbit only")
    a = ap.parse_args()
    if a.quick:
        a.seq, a.steps, a.rates = 32, 3, "1gbit"
    a.ranks = 4
    why = cluster.unsupported()
    if why:
        print(f"UNSUPPORTED: {why}")
        return 77
    a.work = a.work or os.path.join(a.build, "bench", "multinode")
    os.makedirs(a.work, exist_ok=True)
    py = os.path.join(a.build, "pyenv", "bin", "python")
    zero_opt, zero_run = (os.path.join(a.build, "bin", b) for b in ("zero-opt", "zero-run"))
    model = export_model(a.build, py)
    programs = compile_programs(zero_opt, model, a.work, a.ranks, a.seq)
    from safetensors.numpy import save_file
    data = os.path.join(a.work, f"tokens_{a.seq}_{a.steps}.safetensors")
    tokens = np.random.default_rng(0).integers(0, VOCAB, size=(a.steps, 2 * a.ranks, a.seq),
                                               dtype=np.int64)
    save_file({"input_ids": tokens, "labels": tokens.copy()}, data)
    env = mpi.env(root=True, oversubscribe=True, yield_when_idle=True)
    rows = []
    one = {}
    for name, program in programs.items():
        t0 = time.perf_counter()
        one[name] = train(mpi.mpirun, zero_run, program, data, a, env, "one")
        print(f"one node, {name}: {one[name][0]:.3f} s/step, loss {one[name][2]:.4f} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    rows.append(("one node (shared memory)", {n: (t, None, None) for n, (t, _, _) in one.items()}))
    for rate in a.rates.split(","):
        got = {}
        with cluster.cluster(2, 2, rate=rate) as c:
            for name, program in programs.items():
                before = sum(c.bytes_sent().values())
                t, reported, loss = train(lambda np_, cmd: c.mpirun(np_, cmd, map_by="slot"),
                                          zero_run, program, data, a, env, rate)
                wire = sum(c.bytes_sent().values()) - before
                got[name] = (t, wire // a.steps, reported // a.steps if reported else None)
                print(f"{rate}, {name}: {t:.3f} s/step, wire {wire // a.steps} B/step, "
                      f"reported {got[name][2]} B/step, loss {loss:.4f}", flush=True)
        rows.append((f"2 nodes x 2, links {rate}", got))
    plain, zpp = (n for n, _ in VARIANTS)
    print(f"\nLlama ~5M, {a.ranks} ranks x {a.threads} thread(s), 2 x {a.seq} tokens per rank, "
          f"ZeRO-3 with backward re-gathers")
    print("| setting | ZeRO-3 s/step | ZeRO++ s/step | ZeRO++ / ZeRO-3 | best ratio here "
          "(one node / ZeRO-3) | wire B/step ZeRO-3 | wire B/step ZeRO++ | bytes ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for setting, got in rows:
        tp, wp, _ = got[plain]
        tz, wz, _ = got[zpp]
        best = one[plain][0] / tp
        wires = (f"{wp} | {wz} | {wz / wp:.3f}" if wp else "- | - | -")
        print(f"| {setting} | {tp:.3f} | {tz:.3f} | {tz / tp:.2f} | {best:.2f} | {wires} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
