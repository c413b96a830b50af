#!/usr/bin/env python3
"""Training-mode Dropout (ONNX Dropout with training_mode true) in zero-opt --train / zero-run.

The mask comes from the runtime's counter-based generator, so PyTorch cannot give the
same mask; every check below is a property that holds for any correct mask, derived
from Dropout's definition (y = x * mask / (1 - p), dx = dy * mask / (1 - p)):

  model A: W [R, C] initializer, r [R, C] graph input,
           loss = ReduceSum(Dropout(W, p, training_mode=1) * r)
    1. grad.W / r is 0 or 1/(1-p) everywhere (rel. 1e-6): the backward drops and
       scales like the definition;
    2. loss == sum(W * grad.W) (rtol 1e-5): the forward used the backward's mask;
    3. the dropped fraction is within 5 binomial standard deviations of p;
    4. the outputs are byte-identical at --threads 1, 2 and 3.
  model B: two Dropout nodes on the same W (same seed attribute):
    5. their masks differ (agreement near p^2 + (1-p)^2, not 1);
  model C: model A's loss with W [C] broadcast over the batch rows, accumulation 2,
           the same row in both micro-batches:
    6. grad.W / r takes the values 0, s/2 and s (s = 1/(1-p)): the two micro-batches
       draw different masks, and their mean is the gradient;
  training: model A, SGD lr=0 (weights fixed) on 3 identical batches:
    7. the three logged losses differ (a new mask each step) and two runs log the same
       losses (the mask is seeded).
Needs numpy, onnx, safetensors (scripts/setup-pyenv.sh test).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file, save_file

from zerokit import mpi, tools

ROOT = Path(__file__).resolve().parent.parent.parent
P = 0.3
R, C = 64, 96

# Allowed as root: Open MPI refuses to start as root otherwise (CI runs as root).
ENV = mpi.env(root=True, yield_when_idle=True)


class Fail(Exception):
    pass


def model(path: Path, w_shape, r_shape, dropouts=1):
    rng = np.random.default_rng(7)
    w = rng.uniform(0.5, 1.5, size=w_shape).astype(np.float32)  # no zeros: masks show
    nodes, ys = [], []
    ratio = numpy_helper.from_array(np.array(P, dtype=np.float32), "ratio")
    train = numpy_helper.from_array(np.array(True), "training_mode")
    for i in range(dropouts):
        nodes.append(helper.make_node("Dropout", ["W", "ratio", "training_mode"], [f"d{i}"],
                                      name=f"dropout_{i}", seed=1234))
        ys.append(f"d{i}")
    total = ys[0]
    for i, y in enumerate(ys[1:]):
        nodes.append(helper.make_node("Add", [total, y], [f"sum{i}"]))
        total = f"sum{i}"
    nodes += [helper.make_node("Mul", [total, "r"], ["m"]),
              helper.make_node("ReduceSum", ["m"], ["loss"], keepdims=0)]
    g = helper.make_graph(nodes, "dropout_train",
                          [helper.make_tensor_value_info("r", TensorProto.FLOAT, r_shape)],
                          [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                          [numpy_helper.from_array(w, "W"), ratio, train])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)
    return w


def run(cmd):
    p = tools.call(cmd, ENV, session=False)
    if p.returncode != 0:
        raise Fail(f"{' '.join(map(str, cmd))} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return p.stdout


def compile_(a, onnx_path, zrt, weights, extra=()):
    run(tools.zero_opt(a.zero_opt, onnx_path, {}, ["--train", *extra], zrt, weights))


def grads(a, zrt, weights, inputs, out, threads=2):
    run([a.zero_run, zrt, "--weights", weights, "--input", inputs, "--output", out,
         "--threads", str(threads)])
    return load_file(str(out))


def check_scaled(ratio, allowed, what):
    """ratio's elements lie in `allowed` (relative 1e-6); returns the count of each."""
    dist = np.min(np.abs(ratio[..., None] - np.asarray(allowed)[None]), axis=-1)
    bad = dist > 1e-6 * max(allowed)
    if bad.any():
        raise Fail(f"{what}: {int(bad.sum())} elements of grad/r are not in {allowed}, "
                   f"e.g. {ratio[bad][:5]}")
    nearest = np.argmin(np.abs(ratio[..., None] - np.asarray(allowed)[None]), axis=-1)
    return [int((nearest == i).sum()) for i in range(len(allowed))]


def within_binomial(dropped, n, p, what):
    sd = np.sqrt(n * p * (1 - p))
    if abs(dropped - n * p) > 5 * sd:
        raise Fail(f"{what}: {dropped} of {n} dropped, expected {n * p:.0f} +- {5 * sd:.0f}")
    print(f"  {what}: {dropped} of {n} dropped ({dropped / n:.3f}, p = {p})")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", default=str(ROOT / "build" / "bin"))
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    a.zero_opt = Path(a.bin_dir) / "zero-opt"
    a.zero_run = Path(a.bin_dir) / "zero-run"
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="train-dropout-"))
    if work.exists() and a.work:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    s = 1 / (1 - P)
    rng = np.random.default_rng(11)
    failures = 0

    def step(name, fn):
        nonlocal failures
        try:
            fn()
            print(f"PASS {name}")
        except Fail as e:
            failures += 1
            print(f"FAIL {name}: {e}")

    # Model A ---------------------------------------------------------------
    w = model(work / "a.onnx", [R, C], [R, C])
    r = rng.uniform(0.5, 1.5, size=(R, C)).astype(np.float32)
    save_file({"r": r}, str(work / "a_in.safetensors"))
    compile_(a, work / "a.onnx", work / "a.zrt", work / "a_w.safetensors", ["--optimizer", "none"])
    outs = {t: grads(a, work / "a.zrt", work / "a_w.safetensors", work / "a_in.safetensors",
                     work / f"a_out{t}.safetensors", t) for t in (1, 2, 3)}
    o = outs[2]

    def a_scaling():
        counts = check_scaled(o["grad.W"].astype(np.float64) / r, [0.0, s], "grad.W / r")
        within_binomial(counts[0], R * C, P, "model A")

    def a_forward_matches_backward():
        want = float(np.sum(w.astype(np.float64) * o["grad.W"].astype(np.float64)))
        got = float(o["loss"])
        if abs(got - want) > 1e-5 * abs(want):
            raise Fail(f"loss {got} != sum(W * grad.W) {want}: forward and backward masks differ")

    def a_threads():
        for t in (1, 3):
            for k in o:
                if not np.array_equal(outs[t][k], o[k]):
                    raise Fail(f"{k} at --threads {t} differs from --threads 2")

    step("dropout scaling and ratio (model A)", a_scaling)
    step("forward mask == backward mask (model A)", a_forward_matches_backward)
    step("bit-identical at --threads 1, 2, 3 (model A)", a_threads)

    # Model B: two Dropout nodes, same seed attribute --------------------------
    def b_distinct():
        model(work / "b.onnx", [R, C], [R, C], dropouts=2)
        compile_(a, work / "b.onnx", work / "b.zrt", work / "b_w.safetensors", ["--optimizer", "none"])
        g = grads(a, work / "b.zrt", work / "b_w.safetensors", work / "a_in.safetensors",
                  work / "b_out.safetensors")["grad.W"].astype(np.float64) / r
        # grad/r = s * (m0 + m1): 0, s or 2s; identical masks would give only 0 and 2s.
        counts = check_scaled(g, [0.0, s, 2 * s], "grad.W / r (two dropouts)")
        n = R * C
        agree = (counts[0] + counts[2]) / n
        want = P * P + (1 - P) * (1 - P)
        sd = np.sqrt(want * (1 - want) / n)
        if abs(agree - want) > 5 * sd:
            raise Fail(f"the two masks agree on {agree:.3f} of elements; independent masks "
                       f"agree on {want:.3f} +- {5 * sd:.3f}")
        print(f"  model B: masks agree on {agree:.3f} (independent: {want:.3f})")

    step("two Dropout nodes draw different masks (model B)", b_distinct)

    # Model C: accumulation 2 ------------------------------------------------
    def c_accumulation():
        model(work / "c.onnx", [C], [1, C])
        row = rng.uniform(0.5, 1.5, size=(1, C)).astype(np.float32)
        save_file({"r": np.concatenate([row, row])}, str(work / "c_in.safetensors"))
        compile_(a, work / "c.onnx", work / "c.zrt", work / "c_w.safetensors",
                 ["--optimizer", "none", "--config", work / "c_ds.json"])
        g = grads(a, work / "c.zrt", work / "c_w.safetensors", work / "c_in.safetensors",
                  work / "c_out.safetensors")["grad.W"].astype(np.float64) / row[0]
        counts = check_scaled(g, [0.0, s / 2, s], "grad.W / r (accumulation 2)")
        if counts[1] == 0:
            raise Fail("no element kept in exactly one micro-batch: both micro-batches "
                       f"used the same mask (counts {counts})")
        print(f"  model C: 0 / s/2 / s counts {counts} of {C}")

    (work / "c_ds.json").write_text(json.dumps({
        "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2}))
    step("micro-batches draw different masks (accumulation 2)", c_accumulation)

    # Training: new mask every step, reproducible -------------------------------
    def training():
        compile_(a, work / "a.onnx", work / "t.zrt", work / "t_w.safetensors",
                 ["--optimizer", "sgd lr=0"])
        save_file({"r": np.stack([r, r, r])}, str(work / "t_data.safetensors"))
        logs = []
        for i in range(2):
            run([a.zero_run, work / "t.zrt", "--weights", work / "t_w.safetensors",
                 "--data", work / "t_data.safetensors", "--steps", "3",
                 "--log-json", work / f"t_log{i}.json"])
            logs.append([row["loss"] for row in json.loads((work / f"t_log{i}.json").read_text())])
        if logs[0] != logs[1]:
            raise Fail(f"two runs logged different losses: {logs}")
        if len(set(logs[0])) != 3:
            raise Fail(f"the same weights and batch gave equal losses {logs[0]}: the mask did "
                       "not change between steps")
        print(f"  losses at fixed weights: {logs[0]}")

    step("a new, reproducible mask every step (SGD lr=0)", training)

    if failures:
        print(f"{failures} check(s) failed; work files in {work}")
        return 1
    if not a.work:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Fail as e:
        print(f"FAIL: {e}")
        sys.exit(1)
