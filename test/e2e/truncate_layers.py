#!/usr/bin/env python3
"""The check of truncate-layers.test: zero-opt --truncate-layers=K against the
same cut made on the ONNX graph and run by onnxruntime.

`cut MODEL K OUT` writes OUT, MODEL with only its first K repeated blocks, cut
here from the exporter's metadata (pkg.torch.onnx.name_scopes: a block is a
module path ending in an index): the nodes from the first node of block K to
the last node of the last block, in graph order, are removed (a node reading
initializers and constants only is kept, as a later node may read it), and the
value the last block handed on is replaced by the one block K-1 handed on.

`check --cut OUT --inputs NPZ --zero-run Z.safetensors` runs OUT with
onnxruntime on the inputs and compares every output with zero-run's (rtol 1e-4,
atol 1e-5). Prints one line; exit status 1 on a mismatch.
"""
import ast
import sys

import numpy as np
import onnx


def scopes(node):
    for p in node.metadata_props:
        if p.key == "pkg.torch.onnx.name_scopes":
            return ast.literal_eval(p.value)
    return []


def block_of(node):
    """The node's repeated block (a module path ending in an index), or None."""
    for path in scopes(node)[1:-1]:  # full module paths; the root first, the op last
        if path.rsplit(".", 1)[-1].isdigit():
            return path
    return None


def cut(model_path, keep, out_path):
    m = onnx.load(model_path)
    g = m.graph
    nodes = list(g.node)
    blocks = []
    for n in nodes:
        b = block_of(n)
        if b and b not in blocks:
            blocks.append(b)
    if len(blocks) <= keep:
        sys.exit(f"FAIL: {model_path} has {len(blocks)} blocks, not more than {keep}")
    first = min(i for i, n in enumerate(nodes) if block_of(n) == blocks[keep])
    last = max(i for i, n in enumerate(nodes) if block_of(n) == blocks[-1])
    prev = min(i for i, n in enumerate(nodes) if block_of(n) == blocks[keep - 1])
    constant = {i.name for i in g.initializer}
    for n in nodes:
        if n.op_type == "Constant" or (n.input and all(x in constant for x in n.input if x)):
            constant.update(n.output)
    region = [i for i in range(first, last + 1)
              if not (nodes[i].op_type == "Constant" or
                      (nodes[i].input and all(x in constant for x in nodes[i].input if x)))]
    produced = {o for i in region for o in nodes[i].output}
    later = [n for i, n in enumerate(nodes) if i > last or (i not in region and i >= first)]
    leaving = {x for n in later for x in n.input if x in produced}
    leaving |= {o.name for o in g.output if o.name in produced}
    if len(leaving) != 1:
        sys.exit(f"FAIL: {sorted(leaving)} leave the last block; expected one value")
    (old,) = leaving
    # Its counterpart in block K-1: the output of the node as far from that
    # block's end (the blocks are copies of one module; the exporter may place
    # what they share in the first).
    own = [n for n in nodes if block_of(n) == blocks[-1]]
    twin = [n for n in nodes if block_of(n) == blocks[keep - 1]]
    back = next(len(own) - j for j, n in enumerate(own) if old in n.output)
    if back > len(twin) or own[-back].op_type != twin[-back].op_type:
        sys.exit(f"FAIL: {blocks[-1]} and {blocks[keep - 1]} are not copies of one module")
    new = twin[-back].output[list(own[-back].output).index(old)]
    kept = [n for i, n in enumerate(nodes) if i not in region]
    for n in kept:
        for j, x in enumerate(n.input):
            if x == old:
                n.input[j] = new
    del g.node[:]
    g.node.extend(kept)
    read = {x for n in kept for x in n.input} | {o.name for o in g.output}
    unread = [t for t in g.initializer if t.name not in read]
    for t in unread:
        g.initializer.remove(t)
    onnx.save(m, out_path)
    print(f"cut: {len(blocks)} blocks, kept {keep}")


def check(cut_path, inputs, got_path):
    import onnxruntime as ort
    from safetensors.numpy import load_file
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(cut_path, opts, providers=["CPUExecutionProvider"])
    given = dict(np.load(inputs))
    feeds = {i.name: given[i.name] for i in sess.get_inputs()}
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    got = load_file(got_path)
    for name, w in want.items():
        if name not in got:
            sys.exit(f"FAIL: zero-run wrote no output {name!r} (it has {sorted(got)})")
        if not np.allclose(got[name], w, rtol=1e-4, atol=1e-5):
            sys.exit(f"FAIL: {name}: zero-run {got[name].ravel()[:4]} onnxruntime "
                     f"{np.asarray(w).ravel()[:4]}")
    print(f"truncated ok: {', '.join(sorted(want))} equal onnxruntime's on the cut graph")


def main():
    if sys.argv[1] == "cut":
        cut(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        import argparse
        ap = argparse.ArgumentParser()
        ap.add_argument("cmd")
        ap.add_argument("--cut", required=True)
        ap.add_argument("--inputs", required=True)
        ap.add_argument("--zero-run", required=True)
        a = ap.parse_args()
        check(a.cut, a.inputs, a.zero_run)


if __name__ == "__main__":
    main()
