#!/usr/bin/env python3
"""Probes zero-opt/zero-run on transformer architectures that have no fixture.

A tool for finding importer/runtime gaps, not a CI test. Usage (repository root):

    build/pyenv/bin/python test/models/probe_architectures.py [--only NAME[,NAME...]]
        [--exporters dynamo,ts17] [--no-zero] [--reuse] [--out build/probe]

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
import os
import re
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

import numpy as np

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


def hf_config(name):
    """(model class, config, output attribute, takes attention_mask)."""
    import transformers as tf
    common = dict(attn_implementation="eager", use_cache=False)
    small = dict(vocab_size=VOCAB)
    if name == "gpt_neo":
        return tf.GPTNeoForCausalLM, tf.GPTNeoConfig(
            **small, max_position_embeddings=64, hidden_size=32, num_layers=2,
            attention_types=[[["global", "local"], 1]], num_heads=4, window_size=4,
            intermediate_size=64, embed_dropout=0.0, attention_dropout=0.0,
            resid_dropout=0.0, **common), "logits", False
    if name == "opt":
        return tf.OPTForCausalLM, tf.OPTConfig(
            **small, hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=4,
            max_position_embeddings=64, word_embed_proj_dim=32, dropout=0.0,
            attention_dropout=0.0, **common), "logits", False
    if name == "mistral":
        return tf.MistralForCausalLM, tf.MistralConfig(
            **small, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            sliding_window=4, tie_word_embeddings=False, **common), "logits", False
    if name == "qwen2":
        return tf.Qwen2ForCausalLM, tf.Qwen2Config(
            **small, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            tie_word_embeddings=True, **common), "logits", False
    if name == "phi":
        return tf.PhiForCausalLM, tf.PhiConfig(
            **small, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, max_position_embeddings=64, partial_rotary_factor=0.5,
            resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0, **common), "logits", False
    if name == "gptj":
        return tf.GPTJForCausalLM, tf.GPTJConfig(
            **small, n_positions=64, n_embd=32, n_layer=2, n_head=4, rotary_dim=4,
            n_inner=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **common), \
            "logits", False
    if name == "gpt_neox":
        return tf.GPTNeoXForCausalLM, tf.GPTNeoXConfig(
            **small, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, rotary_pct=0.25, max_position_embeddings=64,
            hidden_dropout=0.0, attention_dropout=0.0, **common), "logits", False
    if name == "bloom":
        return tf.BloomForCausalLM, tf.BloomConfig(
            **small, hidden_size=32, n_layer=2, n_head=4, hidden_dropout=0.0,
            attention_dropout=0.0, **common), "logits", True
    if name == "gemma":
        return tf.GemmaForCausalLM, tf.GemmaConfig(
            **small, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=1, head_dim=8,
            max_position_embeddings=64, **common), "logits", False
    if name == "distilbert":
        return tf.DistilBertForMaskedLM, tf.DistilBertConfig(
            **small, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64,
            dropout=0.0, attention_dropout=0.0, **common), "logits", True
    if name == "roberta":
        return tf.RobertaForMaskedLM, tf.RobertaConfig(
            **small, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=66, pad_token_id=1,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **common), \
            "logits", True
    if name == "albert":
        return tf.AlbertForMaskedLM, tf.AlbertConfig(
            **small, embedding_size=16, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **common), \
            "logits", True
    if name == "t5_encoder":
        return tf.T5EncoderModel, tf.T5Config(
            **small, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
            relative_attention_num_buckets=8, relative_attention_max_distance=16,
            dropout_rate=0.0, feed_forward_proj="gated-gelu", **common), \
            "last_hidden_state", True
    raise KeyError(name)


HF_MODELS = ["gpt_neo", "opt", "mistral", "qwen2", "phi", "gptj", "gpt_neox", "bloom",
             "gemma", "distilbert", "roberta", "albert", "t5_encoder"]
TORCH_MODELS = ["torch_encoder"]
ALL = HF_MODELS + TORCH_MODELS


def build(name):
    """Returns (model, takes_mask)."""
    import torch
    torch.manual_seed(SEED)
    if name == "torch_encoder":
        class Encoder(torch.nn.Module):
            """nn.TransformerEncoder (pre-norm, GELU, causal mask) on an embedding."""

            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(VOCAB, 32)
                layer = torch.nn.TransformerEncoderLayer(
                    32, 4, 64, dropout=0.0, activation="gelu", batch_first=True,
                    norm_first=True)
                self.enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
                self.head = torch.nn.Linear(32, VOCAB)

            def forward(self, input_ids):
                x = self.emb(input_ids)
                s = input_ids.shape[1]
                mask = torch.nn.Transformer.generate_square_subsequent_mask(s)
                return self.head(self.enc(x, mask=mask, is_causal=True))

        m = Encoder()
        _perturb_(m)
        return m.eval(), False
    cls, cfg, attr, takes_mask = hf_config(name)

    class Wrapped(cls):
        def forward(self, input_ids, attention_mask=None):
            return getattr(super().forward(input_ids=input_ids,
                                           attention_mask=attention_mask), attr)

    m = Wrapped(cfg)
    _perturb_(m)
    return m.eval(), takes_mask


def make_inputs(shape, takes_mask, seed):
    import torch
    gen = torch.Generator().manual_seed(seed)
    b, s = shape
    ids = torch.randint(2, VOCAB, (b, s), generator=gen)
    inputs = {"input_ids": ids}
    if takes_mask:
        mask = torch.ones(b, s, dtype=torch.int64)
        if b > 1:
            mask[-1, -2:] = 0  # last sequence padded by two tokens
        inputs["attention_mask"] = mask
    return inputs


# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------

def export_dynamo(model, inputs, path):
    import torch
    dims = {0: torch.export.Dim("batch", max=64), 1: torch.export.Dim("seq", max=64)}
    dyn = {k: dims for k in inputs}
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        prog = torch.onnx.export(model, (), kwargs=dict(inputs), dynamo=True,
                                 dynamic_shapes=dyn, input_names=list(inputs),
                                 output_names=["logits"])
    prog.save(str(path))


def export_ts17(model, inputs, path):
    import torch
    dyn = {k: {0: "batch", 1: "seq"} for k in inputs}
    dyn["logits"] = {0: "batch", 1: "seq"}

    def go(m):
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(m, tuple(inputs.values()), str(path), dynamo=False,
                              opset_version=17, input_names=list(inputs),
                              output_names=["logits"], dynamic_axes=dyn)
    try:
        go(model)
        return ""
    except Exception as e:
        if "attention_mask" in inputs or not hasattr(model, "config"):
            raise
        msg = f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    # As in export.py: transformers' packed-sequence detection (run when no mask is
    # given) uses aten::diff, which the TorchScript exporter cannot translate.
    base = type(model)

    class OnesMask(base):
        def forward(self, input_ids):
            return super().forward(input_ids, torch.ones_like(input_ids))

    m2 = OnesMask(model.config)
    m2.load_state_dict(model.state_dict())
    go(m2.eval())
    return f"plain export failed ({msg}); mask=ones_like(input_ids) inside the graph"


def run_ort(path, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    feeds = {i.name: feeds[i.name] for i in sess.get_inputs()}
    return dict(zip(names, sess.run(names, feeds)))


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
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if np_ranks > 1:
        run = ["mpirun", "-np", str(np_ranks), "--oversubscribe"] + run
    if out.exists():
        out.unlink()
    rc, text = sh(run, env=env)
    (work / "zero-run.log").write_text(" ".join(map(str, run)) + "\n" + text)
    if rc != 0 or not out.exists():
        return ("run", classify(rc, text)), None, text
    return ("ok", ""), load_file(str(out)), text


def compare(got, want):
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
        ok &= bool(np.allclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True))
    return ok, worst


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def probe(name, exporter, out_dir, reuse, do_zero):
    import torch
    rows = []
    d = out_dir / name
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{exporter}.onnx"
    note = ""
    model, takes_mask = build(name)
    if not (reuse and path.exists()):
        ex = make_inputs(SHAPES[0], takes_mask, SEED + 1)
        try:
            if exporter == "dynamo":
                export_dynamo(model, ex, path)
            else:
                note = export_ts17(model, ex, path)
        except Exception as e:
            (d / f"{exporter}.export.log").write_text(traceback.format_exc())
            msg = f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"
            return [dict(model=name, exporter=exporter, shape="-", imp="export failed",
                         run="-", err=msg, zero="-", note="")]
    for si, shape in enumerate(SHAPES):
        feeds_t = make_inputs(shape, takes_mask, SEED + 10 + si)
        feeds = {k: v.numpy() for k, v in feeds_t.items()}
        row = dict(model=name, exporter=exporter, shape="x".join(map(str, shape)),
                   imp="", run="-", err="-", zero="-", note=note)
        rows.append(row)
        try:
            want = run_ort(path, feeds)
        except Exception as e:
            row.update(imp="ort failed", err=str(e).splitlines()[0][:100])
            continue
        with torch.no_grad():
            ref = model(**feeds_t)
        ref = ref.numpy()
        torch_err = float(np.max(np.abs(ref - list(want.values())[0])))
        if torch_err > 1e-3:
            row["note"] += f" ort vs torch {torch_err:.2g}"
        work = d / f"{exporter}_{row['shape']}"
        (stage, status), got, _ = compile_and_run(path, feeds, work / "np1")
        if stage == "import":
            row["imp"] = status
            continue
        row["imp"] = "ok"
        if stage == "run":
            row["run"] = status
            continue
        ok, err = compare(got, want)
        row["run"] = "ok" if ok else "WRONG"
        row["err"] = f"{err:.3g}" if isinstance(err, float) else err
        if do_zero and si == 0:
            (stage, status), got2, _ = compile_and_run(
                path, feeds, work / "zero3_np2", pipeline="stage=3 dp=2", np_ranks=2)
            if stage != "ok":
                row["zero"] = f"{stage}: {status}"
            else:
                same = all(np.array_equal(got2[k], got[k], equal_nan=True)
                           for k in got) and set(got2) == set(got)
                row["zero"] = "bit-identical" if same else "DIFFERS"
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated subset of: " + ",".join(ALL))
    ap.add_argument("--exporters", default="dynamo,ts17")
    ap.add_argument("--out", default=str(ROOT / "build" / "probe"))
    ap.add_argument("--reuse", action="store_true", help="reuse exported .onnx files")
    ap.add_argument("--no-zero", action="store_true", help="skip the ZeRO-3 dp=2 run")
    a = ap.parse_args()
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = a.only.split(",") if a.only else ALL
    rows = []
    for name in names:
        for exporter in a.exporters.split(","):
            log(f"== {name} [{exporter}]")
            try:
                r = probe(name, exporter, out_dir, a.reuse, not a.no_zero)
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
