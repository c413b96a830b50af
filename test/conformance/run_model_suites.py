#!/usr/bin/env python3
"""Whole-model conformance against ONNX's non-node backend suites.

The installed `onnx` package ships three suites of small models besides the
per-operator node cases (onnx/backend/test/data/{pytorch-converted,
pytorch-operator,simple}): each case is a folder with model.onnx and
test_data_set_0/input_*.pb, output_*.pb.  Every case is run through
zero-opt (import, with each graph input's shape fixed from the test data) and
zero-run, and the outputs are compared with the stored ones (numpy allclose,
rtol 1e-3, atol 1e-5; exact for integers and bools).

  run_model_suites.py --zero-opt BIN --zero-run BIN --work DIR
        [--filter SUBSTR]              only cases whose suite/name contains it
        [--expect expected.txt]        fail if a listed case does not pass
        [--write-expect FILE]          record the cases that pass now

One line per case: `CASE: pass`, or `CASE: CATEGORY: REASON` with CATEGORY one
of refused (zero-opt or zero-run exited non-zero: the last line of its
stderr), values differ, shape, missing output, dtype (the case has inputs or
outputs of a type the runtime lacks; it is still tried, and the reason says
what happened), timeout.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore")
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

SUITES = ("pytorch-converted", "pytorch-operator", "simple")
SUPPORTED_DTYPES = {np.float32, np.float64, np.int64, np.int32, np.bool_, np.int8, np.uint8}
RTOL, ATOL = 1e-3, 1e-5
TIMEOUT = 60


def data_dir():
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def load_protos(folder, prefix):
    """input_*.pb / output_*.pb in numeric order, as numpy arrays."""
    files = glob.glob(os.path.join(folder, f"{prefix}_*.pb"))
    files.sort(key=lambda p: int(re.search(r"_(\d+)\.pb$", p).group(1)))
    arrays = []
    for f in files:
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        arrays.append((t.name, numpy_helper.to_array(t)))
    return arrays


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    if not lines:
        return "?"
    # "/work/.../model.onnx: error: REASON" -> "REASON"
    return re.sub(r"^\S+: error: ", "", lines[-1].strip())[:300]


def shape_arg(shape):
    return "x".join(str(d) for d in shape) if len(shape) else ""


def compile_model(model, inputs, names_in, args, work):
    """zero-opt with static shapes; inputs that must be constants are baked in.

    Returns (None, baked) on success, or (reason, baked) on refusal."""
    model_path = os.path.join(work, "model.onnx")
    zrt = os.path.join(work, "model.zrt")
    baked = set()
    for _ in range(8):
        onnx.save(model, model_path)
        cmd = [args.zero_opt, model_path, "--emit=zrt", "-o", zrt,
               "--weights-out", os.path.join(work, "w.safetensors")]
        for name, arr in zip(names_in, inputs):
            if name not in baked:
                cmd.append(f"--input-shape={name}={shape_arg(arr.shape)}")
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
        if r.returncode == 0:
            return None, baked
        # Graph inputs that feed shapes/axes must be constants for a
        # static-shape compiler: bake the test's value as an initializer.
        m = re.search(r"\(input \d+, '([^']+)'\) must be a constant", r.stderr)
        if not m or m.group(1) not in names_in or m.group(1) in baked:
            return "zero-opt: " + last_line(r.stderr), baked
        name = m.group(1)
        baked.add(name)
        new = onnx.ModelProto()
        new.CopyFrom(model)
        new.graph.initializer.append(
            numpy_helper.from_array(inputs[names_in.index(name)], name))
        kept = [i for i in new.graph.input if i.name != name]
        del new.graph.input[:]
        new.graph.input.extend(kept)
        model = new
    return "zero-opt: too many run-time constants", baked


def compare(got, names_out, outputs):
    for name, want in zip(names_out, outputs):
        g = got.get(name)
        if g is None:
            return f"missing output: {name} (got {', '.join(sorted(got)) or 'none'})"
        if g.shape != want.shape:
            return f"shape: {name}: {g.shape} != {want.shape}"
        if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
            if g.dtype != want.dtype and not np.can_cast(g.dtype, want.dtype):
                return f"dtype: {name}: got {g.dtype}, want {want.dtype}"
            if not np.array_equal(g, want):
                return f"values differ: {name}: {int(np.sum(g != want))} of {want.size} elements"
        elif want.dtype.kind in "fc":
            if g.dtype.kind not in "fc":
                return f"dtype: {name}: got {g.dtype}, want {want.dtype}"
            if not np.allclose(g, want, rtol=RTOL, atol=ATOL, equal_nan=True):
                err = np.nanmax(np.abs(g.astype(np.float64) - want.astype(np.float64)))
                return f"values differ: {name}: max abs error {err:.3g}"
        else:
            if not np.array_equal(g, want):
                return f"values differ: {name}"
    return "pass"


def run_case(folder, args, work):
    os.makedirs(work, exist_ok=True)
    model = onnx.load(os.path.join(folder, "model.onnx"))
    data = os.path.join(folder, "test_data_set_0")
    ins = load_protos(data, "input")
    outs = load_protos(data, "output")
    inits = {i.name for i in model.graph.initializer}
    graph_in = [i.name for i in model.graph.input if i.name not in inits]
    # Stored protos map to the graph's (non-initializer) inputs in order;
    # prefer the proto's own name where it has one that matches.
    names_in = [n if n in graph_in else graph_in[k] if k < len(graph_in) else n
                for k, (n, _) in enumerate(ins)]
    names_out = [o.name for o in model.graph.output][:len(outs)]
    inputs = [np.asarray(a) for _, a in ins]
    outputs = [np.asarray(a) for _, a in outs]

    odd = sorted({str(a.dtype) if a.dtype != object else "string"
                  for a in inputs + outputs if a.dtype.type not in SUPPORTED_DTYPES})
    status = _run(model, inputs, outputs, names_in, names_out, args, work)
    if odd and status != "pass":
        return f"dtype: {'/'.join(odd)}: {status}"
    return status


def _run(model, inputs, outputs, names_in, names_out, args, work):
    reason, baked = compile_model(model, inputs, names_in, args, work)
    if reason:
        return "refused: " + reason
    out_path = os.path.join(work, "out.safetensors")
    if os.path.exists(out_path):
        os.remove(out_path)
    cmd = [args.zero_run, os.path.join(work, "model.zrt"),
           "--weights", os.path.join(work, "w.safetensors"),
           "--output", out_path, "--threads", "1"]
    for k, (name, arr) in enumerate(zip(names_in, inputs)):
        if name in baked:
            continue
        p = os.path.join(work, f"in{k}.npy")
        np.save(p, arr.astype(str) if arr.dtype == object else arr)
        cmd += ["--input", f"{name}={p}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    if r.returncode != 0:
        return "refused: zero-run: " + last_line(r.stderr or r.stdout)
    if not os.path.exists(out_path):
        return "missing output: zero-run wrote no output file"
    return compare(load_file(out_path), names_out, outputs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--filter", default="")
    ap.add_argument("--expect")
    ap.add_argument("--write-expect")
    args = ap.parse_args()

    results = {}
    per_suite = {}
    for suite in SUITES:
        root = os.path.join(data_dir(), suite)
        if not os.path.isdir(root):
            continue
        for name in sorted(os.listdir(root)):
            folder = os.path.join(root, name)
            if not os.path.isfile(os.path.join(folder, "model.onnx")):
                continue
            case = f"{suite}/{name}"
            if args.filter and args.filter not in case:
                continue
            try:
                status = run_case(folder, args, os.path.join(args.work, suite, name))
            except subprocess.TimeoutExpired:
                status = f"timeout: over {TIMEOUT} s"
            except Exception as e:  # a broken case must not stop the suite
                status = f"error: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            results[case] = status
            per_suite.setdefault(suite, []).append(status == "pass")
            print(f"{case}: {status}", flush=True)

    passed = sorted(n for n, s in results.items() if s == "pass")
    refused = sum(1 for s in results.values()
                  if s.startswith("refused") or (s.startswith("dtype") and ": refused" in s))
    differ = sum(1 for s in results.values() if "values differ" in s)
    for suite, oks in per_suite.items():
        print(f"  {suite}: {sum(oks)} of {len(oks)} pass")
    print(f"{len(passed)} of {len(results)} cases pass; {refused} refused with a message; "
          f"{differ} differ")
    if args.write_expect:
        with open(args.write_expect, "w") as f:
            f.write("\n".join(passed) + ("\n" if passed else ""))
    if args.expect:
        expected = [l.strip() for l in open(args.expect) if l.strip() and not l.startswith("#")]
        expected = [n for n in expected if args.filter in n]
        broken = [n for n in expected if results.get(n) != "pass"]
        if broken:
            for n in broken:
                print(f"FAIL: {n} passed before and now gives: {results.get(n, 'not run')}")
            sys.exit(1)
        print(f"all {len(expected)} expected cases pass")


if __name__ == "__main__":
    main()
