#!/usr/bin/env python3
"""Writes a copy of an ONNX model that records no module paths.

The exporters record each node's module path in two ways: the TorchScript
exporter in the node's name (`/transformer/h.0/attn/MatMul`), the dynamo
exporter in the node's metadata_props (`pkg.torch.onnx.name_scopes`, with
`pkg.torch.onnx.class_hierarchy`, `pkg.torch.onnx.fx_node` and `namespace`
beside it). This script clears both on every node, in subgraphs too (the
attributes of If / Loop / Scan nodes), so the model looks like one exported
by a tool that records neither: the pipeline split must then fall back to
cutting where a single activation crosses (lib/Transforms/Analysis/Layers.cpp).
Weights, value names and the computation are unchanged, so the model's
outputs are too.

  strip_module_paths.py IN.onnx OUT.onnx
"""
import sys

import onnx


def strip_nodes(nodes) -> None:
    """Clears the module paths of `nodes` and of the nodes of their subgraphs
    (the attributes of If / Loop / Scan nodes)."""
    for node in nodes:
        node.name = ""
        keep = [p for p in node.metadata_props
                if not p.key.startswith("pkg.torch.onnx.") and p.key != "namespace"]
        del node.metadata_props[:]
        node.metadata_props.extend(keep)
        for attr in node.attribute:
            if attr.HasField("g"):
                strip_nodes(attr.g.node)
            for g in attr.graphs:
                strip_nodes(g.node)


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model = onnx.load(sys.argv[1])
    strip_nodes(model.graph.node)
    for f in model.functions:
        strip_nodes(f.node)
    onnx.save(model, sys.argv[2])


if __name__ == "__main__":
    main()
