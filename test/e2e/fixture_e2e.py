#!/usr/bin/env python3
"""End-to-end check of one fixture model: zero-opt -> .zrt -> zero-run.

Reads the committed reference file next to the model (inputs and onnxruntime
outputs, produced by test/models/export.py), compiles the model with the given
ZeRO options, runs it under `mpirun -np N`, and checks:
  * every output against onnxruntime (rtol/atol, float32);
  * optionally, bit-exact equality with another run's outputs (--same-as);
  * optionally, the runtime's own measurements against the plan and the ZeRO
    closed forms (--check-zero): resident parameter bytes per rank equal the
    sum of shard and persistent bytes, and all-gather bytes sent per rank per
    forward equal (N-1)/N of the gathered (padded) parameter bytes.
Exit status 0 on success; a message naming the output and the error otherwise.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
from safetensors.numpy import load_file


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--model", required=True, help="fixture name, e.g. gpt2")
    ap.add_argument("--np", type=int, default=1)
    ap.add_argument("--zero-pipeline", default="")
    ap.add_argument("--work", required=True, help="scratch directory")
    ap.add_argument("--same-as", default="", help="outputs that must match exactly")
    ap.add_argument("--check-zero", action="store_true")
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    a = ap.parse_args()

    os.makedirs(a.work, exist_ok=True)
    ref = load_file(os.path.join(a.models, a.model + ".ref.safetensors"))
    inputs = {k[len("input."):]: v for k, v in ref.items() if k.startswith("input.")}
    expected = {k[len("ort."):]: v for k, v in ref.items() if k.startswith("ort.")}
    zrt = os.path.join(a.work, "model.zrt")
    weights = os.path.join(a.work, "model.safetensors")
    out = os.path.join(a.work, "out.safetensors")
    report = os.path.join(a.work, "report.json")
    cmd = [a.zero_opt, os.path.join(a.models, a.model + ".onnx"), "--emit=zrt",
           "-o", zrt, "--weights-out", weights]
    for name, v in inputs.items():
        cmd += ["--input-shape", f"{name}=" + "x".join(str(d) for d in v.shape)]
    if a.zero_pipeline:
        cmd += [f"--zero-pipeline={a.zero_pipeline}"]
    run(cmd)

    run_cmd = ["mpirun", "-np", str(a.np), "--oversubscribe", a.zero_run, zrt,
               "--weights", weights, "--output", out, "--report-json", report]
    if a.trace:
        run_cmd += ["--trace", os.path.join(a.work, "trace.json")]
    for name, v in inputs.items():
        path = os.path.join(a.work, name + ".npy")
        np.save(path, v)
        run_cmd += ["--input", f"{name}={path}"]
    run(run_cmd)

    got = load_file(out)
    for name, want in expected.items():
        if name not in got:
            sys.exit(f"FAIL: output '{name}' missing from {out}")
        g = got[name]
        if g.shape != want.shape:
            sys.exit(f"FAIL: output '{name}' has shape {g.shape}, onnxruntime {want.shape}")
        if not np.allclose(g, want, rtol=a.rtol, atol=a.atol):
            err = np.abs(g.astype(np.float64) - want).max()
            sys.exit(f"FAIL: output '{name}' differs from onnxruntime: max abs error {err}")
        print(f"PASS {a.model} np={a.np} [{a.zero_pipeline}] {name} matches onnxruntime "
              f"(max abs error {np.abs(g.astype(np.float64) - want).max():.3g})")
    if a.same_as:
        other = load_file(a.same_as)
        for name, g in got.items():
            if not np.array_equal(g, other[name]):
                sys.exit(f"FAIL: output '{name}' is not bit-identical to {a.same_as}")
        print(f"PASS {a.model} np={a.np}: outputs bit-identical to {a.same_as}")
    if a.check_zero:
        check_zero(a, zrt, report)


def check_zero(a, zrt, report_path):
    """Compares the runtime's measurements with the ZeRO-3 closed form computed
    here from the ONNX file itself (not from the compiler's IR)."""
    raise SystemExit("FAIL: --check-zero needs the runtime report format")


if __name__ == "__main__":
    main()
