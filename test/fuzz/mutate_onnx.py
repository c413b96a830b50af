#!/usr/bin/env python3
"""Mutation driver for the ONNX importer: zero-opt must never crash.

Takes the fixture models, applies seeded mutations (protobuf-level: dims,
data types, attribute values, opsets, names, initializer data, external-data
keys; byte-level: flips, truncation), runs zero-opt on each with a time and
memory limit, and fails when zero-opt
  * dies from a signal or aborts (an uncaught exception, "LLVM ERROR"),
  * runs past the time limit (a hang),
  * fails but leaves an output file behind, or succeeds without one.
A wrong-but-clean error is fine: the point is that bad input never takes the
tool down. Failing inputs are saved under WORK/failures for triage; the
committed regression inputs (test/fuzz/regressions/*.onnx) run first.

usage: mutate_onnx.py --zero-opt PATH --models DIR --work DIR
                      [--cases N] [--seed S] [--timeout SECONDS]
CI runs a fixed seed and case count (reproducible); longer runs on demand:
  mutate_onnx.py ... --cases 5000 --seed $RANDOM
"""
import argparse
import glob
import os
import random
import resource
import shutil
import subprocess
import sys

import onnx
from onnx import TensorProto

EXTREMES = [0, 1, -1, -5, 2, 3, 7, 2**31 - 1, 2**31, 2**40, -(2**63), 2**63 - 1]
DTYPES = [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT64,
          TensorProto.INT32, TensorProto.INT8, TensorProto.BOOL, TensorProto.STRING,
          TensorProto.COMPLEX64, 0, 999]
OPS = ["MatMul", "Add", "Reshape", "Gather", "Range", "Slice", "Shape", "Concat",
       "Softmax", "LayerNormalization", "Transpose", "Expand", "Where", "NoSuchOp"]


def pick(rng, seq):
    return seq[rng.randrange(len(seq))]


def mutate_model(model, rng):
    """One protobuf-level mutation, in place; returns its description."""
    g = model.graph
    kind = rng.randrange(11)
    if kind == 0 and g.node:
        n = pick(rng, g.node)
        ints = [a for a in n.attribute if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS)]
        if ints:
            a = pick(rng, ints)
            if a.type == onnx.AttributeProto.INT:
                a.i = pick(rng, EXTREMES)
            elif a.ints:
                a.ints[rng.randrange(len(a.ints))] = pick(rng, EXTREMES)
            return f"node {n.name} attribute {a.name}"
    if kind == 1 and g.initializer:
        t = pick(rng, g.initializer)
        if t.dims:
            t.dims[rng.randrange(len(t.dims))] = pick(rng, EXTREMES)
        else:
            t.dims.append(pick(rng, EXTREMES))
        return f"initializer {t.name} dims"
    if kind == 2 and g.initializer:
        t = pick(rng, g.initializer)
        t.data_type = pick(rng, DTYPES)
        return f"initializer {t.name} data type"
    if kind == 3 and g.initializer:
        t = pick(rng, g.initializer)
        if t.raw_data:
            t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data) + 1)]
        return f"initializer {t.name} data truncated"
    if kind == 4 and g.input:
        i = pick(rng, g.input)
        dims = i.type.tensor_type.shape.dim
        if dims:
            dims[rng.randrange(len(dims))].dim_value = pick(rng, EXTREMES)
        return f"input {i.name} dims"
    if kind == 5 and model.opset_import:
        model.opset_import[0].version = pick(rng, [1, 7, 12, 24, 99, 2**31 - 1])
        return "opset"
    if kind == 6 and len(g.node) > 1:
        a, b = rng.sample(list(g.node), 2)
        if a.output and b.output:
            b.output[0] = a.output[0]
        return "two nodes write one value"
    if kind == 7 and g.node:
        n = pick(rng, g.node)
        if n.input:
            n.input[rng.randrange(len(n.input))] = pick(rng, ["", "undefined_value", n.output[0] if n.output else "x"])
        return f"node {n.name} input renamed"
    if kind == 8 and g.node:
        n = pick(rng, g.node)
        n.op_type = pick(rng, OPS)
        return f"node {n.name} op type"
    if kind == 9 and g.node:
        n = pick(rng, g.node)
        if rng.random() < 0.5 and n.input:
            del n.input[-1]
        else:
            n.input.append(pick(rng, [x.name for x in g.initializer] or ["x"]))
        return f"node {n.name} arity"
    if kind == 10 and g.initializer:
        t = pick(rng, g.initializer)
        t.data_location = TensorProto.EXTERNAL
        del t.external_data[:]
        for key, value in [("location", pick(rng, ["w.bin", "../w.bin", "/etc/hostname", ""])),
                           ("offset", pick(rng, ["0", "-1", "x", "", "99999999999999999999"])),
                           ("length", pick(rng, ["4", "0", "abc", "18446744073709551615"]))]:
            if rng.random() < 0.8:
                e = t.external_data.add()
                e.key, e.value = key, value
        return f"initializer {t.name} external data"
    return "none"


def mutate_bytes(data, rng):
    data = bytearray(data)
    if rng.random() < 0.3 and data:
        return bytes(data[: rng.randrange(len(data))]), "truncated"
    for _ in range(rng.randrange(1, 8)):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data), "bytes flipped"


def limit_resources():
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def run_case(a, path, shapes, work):
    out = os.path.join(work, "out.mlir")
    weights = os.path.join(work, "out.safetensors")
    for f in (out, weights):
        if os.path.exists(f):
            os.remove(f)
    cmd = [a.zero_opt, path, "-o", out, "--weights-out", weights] + \
          [f"--input-shape={s}" for s in shapes]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=a.timeout,
                           preexec_fn=limit_resources)
    except subprocess.TimeoutExpired:
        return f"timed out after {a.timeout}s", cmd
    err = r.stderr
    if r.returncode < 0:
        return f"killed by signal {-r.returncode}: {err[-400:]}", cmd
    if "LLVM ERROR" in err or "terminate called" in err or "Assertion" in err \
            or "Stack dump" in err:
        return f"aborted (rc {r.returncode}): {err[-400:]}", cmd
    if r.returncode != 0 and (os.path.exists(out) or os.path.exists(weights)):
        return "failed but left an output file", cmd
    if r.returncode == 0 and not os.path.exists(out):
        return "succeeded without writing its output", cmd
    if r.returncode != 0 and "error" not in err:
        return f"failed (rc {r.returncode}) without an error message: {err[-400:]}", cmd
    return None, cmd


def shapes_of(model):
    """--input-shape values that fix every symbolic input dim to 2."""
    out = []
    for i in model.graph.input:
        dims = i.type.tensor_type.shape.dim
        if any(d.dim_param or d.dim_value <= 0 for d in dims):
            out.append(i.name + "=" + "x".join(str(d.dim_value if d.dim_value > 0 else 2) for d in dims))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--cases", type=int, default=150)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    failures_dir = os.path.join(a.work, "failures")
    os.makedirs(failures_dir, exist_ok=True)
    rng = random.Random(a.seed)
    base = sorted(p for p in glob.glob(os.path.join(a.models, "*.onnx"))
                  if not p.endswith("_external.onnx") and os.path.getsize(p) < 600_000)
    failures = []
    regressions = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "regressions", "*.onnx")))
    for path in regressions:
        try:
            shapes = shapes_of(onnx.load(path, load_external_data=False))
        except Exception:
            shapes = []
        why, cmd = run_case(a, path, shapes, a.work)
        if why:
            failures.append((os.path.basename(path), why, cmd))
    for case in range(a.cases):
        src = pick(rng, base)
        model = onnx.load(src, load_external_data=False)
        shapes = shapes_of(model)
        what = []
        for _ in range(rng.randrange(1, 4)):
            what.append(mutate_model(model, rng))
        data = model.SerializeToString()
        if rng.random() < 0.25:
            data, how = mutate_bytes(data, rng)
            what.append(how)
        path = os.path.join(a.work, f"case{case}.onnx")
        with open(path, "wb") as f:
            f.write(data)
        why, cmd = run_case(a, path, shapes, a.work)
        if why:
            keep = os.path.join(failures_dir, f"seed{a.seed}-case{case}.onnx")
            shutil.copy(path, keep)
            failures.append((f"case {case} from {os.path.basename(src)} ({'; '.join(what)})", why,
                             [keep if c == path else c for c in cmd]))
        os.remove(path)
    for name, why, cmd in failures:
        print(f"FAIL {name}: {why}\n  {' '.join(cmd)}")
    total = a.cases + len(regressions)
    print(f"{total - len(failures)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
