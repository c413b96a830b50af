"""zero-run's MFU and memory over time (train-progress.test).

The GPT-2 loss fixture, batch 8 x 32. Checks:
  flops    the compiler's FLOP count of a training step (tflops x time_s in
           --log-json) is 3x the product FLOPs of the ONNX forward, counted
           here from onnx's own shape inference (every MatMul and Gemm: the
           forward once, the backward twice: one product for each operand's
           gradient), at 1 rank, ZeRO-3 over 2 ranks (half the rows each, the
           count over both) and a 2-stage pipeline (each stage its layers);
  mfu      with --peak-tflops P each step's mfu is tflops / (ranks x P), and
           the progress line shows it;
  memory   with --report --trace, the trace has a "live bytes: ARENA" counter
           track per arena whose highest value is the report's peak-live bytes
           of that arena; the params arena holds at least the 12 bytes of each
           parameter (AdamW: the f32 weight and two moments) all along; and
           scripts/plot_memory.py writes the PNG;
  errors   --peak-tflops 0.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import shape_inference

from zerokit import mpi
from zerokit.tools import run, zero_opt


def forward_flops(path, batch, seq):
    m = onnx.load(path)
    for i in m.graph.input:
        dims = i.type.tensor_type.shape.dim
        if len(dims) == 2:
            dims[0].dim_value, dims[1].dim_value = batch, seq
    m = shape_inference.infer_shapes(m, data_prop=True)
    shape = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
             for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output)}
    shape.update({t.name: list(t.dims) for t in m.graph.initializer})
    total = 0
    for n in m.graph.node:
        if n.op_type == "MatMul":
            total += 2 * int(np.prod(shape[n.output[0]])) * shape[n.input[0]][-1]
        elif n.op_type == "Gemm":
            trans_a = any(a.name == "transA" and a.i for a in n.attribute)
            total += 2 * int(np.prod(shape[n.output[0]])) * shape[n.input[0]][0 if trans_a else 1]
    params = sum(int(np.prod(t.dims)) for t in m.graph.initializer
                 if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) > 0)
    return total, params


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    w = a.work
    os.makedirs(w, exist_ok=True)
    B, S = 8, 32
    model = os.path.join(a.models, "gpt2_loss.onnx")
    fwd, params = forward_flops(model, B, S)
    ids = np.random.default_rng(0).integers(0, 256, size=(3, B, S)).astype(np.int64)
    from safetensors.numpy import save_file
    data = os.path.join(w, "data.safetensors")
    save_file({"input_ids": ids, "labels": ids}, data)

    def compile_(name, batch, extra=()):
        out = os.path.join(w, name + ".zrt")
        run(zero_opt(a.zero_opt, model, {"input_ids": (batch, S), "labels": (batch, S)},
                     ["--train", "--optimizer", "adamw lr=1e-3", *extra], out,
                     os.path.join(w, "init.safetensors")))
        return out

    def train(prog, name, *extra, np_=1):
        log = os.path.join(w, name + ".json")
        cmd = [a.zero_run, prog, "--weights", os.path.join(w, "init.safetensors"), "--data", data,
               "--log-json", log, *extra]
        if np_ > 1:
            cmd = mpi.mpirun(np_, cmd + ["--threads", "1"])
        r = run(cmd)
        return json.load(open(log)), r.stdout

    for name, batch, extra, ranks in [("one", B, [], 1),
                                      ("z3", B // 2, ["--zero-pipeline", "stage=3 dp=2"], 2),
                                      ("pp", B // 2, ["--zero-pipeline", "pp=2 micro-batches=2"], 2)]:
        log, out = train(compile_(name, batch, extra), name, "--peak-tflops", "0.5", np_=ranks)
        for r in log:
            flops = r["tflops"] * 1e12 * r["time_s"]
            if abs(flops - 3 * fwd) > 1e-9 * fwd:
                sys.exit(f"FAIL: {name}: step {r['step']} counts {flops:.0f} FLOPs, "
                         f"not 3 x the ONNX forward's {fwd}")
            if abs(r["mfu"] - r["tflops"] / (ranks * 0.5)) > 1e-12:
                sys.exit(f"FAIL: {name}: mfu {r['mfu']} is not tflops {r['tflops']} / "
                         f"({ranks} x 0.5)")
        if " MFU " not in out:
            sys.exit(f"FAIL: {name}: no MFU on the progress line:\n{out}")
        print(f"flops ok: {name} ({ranks} rank(s)): {3 * fwd} FLOPs a step = 3 x the ONNX "
              f"forward's {fwd}; mfu = tflops / ({ranks} x 0.5)")

    # memory over time
    trace, report = os.path.join(w, "trace.json"), os.path.join(w, "report.json")
    train(os.path.join(w, "one.zrt"), "traced", "--report", "--report-json", report,
          "--trace", trace)
    events = json.load(open(trace))
    events = events.get("traceEvents", events) if isinstance(events, dict) else events
    tracks = {}
    for e in events:
        if e.get("ph") == "C" and e["name"].startswith("live bytes: "):
            tracks.setdefault(e["name"][len("live bytes: "):], []).append(e["args"]["bytes"])
    rank0 = json.load(open(report))["ranks"][0]
    peaks = {m["name"]: m["peak_live_bytes"] for m in rank0["arenas"]}
    if sorted(tracks) != sorted(peaks):
        sys.exit(f"FAIL: counter tracks {sorted(tracks)}, arenas {sorted(peaks)}")
    for arena, values in tracks.items():
        if max(values) != peaks[arena]:
            sys.exit(f"FAIL: {arena}: counter max {max(values)} != peak-live {peaks[arena]}")
    if min(tracks["params"]) < 12 * params:
        sys.exit(f"FAIL: params live {min(tracks['params'])} < 12 x {params} parameters")
    print(f"memory ok: {len(tracks)} counter tracks, maxima = the report's peak-live; "
          f"params >= 12 bytes x {params}")
    png = os.path.join(w, "trace.memory.png")
    r = run([sys.executable, os.path.join(a.src, "scripts", "plot_memory.py"), trace])
    if not os.path.getsize(png) > 0:
        sys.exit("FAIL: plot_memory.py wrote no PNG")
    print(r.stdout.strip().replace(w, "WORK"))

    r = run([a.zero_run, os.path.join(w, "one.zrt"), "--weights",
             os.path.join(w, "init.safetensors"), "--data", data, "--peak-tflops", "0"], ok=False)
    print("error:", r.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
