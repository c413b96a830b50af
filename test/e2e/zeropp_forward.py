#!/usr/bin/env python3
"""ZeRO++ on a fixture's forward: qwZ (quantized weight all-gather) and hpZ
(re-gathers inside a group of ranks), end to end through zero-opt and zero-run.

qwZ, for each (ranks, bits) of --qwz (default 2:8,4:8,2:4,4:4), with prefetch and
buckets in one of them:
  * the outputs equal onnxruntime run on the model whose sharded parameters were
    quantized and dequantized here, in numpy, by ZeRO++'s rule as zero.quantize
    documents it (flatten, pad to a multiple of N, each rank's shard in blocks of
    --block elements, scale = max|x|/qmax, q = round(x/scale)): rtol 1e-4,
    atol 1e-5, the tolerance of the fp32 fixture tests;
  * the error against the fp32 outputs (the committed onnxruntime reference) is
    printed (max abs / max rel) and must stay below --max-rel (a loose sanity
    bound; the exact check is the one above);
  * the all-gather bytes each rank sent, as the runtime measured them, equal the
    formula (N-1) x (s x bits/8 + 4 x ceil(s/block)) summed over the sharded
    parameters (s = the padded shard), and the fp32 gather's bytes are printed for
    the ratio.
hpZ (--hpz, np 4, groups of 2, every distant use re-gathered): the outputs are
bit-identical to the same program without hpZ, the world group's all-gather bytes
are one gather of every shard, and the re-gathers' bytes all went over the group's
sub-communicator: (K-1)/K of the re-gathered padded bytes, derived from the run
without hpZ (whose re-gathers went over the world). The fixture's forward must
re-gather something (a parameter used twice, as GPT-2's tied embedding): a forward
that uses each parameter once gives hpZ nothing to do, and --hpz on it fails
(its hpZ is tested in training, whose backward re-gathers: train_e2e.py --zeropp).
Exit status 0 on success, 1 on a mismatch.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper
from safetensors.numpy import load_file

from model_buffers import buffer_names
from zerokit import mpi, tools
from zerokit.quant import sharded_qdq


def mpirun(np_, cmd):
    return run(mpi.mpirun(np_, cmd), mpi.with_session(mpi.env(root=True, yield_when_idle=True)))


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r


def quantized_bytes(s, bits, block):
    return (s if bits == 8 else (s + 1) // 2) + 4 * (-(-s // block))


class Fixture:
    def __init__(self, a):
        self.a = a
        self.model = os.path.join(a.models, a.model + ".onnx")
        ref = load_file(os.path.join(a.models, a.model + ".ref.safetensors"))
        self.inputs = {k[len("input."):]: v for k, v in ref.items() if k.startswith("input.")}
        self.fp32 = {k[len("ort."):]: v for k, v in ref.items() if k.startswith("ort.")}
        # Buffers (Llama's inv_freq) stay whole on every rank: never gathered.
        self.buffers = buffer_names(self.model)
        self.input_args = []
        for name, v in self.inputs.items():
            path = os.path.join(a.work, name + ".npy")
            np.save(path, v)
            self.input_args += ["--input", f"{name}={path}"]

    def compile_run(self, tag, ranks, pipeline):
        zrt = os.path.join(self.a.work, tag + ".zrt")
        weights = os.path.join(self.a.work, tag + ".safetensors")
        out = os.path.join(self.a.work, tag + ".out.safetensors")
        report = os.path.join(self.a.work, tag + ".report.json")
        shapes = {k: v.shape for k, v in self.inputs.items()}
        run(tools.zero_opt(self.a.zero_opt, self.model, shapes, [f"--zero-pipeline={pipeline}"],
                           zrt, weights))
        mpirun(ranks, [self.a.zero_run, zrt, "--weights", weights, "--output", out,
                       "--report-json", report] + self.input_args)
        with open(report) as f:
            return load_file(weights), load_file(out), json.load(f)["ranks"]


def ort_outputs(model_path, replaced, inputs):
    import onnxruntime as ort
    m = onnx.load(model_path)
    names = {init.name for init in m.graph.initializer}
    missing = set(replaced) - names
    if missing:
        sys.exit(f"FAIL: weights {sorted(missing)} are not initializers of {model_path}")
    for init in m.graph.initializer:
        if init.name in replaced:
            init.CopyFrom(numpy_helper.from_array(replaced[init.name], init.name))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, inputs)))


def check_qwz(a, fx, ranks, bits, extra):
    failures = []
    pipeline = f"stage=3 dp={ranks} qwz={bits} quant-block={a.block} {extra}".strip()
    weights, got, reports = fx.compile_run(f"qwz{bits}_n{ranks}", ranks, pipeline)
    replaced, sent, fp32_sent = {}, 0, 0
    for name, w in weights.items():
        if w.dtype != np.float32 or w.size == 0 or name in fx.buffers:
            continue
        s = -(-w.size // ranks)
        replaced[name] = sharded_qdq(w, ranks, bits, a.block)
        sent += (ranks - 1) * quantized_bytes(s, bits, a.block)
        fp32_sent += (ranks - 1) * 4 * s
    want = ort_outputs(fx.model, replaced, fx.inputs)
    for name, w in want.items():
        g = got[name]
        err = np.abs(g.astype(np.float64) - w).max()
        if not np.allclose(g, w, rtol=1e-4, atol=1e-5):
            failures.append(f"{name}: max abs error {err:.3g} against onnxruntime on the "
                            f"quantized weights")
        ref = fx.fp32[name].astype(np.float64)
        abs_fp32 = np.abs(g - ref).max()
        rel_fp32 = abs_fp32 / max(np.abs(ref).max(), 1e-30)
        if not rel_fp32 <= a.max_rel[bits]:
            failures.append(f"{name}: error against fp32 {rel_fp32:.3g} of its largest value, "
                            f"above {a.max_rel[bits]}")
        print(f"  int{bits} np={ranks} [{pipeline}] {name}: equals onnxruntime on the "
              f"quantized weights (max abs error {err:.3g}); against fp32: max abs "
              f"{abs_fp32:.3g}, max abs / max |fp32| {rel_fp32:.3g}")
    for r in reports:
        g = r["bytes_sent"].get("AllGather", 0)
        if g != sent:
            failures.append(f"rank {r['rank']} sent {g} all-gather bytes, the formula says "
                            f"{sent}")
    print(f"  int{bits} np={ranks}: all-gather bytes per rank {sent} as the formula "
          f"((N-1)(s*{bits}/8 + 4 ceil(s/{a.block})) per parameter); fp32 would send "
          f"{fp32_sent} ({sent / fp32_sent:.3f}x)")
    return failures


def check_hpz(a, fx):
    failures = []
    ranks, k = 4, 2
    base = f"stage=3 dp={ranks} max-reuse-distance=0 prefetch=2"
    _, off, rep_off = fx.compile_run("hpz_off", ranks, base)
    weights, on, rep_on = fx.compile_run("hpz_on", ranks, base + f" hpz={k}")
    for name, v in off.items():
        if not np.array_equal(v, on[name]):
            failures.append(f"{name}: hpZ output is not bit-identical to the run without it")
    shards = sum((ranks - 1) * 4 * -(-w.size // ranks) for name, w in weights.items()
                 if name not in fx.buffers)
    for r_off, r_on in zip(rep_off, rep_on):
        world_off = r_off["bytes_sent"].get("AllGather", 0)
        by_group = r_on.get("bytes_sent_by_group", {})
        # Without hpZ every re-gather went over the world: what it sent beyond one
        # gather of every shard is (N-1)/N of the re-gathered padded bytes.
        regathered = (world_off - shards) * ranks // (ranks - 1)
        want = {"world": shards, "hpz": regathered * (k - 1) // k}
        got = {g: by_group.get(g, 0) for g in want}
        # Nothing re-gathered (no parameter used twice) would leave hpZ nothing to
        # do and this check nothing to check.
        if regathered <= 0:
            failures.append(f"rank {r_on['rank']}: the run without hpZ re-gathered "
                            f"{regathered} padded bytes: {a.model}'s forward gives hpZ "
                            f"nothing to re-gather (do not pass --hpz for it)")
        elif got != want:
            failures.append(f"rank {r_on['rank']}: bytes sent by group {by_group}, expected "
                            f"{want} (re-gathered {regathered} padded bytes)")
    print(f"  hpZ np={ranks} groups of {k}: outputs bit-identical to hpZ off; world "
          f"all-gather {shards} B/rank (each shard once), re-gathers "
          f"{got.get('hpz')} B/rank inside the group (was {world_off - shards} over the "
          f"world)")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--qwz", default="2:8,4:8,2:4,4:4", help="RANKS:BITS,...")
    ap.add_argument("--block", type=int, default=64,
                    help="elements per scale (small, so the fixtures have many blocks)")
    ap.add_argument("--hpz", action="store_true")
    a = ap.parse_args()
    # Loose sanity bounds on the error against fp32 (max abs error over the
    # output's largest magnitude); the exact check is against onnxruntime on the
    # quantized weights.
    a.max_rel = {8: 0.05, 4: 0.5}
    os.makedirs(a.work, exist_ok=True)
    fx = Fixture(a)
    failures = []
    for i, spec in enumerate(a.qwz.split(",") if a.qwz else []):
        ranks, bits = (int(x) for x in spec.split(":"))
        extra = "prefetch=2 bucket-bytes=65536" if i == 1 else ""
        failures += check_qwz(a, fx, ranks, bits, extra)
    if a.hpz:
        failures += check_hpz(a, fx)
    for f in failures:
        print("FAIL", f)
    if failures:
        return 1
    print(f"PASS {a.model}: ZeRO++ forward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
