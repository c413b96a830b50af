#!/usr/bin/env python3
"""Writes the models of batchnorm-statistics.test into DIR (argv[1]):

stats.onnx: Conv (c.weight, c.bias) -> BatchNormalization (bn.weight, bn.bias,
  bn.running_mean, bn.running_var) -> ReduceSum = loss: the running statistics
  are read only as BatchNormalization's mean and variance.
shared.onnx: the same, but bn.running_mean is also added to the output: then it
  is an ordinary initializer.
folded.onnx: the TorchScript exporter's eval-mode export with constant folding: the
  batch norm folded into the Conv, whose weight and bias carry names the exporter
  made ("onnx::Conv_3", "onnx::Conv_4").
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def init(name, a):
    return numpy_helper.from_array(np.asarray(a, dtype=np.float32), name)


def save(path, nodes, inits, extra_out=None):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    loss = helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])
    outs = [loss] + ([extra_out] if extra_out is not None else [])
    g = helper.make_graph(nodes, "g", [x], outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal([3, 2, 3, 3]), rng.standard_normal([3])
    bn = [init("bn.weight", [1.0, 1.5, 0.5]), init("bn.bias", [0.1, 0.2, 0.3]),
          init("bn.running_mean", [0.0, 0.1, -0.1]), init("bn.running_var", [1.0, 2.0, 0.5])]
    conv = helper.make_node("Conv", ["x", "c.weight", "c.bias"], ["y"], pads=[1, 1, 1, 1])
    norm = helper.make_node("BatchNormalization", ["y", "bn.weight", "bn.bias",
                                                   "bn.running_mean", "bn.running_var"], ["z"])
    total = helper.make_node("ReduceSum", ["z"], ["loss"], keepdims=0)
    save(os.path.join(out, "stats.onnx"), [conv, norm, total],
         [init("c.weight", w), init("c.bias", b)] + bn)
    shifted = helper.make_node("Add", ["bn.running_mean", "bn.bias"], ["m"])
    save(os.path.join(out, "shared.onnx"), [conv, norm, total, shifted],
         [init("c.weight", w), init("c.bias", b)] + bn,
         helper.make_tensor_value_info("m", TensorProto.FLOAT, [3]))
    fconv = helper.make_node("Conv", ["x", "onnx::Conv_3", "onnx::Conv_4"], ["y"],
                             pads=[1, 1, 1, 1])
    save(os.path.join(out, "folded.onnx"),
         [fconv, helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
         [init("onnx::Conv_3", w), init("onnx::Conv_4", b)])


if __name__ == "__main__":
    main()
