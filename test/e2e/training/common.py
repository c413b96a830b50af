"""What every mode of train_e2e.py shares: the settings of the stored training
references, running zero-opt and zero-run (Tools, run: a failed command is a Fail
with its output), reading the stored references and zero-run's --log-json, and
comparing tensors (compare_tensors prints one line per tensor).
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np

from zerokit import mpi, tools as kit_tools

HERE = Path(__file__).resolve().parent.parent  # test/e2e
ROOT = HERE.parent.parent
SKIP = 77
FIXTURES = ["mlp", "gpt2", "bert", "llama", "vit"]

# --train settings; the stored references (train_reference.py --write-train-ref) use these.
TRAIN_DEFAULTS = dict(steps=20, accum=2, clip=1.0, eps=1e-6, seed=1234)
TRAIN_REF = "{}_loss.train.ref.safetensors"
REGEN_TRAIN_REF = "build/pyenv/bin/python test/e2e/train_reference.py --write-train-ref {}"

# Allowed as root: Open MPI refuses to start as root otherwise (CI runs as root).
ENV = mpi.env(root=True, yield_when_idle=True)


class Skip(Exception):
    pass


class Fail(Exception):
    pass


def log(*a):
    print(*a, flush=True)


# ---------------------------------------------------------------------------
# Running the tools
# ---------------------------------------------------------------------------

def run(cmd, what):
    """Runs cmd; Fail with its output on a non-zero exit. zero-run gets an Open MPI
    session directory of its own (concurrent jobs sharing one TMPDIR race)."""
    log("  $ " + " ".join(_q(c) for c in cmd))
    t0 = time.time()
    r = kit_tools.call(cmd, ENV)
    dt = time.time() - t0
    if r.returncode != 0:
        out = (r.stdout + r.stderr).strip()
        raise Fail(f"{what} failed (exit {r.returncode}):\n{out[-4000:]}")
    return r, dt


def _q(s):
    s = str(s)
    return s if s and all(c.isalnum() or c in "/._-=,:+" for c in s) else "'" + s.replace("'", "'\\''") + "'"


class Tools:
    def __init__(self, a):
        self.zero_opt = a.zero_opt or str(Path(a.bin_dir) / "zero-opt")
        self.zero_run = a.zero_run or str(Path(a.bin_dir) / "zero-run")
        self.np = a.np
        for t in (self.zero_opt, self.zero_run):
            if not os.path.exists(t):
                raise Fail(f"{t} not found (build it first, or pass --bin-dir)")

    def compile(self, onnx_path, shapes, extra, zrt, weights):
        return run(kit_tools.zero_opt(self.zero_opt, onnx_path, shapes, ["--train"] + extra, zrt,
                                      weights), "zero-opt")

    def zrun(self, zrt, args):
        cmd = [self.zero_run, str(zrt)] + args
        if self.np:
            cmd = mpi.mpirun(self.np, cmd)
        return run(cmd, "zero-run")


# ---------------------------------------------------------------------------
# Reference data
# ---------------------------------------------------------------------------

def read_ref(models, name):
    from safetensors import safe_open
    with safe_open(str(Path(models) / f"{name}_loss.ref.safetensors"), "np") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})


def ref_inputs(ref):
    return {k[len("input."):]: v for k, v in ref.items() if k.startswith("input.")}


def prefixed(ref, p):
    return {k[len(p):]: v for k, v in ref.items() if k.startswith(p)}


def err_stats(got, want, atol):
    g = np.asarray(got, dtype=np.float64)
    w = np.asarray(want, dtype=np.float64)
    d = np.abs(g - w)
    big = np.abs(w) > atol
    return (float(d.max()) if d.size else 0.0,
            float((d[big] / np.abs(w[big])).max()) if big.any() else 0.0)


def compare_tensors(kind, got, want, rtol, atol, allowed=None):
    """Prints one line per tensor (max abs / rel error); returns the failing names.
    allowed: optional {name: per-element allowed error} replacing rtol/atol."""
    bad = []
    width = max((len(k) for k in want), default=10)
    for k in sorted(want):
        w = want[k]
        if k not in got:
            bad.append(k)
            log(f"  FAIL {kind}{k}: missing")
            continue
        g = got[k]
        if g.shape != w.shape:
            bad.append(k)
            log(f"  FAIL {kind}{k}: shape {list(g.shape)}, expected {list(w.shape)}")
            continue
        if g.dtype != np.float32:
            bad.append(k)
            log(f"  FAIL {kind}{k}: dtype {g.dtype}, expected float32")
            continue
        ma, mr = err_stats(g, w, atol)
        if allowed is not None and k in allowed:
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
            ok = bool(np.all(diff <= allowed[k])) and np.all(np.isfinite(g))
        else:
            ok = bool(np.allclose(g, w, rtol=rtol, atol=atol)) and np.all(np.isfinite(g))
        if not ok:
            bad.append(k)
        log(f"  {'ok  ' if ok else 'FAIL'} {kind}{k:<{width}} max abs {ma:9.3g}  max rel {mr:9.3g}")
    return bad


def shapes_of(inputs):
    return {k: v.shape for k, v in inputs.items()}


def train_config(B, K=2, clip=1.0, eps=1e-6):
    """The ds_config of --train. eps 1e-6 rather than 1e-8: the attention key bias has an
    exactly-zero true gradient in gpt2/bert (softmax shift invariance) and with eps 1e-8
    Adam turns float32 gradient noise into lr-sized steps: float32 and float64 PyTorch
    then end 20 steps further apart than the weight tolerance."""
    return {
        "train_batch_size": B * K,
        "train_micro_batch_size_per_gpu": B,
        "gradient_accumulation_steps": K,
        "gradient_clipping": clip,
        "optimizer": {"type": "AdamW",
                      "params": {"lr": 1e-3, "betas": [0.9, 0.999], "eps": eps, "weight_decay": 0.01}},
        "scheduler": {"type": "WarmupLR",
                      "params": {"warmup_min_lr": 1e-4, "warmup_max_lr": 1e-3,
                                 "warmup_num_steps": 5, "warmup_type": "linear"}},
    }


def read_log(path, steps):
    rows = json.loads(Path(path).read_text())
    if not isinstance(rows, list) or len(rows) != steps:
        raise Fail(f"{path}: expected a JSON array of {steps} objects, got "
                   f"{type(rows).__name__} of {len(rows) if isinstance(rows, list) else '?'}")
    for i, r in enumerate(rows):
        for key in ("step", "loss", "grad_norm", "lr"):
            if key not in r:
                raise Fail(f"{path}: entry {i} has no '{key}'")
    return rows


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_train_ref(models, name):
    """The stored training reference of NAME: dict(data, config, steps, seed, losses,
    grad_norms, lrs, params, meta). Fail if it is missing or was written for another
    NAME_loss.onnx."""
    path = Path(models) / TRAIN_REF.format(name)
    regen = REGEN_TRAIN_REF.format(name)
    if not path.exists():
        raise Fail(f"{path} not found: write it with `{regen}` (needs torch), or pass --live")
    from safetensors import safe_open
    with safe_open(str(path), "np") as f:
        t = {k: f.get_tensor(k) for k in f.keys()}
        meta = dict(f.metadata() or {})
    onnx_path = Path(models) / f"{name}_loss.onnx"
    data = prefixed(t, "data.")
    for k, scale in json.loads(meta.get("data_scale", "{}")).items():
        # Stored as int8 (see the module docstring): float32(q) * scale is exact.
        data[k] = data[k].astype(np.float32) * np.float32(scale)
    want_sha = meta.get("onnx_sha256", "")
    if want_sha != sha256_file(onnx_path):
        raise Fail(f"{path.name} was written for a different {onnx_path.name} (sha256 {want_sha[:12]}..., "
                   f"the file now {sha256_file(onnx_path)[:12]}...): the fixture was regenerated; "
                   f"regenerate the training reference with `{regen}`")
    return dict(path=path, meta=meta, data=data, params=prefixed(t, "final."),
                config=json.loads(meta["ds_config"]), steps=int(meta["steps"]), seed=int(meta["seed"]),
                losses=[float(x) for x in t["step.loss"]],
                grad_norms=[float(x) for x in t["step.grad_norm"]],
                lrs=[float(x) for x in t["step.lr"]])


def train_settings(a, stored=None):
    """(steps, accum, clip, eps, seed): the command line's, defaults filled in; with a
    stored reference its values, and a command-line value that differs is a Fail."""
    given = dict(steps=a.steps, accum=a.accum, clip=a.clip, eps=a.eps, seed=a.seed)
    if stored is None:
        return {k: (v if v is not None else TRAIN_DEFAULTS[k]) for k, v in given.items()}
    cfg = stored["config"]
    have = dict(steps=stored["steps"], accum=int(cfg["gradient_accumulation_steps"]),
                clip=float(cfg["gradient_clipping"]), eps=float(cfg["optimizer"]["params"]["eps"]),
                seed=stored["seed"])
    differ = [f"--{k} {given[k]} (stored: {have[k]})" for k in given
              if given[k] is not None and given[k] != have[k]]
    if differ:
        raise Fail(f"{stored['path'].name} holds a reference for other settings: {', '.join(differ)}; "
                   f"use --live for other settings")
    return have



def step_gaps(a, rows, ref_rows):
    """The largest relative gaps of the logged losses and grad norms against the
    1-rank run's, and what exceeds --dp-loss-rtol (10x that for grad norms)."""
    lrel = max(abs(x["loss"] - y["loss"]) / max(abs(y["loss"]), 1e-30)
               for x, y in zip(rows, ref_rows))
    grel = max(abs(x["grad_norm"] - y["grad_norm"]) / max(abs(y["grad_norm"]), 1e-30)
               for x, y in zip(rows, ref_rows))
    bad = []
    if not lrel <= a.dp_loss_rtol:
        bad.append(f"loss rel {lrel:.2g} > {a.dp_loss_rtol:g}")
    if not grel <= a.dp_loss_rtol * 10:
        bad.append(f"grad norm rel {grel:.2g} > {a.dp_loss_rtol * 10:g}")
    return lrel, grel, bad
