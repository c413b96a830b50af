#!/usr/bin/env python3
"""zero-pipeline-split's plan against DeepSpeed's partition methods, computed here.

For an ONNX fixture, this script recovers the layers itself from the exporter's
records (the dynamo exporter's pkg.torch.onnx.name_scopes / class_hierarchy node
metadata, or the TorchScript exporter's /module/path node names): the blocks of the
first repeated container (a module path ending in an index) and the outermost
modules beside it, in order of first use; a layer's parameters are the initializers
its nodes read (a tied weight counts in every layer that reads it, as DeepSpeed
counts a TiedLayerSpec's module in each). Then it runs DeepSpeed's partition_uniform
and partition_balanced (deepspeed/runtime/utils.py, re-written here) for every
(stages, method) asked, and checks that `zero-opt --zero-pipeline-split` recorded
the same layers, parameter counts and stage boundaries (zero.pipeline_plan).
Exit status 0 when all agree.
"""
import argparse
import ast
import re
import subprocess
import sys

import numpy as np
import onnx


def partition_uniform(num_items, num_parts):
    parts = [0] * (num_parts + 1)
    if num_items <= num_parts:
        for p in range(num_parts + 1):
            parts[p] = min(p, num_items)
        return parts
    chunksize = num_items // num_parts
    residual = num_items - (chunksize * num_parts)
    parts = np.arange(0, (num_parts + 1) * chunksize, chunksize)
    for i in range(residual):
        parts[i + 1:] += 1
    return parts.tolist()


def partition_balanced(weights, num_parts):
    n, m = len(weights), num_parts
    if n <= m:
        return partition_uniform(n, m)
    dp_max = np.full((n + 1, m + 1), np.inf)
    dp_min = np.full((n + 1, m + 1), np.inf)
    dp_cost = np.full((n + 1, m + 1), np.inf)
    position = np.zeros((n + 1, m + 1), dtype=int)
    prefix_sum = np.zeros((n + 1))
    prefix_sum[1:] = np.cumsum(weights)
    dp_max[0, 0] = 0
    dp_cost[0, 0] = 0
    for i in range(1, n + 1):
        for j in range(1, min(i, m) + 1):
            for k in range(i):
                max_sum = max(dp_max[k, j - 1], prefix_sum[i] - prefix_sum[k])
                min_sum = min(dp_min[k, j - 1], prefix_sum[i] - prefix_sum[k])
                cost = max_sum - min_sum
                if dp_cost[i, j] >= cost:
                    dp_cost[i, j] = cost
                    dp_max[i, j] = max_sum
                    dp_min[i, j] = min_sum
                    position[i, j] = k
    parts = [n]
    for i in reversed(range(1, m + 1)):
        parts.append(int(position[parts[-1], i]))
    parts.reverse()
    return parts


def node_scopes(node):
    meta = {p.key: p.value for p in node.metadata_props}
    if "pkg.torch.onnx.name_scopes" in meta:
        names = ast.literal_eval(meta["pkg.torch.onnx.name_scopes"])
        classes = ast.literal_eval(meta.get("pkg.torch.onnx.class_hierarchy", "[]"))
        out = []
        for i, n in enumerate(names[:-1]):
            if n and not n.startswith("_empty_nn_module_stack"):
                cls = classes[i] if i < len(classes) else ""
                out.append((n, cls.rsplit(".", 1)[-1]))
        return out
    if node.name.startswith("/"):
        parts = node.name[1:].split("/")[:-1]
        return [(".".join(parts[:i + 1]), "") for i in range(len(parts))]
    return []


def node_macs(model, shapes):
    """Each node's (in graph order) multiply-accumulates at the given input shapes (onnx's own shape
    inference): MatMul and Gemm result elements x K, Conv result elements x input
    channels per group x kernel size; 0 for every other node."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for inp in m.graph.input:
        if inp.name in shapes:
            dims = inp.type.tensor_type.shape.dim
            for d, v in zip(dims, shapes[inp.name]):
                d.ClearField("dim_param")
                d.dim_value = v
    inferred = onnx.shape_inference.infer_shapes(m, data_prop=True)
    known = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + \
            list(inferred.graph.output):
        known[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    for t in m.graph.initializer:
        known[t.name] = list(t.dims)
    macs = []
    for node in m.graph.node:
        out, a = known.get(node.output[0]), known.get(node.input[0]) if node.input else None
        n = 0
        if out and a and all(out) and all(a):
            if node.op_type == "MatMul":
                n = int(np.prod(out)) * a[-1]
            elif node.op_type == "Gemm":
                ta = next((x.i for x in node.attribute if x.name == "transA"), 0)
                n = int(np.prod(out)) * (a[0] if ta else a[1])
            elif node.op_type == "Conv":
                w = known.get(node.input[1])
                n = int(np.prod(out)) * int(np.prod(w[1:])) if w else 0
        macs.append(n)
    return macs


def layers_of(model, shapes=None):
    indexed = lambda p: p.rsplit(".", 1)[-1].isdigit()
    container = None
    for node in model.graph.node:
        for path, _ in node_scopes(node):
            if indexed(path):
                container = path.rsplit(".", 1)[0] if "." in path else ""
                break
        if container is not None:
            break
    # Buffers (the dynamo exporter marks them) are not parameters.
    buffers = {vi.name for vi in model.graph.value_info
               if any(p.key == "pkg.torch.export.graph_signature.InputSpec.kind"
                      and p.value == "BUFFER" for p in vi.metadata_props)}
    inits = {t.name: int(np.prod(t.dims)) for t in model.graph.initializer
             if t.name not in buffers
             and t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                                onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)
             and len(t.dims) > 0}
    order, classes, params, macs = [], {}, {}, {}
    node_mac = node_macs(model, shapes or {})
    for index, node in enumerate(model.graph.node):
        layer = None
        for path, cls in node_scopes(node):
            parent = path.rsplit(".", 1)[0] if "." in path else ""
            block = container is not None and indexed(path) and parent == container
            encloses = container is not None and (path == container or
                                                  container.startswith(path + "."))
            if block or (not indexed(path) and not encloses):
                layer = path
                classes.setdefault(path, cls)
                break
        if layer is None:
            continue
        if layer not in params:
            order.append(layer)
            params[layer] = set()
            macs[layer] = 0
        params[layer].update(i for i in node.input if i in inits)
        macs[layer] += node_mac[index]
    return order, [classes[l] for l in order], \
        [sum(inits[i] for i in params[l]) for l in order], [macs[l] for l in order]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--model", required=True, help="ONNX file")
    ap.add_argument("--shape", action="append", default=[], help="NAME=DxD")
    ap.add_argument("--case", action="append", required=True, help="STAGES:METHOD")
    a = ap.parse_args()
    model = onnx.load(a.model)
    shapes = {n: [int(d) for d in v.split("x")] for n, v in (x.split("=") for x in a.shape)}
    names, classes, params, macs = layers_of(model, shapes)
    failures = []
    for case in a.case:
        stages, method = case.split(":", 1)
        stages = int(stages)
        cmd = [a.zero_opt, a.model, f"--zero-pipeline-split=pp={stages} partition={method}",
               "-o", "-"]
        for s in a.shape:
            cmd += ["--input-shape", s]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"{case}: zero-opt failed: {r.stderr.strip()[:400]}")
            continue
        m = re.search(r"zero\.pipeline_plan = #zero\.pipeline_plan<(.*)>", r.stdout)
        if not m:
            failures.append(f"{case}: no zero.pipeline_plan in the output")
            continue
        plan = m.group(1)
        got_layers = re.findall(r'"([^"]+)"', re.search(r"layers = \[(.*?)\]", plan).group(1))
        got_params = [int(x) for x in re.search(r"layer_params = \[([^\]]*)\]",
                                                plan).group(1).split(",")]
        got_parts = [int(x) for x in re.search(r"parts = \[([^\]]*)\]",
                                               plan).group(1).split(",")]
        if method == "parameters":
            want = partition_balanced(params, stages)
        elif method == "uniform":
            want = partition_uniform(len(names), stages)
        elif method == "compute":
            # Not DeepSpeed's: its balanced rule over the layers' multiply-
            # accumulates, computed here from onnx's shape inference.
            want = partition_balanced(macs, stages)
            got_macs = [int(x) for x in re.search(r"layer_macs = \[([^\]]*)\]",
                                                  plan).group(1).split(",")]
            if got_macs != macs:
                failures.append(f"{case}: multiply-accumulates per layer {got_macs}, "
                                f"from the ONNX graph {macs}")
        else:
            rx = re.compile(method.split(":", 1)[1], re.IGNORECASE)
            want = partition_balanced([1 if rx.search(c) or rx.search(n) else 0
                                       for n, c in zip(names, classes)], stages)
        if got_layers != names or got_params != params or got_parts != want:
            failures.append(f"{case}: zero-opt layers {got_layers} params {got_params} parts "
                            f"{got_parts}; here {names} {params} {want}")
            continue
        print(f"PASS {a.model} {case}: stage boundaries {want} over {len(names)} layers "
              f"({', '.join(names)}), parameters {params}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
