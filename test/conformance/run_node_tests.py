#!/usr/bin/env python3
"""Kernel conformance against ONNX's own per-operator test cases.

Every node test case the installed `onnx` package defines
(onnx.backend.test.case.node: the same cases as onnx/backend/test/data/node)
whose operators zero-opt supports is run through import -> lower -> zero-run,
and its outputs are compared with the expected outputs ONNX ships (the case's
own tolerances, defaulting to rtol 1e-3 / atol 1e-7 as ONNX's runner does).

  run_node_tests.py --zero-opt BIN --zero-run BIN --work DIR
        [--expect expected_pass.txt]   fail if a listed case does not pass
        [--write-expect FILE]          record the cases that pass now
        [--write-table docs/ops.md]    replace the coverage table there
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore")
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from onnx.backend.test.case import node as node_cases  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

SUPPORTED_DTYPES = {np.float32, np.float64, np.int64, np.int32, np.bool_, np.int8, np.uint8}


def supported_ops(zero_opt_src):
    """Op types in the importer's table (lib/Import/OpImporters.cpp)."""
    text = open(zero_opt_src).read()
    ops = set(re.findall(r't\["(\w+)"\]', text))
    for group in re.findall(r'for \(const char \*op : \{([^}]*)\}\)', text):
        ops.update(re.findall(r'"(\w+)"', group))
    return ops


def run_case(case, args, work):
    os.makedirs(work, exist_ok=True)
    model_path = os.path.join(work, "model.onnx")
    onnx.save(case.model, model_path)
    inputs, outputs = case.data_sets[0]
    # 0-d inputs may come as numpy scalars (OneHot's depth): arrays like the rest.
    inputs = [np.asarray(a) if isinstance(a, np.generic) else a for a in inputs]
    outputs = [np.asarray(a) if isinstance(a, np.generic) else a for a in outputs]
    names_in = [i.name for i in case.model.graph.input]
    names_out = [o.name for o in case.model.graph.output]
    for arr in list(inputs) + list(outputs):
        if not isinstance(arr, np.ndarray) or arr.dtype.type not in SUPPORTED_DTYPES:
            return "dtype"
    zrt = os.path.join(work, "model.zrt")
    # ONNX's cases often feed axes/shapes/bounds as graph inputs; a static-shape
    # compiler needs them as constants, so the test's values are baked in as
    # initializers (what an exporter does for real models).
    model = case.model
    baked = set()
    for _ in range(6):
        onnx.save(model, model_path)
        r = subprocess.run([args.zero_opt, model_path, "--emit=zrt", "-o", zrt,
                            "--weights-out", os.path.join(work, "w.safetensors")],
                           capture_output=True, text=True, timeout=60)
        if r.returncode == 0:
            break
        m = re.search(r"\(input \d+, '([^']+)'\) must be a constant", r.stderr)
        if not m or m.group(1) not in names_in or m.group(1) in baked:
            last = r.stderr.strip().splitlines()
            return "compile: " + (last[-1][:200] if last else "?")
        name = m.group(1)
        baked.add(name)
        model = onnx.ModelProto()
        model.CopyFrom(case.model if len(baked) == 1 else model_prev)
        idx = names_in.index(name)
        model.graph.initializer.append(numpy_helper.from_array(inputs[idx], name))
        kept = [i for i in model.graph.input if i.name != name]
        del model.graph.input[:]
        model.graph.input.extend(kept)
        model_prev = model
    else:
        return "compile: too many run-time constants"
    cmd = [args.zero_run, zrt, "--weights", os.path.join(work, "w.safetensors"),
           "--output", os.path.join(work, "out.safetensors"), "--threads", "1"]
    for name, arr in zip(names_in, inputs):
        if name in baked:
            continue
        p = os.path.join(work, f"in{len(cmd)}.npy")
        np.save(p, arr)
        cmd += ["--input", f"{name}={p}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return "run: " + (r.stderr.strip().splitlines() or ["?"])[-1][:200]
    got = load_file(os.path.join(work, "out.safetensors"))
    rtol = getattr(case, "rtol", None) or 1e-3
    atol = getattr(case, "atol", None) or 1e-7
    for name, want in zip(names_out, outputs):
        g = got.get(name)
        if g is None:
            return f"missing output {name}"
        if g.shape != want.shape:
            return f"shape {g.shape} != {want.shape}"
        if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
            if not np.array_equal(g, want):
                return f"values differ ({name})"
        elif not np.allclose(g, want, rtol=rtol, atol=atol, equal_nan=True):
            return f"values differ ({name}): max abs error {np.nanmax(np.abs(g - want)):.3g}"
    return "pass"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--src", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--expect")
    ap.add_argument("--write-expect")
    ap.add_argument("--write-table")
    ap.add_argument("--filter", default="")
    args = ap.parse_args()

    ops = supported_ops(os.path.join(args.src, "lib", "Import", "OpImporters.cpp"))
    results = {}
    by_op = collections.defaultdict(list)
    for case in node_cases.collect_testcases(None):
        if args.filter and args.filter not in case.name:
            continue
        graph_ops = {n.op_type for n in case.model.graph.node}
        domains = {n.domain for n in case.model.graph.node}
        if not graph_ops or not graph_ops <= ops or domains - {"", "ai.onnx"}:
            continue
        if any(f.name for f in case.model.functions):
            continue
        opset = max((o.version for o in case.model.opset_import
                     if o.domain in ("", "ai.onnx")), default=0)
        if opset < 13:
            continue  # zero-opt accepts opsets 13 and newer
        try:
            status = run_case(case, args, os.path.join(args.work, case.name))
        except subprocess.TimeoutExpired:
            status = "timeout"
        results[case.name] = status
        for op in graph_ops:
            by_op[op].append((case.name, status))

    passed = sorted(n for n, s in results.items() if s == "pass")
    print(f"{len(passed)} of {len(results)} applicable ONNX node cases pass")
    for n, s in sorted(results.items()):
        if s != "pass":
            print(f"  not passing: {n}: {s}")
    if args.write_expect:
        with open(args.write_expect, "w") as f:
            f.write("\n".join(passed) + "\n")
    if args.write_table:
        rows = ["| op | cases passing | cases not passing |", "| --- | --- | --- |"]
        for op in sorted(by_op):
            ok = [n for n, s in by_op[op] if s == "pass"]
            bad = [n for n, s in by_op[op] if s != "pass"]
            rows.append(f"| {op} | {len(ok)} | {len(bad)}"
                        + (f" ({', '.join(b[5:] for b in bad[:6])}{', ...' if len(bad) > 6 else ''})" if bad else "")
                        + " |")
        marker = "<!-- conformance table: filled in by the conformance driver -->"
        text = open(args.write_table).read()
        head = text.split(marker)[0]
        summary = (f"\n{len(passed)} of {len(results)} applicable cases pass "
                   f"(onnx {onnx.__version__}). Cases with dtypes the runtime does not "
                   "have (strings, float16, bfloat16, float8, uint16/32/64, int16) count "
                   "as not passing.\n\n")
        with open(args.write_table, "w") as f:
            f.write(head + marker + "\n" + summary + "\n".join(rows) + "\n")
    if args.expect:
        expected = [l.strip() for l in open(args.expect) if l.strip()]
        broken = [n for n in expected if results.get(n) != "pass"]
        if broken:
            for n in broken:
                print(f"FAIL: {n} passed before and now gives: {results.get(n, 'not run')}")
            sys.exit(1)
        print(f"all {len(expected)} expected cases pass")


if __name__ == "__main__":
    main()
