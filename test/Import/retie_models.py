#!/usr/bin/env python3
"""Writes the models of retie-exporter-copy.test into the folder given.

tied.onnx: the TorchScript exporter's form of a tied embedding / LM head: the
parameter 'emb.weight' (V x D) and the exporter's folded transpose of it,
'onnx::MatMul_5' (D x V). square.onnx: the same with V == D. named.onnx: a
decoder 'dec.weight' that starts as the transpose of 'enc.weight' but is a
parameter of its own. ones.onnx: an exporter-made constant of ones that merely
equals the transpose of a parameter of ones.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(path, a_name, a, b_name, b):
    d_in, d_out = a.shape[1], b.shape[1]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", a_name], ["h"]),
         helper.make_node("MatMul", ["h", b_name], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, a.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, d_out])],
        [numpy_helper.from_array(a, a_name), numpy_helper.from_array(b, b_name)])
    del d_in
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, 3)).astype(np.float32)
    model(os.path.join(out, "tied.onnx"), "emb.weight", w, "onnx::MatMul_5", w.T.copy())
    sq = rng.standard_normal((4, 4)).astype(np.float32)
    model(os.path.join(out, "square.onnx"), "emb.weight", sq, "onnx::MatMul_5", sq.T.copy())
    model(os.path.join(out, "named.onnx"), "enc.weight", w, "dec.weight", w.T.copy())
    ones = np.ones((5, 3), np.float32)
    model(os.path.join(out, "ones.onnx"), "emb.weight", ones, "onnx::MatMul_5",
          ones.T.copy())


if __name__ == "__main__":
    main()
