"""old-opset.test: an opset-11 model and onnxruntime's outputs on it (make), and
zero-run's outputs against them (compare, rtol 1e-5, atol 1e-6). Also an
opset-6 PRelu whose slope has one value per channel (dim 1 of X [2, 3, 4]),
as opset 6 applied it: the reference is computed here (onnxruntime has no
PRelu-6 kernel)."""
import sys

import numpy as np
import onnx
from onnx import TensorProto as T, helper
from safetensors.numpy import load_file, save_file


def make(work):
    X = helper.make_tensor_value_info
    nodes = [
        helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0]),
        helper.make_node("ReduceSum", ["u"], ["r"], axes=[2], keepdims=1),
        helper.make_node("Squeeze", ["r"], ["q"], axes=[0, 2]),
        helper.make_node("Unsqueeze", ["q"], ["q2"], axes=[1]),
        helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[1, 3]),
        helper.make_node("Add", ["a", "q2"], ["y"]),
        helper.make_node("Softmax", ["x3"], ["s"], axis=1),
    ]
    g = helper.make_graph(nodes, "opset11",
                          [X("x", T.FLOAT, [2, 4]), X("x3", T.FLOAT, [2, 3, 4])],
                          [X("y", T.FLOAT, [2, 1]), X("s", T.FLOAT, [2, 3, 4]),
                           X("b", T.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 6
    onnx.checker.check_model(m)
    onnx.save(m, f"{work}/opset11.onnx")
    import onnxruntime as ort
    r = np.random.default_rng(0)
    feeds = {"x": r.standard_normal((2, 4)).astype(np.float32),
             "x3": r.standard_normal((2, 3, 4)).astype(np.float32)}
    out = ort.InferenceSession(f"{work}/opset11.onnx",
                               providers=["CPUExecutionProvider"]).run(None, feeds)
    save_file(feeds, f"{work}/in.safetensors")
    save_file({"y": out[0], "s": out[1], "b": out[2]}, f"{work}/ref.safetensors")
    slope = np.array([0.1, -0.5, 2.0], np.float32)
    g6 = helper.make_graph([helper.make_node("PRelu", ["x3", "slope"], ["p"])], "prelu6",
                           [X("x3", T.FLOAT, [2, 3, 4]), X("slope", T.FLOAT, [3])],
                           [X("p", T.FLOAT, [2, 3, 4])],
                           [onnx.numpy_helper.from_array(slope, "slope")])
    m6 = helper.make_model(g6, opset_imports=[helper.make_opsetid("", 6)])
    m6.ir_version = 3
    onnx.save(m6, f"{work}/prelu6.onnx")
    x3 = feeds["x3"]
    save_file({"x3": x3}, f"{work}/in6.safetensors")
    save_file({"p": np.where(x3 < 0, x3 * slope[None, :, None], x3)}, f"{work}/ref6.safetensors")


def compare(work):
    got, want = load_file(f"{work}/out.safetensors"), load_file(f"{work}/ref.safetensors")
    got.update(load_file(f"{work}/out6.safetensors"))
    want.update(load_file(f"{work}/ref6.safetensors"))
    bad = False
    for k in ("y", "s", "b", "p"):
        ok = got[k].shape == want[k].shape and np.allclose(got[k], want[k], rtol=1e-5, atol=1e-6)
        print(f"{k} {'matches' if ok else 'DIFFERS from'} " + ("the per-channel PRelu of opset 6" if k == "p" else "onnxruntime"))
        bad |= not ok
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    {"make": make, "compare": compare}[sys.argv[1]](sys.argv[2])
