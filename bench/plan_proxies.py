#!/usr/bin/env python3
"""zero-opt --plan auto on a deep model: the layouts simulated on proxies and
extrapolated, against the same layouts compiled and simulated whole.

One invocation:
  export   (once) scripts/export_hf.py llama --loss --no-weights with
           Llama-2-7B's shape (hidden 4096, 32 layers, 32 heads, intermediate
           11008, vocab 32000; --shape 70b: bench/compile_scale.py's 80-layer
           graph), no weights anywhere
  plan     zero-opt --plan auto --machine machines/h100-sxm-8x.json over --world
           ranks and --global-batch sequences of --seq tokens, ZeRO's bf16
           config, twice: with --plan-exact (every layout compiled whole) and
           without (proxies of the first S and 2S blocks and fewer
           micro-batches, extrapolated); wall time of each
  compare  per layout of the exact plan: the extrapolated step time and
           memory per rank against the exact simulation's (relative error),
           the ranking of the fitting layouts (Kendall tau), the two picks
No timing is asserted. Usage: build/pyenv/bin/python bench/plan_proxies.py
       [--shape 7b|70b] [--world 4] [--nodes 1] [--global-batch 16] [--seq 2048]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from compile_scale import LLAMA_70B  # noqa: E402

SHAPES = {"70b": (LLAMA_70B, 80),
          "7b": (["hidden_size=4096", "intermediate_size=11008", "num_attention_heads=32",
                  "num_key_value_heads=32", "vocab_size=32000",
                  "max_position_embeddings=4096"], 32)}

LINE = re.compile(r"^  (ZeRO-\d.*?): (?:([0-9.]+) s/step, ([0-9.]+) MiB per rank|not built)")


def plan(zero_opt, model, a, out, exact):
    shutil.rmtree(out, ignore_errors=True)
    cfg = os.path.join(os.path.dirname(out), "base.json")
    json.dump({"bf16": {"enabled": True}, "optimizer": {"type": "AdamW",
                                                         "params": {"lr": 1e-4}}},
              open(cfg, "w"))
    cmd = [zero_opt, model, f"--input-shape=input_ids=1x{a.seq}",
           f"--input-shape=labels=1x{a.seq}", "--no-weights", "--plan", "auto", "--machine",
           os.path.join(ROOT, "machines", "h100-sxm-8x.json"), "--world", str(a.world),
           "--nodes", str(a.nodes), "--global-batch", str(a.global_batch), "--config", cfg,
           "--plan-out", out] + (["--plan-exact"] if exact else [])
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    layouts = {}
    for line in p.stdout.splitlines():
        m = LINE.match(line)
        if m:
            layouts[m.group(1)] = (float(m.group(2)), float(m.group(3))) if m.group(2) else None
    chosen = re.search(r"^chosen: (.*)$", p.stdout, re.M)
    return wall, layouts, chosen.group(1) if chosen else None, p


def kendall(xs, ys):
    n, s = len(xs), 0
    for i in range(n):
        for j in range(i + 1, n):
            s += (1 if (xs[i] - xs[j]) * (ys[i] - ys[j]) > 0 else -1)
    return s / (n * (n - 1) / 2) if n > 1 else 1.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--shape", choices=sorted(SHAPES), default="7b")
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--global-batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=2048)
    a = ap.parse_args()
    work = os.path.join(a.build, "bench", "plan_proxies")
    os.makedirs(work, exist_ok=True)
    shape, layers = SHAPES[a.shape]
    model = os.path.join(a.build, "bench", "compile_scale",
                         f"llama{a.shape.rstrip('b')}b_{layers}l_loss.onnx")
    if not os.path.exists(model):
        os.makedirs(os.path.dirname(model), exist_ok=True)
        sets = [w for s in shape + [f"num_hidden_layers={layers}"] for w in ("--set", s)]
        subprocess.run([os.path.join(a.build, "pyenv", "bin", "python"),
                        os.path.join(ROOT, "scripts", "export_hf.py"), "llama", "--loss",
                        "--no-weights", *sets, "-o", model], check=True)
    zero_opt = os.path.join(a.build, "bin", "zero-opt")
    ew, exact, epick, ep = plan(zero_opt, model, a, os.path.join(work, "exact"), True)
    pw, proxy, ppick, pp = plan(zero_opt, model, a, os.path.join(work, "proxies"), False)
    if not exact or not proxy:
        sys.exit(f"a plan printed no layouts:\n{ep.stdout[-2000:]}{ep.stderr[-2000:]}"
                 f"{pp.stdout[-2000:]}{pp.stderr[-2000:]}")
    print(f"Llama-2-{a.shape.upper()} shape, {a.world} ranks on {a.nodes} node(s) of 8 H100, global batch "
          f"{a.global_batch} x {a.seq} tokens")
    print(f"plan, every layout whole (--plan-exact): {ew:.1f} s, {len(exact)} layouts")
    print(f"plan on proxies:                         {pw:.1f} s, {len(proxy)} layouts "
          f"({ew / pw:.1f}x faster)")
    print(f"\n| layout | exact s/step | proxies s/step | error | exact MiB/rank | proxies "
          f"MiB/rank | error |\n|---|---|---|---|---|---|---|")
    errs_t, errs_m, pairs = [], [], []
    for name, e in exact.items():
        p = proxy.get(name)
        if not e or not p:
            print(f"| {name} | {e and e[0]} | {p and p[0]} | - | - | - | - |")
            continue
        et, pt = e[0], p[0]
        em, pm = e[1], p[1]
        errs_t.append((pt - et) / et)
        errs_m.append((pm - em) / em)
        pairs.append((et, pt))
        print(f"| {name} | {et:.4f} | {pt:.4f} | {100 * errs_t[-1]:+.2f}% | {em:.0f} | {pm:.0f} "
              f"| {100 * errs_m[-1]:+.2f}% |")
    med = lambda v: sorted(abs(x) for x in v)[len(v) // 2]
    print(f"\nstep time: median |error| {100 * med(errs_t):.2f}%, worst "
          f"{100 * max(abs(x) for x in errs_t):.2f}%; memory: median {100 * med(errs_m):.2f}%, "
          f"worst {100 * max(abs(x) for x in errs_m):.2f}%; Kendall tau of the step times "
          f"{kendall([x for x, _ in pairs], [y for _, y in pairs]):.3f}")
    print(f"pick, exact:   {epick}\npick, proxies: {ppick}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
