#!/usr/bin/env python3
"""Exports the small regression fixtures: shapes exporters produce that broke
the ZeRO passes (see test/models/README.md, "Regression fixtures").

  build/pyenv/bin/python test/models/export_regressions.py [--out DIR]

- `gpt2_shared_loss_ts17.onnx`: transformers' GPT2LMHeadModel (2 layers) with a
  `labels` input and the scalar `loss` as output, TorchScript exporter, opset 17,
  untrained weights: the exporter keeps one initializer for equal tensors (every
  LayerNorm bias is zeros, every LayerNorm weight ones, every Linear bias zeros),
  so one parameter is read by the layers of both pipeline stages, besides the
  tied embedding.

- `bart_mask_ts17.onnx`: transformers' BartModel (2 + 2 layers) with inputs
  `input_ids` and `attention_mask`, TorchScript exporter, opset 17, dynamic batch
  and sequence: inputs and values made from them outside the layers (the masks,
  the decoder's shifted ids, the shared embedding's lookups) are read by layers
  of every pipeline stage.

Each export is checked against onnxruntime (`np.allclose(rtol=1e-4, atol=1e-5)`).
"""
import argparse
import contextlib
import io
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch


def log(*a):
    print(*a, flush=True)


def quiet():
    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
    return stack


def strip_metadata(path):
    """Drops node metadata (stack traces with absolute paths) so a re-run is
    byte-identical."""
    m = onnx.load(str(path))
    for n in m.graph.node:
        del n.metadata_props[:]
    onnx.save(m, str(path))


def check(path, feeds, want):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    got = sess.run(None, {i.name: feeds[i.name] for i in sess.get_inputs()})[0]
    if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
        raise SystemExit(f"FAIL: {path.name}: onnxruntime and torch disagree")
    log(f"  ok  {path.name}: max|diff| = {np.max(np.abs(got - want)):.3g}")


def export_gpt2_shared(out):
    import transformers as tf
    torch.manual_seed(15)
    cfg = tf.GPT2Config(attn_implementation="eager", vocab_size=96, n_embd=32, n_layer=2,
                        n_head=2, n_positions=16, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
                        loss_type="ForCausalLM")
    model = tf.GPT2LMHeadModel(cfg).eval()

    class Loss(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, labels):
            # An all-ones mask made in the graph keeps transformers' packed-sequence
            # detection (aten::diff, which the TorchScript exporter lacks) out.
            return self.m(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                          labels=labels, use_cache=False).loss

    wrapped = Loss(model).eval()
    gen = torch.Generator().manual_seed(16)
    ids = torch.randint(0, 96, (2, 16), generator=gen)
    labels = torch.randint(0, 96, (2, 16), generator=gen)
    path = out / "gpt2_shared_loss_ts17.onnx"
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "labels": {0: "batch", 1: "seq"}}
    with quiet():
        torch.onnx.export(wrapped, (ids, labels), str(path), dynamo=False, opset_version=17,
                          input_names=["input_ids", "labels"], output_names=["loss"],
                          dynamic_axes=dyn)
    strip_metadata(path)
    with torch.no_grad():
        check(path, {"input_ids": ids.numpy(), "labels": labels.numpy()},
              wrapped(ids, labels).numpy())


def export_bart_mask(out):
    import transformers as tf
    torch.manual_seed(17)
    cfg = tf.BartConfig(vocab_size=100, d_model=32, encoder_layers=2, decoder_layers=2,
                        encoder_attention_heads=2, decoder_attention_heads=2,
                        encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32)
    model = tf.BartModel(cfg).eval()

    class Hidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          use_cache=False).last_hidden_state

    wrapped = Hidden(model).eval()
    gen = torch.Generator().manual_seed(18)
    ids = torch.randint(0, 100, (2, 8), generator=gen)
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, 6:] = 0
    path = out / "bart_mask_ts17.onnx"
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    with quiet():
        torch.onnx.export(wrapped, (ids, mask), str(path), dynamo=False, opset_version=17,
                          input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"], dynamic_axes=dyn)
    strip_metadata(path)
    with torch.no_grad():
        check(path, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()},
              wrapped(ids, mask).numpy())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent))
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    export_gpt2_shared(out)
    export_bart_mask(out)


if __name__ == "__main__":
    main()
