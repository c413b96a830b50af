"""The initializers of an ONNX model that are buffers, not parameters, read from
the exporter's metadata as zero-opt's importer reads it (docs/passes.md,
"Parameters and buffers"): ZeRO-3 keeps them whole on every rank, never gathers
and never quantizes them, so the test drivers' closed forms leave them out of
the sharded bytes. A buffer is
  * what torch.export records as one (value_info metadata
    `pkg.torch.export.graph_signature.InputSpec.kind` = BUFFER: Llama's
    `rotary_emb.inv_freq`, a registered causal mask);
  * what ONNX Script's optimizer folded from buffers and constants alone
    (`pkg.onnxscript.optimizer.folded_from` naming no parameter);
  * a BatchNormalization's running mean or variance nothing else reads.
"""
import onnx

KIND = "pkg.torch.export.graph_signature.InputSpec.kind"
FOLDED = "pkg.onnxscript.optimizer.folded_from"
SIGNATURE = "pkg.torch.export.ExportedProgram.graph_signature"


def buffer_names(model):
    """The buffer initializers' names of `model` (a path or a ModelProto)."""
    if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
        model = onnx.load(str(model), load_external_data=False)
    g = model.graph
    inits = {t.name for t in g.initializer}
    kinds, folded, parameters = {}, {}, set()
    for p in g.metadata_props:
        if p.key == SIGNATURE:
            for line in p.value.splitlines():
                _, sep, target = line.partition(": PARAMETER target='")
                if sep:
                    parameters.add(target.split("'")[0])
    for vi in g.value_info:
        for p in vi.metadata_props:
            if p.key == KIND:
                kinds[vi.name] = p.value
            elif p.key == FOLDED:
                folded[vi.name] = [s.strip(" '\"") for s in p.value.strip("[] ").split(",")
                                   if s.strip(" '\"")]
    parameters |= {n for n, k in kinds.items() if k == "PARAMETER"}
    buffers = {n for n, k in kinds.items() if k == "BUFFER"}
    buffers |= {n for n, srcs in folded.items() if not any(s in parameters for s in srcs)}
    statistics, other = set(), {o.name for o in g.output}
    for node in g.node:
        bn = node.op_type == "BatchNormalization" and node.domain in ("", "ai.onnx")
        for i, name in enumerate(node.input):
            (statistics if bn and i in (3, 4) else other).add(name)
    buffers |= statistics - other
    return buffers & inits
