#!/usr/bin/env python3
"""Property test of the ZeRO pipeline end to end, on random models and options.

Each case (reproducible from its seed) builds a random ONNX model (opset 17): a
chain with occasional residual joins of 3-12 ops among MatMul, Gemm (with and
without transB, with and without bias), Add of a bias parameter, Relu, Tanh,
LayerNormalization (scale and bias parameters), Mul by a parameter and Mul by
a view of a parameter made at the graph's start and read later, sometimes by
several layers (Unsqueeze, Reshape, Squeeze, a row range, Flatten: the same
bytes; a strided Slice: a copy), with
2-16 float parameters of odd sizes (some below the persistence threshold) and,
in about half the cases, one parameter used twice far apart (a tied
embedding / LM head: MatMul by W early, Gemm by W with transB=1 at the end), so
that max-reuse-distance re-gathers it. It draws a ZeRO option combination

    stage=3 dp=N prefetch=D prefetch-bytes=B bucket-bytes=K
    persistence-threshold=T max-reuse-distance=R

(N in 1..4, the others including 0 / off), compiles the model with it and with
no options (the 1-rank reference), runs both with zero-run (the ZeRO one under
`mpirun -np N`) and checks:

  (1) the outputs are bit-identical to the 1-rank reference run;
  (2) the outputs are close to onnxruntime (rtol 1e-4, atol 1e-5);
  (3) with prefetch and prefetch-bytes=B > 0: if the same options without
      prefetch (prefetch=0, no prefetch-bytes) measure peak_gathered_bytes <= B
      (their planned figure, which a run in program order measures),
      the prefetched program measures peak_gathered_bytes <= B as well (the
      prefetch budget is kept);
  (4) on every rank, the measured peak_gathered_bytes is at most the
      runtime's planned_peak_gathered_bytes (the run follows the plan); runs
      that measure less in every one of --attempts runs are listed (compute may
      run ahead of a prefetched gather; --exact-plan makes that a failure);
  (5) recorded, not asserted: zero-opt --report's "peak gathered parameters
      (bytes)" against the runtime's planned figure; mismatches are listed at
      the end (--strict-report makes them failures);
  (6) the ZeRO program run again with the other stream mode (--overlap on if
      auto made the streams take turns, else off; taking turns, a prefetched
      program runs on its in-order memory plan) gives the same bytes, and
      measures no more gathered bytes than planned.

On a failure it prints the case's seed, options and the exact commands, and
keeps the case's directory. Exit status 0 when every case passed.

  zero_property.py --cases 12 --seed 1 --work /tmp/p \\
      --zero-opt build/bin/zero-opt --zero-run build/bin/zero-run
  zero_property.py --long ...      # 200 cases, np up to 4
  zero_property.py --case-seed S   # rerun the single case S
"""
import argparse
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time

import numpy as np

from zerokit import mpi, tools

ENV = mpi.env(yield_when_idle=True, root=mpi.is_root())

# Dimensions: odd sizes (not divisible by 2, 3 or 4) next to round ones.
DIMS = [1, 2, 3, 5, 7, 8, 11, 12, 13, 16, 17, 23, 24, 31, 37]


class CaseFailure(Exception):
    def __init__(self, prop, message):
        super().__init__(message)
        self.prop = prop


# ---------------------------------------------------------------------------
# Random models
# ---------------------------------------------------------------------------

def build_model(rng, path):
    """Writes a random model to `path`; returns (input shape, description)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    batch = rng.choice([1, 2, 3, 4])
    d_in = rng.choice(DIMS[2:])
    nodes, inits, desc = [], [], []
    counter = [0]

    def name(prefix):
        counter[0] += 1
        return f"{prefix}{counter[0]}"

    def param(shape):
        n = name("p")
        scale = 1.0 / np.sqrt(max(1, shape[0]))
        value = (np.random.default_rng(rng.randrange(1 << 30))
                 .standard_normal(shape).astype(np.float32) * np.float32(scale))
        inits.append(numpy_helper.from_array(value, n))
        return n

    consts = []  # int64 operands (axes, shapes, slice bounds): not parameters
    views = []  # (value, width): [1, width] views of parameters, made first

    def const(values):
        n = name("c")
        consts.append(numpy_helper.from_array(np.array(values, dtype=np.int64), n))
        return n

    def param_view(width):
        """A [1, width] view of a new parameter, made by ops placed at the
        start of the graph (far from its readers, as an exporter places a
        buffer's unsqueeze): the same bytes (Unsqueeze, Reshape, Squeeze, a
        contiguous row range, then sometimes a Flatten) or a strided Slice
        (a copy)."""
        form = rng.choice(["unsqueeze", "reshape", "squeeze", "rows", "strided"])
        out = name("v")
        if form == "unsqueeze":
            node = helper.make_node("Unsqueeze", [param([width]), const([0])], [out])
        elif form == "reshape":
            node = helper.make_node("Reshape", [param([width]), const([1, width])], [out])
        elif form == "squeeze":
            node = helper.make_node("Squeeze", [param([1, 1, width]), const([0])], [out])
        elif form == "rows":
            node = helper.make_node("Slice", [param([3, width]), const([1]), const([2]),
                                              const([0])], [out])
        else:
            node = helper.make_node("Slice", [param([1, 2 * width]), const([1]),
                                              const([2 * width]), const([1]),
                                              const([2])], [out])
        node.name = name("n_")
        front = [node]
        if form != "strided" and rng.random() < 0.3:
            flat = name("v")
            front.append(helper.make_node("Flatten", [out], [flat], name=name("n_"), axis=1))
            out = flat
        nodes[0:0] = front
        views.append((out, width))
        return out, form

    acts = [("x", d_in)]  # (value name, last dim); all are [batch, d]
    cur, d = "x", d_in
    n_ops = rng.randint(3, 12)
    tied = None
    if rng.random() < 0.5:
        n_ops = max(n_ops, 5)
        # Embedding-like first MatMul, reused transposed as the LM head.
        e = rng.choice(DIMS[3:])
        tied = (param([d, e]), d, e)
        out = name("h")
        nodes.append(helper.make_node("MatMul", [cur, tied[0]], [out], name=name("n_")))
        desc.append(f"MatMul[{d}x{e}](tied)")
        cur, d = out, e
        acts.append((cur, d))
    body = n_ops - (2 if tied else 0)
    for _ in range(max(1, body)):
        kind = rng.choice(["MatMul", "Gemm", "GemmT", "Add", "Relu", "Tanh",
                           "LayerNorm", "Mul", "Residual", "ViewMul"])
        if len(inits) >= 13:  # at most 16 parameters in all
            kind = rng.choice(["Relu", "Tanh", "Residual"])
        out = name("h")
        if kind == "MatMul":
            e = rng.choice(DIMS)
            nodes.append(helper.make_node("MatMul", [cur, param([d, e])], [out],
                                          name=name("n_")))
            desc.append(f"MatMul[{d}x{e}]")
            d = e
        elif kind in ("Gemm", "GemmT"):
            e = rng.choice(DIMS)
            trans = kind == "GemmT"
            w = param([e, d] if trans else [d, e])
            ins = [cur, w]
            if rng.random() < 0.6:
                ins.append(param([e]))
            attrs = {"transB": 1} if trans else {}
            if rng.random() < 0.3:
                attrs["alpha"] = 0.5
            nodes.append(helper.make_node("Gemm", ins, [out], name=name("n_"), **attrs))
            desc.append(f"Gemm{'T' if trans else ''}[{d}->{e}{',bias' if len(ins) == 3 else ''}]")
            d = e
        elif kind == "Add":
            nodes.append(helper.make_node("Add", [cur, param([d])], [out], name=name("n_")))
            desc.append(f"AddBias[{d}]")
        elif kind == "Mul":
            shape = [d] if rng.random() < 0.7 else [1, d]
            nodes.append(helper.make_node("Mul", [cur, param(shape)], [out], name=name("n_")))
            desc.append(f"MulParam{shape}")
        elif kind == "ViewMul":
            # A parameter read through a view made at the graph's start; a
            # view of the same width is sometimes read again (a mask every
            # layer reads).
            same = [v for v, w in views if w == d]
            if same and rng.random() < 0.5:
                v, form = rng.choice(same), "again"
            else:
                v, form = param_view(d)
            nodes.append(helper.make_node("Mul", [cur, v], [out], name=name("n_")))
            desc.append(f"MulView[{d},{form}]")
        elif kind in ("Relu", "Tanh"):
            nodes.append(helper.make_node(kind, [cur], [out], name=name("n_")))
            desc.append(kind)
        elif kind == "LayerNorm":
            nodes.append(helper.make_node(
                "LayerNormalization", [cur, param([d]), param([d])], [out],
                name=name("n_"), axis=-1, epsilon=1e-5))
            desc.append(f"LayerNorm[{d}]")
        else:  # Residual: add an earlier activation of the same width
            same = [a for a, w in acts[:-1] if w == d]
            if not same:
                nodes.append(helper.make_node("Tanh", [cur], [out], name=name("n_")))
                desc.append("Tanh")
            else:
                other = rng.choice(same)
                nodes.append(helper.make_node("Add", [cur, other], [out], name=name("n_")))
                desc.append(f"Residual({other})")
        cur = out
        acts.append((cur, d))
    if tied:
        w, d0, e = tied
        if d != e:
            out = name("h")
            nodes.append(helper.make_node("MatMul", [cur, param([d, e])], [out],
                                          name=name("n_")))
            desc.append(f"MatMul[{d}x{e}]")
            cur, d = out, e
        out = name("h")
        nodes.append(helper.make_node("Gemm", [cur, w], [out], name=name("n_"), transB=1))
        desc.append(f"GemmT[{e}->{d0}](tied)")
        cur, d = out, d0
    # 2..16 parameters.
    while len(inits) < 2:
        out = name("h")
        nodes.append(helper.make_node("Add", [cur, param([d])], [out], name=name("n_")))
        desc.append(f"AddBias[{d}]")
        cur = out
    assert 2 <= len(inits) <= 16, len(inits)
    nodes.append(helper.make_node("Identity", [cur], ["y"], name=name("n_")))
    graph = helper.make_graph(
        nodes, "random",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", d_in])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, d])],
        initializer=inits + consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="zero_property")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    sizes = [int(np.prod(t.dims)) for t in inits]
    return [batch, d_in], " -> ".join(desc), sizes


# ---------------------------------------------------------------------------
# Random options
# ---------------------------------------------------------------------------

def draw_options(rng, sizes, max_np):
    weights = [1, 3, 3, 1][:max_np]
    n = rng.choices(range(1, max_np + 1), weights=weights)[0]
    total = sum(sizes) * 4
    biggest = max(sizes) * 4
    o = {"stage": 3, "dp": n}
    o["prefetch"] = rng.choice([0, 0, 1, 1, 2, 3])
    o["prefetch-bytes"] = rng.choice(
        [0, 0, biggest, 2 * biggest, rng.randint(1, max(1, total)),
         rng.randint(biggest, 3 * biggest + 1)])
    o["bucket-bytes"] = rng.choice(
        [0, 0, 64, rng.randint(1, biggest + 1), rng.randint(biggest, 2 * total + 1), 1 << 20])
    o["persistence-threshold"] = rng.choice([0, 0, 1, 5, 20, 64, rng.choice(sizes)])
    o["max-reuse-distance"] = rng.choice([-1, -1, 0, 1, rng.randint(1, max(1, sum(sizes))),
                                          1 << 30])
    # Drop some options altogether (their defaults apply).
    for k in ["prefetch", "prefetch-bytes", "bucket-bytes", "persistence-threshold",
              "max-reuse-distance"]:
        if rng.random() < 0.15:
            del o[k]
    return o


def pipeline_string(o):
    return " ".join(f"{k}={v}" for k, v in o.items())


# ---------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------

class Case:
    def __init__(self, args, seed):
        self.args, self.seed = args, seed
        self.work = os.path.join(args.work, f"case-{seed}")
        self.commands = []
        self.notes = []

    def run(self, cmd, what):
        self.commands.append(" ".join(shlex.quote(c) for c in cmd))
        try:
            for wait in range(24):
                try:
                    # A session directory of this mpirun's own (zerokit.mpi).
                    r = tools.call(cmd, ENV, timeout=self.args.timeout)
                    break
                except (FileNotFoundError, PermissionError):
                    # A binary being relinked: wait for it (up to 2 minutes).
                    if wait == 23:
                        raise
                    time.sleep(5)
        except subprocess.TimeoutExpired:
            raise CaseFailure(what, f"timed out after {self.args.timeout} s: {self.commands[-1]}")
        if r.returncode != 0:
            raise CaseFailure(what, f"exit status {r.returncode}: {self.commands[-1]}\n"
                                    f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        return r

    def compile(self, tag, model, shape, opts):
        zrt = os.path.join(self.work, tag + ".zrt")
        w = os.path.join(self.work, tag + ".safetensors")
        args = [] if opts is None else ["--zero-pipeline=" + pipeline_string(opts), "--report"]
        r = self.run(tools.zero_opt(self.args.zero_opt, model, {"x": shape}, args, zrt, w),
                     "compile")
        report_peak = None
        m = re.search(r"peak gathered parameters \(bytes\)\s+(\d+)", r.stdout + r.stderr)
        if m:
            report_peak = int(m.group(1))
        elif opts is not None:
            raise CaseFailure("(5) report", "zero-opt --report printed no line "
                              "'peak gathered parameters (bytes)'")
        return zrt, w, report_peak

    def execute(self, tag, zrt, w, x, n, extra=()):
        out = os.path.join(self.work, tag + ".out.safetensors")
        rep = os.path.join(self.work, tag + ".report.json")
        cmd = [self.args.zero_run, zrt, "--weights", w, "--input", f"x={x}",
               "--output", out, "--report-json", rep] + list(extra)
        if n > 1 or self.args.always_mpirun:
            cmd = mpi.mpirun(n, cmd)
        self.run(cmd, "run")
        from safetensors.numpy import load_file
        with open(rep) as f:
            report = json.load(f)
        return load_file(out), report

    def check(self):
        rng = random.Random(self.seed)
        os.makedirs(self.work, exist_ok=True)
        model = os.path.join(self.work, "model.onnx")
        shape, desc, sizes = build_model(rng, model)
        opts = draw_options(rng, sizes, self.args.max_np)
        self.summary = (f"seed {self.seed}: np={opts['dp']} [{pipeline_string(opts)}] "
                        f"params {sizes} model x{shape}: {desc}")
        x = np.random.default_rng(self.seed).standard_normal(shape).astype(np.float32)
        xpath = os.path.join(self.work, "x.npy")
        np.save(xpath, x)

        # Reference: no options, one rank.
        ref_zrt, ref_w, _ = self.compile("ref", model, shape, None)
        ref_out, _ = self.execute("ref", ref_zrt, ref_w, xpath, 1)
        # The ZeRO program.
        zrt, w, report_peak = self.compile("zero", model, shape, opts)
        out, report = self.execute("zero", zrt, w, xpath, opts["dp"])

        # (1) bit-identical to the 1-rank reference.
        for k, v in ref_out.items():
            if k not in out:
                raise CaseFailure("(1) bit-identical", f"output {k} missing")
            if v.shape != out[k].shape or v.tobytes() != out[k].tobytes():
                diff = np.abs(v.astype(np.float64) - out[k]).max() if v.shape == out[k].shape else "shape"
                raise CaseFailure("(1) bit-identical",
                                  f"output {k} differs from the 1-rank reference "
                                  f"(max abs difference {diff})")
        # (2) close to onnxruntime.
        import onnxruntime as ort
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        want = sess.run(None, {"x": x})[0]
        got = out["y"]
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            err = np.abs(got.astype(np.float64) - want).max() if got.shape == want.shape else "shape"
            raise CaseFailure("(2) onnxruntime", f"output y differs from onnxruntime "
                                                 f"(max abs error {err})")
        # (6) the other stream mode (--overlap on/off; the run above took
        # auto's pick), with its own memory plan when the streams take turns
        # (the in-order plan): the same bytes, and no more gathered bytes
        # live than planned.
        other = "on" if report.get("streams_take_turns") else "off"
        out2, report2 = self.execute("zero-" + other, zrt, w, xpath, opts["dp"],
                                     ["--overlap", other])
        for k, v in out.items():
            if v.tobytes() != out2[k].tobytes():
                raise CaseFailure("(6) --overlap", f"output {k} with --overlap {other} "
                                  f"differs from the run with --overlap auto")
        for r in report2["ranks"]:
            if r.get("peak_gathered_bytes", 0) > r.get("planned_peak_gathered_bytes", 0):
                raise CaseFailure("(6) --overlap", f"--overlap {other}: rank {r['rank']} "
                                  f"measured {r['peak_gathered_bytes']} gathered bytes, "
                                  f"above the planned {r['planned_peak_gathered_bytes']}")
        ranks = report["ranks"]
        if "peak_gathered_bytes" not in ranks[0]:
            self.notes.append("zero-run reports no peak_gathered_bytes: (3)-(5) skipped")
            return
        measured = [r["peak_gathered_bytes"] for r in ranks]
        planned = [r["planned_peak_gathered_bytes"] for r in ranks]
        # (4) the run follows the plan: never more gathered bytes live than
        # planned, since a gather waits for compute to finish the instruction
        # before it. A run may measure less: compute is free to finish the
        # last reader of a gathered block before the communication thread
        # starts a gather placed ahead of that reader (nothing orders compute
        # behind a prefetched gather), so equality depends on the threads'
        # timing. With --exact-plan, equality is required in one of
        # --attempts runs; otherwise shortfalls are recorded.
        attempt = 1
        while True:
            short = []
            for r in ranks:
                m, p = r["peak_gathered_bytes"], r["planned_peak_gathered_bytes"]
                if m > p:
                    raise CaseFailure("(4) measured <= planned",
                                      f"rank {r['rank']}: measured peak_gathered_bytes {m} "
                                      f"exceeds the planned {p} (run {attempt})")
                if m < p:
                    short.append(f"rank {r['rank']} measured {m} < planned {p}")
            if not short:
                break
            if attempt >= self.args.attempts:
                msg = (f"in each of {attempt} runs some rank measured less than planned "
                       f"(last: {'; '.join(short)})")
                if self.args.exact_plan:
                    raise CaseFailure("(4) measured == planned", msg)
                self.notes.append("(4) " + msg)
                break
            attempt += 1
            _, report = self.execute(f"zero-again{attempt}", zrt, w, xpath, opts["dp"])
            ranks = report["ranks"]
        measured = [r["peak_gathered_bytes"] for r in ranks]
        planned = [r["planned_peak_gathered_bytes"] for r in ranks]
        # (5) the compiler's figure, recorded.
        if report_peak is not None and any(p != report_peak for p in planned):
            self.notes.append(f"(5) zero-opt --report peak gathered {report_peak}, "
                              f"runtime planned {planned}")
            if self.args.strict_report:
                raise CaseFailure("(5) report", self.notes[-1])
        # (3) the prefetch budget.
        budget = opts.get("prefetch-bytes", 0)
        if budget > 0 and opts.get("prefetch", 1) > 0:
            base = dict(opts)
            base["prefetch"] = 0
            del base["prefetch-bytes"]
            bzrt, bw, _ = self.compile("noprefetch", model, shape, base)
            _, brep = self.execute("noprefetch", bzrt, bw, xpath, opts["dp"])
            # The baseline's plan: what it measures when it runs as planned
            # (a run may measure less, see (4), never more).
            bmeasured = []
            for r in brep["ranks"]:
                if r["peak_gathered_bytes"] > r["planned_peak_gathered_bytes"]:
                    raise CaseFailure("(4) measured == planned",
                                      f"without prefetch, rank {r['rank']} measured "
                                      f"{r['peak_gathered_bytes']} > planned "
                                      f"{r['planned_peak_gathered_bytes']}")
                bmeasured.append(r["planned_peak_gathered_bytes"])
            # The prefetched program likewise by its plan (its runs measured at
            # most that, (4)), so that a lucky schedule cannot hide a breach.
            for r, b, m in zip(ranks, bmeasured, planned):
                if b <= budget < m:
                    raise CaseFailure("(3) prefetch budget",
                                      f"rank {r['rank']}: without prefetch the peak of "
                                      f"gathered bytes is {b} <= prefetch-bytes={budget}, "
                                      f"with prefetch it is {m} (planned; measured "
                                      f"{r['peak_gathered_bytes']})")
        self.measured, self.planned, self.report_peak = measured, planned, report_peak


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=None,
                    help="number of cases (default 12, --long 200)")
    ap.add_argument("--seed", type=int, default=1, help="first case's seed; case i uses seed+i")
    ap.add_argument("--case-seed", type=int, action="append", default=[],
                    help="run exactly this case (repeatable)")
    ap.add_argument("--work", required=True, help="scratch directory")
    ap.add_argument("--zero-opt", default="zero-opt")
    ap.add_argument("--zero-run", default="zero-run")
    ap.add_argument("--long", action="store_true", help="200 cases, np up to 4")
    ap.add_argument("--max-np", type=int, default=None,
                    help="largest world size drawn (default 3, --long 4)")
    ap.add_argument("--strict-report", action="store_true",
                    help="make (5) report mismatches failures")
    ap.add_argument("--always-mpirun", action="store_true",
                    help="run 1-rank programs under mpirun -np 1 too")
    ap.add_argument("--keep", action="store_true", help="keep passing cases' files")
    ap.add_argument("--keep-going", action="store_true",
                    help="run every case even after a failure (default with --long)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per command")
    ap.add_argument("--attempts", type=int, default=2,
                    help="runs looked at for (4) when one measures less than planned")
    ap.add_argument("--exact-plan", action="store_true",
                    help="(4) fails unless one of --attempts runs measures exactly the plan")
    a = ap.parse_args()
    if a.cases is None:
        a.cases = 200 if a.long else 12
    if a.max_np is None:
        a.max_np = 4 if a.long else 3
    keep_going = a.keep_going or a.long
    os.makedirs(a.work, exist_ok=True)
    seeds = a.case_seed or [a.seed + i for i in range(a.cases)]

    start = time.time()
    failures, notes, passed = [], [], 0
    for seed in seeds:
        case = Case(a, seed)
        try:
            case.check()
        except CaseFailure as e:
            failures.append((case, e))
            print(f"FAIL {getattr(case, 'summary', f'seed {seed}')}\n"
                  f"  property {e.prop}: {e}\n  commands:\n    " +
                  "\n    ".join(case.commands) +
                  f"\n  rerun: {sys.argv[0]} --case-seed {seed} --work {a.work} "
                  f"--zero-opt {a.zero_opt} --zero-run {a.zero_run}"
                  f"{' --max-np %d' % a.max_np}", flush=True)
            if not keep_going:
                break
            continue
        passed += 1
        extra = ""
        if hasattr(case, "measured"):
            extra = (f" gathered peak measured {case.measured[0]} planned {case.planned[0]}"
                     f" zero-opt {case.report_peak}")
        print(f"PASS {case.summary}{extra}", flush=True)
        for n in case.notes:
            if n.startswith("(5)") or n.startswith("(4)"):
                notes.append((case, n))
            print(f"  NOTE {n}", flush=True)
        if not a.keep:
            shutil.rmtree(case.work, ignore_errors=True)

    print(f"\n{passed} passed, {len(failures)} failed of {passed + len(failures)} case(s) "
          f"(seeds {seeds[0]}..{seeds[-1]}) in {time.time() - start:.1f} s")
    if notes:
        print(f"{len(notes)} note(s), not asserted: (4) runs measuring less than planned, "
              f"(5) zero-opt --report differing from the runtime's plan:")
        for case, n in notes:
            print(f"  {case.summary}\n    {n}")
    for case, e in failures:
        print(f"FAILED seed {case.seed} property {e.prop}: {case.summary}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
