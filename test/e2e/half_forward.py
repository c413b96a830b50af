#!/usr/bin/env python3
"""16-bit models end to end: fixtures converted to fp16 (onnxconverter-common, the
converter onnxruntime's tools use) and to bf16 (the same graph, bf16 where it has
fp16, initializers rounded from the fp32 originals to nearest even), compiled by
zero-opt and run by zero-run (f16/bf16 storage, f32 arithmetic).

Checked per fixture and type:
  * outputs against the fp32 model's onnxruntime outputs (the stored reference), within
    a tolerance taken from onnxruntime itself: 4x onnxruntime's own fp16-vs-fp32 error
    on the same model (at least half an fp16 ulp at the output's scale); bf16 keeps 8
    significant bits to fp16's 11, so its tolerance is 8x fp16's;
  * the same bits at --threads 1 and 3;
  * with --zero: the ZeRO-3 run over 2 ranks (16-bit shards gathered) bit-identical
    to the 1-rank run.
Every output the fp32 reference holds (its ort.* keys, at least one) must be among
zero-run's outputs and is checked; onnxruntime refusing a converted model fails the
fixture. Where the converter makes a model onnxruntime refuses, the nodes it must
keep in fp32 are named in KEEP_F32 with the reason (the converter's node_block_list:
a Cast back to f16 after each), and both onnxruntime and zero-opt run that model.

--exported NAME takes a model exported from torch in 16 bits (test/models/
export_half.py: llama_bf16, gpt2_f16) and holds its outputs to 4x torch's own
16-bit error (torch's 16-bit CPU forward against its fp32 one, both stored; at least
half an ulp of the type at the output's scale), with the same thread and ZeRO-3
checks.
"""
import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, numpy_helper

from zerokit import mpi, tools

# Allowed as root: Open MPI refuses to start as root otherwise (CI runs as root).
ENV = mpi.env(root=True, yield_when_idle=True)
U16 = 2.0 ** -11  # fp16's unit roundoff
# Nodes the fp16 conversion keeps in fp32, per fixture, and why: without them the
# converter writes a model onnxruntime refuses. Each named node must exist.
KEEP_F32 = {
    "llama": {"node__to_copy": "the rotary embedding's Cast of the positions to f32: "
                               "the converter keeps to=FLOAT but declares its output f16, "
                               "so the Mul with the f16 inv_freq does not type-check"},
}


def bf16_bits(a):
    """f32 -> bf16 bits, round to nearest even (NaN stays NaN)."""
    b = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(a, np.float32))
    r[nan] = 0x7FC0
    return r


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


# safetensors with BF16 (numpy has no bfloat16: kept as uint16 bits).
def write_st(path, tensors):
    header, blobs, off = {}, [], 0
    for k, (dt, a) in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_st(path):
    raw = Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        data = raw[8 + n + b:8 + n + e]
        dt = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64,
              "I32": np.int32, "BOOL": np.bool_}[v["dtype"]]
        a = np.frombuffer(data, dt).reshape(v["shape"])
        out[k] = (v["dtype"], a)
    return out


def as_f32(dt, a):
    return bf16_to_f32(a) if dt == "BF16" else a.astype(np.float32)


def to_bf16(m32, m16):
    """m16 with bf16 wherever it has fp16; initializers rounded from m32's values."""
    m = onnx.ModelProto()
    m.CopyFrom(m16)
    orig = {t.name: numpy_helper.to_array(t) for t in m32.graph.initializer}

    def retype(t, values):
        t.ClearField("float_data")
        t.ClearField("int32_data")
        t.data_type = TensorProto.BFLOAT16
        t.raw_data = bf16_bits(values).tobytes()

    for t in m.graph.initializer:
        if t.data_type == TensorProto.FLOAT16:
            retype(t, orig.get(t.name, numpy_helper.to_array(t)).astype(np.float32))
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.elem_type == TensorProto.FLOAT16:
            tt.elem_type = TensorProto.BFLOAT16
    for n in m.graph.node:
        for a in n.attribute:
            if a.name == "to" and a.i == TensorProto.FLOAT16:
                a.i = TensorProto.BFLOAT16
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT16:
                retype(a.t, numpy_helper.to_array(a.t).astype(np.float32))
    return m


class Driver:
    def __init__(self, a):
        self.a, self.work = a, Path(a.work)
        self.failures, self.checks = [], 0

    def run(self, cmd, session=False):
        r = tools.call(cmd, ENV, session=session)
        if r.returncode:
            raise RuntimeError(f"{' '.join(map(str, cmd))}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        return r

    def check(self, ok, what, detail=""):
        print(f"  {'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail else ""),
              flush=True)
        self.checks += 1
        if not ok:
            self.failures.append(what)

    def fixture(self, name):
        from onnxconverter_common import float16
        from safetensors.numpy import load_file
        models = Path(self.a.models)
        m32 = onnx.load(str(models / f"{name}.onnx"))
        ref = load_file(str(models / f"{name}.ref.safetensors"))
        inputs = {k[6:]: v for k, v in ref.items() if k.startswith("input.")}
        want = {k[4:]: v for k, v in ref.items() if k.startswith("ort.")}
        import warnings
        if not want:
            self.check(False, f"{name}: the reference holds onnxruntime outputs (ort.*)")
            return
        keep = KEEP_F32.get(name, {})
        node_names = {n.name for n in m32.graph.node}
        for n, why in keep.items():
            self.check(n in node_names, f"{name}: node {n} kept in fp32 exists ({why})")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m16 = float16.convert_float_to_float16(m32, keep_io_types=False,
                                                   node_block_list=sorted(keep))
        w = self.work / name
        w.mkdir(parents=True, exist_ok=True)
        onnx.save(m16, str(w / "f16.onnx"))
        onnx.save(to_bf16(m32, m16), str(w / "bf16.onnx"))
        feeds = {k: (v.astype(np.float16) if v.dtype == np.float32 else v)
                 for k, v in inputs.items()}
        try:
            got16 = ort.InferenceSession(str(w / "f16.onnx")).run(None, feeds)
        except Exception as e:  # noqa: BLE001
            self.check(False, f"{name}: onnxruntime runs the fp16 conversion",
                       str(e).splitlines()[0][:300])
            return
        ort16 = dict(zip((o.name for o in m16.graph.output), got16))
        missing = sorted(set(want) - set(ort16))
        if missing:
            self.check(False, f"{name}: the fp16 model has every reference output",
                       f"missing {missing}")
            return
        ort_err = {n: float(np.abs(ort16[n].astype(np.float32) - want[n]).max())
                   for n in want}
        print(f"== {name}: onnxruntime's fp16 error vs fp32 "
              + ", ".join(f"{n} {e:.3g}" for n, e in ort_err.items()))
        shapes = {k: v.shape for k, v in inputs.items()}
        for kind, factor in (("f16", 4.0), ("bf16", 32.0)):
            dt = {"f16": "F16", "bf16": "BF16"}[kind]
            zrt, wts = w / f"{kind}.zrt", w / f"{kind}.safetensors"
            self.run(tools.zero_opt(self.a.zero_opt, w / f"{kind}.onnx", shapes, [], zrt, wts))
            feed = {}
            for k, v in inputs.items():
                if v.dtype == np.float32:
                    feed[k] = (dt, v.astype(np.float16) if kind == "f16" else bf16_bits(v))
                else:
                    feed[k] = ({np.dtype(np.int64): "I64", np.dtype(np.int32): "I32",
                                np.dtype(np.bool_): "BOOL"}[v.dtype], v)
            write_st(w / f"in_{kind}.safetensors", feed)
            outs = {}
            for t in (1, 3):
                o = w / f"out_{kind}_t{t}.safetensors"
                self.run([self.a.zero_run, zrt, "--weights", wts, "--input",
                          w / f"in_{kind}.safetensors", "--output", o, "--threads", t])
                outs[t] = read_st(o)
            missing = sorted(n for n in want if n not in outs[1] or n not in outs[3])
            if missing:
                self.check(False, f"{name} {kind}: zero-run writes every reference output",
                           f"missing {missing}")
                continue
            same = all(outs[1][k][1].tobytes() == outs[3][k][1].tobytes() for k in want)
            self.check(same, f"{name} {kind}: the same bits at --threads 1 and 3")
            for n in want:
                odt, a = outs[1][n]
                err = float(np.abs(as_f32(odt, a) - want[n]).max())
                scale = float(np.abs(want[n]).max())
                tol = factor * max(ort_err[n], U16 * scale)
                self.check(odt == dt and err <= tol,
                           f"{name} {kind}: {n} ({odt}) within {tol:.3g} of fp32 onnxruntime",
                           f"max abs error {err:.3g}")
            if self.a.zero and name in self.a.zero:
                zrt2, w2 = w / f"{kind}_z3.zrt", w / f"{kind}_z3.safetensors"
                self.run(tools.zero_opt(self.a.zero_opt, w / f"{kind}.onnx", shapes,
                                        ["--zero-pipeline=stage=3 dp=2"], zrt2, w2))
                o2 = w / f"out_{kind}_z3.safetensors"
                self.run(mpi.mpirun(2, [self.a.zero_run, zrt2, "--weights", w2, "--input",
                                        w / f"in_{kind}.safetensors", "--output", o2]),
                         session=True)
                z = read_st(o2)
                same = all(k in z and z[k][1].tobytes() == outs[1][k][1].tobytes()
                           for k in want)
                self.check(same, f"{name} {kind}: ZeRO-3 over 2 ranks bit-identical to 1 rank")


    def exported(self, name):
        from safetensors.numpy import load_file
        models = Path(self.a.models)
        ref = load_file(str(models / f"{name}.ref.safetensors"))
        inputs = {k[6:]: v for k, v in ref.items() if k.startswith("input.")}
        w = self.work / name
        w.mkdir(parents=True, exist_ok=True)
        shapes = {k: v.shape for k, v in inputs.items()}
        write_st(w / "in.safetensors", {k: ({np.dtype(np.int64): "I64",
                                             np.dtype(np.int32): "I32"}[v.dtype], v)
                                        for k, v in inputs.items()})
        outs = {}
        for tag, zopts, ranks in (("t1", [], 1), ("t3", [], 1),
                                  ("z3", ["--zero-pipeline=stage=3 dp=2"], 2)):
            zrt, wts = w / f"{tag}.zrt", w / f"{tag}.safetensors"
            self.run(tools.zero_opt(self.a.zero_opt, models / f"{name}.onnx", shapes, zopts,
                                    zrt, wts))
            o = w / f"out_{tag}.safetensors"
            cmd = [self.a.zero_run, zrt, "--weights", wts, "--input", w / "in.safetensors",
                   "--output", o, "--threads", 3 if tag == "t3" else 1]
            if ranks > 1:
                cmd = mpi.mpirun(ranks, cmd)
            self.run(cmd, session=ranks > 1)
            outs[tag] = read_st(o)
        print(f"== {name} (exported in 16 bits)")
        names = [k[len("torch32."):] for k in ref if k.startswith("torch32.")]
        missing = {tag: sorted(n for n in names if n not in o) for tag, o in outs.items()}
        if not names or any(missing.values()):
            self.check(False, f"{name}: zero-run writes every output of the reference "
                       "(torch32.*, at least one)", f"reference {names}, missing {missing}")
            return
        for tag, what in (("t3", "the same bits at --threads 1 and 3"),
                          ("z3", "ZeRO-3 over 2 ranks bit-identical to 1 rank")):
            same = all(outs[tag][k][1].tobytes() == outs["t1"][k][1].tobytes()
                       for k in names)
            self.check(same, f"{name}: {what}")
        for n in names:
            odt, a = outs["t1"][n]
            want, t16 = ref[f"torch32.{n}"], ref[f"torch.{n}"]
            ulp = {"F16": 2.0 ** -11, "BF16": 2.0 ** -8}[odt]
            spread = float(np.abs(t16 - want).max())
            tol = 4 * max(spread, ulp * float(np.abs(want).max()))
            err = float(np.abs(as_f32(odt, a) - want).max())
            self.check(err <= tol, f"{name}: {n} ({odt}) within {tol:.3g} of torch's fp32 "
                       f"forward (torch's own {odt} error: {spread:.3g})",
                       f"max abs error {err:.3g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", action="append", default=[])
    ap.add_argument("--exported", action="append", default=[],
                    help="a fixture exported in 16 bits (test/models/export_half.py)")
    ap.add_argument("--zero", action="append", default=[],
                    help="fixtures also run under ZeRO-3 over 2 ranks")
    a = ap.parse_args()
    a.zero_opt = str(Path(a.bin_dir) / "zero-opt")
    a.zero_run = str(Path(a.bin_dir) / "zero-run")
    try:
        import onnxconverter_common  # noqa: F401
    except ImportError:
        print("SKIP: onnxconverter-common is not installed (scripts/setup-pyenv.sh test)")
        return 77
    d = Driver(a)
    for name in a.model + a.exported:
        try:
            (d.exported if name in a.exported else d.fixture)(name)
        except RuntimeError as e:
            d.check(False, f"{name}: a command failed", str(e))
    if not d.checks:
        d.check(False, "something to check: give --model or --exported")
    print("== summary")
    for f in d.failures:
        print(f"FAIL {f}")
    if not d.failures:
        print("PASS 16-bit models")
    return 1 if d.failures else 0


if __name__ == "__main__":
    sys.exit(main())
