#!/usr/bin/env python3
"""The CUDA backend against the CPU backend (ctest label `gpu`).

For every fixture of FIXTURES (each with its reference file), at the reference
inputs: compiled once at 1 rank and once for ZeRO-3 over 2 ranks (stage 3,
prefetch 2, buckets), run by the CPU zero-run and by the CUDA variant's
zero-run with --backend cuda; the CUDA outputs must equal the CPU run's within
rtol 1e-4 (atol 1e-5). Then GPT-2's training step (AdamW, 3 steps, 1 and 2
ranks): the CUDA losses must equal the CPU losses within rtol 1e-4.

Every output of the fixture's stored onnxruntime reference (its ort.* keys, at
least one) must be among both runs' outputs, and the CPU run's must equal it
within the same tolerance: the comparison then rests on a run checked against
something independent.

Skips (exit 77, with the reason) when the CUDA variant was not built (no CUDA
toolkit) or when its zero-run finds no usable GPU. `--backend cpu` with the CPU
zero-run as --zero-run-cuda (ctest gpu-backend-driver) runs this driver where no
GPU is, so the GPU test's own code cannot rot unnoticed: there the second run is
the first one again, and its comparisons (outputs, training losses) are a smoke
check of the driver that fails only on a crash or an error of the driver; only
the CPU outputs against onnxruntime are checked against something independent.

  gpu_backend.py --zero-opt BIN --zero-run BIN --zero-run-cuda BIN
                 --models DIR --work DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

from zerokit import mpi, tools

SKIP = 77
FIXTURES = ["mlp", "gpt2", "gpt2_ts17", "bert", "llama", "vit", "whisper", "moe"]


def run(cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True, env=mpi.env(root=True))
    if check and r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r


def mpirun(n):
    return mpi.mpirun(n, bind_to="none")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True)
    ap.add_argument("--zero-run-cuda", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--backend", default="cuda",
                    help="the second run's --backend (cpu checks this driver itself)")
    a = ap.parse_args()
    if not os.path.exists(a.zero_run_cuda):
        print(f"SKIP: {a.zero_run_cuda} was not built (scripts/build.sh builds the CUDA "
              "variant where the CUDA toolkit is, unless ZERO_SKIP_CUDA=1)")
        return SKIP
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)

    def compile_fixture(model, shapes, tag, pipeline=None):
        zrt = os.path.join(a.work, f"{tag}.zrt")
        weights = os.path.join(a.work, f"{tag}.safetensors")
        run(tools.zero_opt(a.zero_opt, os.path.join(a.models, f"{model}.onnx"), shapes,
                           [f"--zero-pipeline={pipeline}"] if pipeline else [], zrt, weights))
        return zrt, weights

    def inputs_of(model):
        ref = load_file(os.path.join(a.models, f"{model}.ref.safetensors"))
        ins = {k[len("input."):]: v for k, v in ref.items() if k.startswith("input.")}
        path = os.path.join(a.work, f"{model}.inputs.safetensors")
        save_file(ins, path)
        return ins, path, {k[len("ort."):]: v for k, v in ref.items() if k.startswith("ort.")}

    smoke = a.backend == "cpu" and os.path.realpath(a.zero_run_cuda) == \
        os.path.realpath(a.zero_run)
    versus = " (the same binary and backend: a smoke check of this driver)" if smoke else ""

    def forward(binary, n, zrt, weights, inputs, out, backend=None):
        cmd = (mpirun(n) if n > 1 else []) + [binary, zrt, "--weights", weights,
                                                "--input", inputs, "--output", out]
        if backend:
            cmd += ["--backend", backend]
        return run(cmd, check=False)

    # Probe: the smallest fixture on the GPU.
    ins, inputs, _ = inputs_of("mlp")
    zrt, weights = compile_fixture("mlp", {k: v.shape for k, v in ins.items()}, "probe")
    probe = forward(a.zero_run_cuda, 1, zrt, weights, inputs,
                    os.path.join(a.work, "probe.out"), a.backend)
    if probe.returncode != 0:
        if "no usable CUDA device" in probe.stderr:
            print("SKIP: no GPU on this machine (the CUDA backend is compiled but cannot "
                  "run here): " + probe.stderr.strip().splitlines()[-1])
            return SKIP
        sys.exit(f"FAIL: the CUDA zero-run failed on the mlp fixture:\n{probe.stderr}")

    for model in FIXTURES:
        if not os.path.exists(os.path.join(a.models, f"{model}.ref.safetensors")):
            sys.exit(f"FAIL: {model}: no {model}.ref.safetensors in {a.models}")
        ins, inputs, expected = inputs_of(model)
        if not expected:
            sys.exit(f"FAIL: {model}.ref.safetensors holds no onnxruntime outputs (ort.*)")
        shapes = {k: v.shape for k, v in ins.items()}
        for n, pipeline in [(1, None), (2, "stage=3 dp=2 prefetch=2 bucket-bytes=65536")]:
            tag = f"{model}-np{n}"
            zrt, weights = compile_fixture(model, shapes, tag, pipeline)
            cpu_out, gpu_out = (os.path.join(a.work, f"{tag}.{b}.out") for b in ("cpu", "gpu"))
            r = forward(a.zero_run, n, zrt, weights, inputs, cpu_out)
            if r.returncode != 0:
                sys.exit(f"FAIL: {tag} on the CPU:\n{r.stderr}")
            r = forward(a.zero_run_cuda, n, zrt, weights, inputs, gpu_out, a.backend)
            if r.returncode != 0:
                sys.exit(f"FAIL: {tag} on --backend {a.backend}:\n{r.stderr}")
            cpu, gpu = load_file(cpu_out), load_file(gpu_out)
            for name, ref in expected.items():
                if name not in cpu or name not in gpu:
                    sys.exit(f"FAIL: {tag}: output '{name}' missing from the CPU run or "
                             f"the --backend {a.backend} run")
                if cpu[name].shape != ref.shape or \
                        not np.allclose(cpu[name], ref, rtol=1e-4, atol=1e-5):
                    sys.exit(f"FAIL: {tag}: output '{name}' on the CPU differs from "
                             "onnxruntime (the stored reference)")
                want, got = cpu[name], gpu[name]
                if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
                    err = np.abs(got.astype(np.float64) - want).max() if got.shape == want.shape \
                        else f"shape {got.shape} vs {want.shape}"
                    sys.exit(f"FAIL: {tag}: output '{name}' on --backend {a.backend} differs "
                             f"from the CPU run ({err})")
            print(f"PASS {tag}: the CPU run equals onnxruntime, and --backend {a.backend} "
                  f"equals the CPU run (rtol 1e-4){versus}")

    # Training: GPT-2's step, AdamW, 3 steps of random tokens.
    steps, rows, seq = 3, 2, 8
    for n in (1, 2):
        tokens = np.random.default_rng(0).integers(0, 256, size=(steps, rows * n, seq),
                                                   dtype=np.int64)
        data = os.path.join(a.work, f"train-np{n}.safetensors")
        save_file({"input_ids": tokens, "labels": tokens.copy()}, data)
        zrt = os.path.join(a.work, f"train-np{n}.zrt")
        weights = os.path.join(a.work, f"train-np{n}.weights.safetensors")
        args = ["--train", "--loss", "causal-lm:labels", "--optimizer", "adamw lr=1e-3"]
        if n > 1:
            args.append(f"--zero-pipeline=stage=3 dp={n}")
        cmd = tools.zero_opt(a.zero_opt, os.path.join(a.models, "gpt2.onnx"),
                             {"input_ids": (rows, seq)}, args, zrt, weights)
        run(cmd)
        losses = {}
        for backend, binary in (("cpu", a.zero_run), ("cuda", a.zero_run_cuda)):
            log = os.path.join(a.work, f"train-np{n}.{backend}.json")
            r = run((mpirun(n) if n > 1 else []) +
                    [binary, zrt, "--weights", weights, "--data", data, "--steps", str(steps),
                     "--log-json", log] + (["--backend", a.backend] if backend == "cuda" else []),
                    check=False)
            if r.returncode != 0:
                sys.exit(f"FAIL: training at np {n} on {backend}:\n{r.stderr}")
            losses[backend] = [s["loss"] for s in json.load(open(log))]
        if not np.allclose(losses["cuda"], losses["cpu"], rtol=1e-4):
            sys.exit(f"FAIL: training at np {n}: --backend {a.backend} losses "
                     f"{losses['cuda']} vs CPU {losses['cpu']}")
        print(f"PASS training np={n}: --backend {a.backend} losses equal the CPU's "
              f"(rtol 1e-4){versus}: {losses['cuda']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
