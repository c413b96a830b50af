"""scripts/export_hf.py's graphs train as the Hugging Face model does (export-hf.test).

Exports a tiny GPT-2 (config overrides, random init) as the loss model and as
the logits model, compiles each with zero-opt --train (the logits one with
--loss causal-lm:labels) and --optimizer none, runs one step on the same
input_ids/labels with zero-run --input --output, and compares the loss and
every parameter's gradient with PyTorch's on the same model, its weights read
from zero-opt's --weights-out file (so by the names the export kept): rtol
1e-4, atol 1e-6. A sequence classifier (BERT) is exported and compared the same
way (loss and gradients).
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import torch
import transformers as tf
from safetensors.numpy import load_file, save_file

from zerokit.tools import zero_opt


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r.stdout


def check(a, name, export_args, config, cls, B, S, labels_shape, zero_loss_args, num_labels=None):
    w = os.path.join(a.work, name)
    os.makedirs(w, exist_ok=True)
    onnx_path = os.path.join(w, "model.onnx")
    out = sh([sys.executable, a.export, *export_args, "-o", onnx_path])
    print(out.strip().splitlines()[-2])
    zrt, init = os.path.join(w, "t.zrt"), os.path.join(w, "init.safetensors")
    shapes = {"input_ids": (B, S)}
    if not zero_loss_args:  # the loss model's own labels input (--loss adds one)
        shapes["labels"] = labels_shape
    sh(zero_opt(a.zero_opt, onnx_path, shapes, ["--train", *zero_loss_args, "--optimizer", "none"],
                zrt, init))
    g = np.random.default_rng(3)
    vocab = config.vocab_size
    ids = g.integers(0, vocab, (B, S)).astype(np.int64)
    labels = (ids.copy() if num_labels is None else
              g.integers(0, num_labels, labels_shape).astype(np.int64))
    feeds = os.path.join(w, "in.safetensors")
    save_file({"input_ids": ids, "labels": labels}, feeds)
    result = os.path.join(w, "out.safetensors")
    sh([a.zero_run, zrt, "--weights", init, "--input", feeds, "--output", result])
    got = load_file(result)
    weights = load_file(init)
    config._attn_implementation = "eager"
    model = cls(config).float()
    model.eval()
    # Every name, tied ones too (a tied LM head keeps "lm_head.weight" in the export).
    params = dict(model.named_parameters(remove_duplicate=False))
    with torch.no_grad():
        for k, v in weights.items():
            if k in params:
                params[k].copy_(torch.from_numpy(v))
    loss = model(input_ids=torch.from_numpy(ids), labels=torch.from_numpy(labels)).loss
    loss.backward()
    if not np.allclose(got["loss"], loss.item(), rtol=1e-4, atol=1e-6):
        sys.exit(f"FAIL: {name}: loss {float(got['loss'])} against PyTorch's {loss.item()}")
    bad, n = [], 0
    for k, p in params.items():
        gk = "grad." + k
        if gk not in got:
            continue
        n += 1
        if not np.allclose(got[gk], p.grad.numpy(), rtol=1e-4, atol=1e-6):
            bad.append(k)
    trained = sum(1 for k in weights if k in params)
    if bad or n < trained:
        sys.exit(f"FAIL: {name}: {n} of {trained} gradients compared, differing: {bad[:4]}")
    print(f"{name} ok: loss {float(got['loss']):.6f} equals PyTorch's; {n} of {trained} "
          "gradients match")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--export", required=True)
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    gpt = dict(n_layer=2, n_embd=32, n_head=2, vocab_size=256, n_positions=64)
    sets = [x for k, v in gpt.items() for x in ("--set", f"{k}={v}")]
    cfg = tf.GPT2Config(**gpt, use_cache=False)
    check(a, "gpt2-loss", ["gpt2", *sets, "--loss"], cfg, tf.GPT2LMHeadModel, 2, 16, (2, 16), [])
    check(a, "gpt2-logits", ["gpt2", *sets], cfg, tf.GPT2LMHeadModel, 2, 16, (2, 16),
          ["--loss", "causal-lm:labels"])
    bert = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                intermediate_size=64, vocab_size=200, max_position_embeddings=64)
    bsets = [x for k, v in bert.items() for x in ("--set", f"{k}={v}")]
    bcfg = tf.BertConfig(**bert, num_labels=3, pad_token_id=0)
    check(a, "bert-classifier", ["bert", *bsets, "--task", "sequence-classification",
                                 "--num-labels", "3", "--loss"], bcfg,
          tf.BertForSequenceClassification, 2, 12, (2,), [], num_labels=3)


if __name__ == "__main__":
    main()
