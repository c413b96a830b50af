#!/usr/bin/env python3
"""Writes the models of loss-upcast.test into the folder given.

Each is the smallest graph a torch.onnx.export(dynamo=True) of a model with
its loss gives, logits = MatMul(x, w) and loss = SoftmaxCrossEntropyLoss(logits,
labels) (or LogSoftmax then NegativeLogLikelihoodLoss), with the exporter's
node metadata (pkg.torch.onnx.class_hierarchy: the root module's class, each
module's down to the node's, then the op) of one kind of model:

  lm-wrapper    a wrapper module around transformers' GPT2LMHeadModel, whose
                loss function casts the logits to f32 (the cast of an f32
                tensor is not in the export)
  lm-nll        the same through LogSoftmax + NegativeLogLikelihoodLoss
  token-root    BertForTokenClassification at the root (casts too)
  seqcls-root   BertForSequenceClassification at the root (its loss does not)
  image-wrapper a wrapper around ViTForImageClassification (does not)
  lm-subclass   a user subclass of a transformers LM at the root: its own
                class is the user's, transformers' modules under it
  own-module    that subclass computing its loss with its own
                torch.nn.CrossEntropyLoss module (no cast)
  plain         a torch model with no transformers module (no cast)
  bare          no metadata at all
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TF = "transformers.models."
CASES = {
    "lm-wrapper": (["__main__.Wrapper", TF + "gpt2.modeling_gpt2.GPT2LMHeadModel"], False),
    "lm-nll": (["__main__.Wrapper", TF + "gpt2.modeling_gpt2.GPT2LMHeadModel"], True),
    "token-root": ([TF + "bert.modeling_bert.BertForTokenClassification"], False),
    "seqcls-root": ([TF + "bert.modeling_bert.BertForSequenceClassification"], False),
    "image-wrapper": (["__main__.Wrapper", TF + "vit.modeling_vit.ViTForImageClassification"],
                      False),
    "lm-subclass": (["__main__.MyLM"], False),
    "own-module": (["__main__.MyLM", "torch.nn.modules.loss.CrossEntropyLoss"], False),
    "plain": (["__main__.Classifier"], False),
    "bare": (None, False),
}


def meta(node, hierarchy):
    if hierarchy is not None:
        node.metadata_props.add(key="pkg.torch.onnx.class_hierarchy", value=repr(hierarchy))
    return node


def model(path, loss_modules, nll):
    w = numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32), "w")
    # The matmul runs in the model's body: a transformers model's GPT2Model (a
    # subclass's child), or the root's own.
    body = None
    if loss_modules is not None:
        body = loss_modules[:1] + ([TF + "gpt2.modeling_gpt2.GPT2Model"]
                                   if loss_modules[0].startswith("__main__.MyLM") else
                                   loss_modules[1:2]) + ["aten.linear.default"]
    nodes = [meta(helper.make_node("MatMul", ["x", "w"], ["logits"]), body)]
    loss_ops = None if loss_modules is None else loss_modules + ["aten.cross_entropy_loss.default"]
    if nll:
        nodes.append(meta(helper.make_node("LogSoftmax", ["logits"], ["logp"], axis=1), loss_ops))
        nodes.append(meta(helper.make_node("NegativeLogLikelihoodLoss", ["logp", "labels"],
                                           ["loss"]), loss_ops))
    else:
        nodes.append(meta(helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"],
                                           ["loss"]), loss_ops))
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3]),
         helper.make_tensor_value_info("labels", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], [w])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 10
    onnx.save(m, path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, (modules, nll) in CASES.items():
        model(os.path.join(out, name + ".onnx"), modules, nll)


if __name__ == "__main__":
    main()
