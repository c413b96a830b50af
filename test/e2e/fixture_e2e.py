#!/usr/bin/env python3
"""End-to-end check of one fixture model: zero-opt -> .zrt -> zero-run.

Reads the committed reference file next to the model (inputs and onnxruntime
outputs, produced by test/models/export.py), compiles the model with the given
ZeRO options, runs it under `mpirun -np N`, and checks:
  * every output against onnxruntime (rtol/atol, float32);
  * optionally, bit-exact equality with another run's outputs (--same-as);
  * optionally, bit-exact equality of the outputs at several --threads counts
    (--threads-sweep): kernels split work by shape, never by thread count;
  * the peak of gathered parameter bytes: zero-opt's report equals the
    program's peak in program order (computed by zero-run) on every rank, and
    no rank measures more;
  * optionally, the runtime's own measurements against the plan and the ZeRO
    closed forms (--check-zero): resident parameter bytes per rank equal the
    sum of shard and persistent bytes, and all-gather bytes sent per rank per
    forward equal (N-1)/N of the gathered (padded) parameter bytes.
Exit status 0 on success; a message naming the output and the error otherwise.
"""
import argparse
import json
import re
import os
import shlex
import sys

import numpy as np
from safetensors.numpy import load_file

from zerokit import mpi, tools


# Tests oversubscribe the cores (2-4 ranks, each with a compute and a
# communication thread): let Open MPI's progress loop yield instead of spin.
ENV = mpi.env(yield_when_idle=True)


def run(cmd, **kw):
    # An mpirun gets a session directory of its own (zerokit.mpi.session).
    r = tools.call(cmd, ENV, session=mpi.is_mpirun(cmd), **kw)
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
    ap.add_argument("--in-order-plan", choices=["yes", "no"], default=None,
                    help="check zero-run's report: the run used the program's "
                         "in-order memory plan (streams taking turns) or not")
    ap.add_argument("--trace", choices=["overlap", "in-order", "turns"], default=None,
                    help="check the timeline: gathers overlap compute (prefetch), "
                         "follow program order (no prefetch), or never overlap a "
                         "kernel (zero-run --overlap off)")
    ap.add_argument("--shape", action="append", default=[],
                    help="NAME=D0xD1: run on random inputs of this shape (ids below "
                         "--vocab) and compare with onnxruntime run here")
    ap.add_argument("--threads-sweep", default="",
                    help="comma-separated --threads counts: rerun the program at each and "
                         "require outputs bit-identical to the first")
    ap.add_argument("--zero-opt-args", default="",
                    help="more zero-opt arguments (e.g. --zero-pipeline-split=pp=2)")
    ap.add_argument("--micro-batches", type=int, default=1,
                    help="compile at dim 0 / M (zero-pipeline-split micro-batches=M "
                         "stacks M micro-batches into the program's inputs)")
    ap.add_argument("--zero-run-args", default="",
                    help="extra zero-run arguments, e.g. \"--repeat 3 --warmup 1\"")
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    a = ap.parse_args()

    os.makedirs(a.work, exist_ok=True)
    model_path = os.path.join(a.models, a.model + ".onnx")
    if a.shape:
        # Inputs of another shape: the committed reference does not apply, so
        # onnxruntime computes the expected outputs here.
        import onnxruntime as ort
        rng = np.random.default_rng(0)
        inputs = {}
        for spec in a.shape:
            name, _, dims = spec.partition("=")
            inputs[name] = rng.integers(0, a.vocab, size=[int(d) for d in dims.split("x")],
                                        dtype=np.int64)
        sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        expected = dict(zip(names, sess.run(None, inputs)))
    else:
        ref = load_file(os.path.join(a.models, a.model + ".ref.safetensors"))
        inputs = {k[len("input."):]: v for k, v in ref.items() if k.startswith("input.")}
        expected = {k[len("ort."):]: v for k, v in ref.items() if k.startswith("ort.")}
    if not expected:
        sys.exit(f"FAIL: no expected outputs for {a.model} (the reference has no ort.* "
                 "outputs): nothing to compare with")
    zrt = os.path.join(a.work, "model.zrt")
    weights = os.path.join(a.work, "model.safetensors")
    out = os.path.join(a.work, "out.safetensors")
    report = os.path.join(a.work, "report.json")
    shapes = {}
    for name, v in inputs.items():
        shape = list(v.shape)
        if a.micro_batches > 1:
            if shape[0] % a.micro_batches:
                sys.exit(f"FAIL: {name} has {shape[0]} rows, not a multiple of "
                         f"{a.micro_batches} micro-batches")
            shape[0] //= a.micro_batches
        shapes[name] = shape
    args = [f"--zero-pipeline={a.zero_pipeline}"] if a.zero_pipeline else []
    args += shlex.split(a.zero_opt_args) + ["--report"]
    compiled = run(tools.zero_opt(a.zero_opt, model_path, shapes, args, zrt, weights))
    planned_peak = None
    stage_sends = {}  # pipeline report: stage -> (bytes, sends) per forward
    stage_params = {}  # pipeline report: stage -> parameter bytes a rank of it holds
    stage_gathers = {}  # with replicas: stage -> (peak gathered, all-gather bytes sent)
    replicas = 1  # a pipeline's ranks per stage (stage s on ranks [s*dp, (s+1)*dp))
    for line in compiled.stderr.splitlines():
        if line.strip().startswith("peak gathered parameters (bytes)"):
            planned_peak = int(line.split()[-1])
        m = re.match(r"== zero-report: pipeline, \d+ stages x (\d+) ranks?", line)
        if m:
            planned_peak = 0  # whole parameters on each stage, none gathered
            replicas = int(m.group(1))
        m = re.match(r"\s+stage (\d+)\s+(\d+)\s+(\d+)\s+(\d+)(?:\s+(\d+)\s+(\d+))?$", line)
        if m:
            stage_sends[int(m.group(1))] = (int(m.group(3)), int(m.group(4)))
            stage_params[int(m.group(1))] = int(m.group(2))
            if m.group(5) is not None:
                stage_gathers[int(m.group(1))] = (int(m.group(5)), int(m.group(6)))
    if planned_peak is None:
        sys.exit("FAIL: zero-opt --report printed no 'peak gathered parameters' line")
    if replicas > 1 and len(stage_gathers) != len(stage_sends):
        sys.exit("FAIL: zero-opt's pipeline report with replicas gives no gathered bytes "
                 "per stage")

    run_cmd = mpi.mpirun(a.np, [a.zero_run, zrt, "--weights", weights, "--output", out,
                                "--report-json", report])
    if a.trace:
        run_cmd += ["--trace", os.path.join(a.work, "trace.json")]
    run_cmd += a.zero_run_args.split()
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
    # The compiler's peak of gathered bytes is what the program does when run
    # in program order (the runtime computes that from the .zrt), and no run
    # exceeds it (overlap can only end a gathered buffer's life earlier).
    with open(report) as f:
        rep = json.load(f)
    if a.in_order_plan is not None:
        used = rep.get("in_order_plan", False)
        if used != (a.in_order_plan == "yes"):
            sys.exit(f"FAIL: zero-run's report says in_order_plan {used}, "
                     f"expected {a.in_order_plan}")
        print(f"PASS {a.model} np={a.np}: in-order memory plan used: {a.in_order_plan}")
    for r in rep["ranks"]:
        if stage_gathers:
            planned_peak = stage_gathers[r["rank"] // replicas][0]
        if r["planned_peak_gathered_bytes"] != planned_peak:
            sys.exit(f"FAIL: rank {r['rank']}: the program's peak of gathered bytes in "
                     f"program order is {r['planned_peak_gathered_bytes']}, zero-opt's "
                     f"report says {planned_peak}")
        if r["peak_gathered_bytes"] > planned_peak:
            sys.exit(f"FAIL: rank {r['rank']} measured {r['peak_gathered_bytes']} gathered "
                     f"bytes live at once, above the plan's {planned_peak}")
    # A pipeline stage sends what zero-opt's report says it sends per
    # forward, as the runtime's own counters measure it.
    # Every rank of a stage (its replicas, with dp > 1) does.
    by_rank = {r["rank"]: r for r in rep["ranks"]}
    stage_ranks = {st: [by_rank[st * replicas + d] for d in range(replicas)]
                   for st in stage_sends}
    for stage, (nbytes, nsends) in stage_sends.items():
        for r in stage_ranks[stage]:
            got_bytes, got_calls = r["bytes_sent"]["Send"], r["collective_calls"]["Send"]
            if (got_bytes, got_calls) != (nbytes, nsends):
                sys.exit(f"FAIL: stage {stage} (rank {r['rank']}) sent {got_bytes} bytes in "
                         f"{got_calls} sends; zero-opt's report says {nbytes} in {nsends}")
    # Each stage loads only its own weights (a tied one on each stage that
    # reads it; with replicas, its shard of each): what the runtime holds is
    # what zero-opt's report says.
    for stage, nbytes in stage_params.items():
        for r in stage_ranks[stage]:
            held = r["param_bytes_resident"]
            if held != nbytes:
                sys.exit(f"FAIL: stage {stage} (rank {r['rank']}) holds {held} parameter "
                         f"bytes; zero-opt's report says {nbytes}")
    # ... and gathers over its replicas the bytes zero-opt's report says.
    for stage, (_, nbytes) in stage_gathers.items():
        for r in stage_ranks[stage]:
            got = r["bytes_sent"].get("AllGather", 0)
            if got != nbytes:
                sys.exit(f"FAIL: stage {stage} (rank {r['rank']}) sent {got} all-gather "
                         f"bytes; zero-opt's report says {nbytes}")
    if stage_gathers:
        print(f"PASS {a.model} np={a.np}: every stage's replicas gathered the bytes zero-opt "
              f"reports ({', '.join(str(v[1]) for _, v in sorted(stage_gathers.items()))})")
    if stage_sends:
        print(f"PASS {a.model} np={a.np}: every stage holds the parameter bytes zero-opt "
              f"reports ({', '.join(str(v) for _, v in sorted(stage_params.items()))})")
        print(f"PASS {a.model} np={a.np}: every stage sent the bytes zero-opt reports "
              f"({', '.join(str(v[0]) for _, v in sorted(stage_sends.items()))})")
    planned = (", ".join(str(v[0]) for _, v in sorted(stage_gathers.items())) + " per stage"
               if stage_gathers else str(planned_peak))
    print(f"PASS {a.model} np={a.np}: peak gathered bytes {planned} as zero-opt "
          f"reports; measured " + ", ".join(str(r["peak_gathered_bytes"]) for r in rep["ranks"]))
    if a.threads_sweep:
        counts = [int(t) for t in a.threads_sweep.split(",")]
        first = None
        for t in counts:
            path = os.path.join(a.work, f"out-threads{t}.safetensors")
            run(run_cmd[:run_cmd.index("--output") + 1] + [path] +
                run_cmd[run_cmd.index("--output") + 2:] + ["--threads", str(t)])
            outs = {k: v.tobytes() for k, v in load_file(path).items()}
            if first is None:
                first = (t, outs)
                continue
            for name, b in outs.items():
                if b != first[1][name]:
                    sys.exit(f"FAIL: output '{name}' at --threads {t} is not bit-identical "
                             f"to --threads {first[0]}")
        print(f"PASS {a.model} np={a.np}: outputs bit-identical at --threads {a.threads_sweep}")
    if a.check_zero:
        check_zero(a, zrt, report)
    if a.trace == "in-order":
        check_trace(a, False)
    elif a.trace == "turns":
        check_turns(a)
    elif a.trace == "overlap":
        # Overlap is a property of the schedule as it ran: the threads of a
        # loaded 2-core machine may serialise one run by chance, so up to
        # three runs are looked at.
        for attempt in range(3):
            if check_trace(a, True, final=attempt == 2):
                break
            run(run_cmd)


def zero3_closed_form(model_path, world, threshold):
    """Per-rank resident parameter bytes, all-gather bytes each rank sends per
    forward, and the total bytes all ranks read from the weights file, for
    ZeRO-3 with DeepSpeed's rule (flatten, pad to a multiple of N, rank r owns
    [r*s, (r+1)*s)), computed from the ONNX file's parameters. Buffers
    (model_buffers.py) are not parameters: every rank holds them whole, as
    parameters at or below the persistence threshold."""
    import onnx
    from onnx import TensorProto
    from onnx import numpy_helper
    from model_buffers import buffer_names
    m = onnx.load(model_path)
    buffers = buffer_names(m)
    used = {i for n in m.graph.node for i in n.input}
    # A 2-D initializer the exporter made ("onnx::MatMul_592") holding the
    # transpose of a parameter (not constant) is that parameter (an
    # exporter-untied embedding / LM head): one parameter, as PyTorch has it.
    seen, untied = [], set()
    for t in m.graph.initializer:
        if len(t.dims) != 2:
            continue
        arr = numpy_helper.to_array(t)
        if np.all(arr == arr.flat[0]):
            continue
        if not t.name.startswith("onnx::"):
            seen.append(arr)
        elif any(o.shape == arr.T.shape and np.array_equal(o, arr.T) for o in seen):
            untied.add(t.name)
    sizes = {TensorProto.FLOAT: 4, TensorProto.DOUBLE: 8, TensorProto.FLOAT16: 2,
             TensorProto.BFLOAT16: 2}
    resident = sent = read = 0
    for t in m.graph.initializer:
        if t.data_type not in sizes or len(t.dims) == 0 or t.name not in used \
                or t.name in untied:
            continue
        n = int(np.prod(t.dims))
        es = sizes[t.data_type]
        if n > threshold and t.name not in buffers:
            s = -(-n // world)
            resident += s * es
            sent += (world - 1) * s * es
            read += n * es
        else:
            resident += n * es
            read += world * n * es
    return resident, sent, read


def check_zero(a, zrt, report_path):
    """Compares the runtime's own measurements with the closed form."""
    with open(report_path) as f:
        rep = json.load(f)
    threshold = 0
    for tok in a.zero_pipeline.replace(",", " ").split():
        k, _, v = tok.partition("=")
        if k == "persistence-threshold":
            threshold = int(v)
    resident, sent, read = zero3_closed_form(
        os.path.join(a.models, a.model + ".onnx"), a.np, threshold)
    total_read = 0
    for r in rep["ranks"]:
        if r["param_bytes_resident"] != resident:
            sys.exit(f"FAIL: rank {r['rank']} holds {r['param_bytes_resident']} parameter "
                     f"bytes; the ZeRO-3 plan says {resident}")
        got = r["bytes_sent"].get("AllGather", 0)
        if got != sent:
            sys.exit(f"FAIL: rank {r['rank']} sent {got} all-gather bytes per forward; "
                     f"the closed form (N-1) x shard bytes says {sent}")
        total_read += r["weights_bytes_read"]
    if total_read != read:
        sys.exit(f"FAIL: ranks read {total_read} weight bytes in total; each shard once "
                 f"and each persistent parameter once per rank is {read}")
    print(f"PASS {a.model} np={a.np}: resident {resident} B/rank, all-gather {sent} B/rank "
          f"per forward, {read} B read in total, as the ZeRO-3 closed form says")


def check_trace(a, expect_overlap, final=True):
    """With prefetch, some gather overlaps compute on the other stream; without
    it, no gather starts before the compute that precedes it in program order."""
    with open(os.path.join(a.work, "trace.json")) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    overlaps = 0
    for rank in {e["pid"] for e in events}:
        mine = [e for e in events if e["pid"] == rank]
        gathers = [e for e in mine if e["name"] == "AllGather"]
        compute = [e for e in mine
                   if e["tid"] == 0 and e["name"] not in ("Wait", "Record")]
        for g in gathers:
            g0, g1 = g["ts"], g["ts"] + g["dur"]
            overlaps += sum(1 for c in compute if c["ts"] < g1 and g0 < c["ts"] + c["dur"])
            if not expect_overlap:
                before = [c for c in compute
                          if c["args"]["instruction"] < g["args"]["instruction"]]
                if before:
                    prev = max(before, key=lambda c: c["args"]["instruction"])
                    if g0 < prev["ts"] + prev["dur"]:
                        sys.exit(f"FAIL: without prefetch, gather {g['args']['instruction']} "
                                 f"started before compute {prev['args']['instruction']} ended")
    if expect_overlap and overlaps == 0:
        if not final:
            return False
        sys.exit("FAIL: with prefetch, no gather overlaps any compute kernel")
    print(f"PASS {a.model} np={a.np}: trace has {overlaps} gather/compute overlaps "
          f"({'prefetch' if expect_overlap else 'no prefetch: gathers follow program order'})")
    return True


def check_turns(a):
    """zero-run --overlap off: on every rank, no collective of the
    communication stream runs while a compute kernel does."""
    with open(os.path.join(a.work, "trace.json")) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    collectives = 0
    for rank in {e["pid"] for e in events}:
        mine = [e for e in events if e["pid"] == rank]
        comm = [e for e in mine if e["tid"] != 0 and e["name"] not in ("Wait", "Record", "Send")]
        compute = [e for e in mine
                   if e["tid"] == 0 and e["name"] not in ("Wait", "Record", "Recv")]
        collectives += len(comm)
        for g in comm:
            g0, g1 = g["ts"], g["ts"] + g["dur"]
            for c in compute:
                if c["ts"] < g1 and g0 < c["ts"] + c["dur"]:
                    sys.exit(f"FAIL: rank {rank}: {g['name']} (instruction "
                             f"{g['args']['instruction']}) ran during kernel {c['name']} "
                             f"(instruction {c['args']['instruction']}) with --overlap off")
    if collectives == 0:
        sys.exit("FAIL: the trace has no communication to check")
    print(f"PASS {a.model} np={a.np}: {collectives} communication steps, none during a "
          f"kernel (streams took turns)")


if __name__ == "__main__":
    main()
