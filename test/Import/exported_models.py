#!/usr/bin/env python3
"""Writes the models of torch-export-folded.test into the folder given.

The form of a Hugging Face causal LM exported with torch.onnx.export(dynamo=True)
at static shapes, returning (loss, logits), small: torch.export's graph
signature in the graph metadata, ONNX Script's `folded_from` on the
initializers it folded, the weights as external data. Initializers:
  emb.weight [5, 3]   the tied embedding (a PARAMETER)
  val_9 [3, 5]        its transpose, folded from the LM head 'head.weight'
  val_20 [3, 3]       fc.weight's transpose, folded; fc.weight itself is gone
  val_12 [2, 5]       a mask folded from constants alone ('arange', 'val_3')
The graph: logits = (Gather(emb.weight, ids) @ val_20) @ val_9 + val_12, and a
scalar mean of the logits. folded.onnx names that output 'loss' and lists the
parameters emb.weight, head.weight and fc.weight; unnamed.onnx calls it 'mean'
and also lists ln.weight and ln.bias, which the file does not hold (the
exporter's optimizer merges parameters of equal values). twoscalars.onnx
returns a second scalar, so which one is the loss cannot be told.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

KIND = "pkg.torch.export.graph_signature.InputSpec.kind"
FOLDED = "pkg.onnxscript.optimizer.folded_from"


def model(path, loss_name, params, two_scalars=False):
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((5, 3)).astype(np.float32)
    fc = rng.standard_normal((3, 3)).astype(np.float32)
    mask = np.where(rng.random((2, 5)) < 0.5, 0.0, -1e9).astype(np.float32)
    inits = [numpy_helper.from_array(emb, "emb.weight"),
             numpy_helper.from_array(np.ascontiguousarray(emb.T), "val_9"),
             numpy_helper.from_array(fc, "val_20"),
             numpy_helper.from_array(mask, "val_12")]
    nodes = [helper.make_node("Gather", ["emb.weight", "ids"], ["h"]),
             helper.make_node("MatMul", ["h", "val_20"], ["h2"]),
             helper.make_node("MatMul", ["h2", "val_9"], ["scores"]),
             helper.make_node("Add", ["scores", "val_12"], ["logits"]),
             helper.make_node("ReduceMean", ["logits"], [loss_name], keepdims=0)]
    outputs = [helper.make_tensor_value_info(loss_name, TensorProto.FLOAT, []),
               helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 5])]
    if two_scalars:
        nodes.append(helper.make_node("ReduceMax", ["logits"], ["peak"], keepdims=0))
        outputs.append(helper.make_tensor_value_info("peak", TensorProto.FLOAT, []))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2])],
        outputs, inits)
    graph.metadata_props.add(
        key="pkg.torch.export.ExportedProgram.graph_signature",
        value="\n# inputs\n" + "".join(
            f"p_{p.replace('.', '_')}: PARAMETER target='{p}'\n" for p in params)
        + "ids: USER_INPUT\n")
    vi = helper.make_tensor_value_info("emb.weight", TensorProto.FLOAT, [5, 3])
    vi.metadata_props.add(key=KIND, value="PARAMETER")
    graph.value_info.append(vi)
    for name, shape, sources in (("val_9", [3, 5], ["head.weight"]),
                                 ("val_20", [3, 3], ["fc.weight"]),
                                 ("val_12", [2, 5], ["arange", "val_3"])):
        vi = helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
        vi.metadata_props.add(key=FOLDED, value=str(sources))
        graph.value_info.append(vi)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 10
    onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
              location=os.path.basename(path) + ".data", size_threshold=0)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    params = ["emb.weight", "head.weight", "fc.weight"]
    model(os.path.join(out, "folded.onnx"), "loss", params)
    model(os.path.join(out, "unnamed.onnx"), "mean", params + ["ln.weight", "ln.bias"])
    model(os.path.join(out, "twoscalars.onnx"), "mean", params, two_scalars=True)


if __name__ == "__main__":
    main()
