#!/usr/bin/env python3
"""zero-opt --plan auto on the GPT-2 fixture over 4 ranks (global batch 8) on
machines/cpu-2core.json, under a memory cap per rank that some layouts exceed:

  * the plan's files: ds_config.json, zero-pipeline.txt, plan.txt, and one
    folder per layout tried (its ds_config, --zero-pipeline string, program and
    simulation);
  * the choice, recomputed here from the layouts' own simulation.json files:
    among those whose device bytes (device_planned_bytes, every rank) fit the
    cap, the least step_s; the chosen ds_config and --zero-pipeline are that
    layout's, and plan.txt ranks it first;
  * every layout listed as over the memory is over it in its simulation;
  * the chosen layout compiled with the weights runs one step under mpirun: its
    ranks' peak live bytes (zero-run --report-json, summed over the arenas) stay
    under the cap;
  * a cap no layout fits: exit 1, a message naming plan.txt, no ds_config.json;
    missing arguments: a message naming them.
Prints what it checked; exits non-zero on the first failure.
"""
import argparse
import json
import os
import re
import shutil
import sys

import numpy as np
from safetensors.numpy import save_file

from zerokit import mpi
from zerokit.tools import run

CAP = 2 * 2**20  # bytes per rank: some of the 4-rank layouts need more


def planned_bytes(sim):
    return max(r.get("device_planned_bytes", r["peak_bytes"]) for r in sim["ranks"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--machines", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    model = os.path.join(a.models, "gpt2_loss.onnx")
    machine = os.path.join(a.machines, "cpu-2core.json")
    out = os.path.join(a.work, "plan")
    shutil.rmtree(out, ignore_errors=True)
    plan = [a.zero_opt, model, "--input-shape=input_ids=1x8", "--input-shape=labels=1x8",
            "--plan", "auto", "--machine", machine, "--world", "4", "--global-batch", "8"]
    run(plan + ["--max-memory-per-rank", str(CAP), "--plan-out", out])

    layouts = []
    base = os.path.join(out, "layouts")
    for d in sorted(os.listdir(base), key=int):
        sim_path = os.path.join(base, d, "simulation.json")
        sim = json.load(open(sim_path))["simulation"] if os.path.exists(sim_path) else None
        layouts.append((d, sim, open(os.path.join(base, d, "ds_config.json")).read(),
                        open(os.path.join(base, d, "zero-pipeline.txt")).read()))
    fit = [(s["step_s"], d, cfg, zp) for d, s, cfg, zp in layouts
           if s is not None and planned_bytes(s) <= CAP]
    over = [d for d, s, _, _ in layouts if s is not None and planned_bytes(s) > CAP]
    if not fit or not over:
        sys.exit(f"FAIL: {len(fit)} layouts fit {CAP} bytes and {len(over)} do not: the cap "
                 "should split them")
    step, best, cfg, zp = min(fit)
    if open(os.path.join(out, "ds_config.json")).read() != cfg or \
            open(os.path.join(out, "zero-pipeline.txt")).read() != zp:
        sys.exit(f"FAIL: the plan's ds_config / zero-pipeline are not layout {best}'s, the "
                 f"fastest that fits ({step} s)")
    text = open(os.path.join(out, "plan.txt")).read()
    first = re.search(r"^\s+1\s+([0-9.]+)\s", text, re.M)
    if not first or abs(float(first[1]) - step) > 6e-7:  # printed to 6 places
        sys.exit(f"FAIL: plan.txt's first row {first and first[1]}, expected {step} s")
    listed = text.split("over the memory per rank:")[1].split("not built:")[0] \
        if "over the memory per rank:" in text else ""
    if len([ln for ln in listed.splitlines() if ln.strip()]) != len(over):
        sys.exit(f"FAIL: plan.txt lists {listed.count(chr(10))} layouts over the memory, "
                 f"the simulations {len(over)}")
    print(f"plan ok: {len(layouts)} layouts, {len(fit)} within {CAP} bytes per rank, "
          f"{len(over)} over it; chosen layout {best} ({step:.6f} s), the fastest that fits, "
          f"zero-pipeline '{zp.strip()}'")

    # The choice, compiled with the weights and run for a step.
    ds, zrt, w = (os.path.join(a.work, f) for f in ("ds.json", "chosen.zrt", "w.safetensors"))
    shutil.copy(os.path.join(out, "ds_config.json"), ds)
    cfg = json.load(open(ds))
    micro = cfg["train_micro_batch_size_per_gpu"]
    extra = [f"--zero-pipeline={zp.strip()}"] if zp.strip() else []
    run([a.zero_opt, model, f"--input-shape=input_ids={micro}x8",
         f"--input-shape=labels={micro}x8", "--train", "--config", ds, *extra,
         "--emit=zrt", "-o", zrt, "--weights-out", w])
    tokens = np.random.default_rng(0).integers(0, 256, size=(1, 8, 8), dtype=np.int64)
    data = os.path.join(a.work, "data.safetensors")
    save_file({"input_ids": tokens, "labels": tokens.copy()}, data)
    rep = os.path.join(a.work, "report.json")
    run(mpi.mpirun(4, [a.zero_run, zrt, "--weights", w, "--data", data, "--steps", "1",
                       "--report-json", rep]))
    peaks = [sum(x["peak_live_bytes"] for x in r["arenas"])
             for r in json.load(open(rep))["ranks"]]
    if max(peaks) > CAP:
        sys.exit(f"FAIL: the chosen layout's ranks peaked at {peaks} bytes, over {CAP}")
    print(f"run ok: the chosen layout trains a step; its ranks' peak live bytes {peaks} "
          f"are within {CAP}")

    # Nothing fits; arguments missing.
    none = os.path.join(a.work, "none")
    r = run(plan + ["--max-memory-per-rank", "1KiB", "--plan-out", none], ok=False)
    print("error:", r.stderr.strip().splitlines()[-1])
    if os.path.exists(os.path.join(none, "ds_config.json")):
        sys.exit("FAIL: a plan where nothing fits wrote a ds_config.json")
    r = run([a.zero_opt, model, "--plan", "auto", "--world", "4"], ok=False)
    print("error:", r.stderr.strip().splitlines()[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
