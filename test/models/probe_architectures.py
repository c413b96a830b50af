#!/usr/bin/env python3
"""Probes zero-opt/zero-run on transformer architectures that have no fixture.

A tool for finding importer/runtime gaps, not a CI test. Usage (repository root):

    build/pyenv/bin/python test/models/probe_architectures.py [--only NAME[,NAME...]]
        [--extra] [--variants dynamo,ts17,...] [--no-zero] [--reuse] [--out build/probe]

For each architecture (a small, randomly initialised configuration; nothing is
downloaded) and each exporter (torch.onnx.export dynamo=True, and the legacy
TorchScript exporter at opset 17) it

  1. exports the model with symbolic batch/seq dims to OUT/NAME/EXPORTER.onnx;
  2. for two shapes (2x8 and 1x5), imports it with
       zero-opt MODEL.onnx --input-shape ...=BxS --emit=zrt -o M.zrt --weights-out M.safetensors
     runs `zero-run M.zrt --weights M.safetensors --input name=file.npy ... --output out.safetensors`
     and compares every output with onnxruntime (rtol 1e-4, atol 1e-5);
  3. for the first shape, compiles again with --zero-pipeline="stage=3 dp=2" and runs
     under `mpirun -np 2 --oversubscribe`: the outputs must be bit-identical to the
     1-rank run.

and prints a table (also written to OUT/summary.md, logs of every failing step under
OUT/NAME/). Import failures are classified as "unsupported op X" (the importer's clean
docs/ops.md message), "error: ..." (any other diagnostic) or "CRASH" (signal, LLVM
ERROR, assertion, stack dump).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import re
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

import numpy as np

from zerokit import mpi

ROOT = Path(__file__).resolve().parents[2]
ZERO_OPT = ROOT / "build" / "bin" / "zero-opt"
ZERO_RUN = ROOT / "build" / "runtime" / "tools" / "zero-run" / "zero-run"
RTOL, ATOL = 1e-4, 1e-5
VOCAB = 128
SHAPES = [(2, 8), (1, 5)]
SEED = 0
TIMEOUT = 600


def log(*a):
    print(*a, flush=True)


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------

def _perturb_(model, std=0.02):
    import torch
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * std)


IDS, MASK, TYPES, DEC = "input_ids", "attention_mask", "token_type_ids", "decoder_input_ids"

# name -> (model class, config class, config kwargs, output attribute, inputs).
# Every config is small; dropout is off. attn_implementation/use_cache are added
# per variant (see VARIANTS).
HF = {
    "gpt_neo": ("GPTNeoForCausalLM", "GPTNeoConfig", dict(
        max_position_embeddings=64, hidden_size=32, num_layers=2,
        attention_types=[[["global", "local"], 1]], num_heads=4, window_size=4,
        intermediate_size=64, embed_dropout=0.0, attention_dropout=0.0, resid_dropout=0.0),
        "logits", (IDS,)),
    "opt": ("OPTForCausalLM", "OPTConfig", dict(
        hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=4,
        max_position_embeddings=64, word_embed_proj_dim=32, dropout=0.0,
        attention_dropout=0.0), "logits", (IDS,)),
    "mistral": ("MistralForCausalLM", "MistralConfig", dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, sliding_window=4,
        tie_word_embeddings=False), "logits", (IDS,)),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True),
        "logits", (IDS,)),
    "phi": ("PhiForCausalLM", "PhiConfig", dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=64, partial_rotary_factor=0.5, resid_pdrop=0.0,
        embd_pdrop=0.0, attention_dropout=0.0), "logits", (IDS,)),
    "gptj": ("GPTJForCausalLM", "GPTJConfig", dict(
        n_positions=64, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_inner=64,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0), "logits", (IDS,)),
    "gpt_neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", dict(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        rotary_pct=0.25, max_position_embeddings=64, hidden_dropout=0.0,
        attention_dropout=0.0), "logits", (IDS,)),
    "bloom": ("BloomForCausalLM", "BloomConfig", dict(
        hidden_size=32, n_layer=2, n_head=4, hidden_dropout=0.0, attention_dropout=0.0),
        "logits", (IDS, MASK)),
    "gemma": ("GemmaForCausalLM", "GemmaConfig", dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, head_dim=8, max_position_embeddings=64), "logits", (IDS,)),
    "distilbert": ("DistilBertForMaskedLM", "DistilBertConfig", dict(
        dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64,
        dropout=0.0, attention_dropout=0.0), "logits", (IDS, MASK)),
    "roberta": ("RobertaForMaskedLM", "RobertaConfig", dict(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=66, pad_token_id=1, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0), "logits", (IDS, MASK)),
    "albert": ("AlbertForMaskedLM", "AlbertConfig", dict(
        embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0), "logits", (IDS, MASK, TYPES)),
    "t5_encoder": ("T5EncoderModel", "T5Config", dict(
        d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
        relative_attention_num_buckets=8, relative_attention_max_distance=16,
        dropout_rate=0.0, feed_forward_proj="gated-gelu"), "last_hidden_state", (IDS, MASK)),
    # --- extra architectures (--extra) ---
    "falcon": ("FalconForCausalLM", "FalconConfig", dict(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, new_decoder_architecture=True,
        num_kv_heads=2, hidden_dropout=0.0, attention_dropout=0.0), "logits", (IDS,)),
    "falcon_alibi": ("FalconForCausalLM", "FalconConfig", dict(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, alibi=True,
        multi_query=True, parallel_attn=False, bias=True, hidden_dropout=0.0,
        attention_dropout=0.0), "logits", (IDS, MASK)),
    "bart": ("BartForConditionalGeneration", "BartConfig", dict(
        d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0), "logits", (IDS, MASK, DEC)),
    "t5": ("T5ForConditionalGeneration", "T5Config", dict(
        d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=4,
        relative_attention_num_buckets=8, relative_attention_max_distance=16,
        dropout_rate=0.0), "logits", (IDS, MASK, DEC)),
    "electra": ("ElectraForMaskedLM", "ElectraConfig", dict(
        embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0), "logits", (IDS, MASK, TYPES)),
    "deberta_v2": ("DebertaV2ForMaskedLM", "DebertaV2Config", dict(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, relative_attention=True, position_buckets=8,
        pos_att_type=["p2c", "c2p"], hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0), "logits", (IDS, MASK)),
    "mpt": ("MptForCausalLM", "MptConfig", dict(
        d_model=32, n_heads=4, n_layers=2, expansion_ratio=2, max_seq_len=64),
        "logits", (IDS,)),
    "gpt_bigcode": ("GPTBigCodeForCausalLM", "GPTBigCodeConfig", dict(
        n_positions=64, n_embd=32, n_layer=2, n_head=4, n_inner=64, multi_query=True,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0), "logits", (IDS,)),
    "codegen": ("CodeGenForCausalLM", "CodeGenConfig", dict(
        n_positions=64, n_ctx=64, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_inner=64,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0), "logits", (IDS,)),
    "stablelm": ("StableLmForCausalLM", "StableLmConfig", dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, partial_rotary_factor=0.25,
        qk_layernorm=True, use_parallel_residual=True), "logits", (IDS,)),
    "phi3": ("Phi3ForCausalLM", "Phi3Config", dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, original_max_position_embeddings=64,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, sliding_window=None),
        "logits", (IDS,)),
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=64), "logits", (IDS,)),
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=64, sliding_window=4,
        final_logit_softcapping=30.0, attn_logit_softcapping=50.0), "logits", (IDS,)),
    "olmo2": ("Olmo2ForCausalLM", "Olmo2Config", dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0), "logits", (IDS,)),
    "llama3_rope": ("LlamaForCausalLM", "LlamaConfig", dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rope_scaling=dict(
            rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
            original_max_position_embeddings=16), attention_bias=True, mlp_bias=True),
        "logits", (IDS, MASK)),
    "modernbert": ("ModernBertForMaskedLM", "ModernBertConfig", dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
        max_position_embeddings=64, local_attention=4, global_attn_every_n_layers=2,
        pad_token_id=0, reference_compile=False), "logits", (IDS, MASK)),
    "mobilebert": ("MobileBertForMaskedLM", "MobileBertConfig", dict(
        hidden_size=32, embedding_size=16, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=32, intra_bottleneck_size=16, true_hidden_size=16,
        max_position_embeddings=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0), "logits", (IDS, MASK, TYPES)),
    "xglm": ("XGLMForCausalLM", "XGLMConfig", dict(
        d_model=32, num_layers=2, attention_heads=4, ffn_dim=64, max_position_embeddings=64,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0), "logits", (IDS, MASK)),
    "roformer": ("RoFormerForMaskedLM", "RoFormerConfig", dict(
        hidden_size=32, embedding_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0), "logits", (IDS, MASK)),
    "fnet": ("FNetForMaskedLM", "FNetConfig", dict(
        hidden_size=32, num_hidden_layers=2, intermediate_size=64, max_position_embeddings=64,
        hidden_dropout_prob=0.0, use_tpu_fourier_optimizations=False), "logits", (IDS, TYPES)),
    "squeezebert": ("SqueezeBertForMaskedLM", "SqueezeBertConfig", dict(
        hidden_size=32, embedding_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0), "logits", (IDS, MASK)),
}

CORE = ["gpt_neo", "opt", "mistral", "qwen2", "phi", "gptj", "gpt_neox", "bloom", "gemma",
        "distilbert", "roberta", "albert", "t5_encoder", "torch_encoder"]
EXTRA = [n for n in HF if n not in CORE] + ["torch_encoder_postnorm"]
ALL = CORE + EXTRA

# variant -> (exporter, opset or None for the exporter's default, HF attention settings)
VARIANTS = {
    "dynamo": ("dynamo", None, dict(attn_implementation="eager", use_cache=False)),
    "dynamo_hfdefault": ("dynamo", None, {}),  # sdpa attention, use_cache=True
    "dynamo23": ("dynamo", 23, dict(attn_implementation="eager", use_cache=False)),
    # Without the onnxscript optimizer (functions, Identity chains, unfolded shapes).
    "dynamo_noopt": ("dynamo", None, dict(attn_implementation="eager", use_cache=False)),
    # opset 23 with sdpa attention: Attention and RotaryEmbedding nodes.
    "dynamo23_sdpa": ("dynamo", 23, dict(attn_implementation="sdpa", use_cache=False)),
    "ts17": ("ts", 17, dict(attn_implementation="eager", use_cache=False)),
    "ts14": ("ts", 14, dict(attn_implementation="eager", use_cache=False)),
    # Half precision: the whole model in float16 (compared with a looser tolerance).
    "dynamo_fp16": ("dynamo", None, dict(attn_implementation="eager", use_cache=False)),
    "ts17_fp16": ("ts", 17, dict(attn_implementation="eager", use_cache=False)),
}
FP16_RTOL, FP16_ATOL = 2e-2, 2e-2


def build(name, variant):
    """Returns (model, input names)."""
    import torch
    import transformers as tf
    torch.manual_seed(SEED)
    if name.startswith("torch_encoder"):
        norm_first = name == "torch_encoder"

        class Encoder(torch.nn.Module):
            """nn.TransformerEncoder (GELU, causal mask) on an embedding."""

            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(VOCAB, 32)
                layer = torch.nn.TransformerEncoderLayer(
                    32, 4, 64, dropout=0.0, activation="gelu", batch_first=True,
                    norm_first=norm_first)
                self.enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
                self.head = torch.nn.Linear(32, VOCAB)

            def forward(self, input_ids, attention_mask):
                x = self.emb(input_ids)
                s = input_ids.shape[1]
                causal = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
                pad = attention_mask == 0
                return self.head(self.enc(x, mask=causal, src_key_padding_mask=pad,
                                          is_causal=True))

        m = Encoder()
        _perturb_(m)
        if variant.endswith("_fp16"):
            m = m.half()
        return m.eval(), (IDS, MASK)
    cls_name, cfg_name, kw, attr, names = HF[name]
    cls, cfg = getattr(tf, cls_name), getattr(tf, cfg_name)(
        vocab_size=VOCAB, **kw, **VARIANTS[variant][2])

    class Wrapped(cls):
        def forward(self, input_ids, attention_mask=None, token_type_ids=None,
                    decoder_input_ids=None):
            kwargs = dict(input_ids=input_ids)
            if attention_mask is not None:
                kwargs["attention_mask"] = attention_mask
            if token_type_ids is not None:
                kwargs["token_type_ids"] = token_type_ids
            if decoder_input_ids is not None:
                kwargs["decoder_input_ids"] = decoder_input_ids
            return getattr(super().forward(**kwargs), attr)

    m = Wrapped(cfg)
    _perturb_(m)
    if variant.endswith("_fp16"):
        m = m.half()
    return m.eval(), names


def make_inputs(shape, names, seed):
    import torch
    gen = torch.Generator().manual_seed(seed)
    b, s = shape
    inputs = {}
    for n in names:
        if n in (IDS, DEC):
            inputs[n] = torch.randint(2, VOCAB, (b, s), generator=gen)
        elif n == MASK:
            mask = torch.ones(b, s, dtype=torch.int64)
            if b > 1:
                mask[-1, -2:] = 0  # last sequence padded by two tokens
            inputs[n] = mask
        elif n == TYPES:
            t = torch.zeros(b, s, dtype=torch.int64)
            t[:, s // 2:] = 1
            inputs[n] = t
    return inputs


# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------

def export_dynamo(model, inputs, path, opset, optimize=True):
    import torch
    dims = {0: torch.export.Dim("batch", max=64), 1: torch.export.Dim("seq", max=64)}
    dyn = {k: dims for k in inputs}
    kw = {} if opset is None else dict(opset_version=opset)
    if not optimize:
        kw["optimize"] = False
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        prog = torch.onnx.export(model, (), kwargs=dict(inputs), dynamo=True,
                                 dynamic_shapes=dyn, input_names=list(inputs),
                                 output_names=["logits"], **kw)
    prog.save(str(path))
    return ""


def export_ts(model, inputs, path, opset):
    import torch
    dyn = {k: {0: "batch", 1: "seq"} for k in inputs}
    dyn["logits"] = {0: "batch", 1: "seq"}

    def go(m):
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            # The first input positionally, the others as keyword arguments (a
            # trailing dict), so that they bind by name to forward's parameters.
            vals = list(inputs.values())
            args = (vals[0], dict(list(inputs.items())[1:])) if len(vals) > 1 else (vals[0],)
            torch.onnx.export(m, args, str(path), dynamo=False,
                              opset_version=opset, input_names=list(inputs),
                              output_names=["logits"], dynamic_axes=dyn)
    try:
        go(model)
        return ""
    except Exception as e:
        if list(inputs) != [IDS] or not hasattr(model, "config"):
            raise
        msg = f"{type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
    # As in export.py: transformers' packed-sequence detection (run when no mask is
    # given) uses aten::diff, which the TorchScript exporter cannot translate.
    base = type(model)

    class OnesMask(base):
        def forward(self, input_ids):
            return super().forward(input_ids, torch.ones_like(input_ids))

    m2 = OnesMask(model.config)
    m2.load_state_dict(model.state_dict())
    go(m2.to(next(model.parameters()).dtype).eval())
    return "mask=ones_like(ids) in graph (plain ts export: aten::diff)"


def run_ort(path, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    feeds = {i.name: feeds[i.name] for i in sess.get_inputs()}
    return dict(zip(names, sess.run(names, feeds)))


def run_reference(path, feeds):
    import onnx
    from onnx.reference import ReferenceEvaluator
    m = onnx.load(str(path))
    ref = ReferenceEvaluator(m)
    names = [o.name for o in m.graph.output]
    feeds = {i.name: feeds[i.name] for i in m.graph.input if i.name in feeds}
    return dict(zip(names, ref.run(None, feeds)))


# ---------------------------------------------------------------------------
# zero-opt / zero-run
# ---------------------------------------------------------------------------

def sh(cmd, env=None, timeout=TIMEOUT):
    try:
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                           env=env, timeout=timeout)
        return r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        return -999, f"timed out after {timeout}s"


CRASH_PAT = re.compile(r"LLVM ERROR|Assertion|Stack dump|PLEASE submit|Segmentation|"
                       r"terminate called|Aborted|core dumped|UNREACHABLE")


def classify(rc, text):
    if rc == -999:
        return "TIMEOUT"
    if rc < 0 or rc >= 128 or CRASH_PAT.search(text):
        return "CRASH: " + first_line(text)
    m = re.search(r"unsupported operator (\S+) \(domain '([^']*)'", text)
    if m and "docs/ops.md" in text:
        dom = "" if m.group(2) == "ai.onnx" else f" ({m.group(2)})"
        return f"unsupported op {m.group(1)}{dom}"
    return "error: " + first_line(text)


def first_line(text):
    for line in text.splitlines():
        if "error" in line.lower() or "Assertion" in line or "ERROR" in line:
            return line.strip()[:160]
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[0][:160] if lines else "(no output)"


def compile_and_run(onnx_path, feeds, work, pipeline="", np_ranks=1):
    """Returns (status, outputs or None, log text)."""
    from safetensors.numpy import load_file
    work.mkdir(parents=True, exist_ok=True)
    zrt, weights, out = work / "m.zrt", work / "m.safetensors", work / "out.safetensors"
    cmd = [ZERO_OPT, onnx_path, "--emit=zrt", "-o", zrt, "--weights-out", weights]
    for k, v in feeds.items():
        cmd += ["--input-shape", f"{k}=" + "x".join(str(d) for d in v.shape)]
    if pipeline:
        cmd += [f"--zero-pipeline={pipeline}"]
    rc, text = sh(cmd)
    (work / "zero-opt.log").write_text(" ".join(map(str, cmd)) + "\n" + text)
    if rc != 0 or CRASH_PAT.search(text):
        return ("import", classify(rc, text)), None, text
    run = [ZERO_RUN, zrt, "--weights", weights, "--output", out]
    for k, v in feeds.items():
        p = work / f"{k}.npy"
        np.save(p, v)
        run += ["--input", f"{k}={p}"]
    env = mpi.env(root=True)
    if np_ranks > 1:
        run = mpi.mpirun(np_ranks, run)
    if out.exists():
        out.unlink()
    rc, text = sh(run, env=env)
    (work / "zero-run.log").write_text(" ".join(map(str, run)) + "\n" + text)
    if rc != 0 or not out.exists():
        return ("run", classify(rc, text)), None, text
    return ("ok", ""), load_file(str(out)), text


def compare(got, want, rtol=RTOL, atol=ATOL):
    """Returns (ok, max abs error or message)."""
    worst, ok = 0.0, True
    for name, w in want.items():
        if name not in got:
            return False, f"output {name} missing"
        g = got[name]
        if g.shape != w.shape:
            return False, f"{name} shape {g.shape} vs {w.shape}"
        if g.dtype != w.dtype:
            return False, f"{name} dtype {g.dtype} vs {w.dtype}"
        err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) \
            if g.size else 0.0
        if np.isnan(g).any() != np.isnan(w).any() if g.dtype.kind == "f" else False:
            return False, f"{name} NaN mismatch"
        worst = max(worst, err)
        ok &= bool(np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True))
    return ok, worst


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def probe(name, variant, out_dir, reuse, do_zero, shapes=SHAPES):
    import torch
    exporter, opset, _ = VARIANTS[variant]
    d = out_dir / name
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{variant}.onnx"
    note = ""
    model, names = build(name, variant)
    if not (reuse and path.exists()):
        ex = make_inputs(SHAPES[0], names, SEED + 1)
        try:
            if exporter == "dynamo":
                note = export_dynamo(model, ex, path, opset, optimize=variant != "dynamo_noopt")
            else:
                note = export_ts(model, ex, path, opset)
        except Exception as e:
            (d / f"{variant}.export.log").write_text(traceback.format_exc())
            msg = f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"
            return [dict(model=name, exporter=variant, shape="-", imp="export failed",
                         run="-", err="-", zero="-", note=msg)]
    rows = []
    for si, shape in enumerate(shapes):
        feeds_t = make_inputs(shape, names, SEED + 10 + si)
        feeds = {k: v.numpy() for k, v in feeds_t.items()}
        row = dict(model=name, exporter=variant, shape="x".join(map(str, shape)),
                   imp="", run="-", err="-", zero="-", note=note)
        rows.append(row)
        try:
            want = run_ort(path, feeds)
        except Exception as e:
            # onnxruntime lacks a kernel (or is stricter than the spec, as its
            # RotaryEmbedding with [1, S] caches for a batch of 2): compare with the
            # ONNX reference implementation instead. If that fails too, the model
            # is broken; zero-opt must still fail cleanly or run.
            row["note"] += " onnxruntime failed: " + str(e).splitlines()[0][:80]
            try:
                want = run_reference(path, feeds)
                row["note"] += "; compared with onnx.reference"
            except Exception as e2:
                want = None
                row["note"] += "; onnx.reference failed: " + str(e2).splitlines()[0][:60]
        if want is not None:
            try:
                with torch.no_grad():
                    ref = model(**feeds_t).float().numpy()
                torch_err = float(np.max(np.abs(ref - list(want.values())[0])))
                if not np.allclose(ref, list(want.values())[0], rtol=1e-3, atol=1e-4) \
                        and not variant.endswith("_fp16"):
                    row["note"] += f" (ort vs torch {torch_err:.2g})"
            except Exception as e:
                row["note"] += f" (torch failed: {type(e).__name__})"
        work = d / f"{variant}_{row['shape']}"
        (stage, status), got, _ = compile_and_run(path, feeds, work / "np1")
        if stage == "import":
            row["imp"] = status
            continue
        row["imp"] = "ok"
        if stage == "run":
            row["run"] = status
            continue
        if want is None:
            row["run"] = "ran (no reference)"
        else:
            ok, err = compare(got, want, *((FP16_RTOL, FP16_ATOL)
                                           if variant.endswith("_fp16") else (RTOL, ATOL)))
            row["run"] = "ok" if ok else "WRONG"
            row["err"] = f"{err:.3g}" if isinstance(err, float) else err
        if do_zero and si == 0:
            (stage, status), got2, _ = compile_and_run(
                path, feeds, work / "zero3_np2", pipeline="stage=3 dp=2", np_ranks=2)
            if stage != "ok":
                row["zero"] = f"{stage}: {status}"
            else:
                same = set(got2) == set(got) and all(
                    np.array_equal(got2[k], got[k], equal_nan=True) for k in got)
                row["zero"] = "bit-identical" if same else "DIFFERS"
    return rows


def main():
    global ZERO_OPT, ZERO_RUN
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated subset of: " + ",".join(ALL))
    ap.add_argument("--extra", action="store_true", help="also the extra architectures")
    ap.add_argument("--variants", default="dynamo,ts17",
                    help="comma-separated subset of: " + ",".join(VARIANTS))
    ap.add_argument("--out", default=str(ROOT / "build" / "probe"))
    ap.add_argument("--reuse", action="store_true", help="reuse exported .onnx files")
    ap.add_argument("--no-zero", action="store_true", help="skip the ZeRO-3 dp=2 run")
    ap.add_argument("--zero-opt", default=str(ZERO_OPT))
    ap.add_argument("--zero-run", default=str(ZERO_RUN))
    ap.add_argument("--shapes", default=",".join(f"{b}x{s}" for b, s in SHAPES),
                    help="BxS,... (the ZeRO run uses the first)")
    a = ap.parse_args()
    ZERO_OPT, ZERO_RUN = Path(a.zero_opt), Path(a.zero_run)
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = a.only.split(",") if a.only else (ALL if a.extra else CORE)
    shapes = [tuple(int(d) for d in x.split("x")) for x in a.shapes.split(",")]
    rows = []
    for name in names:
        for exporter in a.variants.split(","):
            log(f"== {name} [{exporter}]")
            try:
                r = probe(name, exporter, out_dir, a.reuse, not a.no_zero, shapes)
            except Exception as e:
                traceback.print_exc()
                r = [dict(model=name, exporter=exporter, shape="-", imp="probe failed",
                          run="-", err=str(e).splitlines()[0][:100] if str(e) else "",
                          zero="-", note="")]
            for row in r:
                log("   ", row)
            rows += r
    cols = ["model", "exporter", "shape", "imp", "run", "err", "zero", "note"]
    head = ["model", "exporter", "shape", "import", "run", "max abs err", "ZeRO-3 dp=2",
            "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join(str(r[c]).replace("|", "/") for c in cols) + " |")
    table = "\n".join(lines)
    (out_dir / "summary.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
