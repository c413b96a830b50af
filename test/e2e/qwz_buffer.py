#!/usr/bin/env python3
"""The model of qwz-buffer.test and the check of its runs.

`model DIR` writes DIR/model.onnx and DIR/ids.npy: a one-layer causal LM of our
own in the form torch.onnx.export(dynamo=True) gives a module that registers an
additive causal mask as a buffer beside a tied embedding. torch.export's record
is in the value_info metadata (`InputSpec.kind`): the weights are PARAMETERs,
`mask` [12, 12] (0 on and below the diagonal, -inf above: 66 of 144 values) a
BUFFER. The graph:
  h = Gather(tok.weight, ids)                       ids int64 [2, 12]
  p = Softmax(0.25 (h Wq)(h Wk)^T + mask)
  logits = (h + (p (h Wv)) Wo) tok.weight^T          [2, 12, 64]
Weights 64x16 + 4 x 16x16 floats, the mask 144: the file is about 9 KB.

`check --model M --ids IDS --fp32 ONE.safetensors --qwz N.safetensors --ranks N
--bits B --block K` compares zero-run's outputs:
  * the 1-rank fp32 run against onnxruntime (rtol 1e-4, atol 1e-5);
  * the qwZ run against onnxruntime on the model whose parameters were
    quantized and dequantized here by ZeRO++'s rule (flatten, pad to a multiple
    of N, each rank's shard in blocks of K, scale = max|x|/qmax, round), the
    mask kept as it is: rtol 1e-4, atol 1e-5 (test/e2e/zeropp_forward.py's
    exact check);
  * the qwZ run against the 1-rank fp32 run: max abs error over the largest
    |fp32| value within qwZ's bound (int8 0.05, int4 0.5, zeropp_forward.py's).
Prints one line per check; exit status 1 on a mismatch.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

from zerokit.quant import sharded_qdq

KIND = "pkg.torch.export.graph_signature.InputSpec.kind"
VOCAB, DIM, SEQ, BATCH = 64, 16, 12, 2
PARAMETERS = ["tok.weight", "attn.q.weight", "attn.k.weight", "attn.v.weight",
              "attn.o.weight"]


def weights():
    rng = np.random.default_rng(54)
    w = {"tok.weight": rng.standard_normal((VOCAB, DIM)).astype(np.float32)}
    for p in PARAMETERS[1:]:
        w[p] = (rng.standard_normal((DIM, DIM)) / np.sqrt(DIM)).astype(np.float32)
    return w


def causal_mask():
    return np.triu(np.full((SEQ, SEQ), -np.inf, np.float32), k=1)


def write_model(out):
    os.makedirs(out, exist_ok=True)
    w = weights()
    inits = [numpy_helper.from_array(v, k) for k, v in w.items()]
    inits.append(numpy_helper.from_array(causal_mask(), "mask"))
    n = helper.make_node
    nodes = [
        n("Gather", ["tok.weight", "ids"], ["h"]),
        n("MatMul", ["h", "attn.q.weight"], ["q"]),
        n("MatMul", ["h", "attn.k.weight"], ["k"]),
        n("MatMul", ["h", "attn.v.weight"], ["v"]),
        n("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        n("MatMul", ["q", "kt"], ["scores"]),
        n("Constant", [], ["scale"], value=numpy_helper.from_array(np.float32(0.25))),
        n("Mul", ["scores", "scale"], ["scaled"]),
        n("Add", ["scaled", "mask"], ["masked"]),
        n("Softmax", ["masked"], ["probs"], axis=-1),
        n("MatMul", ["probs", "v"], ["ctx"]),
        n("MatMul", ["ctx", "attn.o.weight"], ["o"]),
        n("Add", ["h", "o"], ["h2"]),
        n("Transpose", ["tok.weight"], ["head"], perm=[1, 0]),
        n("MatMul", ["h2", "head"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes, "causal_lm",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [BATCH, SEQ])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, SEQ, VOCAB])],
        inits)
    graph.metadata_props.add(
        key="pkg.torch.export.ExportedProgram.graph_signature",
        value="\n# inputs\n" + "".join(
            f"p_{p.replace('.', '_')}: PARAMETER target='{p}'\n" for p in PARAMETERS)
        + "b_mask: BUFFER target='mask' persistent=True\nids: USER_INPUT\n")
    for init in inits:
        vi = helper.make_tensor_value_info(init.name, TensorProto.FLOAT, list(init.dims))
        vi.metadata_props.add(key=KIND, value="BUFFER" if init.name == "mask" else "PARAMETER")
        graph.value_info.append(vi)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 10
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "model.onnx"))
    ids = np.random.default_rng(7).integers(0, VOCAB, (BATCH, SEQ)).astype(np.int64)
    np.save(os.path.join(out, "ids.npy"), ids)


def ort_logits(model_path, replaced, ids):
    import onnxruntime as ort
    m = onnx.load(model_path)
    for init in m.graph.initializer:
        if init.name in replaced:
            init.CopyFrom(numpy_helper.from_array(replaced[init.name], init.name))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(["logits"], {"ids": ids})[0]


def check(a):
    ids = np.load(a.ids)
    fp32 = load_file(a.fp32)["logits"]
    got = load_file(a.qwz)["logits"]
    failures = []
    want = ort_logits(a.model, {}, ids)
    err = np.abs(fp32.astype(np.float64) - want).max()
    if not np.allclose(fp32, want, rtol=1e-4, atol=1e-5):
        failures.append(f"1 rank fp32: max abs error {err:.3g} against onnxruntime")
    print(f"1 rank fp32: equals onnxruntime (max abs error {err:.3g})")
    init = {t.name: numpy_helper.to_array(t) for t in onnx.load(a.model).graph.initializer}
    replaced = {p: sharded_qdq(init[p], a.ranks, a.bits, a.block) for p in PARAMETERS}
    want_q = ort_logits(a.model, replaced, ids)
    err = np.abs(got.astype(np.float64) - want_q).max()
    if not np.all(np.isfinite(got)) or not np.allclose(got, want_q, rtol=1e-4, atol=1e-5):
        failures.append(f"qwZ: max abs error {err:.3g} against onnxruntime on the "
                        "quantized parameters (mask kept)")
    print(f"qwZ int{a.bits} np={a.ranks}: equals onnxruntime on the quantized parameters, "
          f"mask kept (max abs error {err:.3g})")
    bound = {8: 0.05, 4: 0.5}[a.bits]
    rel = np.abs(got.astype(np.float64) - fp32).max() / np.abs(fp32).max()
    if not rel <= bound:
        failures.append(f"qwZ: error against the 1-rank fp32 run {rel:.3g} of its largest "
                        f"value, above {bound}")
    print(f"qwZ int{a.bits} np={a.ranks}: against the 1-rank fp32 run max abs / max |fp32| "
          f"{rel:.3g} (bound {bound})")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("model")
    m.add_argument("out")
    c = sub.add_parser("check")
    for k in ("--model", "--ids", "--fp32", "--qwz"):
        c.add_argument(k, required=True)
    c.add_argument("--ranks", type=int, required=True)
    c.add_argument("--bits", type=int, default=8)
    c.add_argument("--block", type=int, default=2048)
    a = ap.parse_args()
    if a.cmd == "model":
        write_model(a.out)
        return 0
    return check(a)


if __name__ == "__main__":
    sys.exit(main())
