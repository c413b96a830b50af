#!/usr/bin/env python3
"""Planning a model that is not here: zero-opt's time and memory on a 70B graph.

One invocation:
  export   scripts/export_hf.py llama --loss --no-weights with Llama-2-70B's shape
           (hidden 8192, 80 layers, 64 heads, 8 KV heads, intermediate 28672,
           vocab 32000): built on the meta device, its 69B parameters written as
           references to an external-data file that does not exist
  compile  zero-opt --train --no-weights, a DeepSpeed config of ZeRO-3, bf16,
           micro-batch 1 x SEQ tokens, over --world ranks (default 1024):
           wall time and peak RSS of the zero-opt process (getrusage), against
           the issue's bound (a minute, 8 GiB)
  simulate the same compiled over --simulate-world ranks (default 128: 16 nodes
           of 8 H100, machines/h100-sxm-8x.json), zero-run --simulate's wall time
           and its predicted step (0 skips it)
No timing is asserted. Usage: build/pyenv/bin/python bench/compile_scale.py
       [--world 1024] [--simulate-world 128] [--seq 2048] [--layers 80]
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA_70B = ["hidden_size=8192", "intermediate_size=28672", "num_attention_heads=64",
             "num_key_value_heads=8", "vocab_size=32000", "max_position_embeddings=4096"]


def timed(cmd):
    """Runs CMD; returns (wall seconds, its own peak RSS in bytes, stdout+stderr)."""
    t0 = time.perf_counter()
    p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"failed ({code}): {' '.join(map(str, cmd))}\n{out[-3000:]}")
    return wall, usage.ru_maxrss * 1024, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--world", type=int, default=1024)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=80)
    ap.add_argument("--simulate-world", type=int, default=128)
    a = ap.parse_args()
    work = os.path.join(a.build, "bench", "compile_scale")
    os.makedirs(work, exist_ok=True)
    py = os.path.join(a.build, "pyenv", "bin", "python")
    model = os.path.join(work, f"llama70b_{a.layers}l_loss.onnx")
    if not os.path.exists(model):
        sets = [w for s in LLAMA_70B + [f"num_hidden_layers={a.layers}"] for w in ("--set", s)]
        t, _, _ = timed([py, os.path.join(ROOT, "scripts", "export_hf.py"), "llama", "--loss",
                         "--no-weights", *sets, "-o", model])
        print(f"exported {model} in {t:.0f} s ({os.path.getsize(model) / 2**20:.1f} MiB, "
              "no weights)", flush=True)
    zero_opt = os.path.join(a.build, "bin", "zero-opt")

    def compile_(world):
        cfg = os.path.join(work, f"ds_{world}.json")
        with open(cfg, "w") as f:
            json.dump({"train_batch_size": world, "train_micro_batch_size_per_gpu": 1,
                       "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}, f)
        zrt = os.path.join(work, f"llama70b_{world}.zrt")
        wall, rss, _ = timed([zero_opt, model, f"--input-shape=input_ids=1x{a.seq}",
                              f"--input-shape=labels=1x{a.seq}", "--train", "--config", cfg,
                              "--no-weights", "--emit=zrt", "-o", zrt])
        print(f"zero-opt: {a.layers} layers, ZeRO-3 bf16 over {world} ranks, 1 x {a.seq} "
              f"tokens per rank: {wall:.1f} s, peak RSS {rss / 2**30:.2f} "
              f"GiB ({wall / 60:.2f}x a minute, {rss / 8 / 2**30:.3f}x 8 GiB); program "
              f"{os.path.getsize(zrt) / 2**20:.1f} MiB", flush=True)
        return zrt

    compile_(a.world)
    if a.simulate_world <= 0:
        return 0
    zrt = compile_(a.simulate_world)
    rep = os.path.join(work, f"sim_{a.simulate_world}.json")
    nodes = max(1, a.simulate_world // 8)
    swall, srss, _ = timed([os.path.join(a.build, "bin", "zero-run"), zrt, "--simulate",
                         os.path.join(ROOT, "machines", "h100-sxm-8x.json"), "--nodes",
                         str(nodes), "--report-json", rep])
    sim = json.load(open(rep))["simulation"]
    print(f"zero-run --simulate on {nodes} nodes of 8 H100: {swall:.1f} s, peak RSS "
          f"{srss / 2**30:.2f} GiB; predicted step {sim['step_s']:.2f} s, "
          f"compute {sim['compute_s']:.2f} s, exposed communication "
          f"{sim['exposed_communication_s']:.2f} s, MFU {sim['mfu']:.3f}, peak "
          f"{max(r['peak_bytes'] for r in sim['ranks']) / 2**30:.1f} GiB per rank")
    return 0


if __name__ == "__main__":
    sys.exit(main())
