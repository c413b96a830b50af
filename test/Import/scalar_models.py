#!/usr/bin/env python3
"""Writes the models of scalar-parameters.test into the folder given.

Each computes y = (x @ w) * s0 + s1 and holds 0-d float initializers.
plain.onnx (no torch.export record): 'temp', a module's learnable scalar, and
the exporters' own scalars 'val_3' (ONNX Script) and 'onnx::Add_5'
(TorchScript). exported.onnx: torch.export's form: graph metadata with the
graph signature, value_info metadata saying 'logit_scale' is a PARAMETER and
'bias_scale' a BUFFER; 'zeros', a scalar the exporter folded, has no record.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

KIND = "pkg.torch.export.graph_signature.InputSpec.kind"


def model(path, s0, s1, kinds=None):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array(1.5, np.float32), s0),
             numpy_helper.from_array(np.array(0.25, np.float32), s1)]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("Mul", ["h", s0], ["m"]),
         helper.make_node("Add", ["m", s1], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        inits)
    if kinds is not None:
        graph.metadata_props.add(key="pkg.torch.export.ExportedProgram.graph_signature",
                                 value="p_w: PARAMETER target='w'")
        for name, kind in kinds.items():
            vi = helper.make_tensor_value_info(name, TensorProto.FLOAT, [])
            vi.metadata_props.add(key=KIND, value=kind)
            graph.value_info.append(vi)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    onnx.save(m, path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    model(os.path.join(out, "plain.onnx"), "temp", "val_3")
    model(os.path.join(out, "torchscript.onnx"), "temp", "onnx::Add_5")
    model(os.path.join(out, "exported.onnx"), "logit_scale", "zeros",
          {"w": "PARAMETER", "logit_scale": "PARAMETER"})
    model(os.path.join(out, "buffer.onnx"), "bias_scale", "val_7",
          {"w": "PARAMETER", "bias_scale": "BUFFER"})


if __name__ == "__main__":
    main()
