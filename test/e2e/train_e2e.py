#!/usr/bin/env python3
"""End-to-end checks of training: zero-opt --train -> .zrt -> zero-run, against the
fixtures' stored gradients / AdamW step and against an independent PyTorch reference
(train_reference.py), stored in test/models/NAME_loss.train.ref.safetensors or
recomputed (--live).

Modes (any combination; they run in this order):

  --grads NAME        compile NAME_loss.onnx with `--train --optimizer none` at the
                      reference shapes, run it once on the reference inputs and compare
                      `loss` with torch.loss and every `grad.<initializer>` output with
                      the stored grad.* (rtol 1e-4, atol 1e-6); the set of gradient
                      outputs must equal the set of stored gradients.
  --adamw-step NAME   compile with the fixture's AdamW settings, run one step on the
                      reference inputs (--input, --save) and compare the saved
                      parameters with the stored adamw.* (see "AdamW step tolerance").
  --train NAME        ds_config with AdamW, gradient_clipping, gradient accumulation 2
                      and a linear WarmupLR; 20 steps on generated data; the log's loss,
                      grad_norm and lr at every step and the final parameters are
                      compared with the PyTorch reference. By default the reference is
                      the stored NAME_loss.train.ref.safetensors (numpy + safetensors
                      only: the data batches, ds_config and step count come from it, so
                      --steps/--accum/--clip/--eps/--seed may only repeat its values);
                      with --live it is recomputed by train_reference.py on freshly
                      generated data (needs torch + transformers; any settings, --freeze).
    --threads-sweep [T1,T2,...]   also run zero-run at each --threads count (default
                      1,3): losses, grad norms and saved weights must be bit-identical.
  --dp NAME           training over ranks: for each STAGE:RANKS[:ACCUMULATION] of
                      --dp-configs (default 0:2,1:2,2:2,2:2:2,0:4,1:4,2:4) compile with a
                      ds_config giving that stage and the batch sizes (the stored
                      reference's global batch and optimizer settings), train --dp-steps
                      (10) steps under mpirun -np RANKS twice (bit-identical run to run)
                      and compare with the 1-rank run over the same micro-batches
                      (accumulation RANKS x ACCUMULATION): losses rtol 1e-5, grad norms
                      1e-4, weights rtol 1e-4 + atol 1e-6.
  --ckpt NAME         ZeRO-3 checkpoints (zero-run --save-dir/--save-every/--resume):
                      saved at step 5 and resumed to 10 bit-identical to the
                      uninterrupted run; rank 0 killed while writing the step-10
                      checkpoint (ZRT_FAULT_KILL_BEFORE_RENAME=manifest.json) leaves the
                      step-5 one as DIR/latest; saved at np 4 and resumed at np 2 equal to
                      the np 4 run; --resume without a checkpoint or past --steps fails;
                      zero-ckpt consolidate equals --save/--save-optimizer, and (gpt2) its
                      peak RSS on a 192 MiB synthetic checkpoint stays within the largest
                      tensor + 32 MiB.

Stored training references (test/models/NAME_loss.train.ref.safetensors), written by
the PyTorch reference with this script's default settings (20 steps, accumulation 2,
clipping 1.0, AdamW eps 1e-6, WarmupLR, data seed 1234):
  data.<input>      the generated batches, [steps, accumulation x micro-batch, ...]; a
                    float input may be stored as int8 q with metadata data_scale (JSON
                    {input: scale}): the batch is the float32 q * scale, exactly (vit's
                    pixel_values, N(0, 1) on a 1/32 grid: a quarter of the bytes)
  step.loss, step.grad_norm, step.lr   float64 [steps]; step.micro_loss [steps, K]
  final.<init>      the final trainable parameters (ONNX initializer names, F32)
  metadata          ds_config (JSON), steps, seed, versions, sha256 of NAME_loss.onnx
                    (a different fixture file is a failure: regenerate), regenerate
Regenerate them (after test/models/export.py, or when the reference changes) with
  scripts/setup-pyenv.sh full
  build/pyenv/bin/python test/e2e/train_reference.py --write-train-ref [NAME ...]

Exit status: 0 all passed, 1 a mismatch, a failed command, a missing tool or stored
reference; 77 skipped only for --live without torch (printed why).

Command lines (B x S the fixture's reference shape, mlp: x=Bx16, labels=B; vit:
pixel_values=Bx3x32x32, labels=B):
  zero-opt M_loss.onnx --input-shape input_ids=BxS --input-shape labels=BxS --train
           --optimizer none --emit=zrt -o t.zrt --weights-out init.safetensors
  zero-run t.zrt --weights init.safetensors --input in.safetensors --output out.safetensors
  zero-opt ... --train --optimizer "adamw lr=0.001 betas=0.9,0.999 eps=1e-08 weight-decay=0.01" ...
  zero-run t.zrt --weights init.safetensors --input in.safetensors --save final.safetensors
  zero-opt ... --train --config ds_config.json ...
  zero-run t.zrt --weights init.safetensors --data batches.safetensors --steps 20
           --log-json log.json --save final.safetensors [--threads T]

AdamW step tolerance: at step 1 AdamW moves every element by lr * g / (|g| + eps)
(plus the decay), so an element whose gradient is at float32 noise level (e.g. the
attention key bias: softmax is shift invariant, its true gradient is exactly 0) moves by
an amount that depends on the noise. The saved parameter w must satisfy
|w - want| <= rtol*|want| + atol + lr * max |u(g') - u(g)| over the gradients g' within
the --grads tolerance of the stored g (u(g) = g / (|g| + eps); where the stored
gradient is exactly 0, within 1e-7 x the tensor's largest gradient, unless that largest
gradient is itself within the gradient atol: then the whole tensor is noise around a true 0
and its zeros get the atol too); elements where that last term matters are counted and printed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from model_buffers import buffer_names
from zerokit import mpi, tools as kit_tools

HERE = Path(__file__).resolve().parent

# The fixtures whose ZeRO-3 training step (reuse distance 0) re-gathers no
# parameter, and why: hpZ has nothing to keep inside its group there, so
# --zeropp checks only that hpZ changes no bit (a fixture that starts to
# re-gather fails until it is removed here).
NO_TRAINING_REGATHERS = {
    "mlp": "its backward uses the last layer's weight right after the forward, with "
           "nothing gathered in between, and the first layer's not at all (its input "
           "needs no gradient)",
}
ROOT = HERE.parent.parent
SKIP = 77
FIXTURES = ["mlp", "gpt2", "bert", "llama", "vit"]

# --train settings; the stored references (train_reference.py --write-train-ref) use these.
TRAIN_DEFAULTS = dict(steps=20, accum=2, clip=1.0, eps=1e-6, seed=1234)
TRAIN_REF = "{}_loss.train.ref.safetensors"
REGEN_TRAIN_REF = "build/pyenv/bin/python test/e2e/train_reference.py --write-train-ref {}"

ENV = mpi.env(yield_when_idle=True)


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
        cmd = [self.zero_opt, str(onnx_path)]
        for n, s in shapes.items():
            cmd += ["--input-shape", f"{n}=" + "x".join(str(d) for d in s)]
        cmd += ["--train"] + extra + ["--emit=zrt", "-o", str(zrt), "--weights-out", str(weights)]
        return run(cmd, "zero-opt")

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


# ---------------------------------------------------------------------------
# Modes
# ---------------------------------------------------------------------------

def shapes_of(inputs):
    return {k: v.shape for k, v in inputs.items()}


def mode_grads(a, tools, name, work):
    log(f"== train-grads {name}: zero-opt --train --optimizer none vs stored grad.*")
    ref, _ = read_ref(a.models, name)
    inputs = ref_inputs(ref)
    zrt, weights = work / "t.zrt", work / "init.safetensors"
    tools.compile(Path(a.models) / f"{name}_loss.onnx", shapes_of(inputs), ["--optimizer", "none"],
                  zrt, weights)
    save_file(inputs, str(work / "in.safetensors"))
    tools.zrun(zrt, ["--weights", str(weights), "--input", str(work / "in.safetensors"),
                     "--output", str(work / "out.safetensors")])
    out = load_file(str(work / "out.safetensors"))
    want = prefixed(ref, "grad.")
    got = prefixed(out, "grad.")
    failures = []
    if "loss" not in out:
        failures.append("loss missing")
        log("  FAIL output 'loss' missing")
    else:
        ma, mr = err_stats(out["loss"], ref["torch.loss"], 0)
        ok = out["loss"].shape == () and np.allclose(out["loss"], ref["torch.loss"], rtol=a.rtol, atol=a.atol)
        log(f"  {'ok  ' if ok else 'FAIL'} loss {float(out['loss']):.7f} vs torch.loss "
            f"{float(ref['torch.loss']):.7f} (abs {ma:.3g}, shape {list(out['loss'].shape)})")
        if not ok:
            failures.append("loss")
    extra, missing = sorted(set(got) - set(want)), sorted(set(want) - set(got))
    if extra or missing:
        failures.append("gradient set")
        log(f"  FAIL the gradient outputs are not the trainable parameters: extra {extra}, missing {missing}")
    others = sorted(k for k in out if k != "loss" and not k.startswith("grad."))
    if others:
        log(f"  note: other outputs {others}")
    failures += compare_tensors("grad.", got, want, a.rtol, a.atol)
    return failures


def adam_step1_allowed(want_w, g, lr, eps, rtol, atol, grtol, gatol):
    """Per-element allowed |w - want| after one AdamW step from zero state (see the
    module docstring). Returns (allowed, number of elements the gradient noise widens)."""
    w = np.abs(want_w.astype(np.float64))
    g = g.astype(np.float64)
    # An exactly zero stored gradient is mostly structural (an embedding row no token
    # uses, a position past the sequence), sometimes noise that rounded to 0 (the
    # attention key bias): it gets the float32 noise floor of its tensor (1e-7 x its
    # largest gradient) instead of the gradient atol. Where the whole tensor is within
    # the gradient atol of 0 (its true gradient is 0, every element noise: vit's
    # separate k_proj.bias, where one element rounded to exactly 0), the largest
    # gradient is noise too, and its zeros get the gradient atol like its other elements.
    gmax = float(np.max(np.abs(g))) if g.size else 0.0
    floor = gatol if gmax <= gatol else 1e-7 * gmax
    d = np.where(g == 0, floor, grtol * np.abs(g) + gatol)

    def u(x):
        return x / (np.abs(x) + eps)
    sens = lr * np.maximum(np.abs(u(g + d) - u(g)), np.abs(u(g - d) - u(g)))
    base = rtol * w + atol
    return base + sens, int(np.sum(sens > base))


def mode_adamw_step(a, tools, name, work):
    log(f"== train-adamw-step {name}: one AdamW step (--input, --save) vs stored adamw.*")
    ref, meta = read_ref(a.models, name)
    inputs = ref_inputs(ref)
    lr, b1, b2 = float(meta["lr"]), float(meta["beta1"]), float(meta["beta2"])
    eps, wd = float(meta["eps"]), float(meta["weight_decay"])
    opt = f"adamw lr={lr!r} betas={b1!r},{b2!r} eps={eps!r} weight-decay={wd!r}"
    zrt, weights = work / "t.zrt", work / "init.safetensors"
    tools.compile(Path(a.models) / f"{name}_loss.onnx", shapes_of(inputs), ["--optimizer", opt],
                  zrt, weights)
    save_file(inputs, str(work / "in.safetensors"))
    final = work / "final.safetensors"
    tools.zrun(zrt, ["--weights", str(weights), "--input", str(work / "in.safetensors"),
                     "--save", str(final)])
    got = load_file(str(final))
    want = prefixed(ref, "adamw.")
    grads = prefixed(ref, "grad.")
    failures = []
    extra, missing = sorted(set(got) - set(want)), sorted(set(want) - set(got))
    if missing:
        failures.append("parameter set")
        log(f"  FAIL parameters missing from {final.name}: {missing}")
    if extra:
        log(f"  note: {final.name} also holds {extra}")
    allowed, widened = {}, {}
    for k, w in want.items():
        allowed[k], widened[k] = adam_step1_allowed(w, grads[k], lr, eps, a.step_rtol, a.step_atol,
                                                    a.rtol, a.atol)
    failures += compare_tensors("adamw.", got, want, a.step_rtol, a.step_atol, allowed)
    wide = {k: n for k, n in widened.items() if n}
    if wide:
        log(f"  note: elements whose gradient is near float32 noise (|g| ~ eps or below), where the "
            f"allowed error includes lr x the gradient tolerance's effect on g/(|g|+eps): {wide}")
    return failures


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


def mode_train(a, tools, name, work):
    ref = tr = stored = None
    if a.live:
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError as e:
            raise Skip(f"--live: the PyTorch reference needs torch and transformers ({e}); "
                       "scripts/setup-pyenv.sh full installs them (without --live the stored "
                       f"{TRAIN_REF.format(name)} is the reference)")
        sys.path.insert(0, str(HERE))
        import train_reference as tr
        st = train_settings(a)
        B, S = tr.fixture_dims(name, Path(a.models))
        K, steps = st["accum"], st["steps"]
        cfg = train_config(B, K, st["clip"], st["eps"])
        data = tr.make_data(name, steps, K, B, S, st["seed"], Path(a.models))
        source = "the PyTorch reference (--live, recomputed)"
    else:
        if a.freeze:
            raise Fail("--freeze needs --live (the stored reference trains every parameter)")
        stored = read_train_ref(a.models, name)
        st = train_settings(a, stored)
        K, steps = st["accum"], st["steps"]
        cfg, data = stored["config"], stored["data"]
        B = next(iter(data.values())).shape[1] // K
        meta = stored["meta"]
        source = (f"the stored PyTorch reference {stored['path'].name} (torch {meta.get('torch_version', '?')}, "
                  f"transformers {meta.get('transformers_version', '?')})")
    log(f"== train-20steps {name}: {steps} steps, gradient accumulation {K}, clipping "
        f"{cfg.get('gradient_clipping')}, AdamW + WarmupLR, vs {source}")
    cfg_path = work / "ds_config.json"
    cfg_path.write_text(json.dumps(cfg, indent=1) + "\n")
    data_path = work / "batches.safetensors"
    save_file({k: np.ascontiguousarray(v) for k, v in data.items()}, str(data_path))
    shapes = {k: (B,) + v.shape[2:] for k, v in data.items()}  # micro-batch shapes

    zrt, weights = work / "t.zrt", work / "init.safetensors"
    extra = ["--config", str(cfg_path)] + (["--freeze", a.freeze] if a.freeze else [])
    _, ct = tools.compile(Path(a.models) / f"{name}_loss.onnx", shapes, extra, zrt, weights)
    sweep = [int(t) for t in a.threads_sweep.split(",")] if a.threads_sweep else []

    def train_run(tag, threads):
        lp, sp = work / f"log{tag}.json", work / f"final{tag}.safetensors"
        args = ["--weights", str(weights), "--data", str(data_path), "--steps", str(steps),
                "--log-json", str(lp), "--save", str(sp)]
        if threads:
            args += ["--threads", str(threads)]
        _, dt = tools.zrun(zrt, args)
        return read_log(lp, steps), load_file(str(sp)), dt

    rows, final, rt = train_run(f"-t{sweep[0]}" if sweep else "", sweep[0] if sweep else None)
    t0 = time.time()
    if a.live:
        ref = tr.Reference(name, Path(a.models), freeze=a.freeze)
        if a.freeze:
            log(f"  frozen (--freeze {a.freeze!r}): {sorted(ref.param_map[n] for n in ref.frozen)}")
        res = ref.train(data, cfg, steps)
        note_stored_data(a, name, st, data)
    else:
        res = dict(losses=stored["losses"], grad_norms=stored["grad_norms"], lrs=stored["lrs"],
                   params=stored["params"])
        for k in ("losses", "grad_norms", "lrs"):
            if len(res[k]) != steps:
                raise Fail(f"{stored['path'].name}: {len(res[k])} {k}, expected {steps}")
    reft = time.time() - t0
    log(f"  times: zero-opt {ct:.2f}s, zero-run {rt:.2f}s, reference {reft:.2f}s"
        + ("" if a.live else " (stored)"))

    failures = []
    log(f"  {'step':>4} {'loss zrt':>11} {'loss ref':>11} {'rel':>8} | {'grad_norm zrt':>13} "
        f"{'ref':>10} {'rel':>8} | {'lr zrt':>10} {'lr ref':>10}")
    for i, r in enumerate(rows):
        lz, lrf = float(r["loss"]), res["losses"][i]
        gz, grf = float(r["grad_norm"]), res["grad_norms"][i]
        rz, rrf = float(r["lr"]), res["lrs"][i]
        rel_l = abs(lz - lrf) / max(abs(lrf), 1e-30)
        rel_g = abs(gz - grf) / max(abs(grf), 1e-30)
        bad = []
        if not (np.isfinite(lz) and rel_l <= a.loss_rtol):
            bad.append("loss")
        if not (np.isfinite(gz) and rel_g <= a.gn_rtol):
            bad.append("grad_norm")
        if not abs(rz - rrf) <= a.lr_rtol * abs(rrf) + 1e-12:
            bad.append("lr")
        log(f"  {r['step']:>4} {lz:11.7f} {lrf:11.7f} {rel_l:8.2g} | {gz:13.7f} {grf:10.7f} {rel_g:8.2g} | "
            f"{rz:10.4g} {rrf:10.4g}" + ("   FAIL " + ",".join(bad) if bad else ""))
        failures += [f"step {i} {b}" for b in bad]
    want = res["params"]
    extra, missing = sorted(set(final) - set(want)), sorted(set(want) - set(final))
    if missing:
        failures.append("parameter set")
        log(f"  FAIL trainable parameters missing from the saved weights: {missing}")
    frozen = {ref.param_map[n]: ref.to_onnx_layout(n, ref.named[n]) for n in ref.frozen} if ref else {}
    for k in extra:
        if k in frozen:  # a frozen parameter, if saved, is unchanged
            if final[k].shape != frozen[k].shape or not np.array_equal(final[k], frozen[k]):
                failures.append(f"frozen {k}")
                log(f"  FAIL frozen parameter {k} changed")
    if set(extra) - set(frozen):
        log(f"  note: the saved weights also hold {sorted(set(extra) - set(frozen))}")
    failures += [f"final {k}" for k in compare_tensors("final ", final, want, a.w_rtol, a.w_atol)]

    if sweep:
        base_tag = sweep[0]
        for t in sweep[1:]:
            rows_t, final_t, _ = train_run(f"-t{t}", t)
            diffs = [i for i, (x, y) in enumerate(zip(rows, rows_t))
                     if x["loss"] != y["loss"] or x["grad_norm"] != y["grad_norm"]]
            wdiff = sorted(k for k in final if k not in final_t or final[k].tobytes() != final_t[k].tobytes())
            if diffs or wdiff or set(final) != set(final_t):
                failures.append(f"threads {t}")
                log(f"  FAIL --threads {t} vs --threads {base_tag}: losses/grad norms differ at steps "
                    f"{diffs}, weights differ in {wdiff}")
            else:
                log(f"  ok   --threads {t}: losses, grad norms and saved weights bit-identical to "
                    f"--threads {base_tag}")
    return failures


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


def mode_dp(a, tools, name, work):
    """Training over ranks (ZeRO stages 0-2) equals the 1-rank training of the same
    global batch. Each configuration S:N[:K] (stage, ranks, accumulation per rank) runs
    --dp-steps steps of the stored reference's data and optimizer settings under
    mpirun -np N, twice (bit-identical), and is compared with the 1-rank run that has
    the same micro-batches: accumulation N x K over micro-batches of the global batch /
    (N x K) rows (a micro-batch's loss is its own mean, as each rank's is in DDP), whose
    own equality with PyTorch is what --train checks."""
    stored = read_train_ref(a.models, name)
    cfg0, data = stored["config"], stored["data"]
    steps = min(a.dp_steps, stored["steps"])
    rows = next(iter(data.values())).shape[1]  # the global batch of a step
    data_path = work / "batches.safetensors"
    save_file({k: np.ascontiguousarray(v) for k, v in data.items()}, str(data_path))
    log(f"== train-dp {name}: {steps} steps of a global batch of {rows} rows, "
        f"{cfg0['optimizer']['type']} + {cfg0['scheduler']['type']}, clipping "
        f"{cfg0.get('gradient_clipping')}; configurations {a.dp_configs}")

    def compile_(tag, ranks, micro, accum, stage, bucket=0, ds_defaults=False):
        cfg = {k: v for k, v in cfg0.items() if k not in ("train_batch_size",
               "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")}
        cfg.update(train_batch_size=rows, train_micro_batch_size_per_gpu=micro,
                   gradient_accumulation_steps=accum)
        if stage is not None:
            cfg["zero_optimization"] = {"stage": stage}
            if stage == 3 and not ds_defaults:
                # Every parameter partitioned, and re-gathered for each distant use
                # (backward): DeepSpeed's defaults keep these small fixtures whole.
                cfg["zero_optimization"].update(stage3_param_persistence_threshold=0,
                                                stage3_max_reuse_distance=0)
            if bucket:
                cfg["zero_optimization"]["reduce_bucket_size"] = bucket
        cp = work / f"ds_{tag}.json"
        cp.write_text(json.dumps(cfg, indent=1) + "\n")
        shapes = {k: (micro,) + v.shape[2:] for k, v in data.items()}
        zrt, w = work / f"{tag}.zrt", work / f"init_{tag}.safetensors"
        tools.compile(Path(a.models) / f"{name}_loss.onnx", shapes, ["--config", str(cp)], zrt, w)
        return zrt, w

    def train(tag, zrt, weights, ranks, index):
        lp, sp = work / f"log_{tag}_{index}.json", work / f"final_{tag}_{index}.safetensors"
        cmd = [tools.zero_run, str(zrt), "--weights", str(weights), "--data", str(data_path),
               "--steps", str(steps), "--log-json", str(lp), "--save", str(sp),
               "--report-json", str(work / f"report_{tag}_{index}.json"),
               "--save-optimizer", str(work / f"opt_{tag}_{index}.safetensors")]
        if index == 1:
            cmd.append("--check-collectives")  # and it must not stop a correct run
        else:
            cmd += ["--trace", str(work / f"trace_{tag}.json")]
        if ranks > 1:
            cmd = mpi.mpirun(ranks, cmd)
        run(cmd, "zero-run")
        return read_log(lp, steps), load_file(str(sp))

    failures, refs = [], {}
    for spec in a.dp_configs.split(","):
        fields = spec.split(":")
        ds_defaults = len(fields) > 4 and fields[4] == "ds"
        parts = [int(x) for x in fields[:4]]
        stage, ranks, accum = parts[0], parts[1], parts[2] if len(parts) > 2 else 1
        bucket = parts[3] if len(parts) > 3 else 0
        micros = ranks * accum
        if rows % micros:
            raise Fail(f"--dp-configs {spec}: the stored global batch of {rows} rows does "
                       f"not split into {micros} micro-batches; give configurations it "
                       "splits into")
        micro = rows // micros
        if micros not in refs:
            zrt, w = compile_(f"one_m{micros}", 1, micro, micros, None)
            refs[micros] = train(f"one_m{micros}", zrt, w, 1, 0)
        ref_rows, ref_w = refs[micros]
        tag = f"s{stage}_n{ranks}_k{accum}" + (f"_b{bucket}" if bucket else "") + \
            ("_ds" if ds_defaults else "")
        zrt, w = compile_(tag, ranks, micro, accum, stage, bucket, ds_defaults)
        got = [train(tag, zrt, w, ranks, r) for r in (0, 1)]
        bad = []
        (rows_a, w_a), (rows_b, w_b) = got
        if [r["loss"] for r in rows_a] != [r["loss"] for r in rows_b] or \
                any(w_a[k].tobytes() != w_b[k].tobytes() for k in w_a):
            bad.append("not bit-identical run to run")
        lrel, grel, gaps = step_gaps(a, rows_a, ref_rows)
        bad += gaps
        if set(w_a) != set(ref_w):
            bad.append("parameter set")
        werr = 0.0
        for k in ref_w:
            if k in w_a:
                d = np.abs(w_a[k].astype(np.float64) - ref_w[k])
                tol = a.dp_w_rtol * np.abs(ref_w[k]) + a.dp_w_atol
                werr = max(werr, float(np.max(d / tol)) if d.size else 0.0)
        if not werr <= 1:
            bad.append(f"weights error/tolerance {werr:.3g}")
        # The optimizer state, gathered from the ranks' shards by --save-optimizer,
        # against the 1-rank run's; atol 1e-5 x the largest element of that kind of
        # state (exp_avg, exp_avg_sq) over all parameters: moments of gradients at
        # float32 noise level (the attention key bias, whose true gradient is 0)
        # differ in absolute terms only.
        opt_got = load_file(str(work / f"opt_{tag}_0.safetensors"))
        opt_want = load_file(str(work / f"opt_one_m{micros}_0.safetensors"))
        serr = 0.0
        scale = {}
        for k, v in opt_want.items():
            if v.dtype.kind == "f" and v.size:
                kind = k.rsplit(".", 1)[-1]
                scale[kind] = max(scale.get(kind, 0.0), float(np.max(np.abs(v))))
        if set(opt_got) != set(opt_want):
            bad.append(f"optimizer state names {sorted(set(opt_got) ^ set(opt_want))}")
        for k in opt_want:
            if k in opt_got and opt_want[k].dtype.kind == "f" and opt_want[k].size:
                want_k = opt_want[k].astype(np.float64)
                d = np.abs(opt_got[k].astype(np.float64) - want_k)
                tol = a.dp_w_rtol * np.abs(want_k) + 1e-5 * scale[k.rsplit(".", 1)[-1]] + 1e-30
                serr = max(serr, float(np.max(d / tol)))
            elif k in opt_got and not np.array_equal(opt_got[k], opt_want[k]):
                bad.append(f"optimizer {k} differs")
        if not serr <= 1:
            bad.append(f"optimizer state error/tolerance {serr:.3g}")
        # Overlap (stages 2 and 3), measured and reported, not asserted (a timing):
        # gradient reduce-scatters on the communication stream running while a later
        # backward kernel runs on the compute stream (the trace's last step). That
        # the program lets them overlap (no compute wait on a reduce-scatter before
        # the optimizer) is lit-tested: test/Transforms/Lowering/zero-lower-to-runtime-training-overlap.mlir.
        overlap = None
        if stage in (2, 3) and ranks > 1:
            trace = json.loads((work / f"trace_{tag}.json").read_text())
            events = trace["traceEvents"] if isinstance(trace, dict) else trace
            overlap = 0
            for pid in range(ranks):
                mine = [e for e in events if e.get("pid") == pid and e.get("ph") == "X"]
                kernels = [e for e in mine if e.get("cat") == "kernel"]
                hits = sum(1 for rs in mine if rs.get("name") == "ReduceScatter"
                           and any(k["args"]["instruction"] > rs["args"]["instruction"]
                                   and k["ts"] < rs["ts"] + rs["dur"]
                                   and rs["ts"] < k["ts"] + k["dur"] for k in kernels))
                overlap += hits
        # Bytes per rank, measured by the runtime, against the formulas from the
        # trained parameters' sizes (padding to a multiple of N included).
        report = json.loads((work / f"report_{tag}_0.json").read_text())
        sizes = [int(np.prod(v.shape)) for v in ref_w.values()]
        padded = [-(-n // ranks) * ranks for n in sizes]
        init = load_file(str(w))
        want_weights = sum(v.nbytes for v in init.values())
        gather_range = None
        if stage == 0:
            want_sent = {"AllReduce": sum(2 * (ranks - 1) * 4 * n // ranks for n in sizes)}
            want_state = 8 * sum(sizes)
        elif stage == 3:
            # Parameters are gathered for forward and again for backward uses, in every
            # micro-batch: between Psi and 2 Psi (N-1)/N of every weight (padded) per
            # micro-batch, the paper's 3 Psi with the gradients' reduce-scatter. Each
            # rank holds its shards only, and the buffers (Llama's inv_freq) whole.
            want_sent = {"ReduceScatter": sum(4 * p // ranks * (ranks - 1) for p in padded),
                         "AllReduce": 2 * (ranks - 1) * 4 // ranks}
            buffers = buffer_names(Path(a.models) / f"{name}_loss.onnx")
            shard_bytes = [v.itemsize * (-(-v.size // ranks)) for k, v in init.items()
                           if k not in buffers]
            one = sum(b * (ranks - 1) for b in shard_bytes)
            gather_range = (one * accum, 2 * one * accum)
            want_state = 8 * sum(p // ranks for p in padded)
            want_weights = sum(shard_bytes) + sum(v.nbytes for k, v in init.items()
                                                  if k in buffers)
        else:
            # Stage 2 reduce-scatters every micro-step (DeepSpeed), stage 1 once.
            scatters = accum if stage == 2 else 1
            want_sent = {"ReduceScatter": scatters * sum(4 * p // ranks * (ranks - 1)
                                                         for p in padded),
                         "AllGather": sum(4 * p // ranks * (ranks - 1) for p in padded),
                         "AllReduce": 2 * (ranks - 1) * 4 // ranks}
            want_state = 8 * sum(p // ranks for p in padded)
        # Every weight the program reads (trained, frozen, buffers), the state, the
        # step counter.
        want_resident = want_weights + want_state + 8
        measured_gather = None
        # DeepSpeed's stage-3 defaults keep small parameters whole (persistence
        # threshold): the formulas above assume every parameter partitioned.
        for rk in ([] if ds_defaults else report["ranks"]):
            got_sent = {k: v for k, v in rk["bytes_sent"].items() if v}
            per_step = {k: v * steps for k, v in want_sent.items() if v}
            if gather_range:
                gathered = got_sent.pop("AllGather", 0)
                lo, hi = gather_range[0] * steps, gather_range[1] * steps
                if not lo <= gathered <= hi:
                    bad.append(f"rank {rk['rank']} all-gathered {gathered} bytes, outside "
                               f"[{lo}, {hi}] (once or twice every shard, {steps} steps)")
                measured_gather = gathered // steps
            if got_sent != per_step:
                bad.append(f"rank {rk['rank']} sent {got_sent}, formula {per_step} "
                           f"({steps} steps)")
            if rk["param_bytes_resident"] != want_resident:
                bad.append(f"rank {rk['rank']} holds {rk['param_bytes_resident']} bytes of "
                           f"parameters + optimizer state, formula {want_resident}")
        log(f"  {'FAIL' if bad else 'ok  '} stage {stage} np {ranks} accumulation {accum} "
            + (f"reduce_bucket_size {bucket} " if bucket else "") +
            f"(micro-batch {micro}) vs 1 rank accumulation {micros}: loss rel {lrel:.2g}, "
            f"grad norm rel {grel:.2g}, weights error/tolerance {werr:.3g}, optimizer state "
            f"{serr:.3g} (rtol "
            f"{a.dp_w_rtol:g}, atol {a.dp_w_atol:g}); run to run bit-identical; bytes sent "
            f"per rank and step {want_sent}"
            + (f" + AllGather {measured_gather} (measured; in [{gather_range[0]}, "
               f"{gather_range[1]}])" if gather_range else "")
            + f", resident parameters + state {want_resident}"
            + (f"; reduce-scatters overlapping later backward kernels: {overlap}"
               if overlap is not None else "")
            + (f"   {'; '.join(bad)}" if bad else ""))
        failures += [f"{tag}: {b}" for b in bad]
    return failures


def deepspeed_train_schedule(micro_batches, stages, stage_id):
    """The order of work on `stage_id` in DeepSpeed's TrainSchedule (1F1B), as its
    _step_to_micro_batch walks 2 (M + S - 1) steps: forwards on steps of the stage's
    parity, backwards on the others, micro-batch ids shifted by the stage."""
    out = []
    for step in range(2 * (micro_batches + stages - 1)):
        even_step, even_stage = step % 2 == 0, stage_id % 2 == 0
        if even_step and even_stage:
            mb, fwd = step // 2 - stage_id // 2, True
        elif not even_step and not even_stage:
            mb, fwd = (step - 1) // 2 - stage_id // 2, True
        elif even_step:
            mb, fwd = step // 2 - stages + (stage_id + 1) // 2, False
        else:
            mb, fwd = (step - 1) // 2 - stages + 1 + stage_id // 2, False
        if 0 <= mb < micro_batches:
            out.append(("F" if fwd else "B") + str(mb))
    return out


def mode_pp(a, tools, name, work):
    """Training through pipeline stages equals the 1-rank training of the same global
    batch. Each configuration SCHEDULE:STAGES:M (schedule gpipe or 1f1b, M
    micro-batches = gradient_accumulation_steps) compiles the stored reference's
    optimizer settings (AdamW, clipping, WarmupLR) with --zero-pipeline "pp=STAGES
    micro-batches=M schedule=SCHEDULE", trains --pp-steps steps of its data under
    mpirun -np STAGES and is compared with the 1-rank run over the same micro-batches
    (accumulation M): losses and grad norms rtol --dp-loss-rtol, weights and optimizer
    state rtol --dp-w-rtol + atol --dp-w-atol. With :DP:ZERO (pp x dp, DeepSpeed's
    pipe-major topology: stage s on ranks [s*DP, (s+1)*DP)) the ZeRO stage runs inside
    each stage's replicas and the 1-rank run accumulates all DP x M micro-batches. Both schedules backpropagate the
    micro-batches in order and sum a tied parameter's gradient once, so the run is
    expected to be bit-identical to the 1-rank one; that is reported, not required.
    SCHEDULE/KEY=VALUE adds a --zero-pipeline option: tied-grads=step (DeepSpeed's
    reduction of tied gradients: each stage accumulates its part, the parts are
    summed once per step) rounds that sum differently: within the tolerances, not
    bit-identical; prefetch=N moves each stage's gathers ahead of its compute.
    A tied parameter's copies (GPT-2's wte / lm_head on the first and last stage) are
    compared by zero-run --save itself, which fails when the stages' copies differ.
    Memory, from the runtime's own counters (--report-json: peak live bytes of the
    activations arena per rank), at --pp-memory-scale times the batch and sequence
    (where activations set the peak): for every S and M >= S with both schedules
    given, 1F1B's peak on stage s is below GPipe's where S - s < M (1F1B keeps S - s
    micro-batches in flight there, GPipe M) and never above it. A stage marked
    --pp-memory-xfail S:M:STAGE is a known failure of that comparison: reported XFAIL
    where it fails, a failure of the run where it holds (XPASS) or was not run."""
    stored = read_train_ref(a.models, name)
    cfg0, data = stored["config"], stored["data"]
    steps = min(a.pp_steps, stored["steps"])
    rows = next(iter(data.values())).shape[1]
    data_path = work / "batches.safetensors"
    save_file({k: np.ascontiguousarray(v) for k, v in data.items()}, str(data_path))
    log(f"== train-pp {name}: {steps} steps of a global batch of {rows} rows, "
        f"configurations {a.pp_configs}")

    def compile_(tag, micro, accum, zopts, zero_stage=None):
        cfg = {k: v for k, v in cfg0.items() if k not in ("train_batch_size",
               "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")}
        cfg.update(train_batch_size=rows, train_micro_batch_size_per_gpu=micro,
                   gradient_accumulation_steps=accum)
        if zero_stage is not None:
            cfg["zero_optimization"] = {"stage": zero_stage}
            if zero_stage == 3:  # every parameter partitioned (as --dp does)
                cfg["zero_optimization"].update(stage3_param_persistence_threshold=0,
                                                stage3_max_reuse_distance=0)
        cp = work / f"ds_{tag}.json"
        cp.write_text(json.dumps(cfg, indent=1) + "\n")
        shapes = {k: (micro,) + v.shape[2:] for k, v in data.items()}
        zrt, w = work / f"{tag}.zrt", work / f"init_{tag}.safetensors"
        extra = ["--config", str(cp)] + (["--zero-pipeline", zopts] if zopts else [])
        tools.compile(Path(a.models) / f"{name}_loss.onnx", shapes, extra, zrt, w)
        return zrt, w

    def train(tag, zrt, weights, ranks):
        lp, sp = work / f"log_{tag}.json", work / f"final_{tag}.safetensors"
        rp = work / f"report_{tag}.json"
        cmd = [tools.zero_run, str(zrt), "--weights", str(weights), "--data", str(data_path),
               "--steps", str(steps), "--log-json", str(lp), "--save", str(sp),
               "--report-json", str(rp),
               "--save-optimizer", str(work / f"opt_{tag}.safetensors")]
        if ranks > 1:
            cmd = mpi.mpirun(ranks, cmd + ["--trace", str(work / f"trace_{tag}.json")])
        run(cmd, "zero-run")
        if ranks > 1:
            trace = json.loads((work / f"trace_{tag}.json").read_text())
            events = trace["traceEvents"] if isinstance(trace, dict) else trace
            schedules[tag] = {r: [e["name"] for e in events if e.get("cat") == "schedule"
                                  and e["pid"] == r and e["name"][0] in "FB"]
                              for r in range(ranks)}
        report = json.loads(rp.read_text())
        ranks = sorted(report["ranks"], key=lambda r: r["rank"])
        if len(ranks) > 1:
            bubbles[tag] = (ranks, schedule_bubbles(events, [r["wall_time_s"] for r in ranks]))
        peaks = [next(x["peak_live_bytes"] for x in r["arenas"] if x["name"] == "activations")
                 for r in ranks]
        resident[tag] = [r["param_bytes_resident"] for r in ranks]
        # A stage's mean point-to-point message: what one send still in flight
        # keeps live (how long depends on the communication stream's timing).
        message[tag] = [r["bytes_sent"]["Send"] // max(1, r["collective_calls"]["Send"])
                        for r in ranks]
        return read_log(lp, steps), load_file(str(sp)), \
            load_file(str(work / f"opt_{tag}.safetensors")), peaks

    def schedule_bubbles(events, walls):
        """Per rank, the schedule's bubble re-derived from the trace and the step's
        wall time (walls[r], the report's wall_time_s): of the step less the
        compute-stream instructions of its other steps (prologue, optimizer;
        receives there excepted: they wait for another stage), the fraction with no
        kernel of a forward / backward step (F<k>, B<k>)."""
        out = {}
        for r, wall in enumerate(walls):
            compute = next(e["tid"] for e in events if e.get("ph") == "M" and e["pid"] == r
                           and e["name"] == "thread_name" and e["args"]["name"] == "compute")
            busy = outside = 0.0
            scheduled_any = False
            for e in events:
                if e["pid"] != r or e.get("ph") != "X" or e["tid"] != compute:
                    continue
                step = e.get("args", {}).get("step", "")
                if len(step) > 1 and step[0] in "FB" and step[1].isdigit():
                    scheduled_any = True
                    busy += e["dur"] if e["cat"] == "kernel" else 0.0
                elif step and e["name"] != "Recv":
                    outside += e["dur"]
            span = wall * 1e6 - outside
            out[r] = 1 - busy / span if scheduled_any and span > 0 else None
        return out

    failures, refs, peaks, resident, zero_runs, schedules = [], {}, {}, {}, {}, {}
    message = {}
    bubbles = {}
    for spec in a.pp_configs.split(","):
        fields = spec.split(":")
        # SCHEDULE/KEY=VALUE/...: more --zero-pipeline options.
        schedule, *extra = fields[0].split("/")
        tied = next((e.split("=", 1)[1] for e in extra if e.startswith("tied-grads=")), "")
        stages, m = int(fields[1]), int(fields[2])
        dp = int(fields[3]) if len(fields) > 3 else 1
        zero_stage = int(fields[4]) if len(fields) > 4 else None
        micros = m * dp  # the 1-rank run's accumulation: every replica's micro-batches
        if rows % micros:
            raise Fail(f"--pp-configs {spec}: the stored global batch of {rows} rows does "
                       f"not split into {micros} micro-batches; give configurations it "
                       "splits into")
        micro = rows // micros
        if micros not in refs:
            zrt, w = compile_(f"one_m{micros}", micro, micros, "")
            refs[micros] = train(f"one_m{micros}", zrt, w, 1)
        ref_rows, ref_w, ref_opt, _ = refs[micros]
        tag = f"{schedule}_s{stages}_m{m}" + (f"_dp{dp}_z{zero_stage}" if dp > 1 else "") \
            + "".join("_" + e.replace("=", "") for e in extra)
        zrt, w = compile_(tag, micro, m, f"pp={stages} micro-batches={m} schedule={schedule}"
                          + "".join(" " + e for e in extra), zero_stage)
        got_rows, got_w, got_opt, got_peaks = train(tag, zrt, w, stages * dp)
        if dp == 1 and not extra:
            peaks[(schedule, stages, m)] = got_peaks
        elif not extra:
            zero_runs[(stages, m, dp, zero_stage)] = tag
        bad = []
        # The order each rank ran its steps in (zero-run --trace's schedule track)
        # against DeepSpeed's TrainSchedule, or GPipe's all-forwards-then-backwards.
        for r, got_order in schedules[tag].items():
            st = r // dp
            want = deepspeed_train_schedule(m, stages, st) if schedule == "1f1b" else \
                [f"F{k}" for k in range(m)] + [f"B{k}" for k in range(m)]
            if got_order != want:
                bad.append(f"rank {r} ran {' '.join(got_order)}, the {schedule} order is "
                           f"{' '.join(want)}")
        # zero-run's report per rank: its stage, the predicted bubble
        # (S-1)/(M+S-1), and the schedule's measured bubble, which must be the
        # one the trace shows.
        rank_reports, derived = bubbles[tag]
        for rk in rank_reports:
            r = rk["rank"]
            want_pred = (stages - 1) / (m + stages - 1)
            if rk.get("pipeline_stage") != r // dp:
                bad.append(f"rank {r}: report says stage {rk.get('pipeline_stage')}, "
                           f"expected {r // dp}")
            if abs(rk.get("pipeline_predicted_bubble", -1) - want_pred) > 1e-12:
                bad.append(f"rank {r}: predicted bubble {rk.get('pipeline_predicted_bubble')}"
                           f", (S-1)/(M+S-1) = {want_pred}")
            got_b = rk.get("pipeline_schedule_bubble")
            if got_b is None or derived[r] is None or abs(got_b - derived[r]) > 1e-3:
                bad.append(f"rank {r}: schedule bubble {got_b}, the trace shows {derived[r]}")
            # Every step's bubble, the last one the trace's.
            per_step = rk.get("iteration_schedule_bubble", [])
            if len(per_step) != steps or (per_step and per_step[-1] != got_b):
                bad.append(f"rank {r}: per-step schedule bubbles {per_step}, expected "
                           f"{steps} ending in {got_b}")
        lrel, grel, gaps = step_gaps(a, got_rows, ref_rows)
        bad += gaps
        if set(got_w) != set(ref_w):
            bad.append(f"parameter set {sorted(set(got_w) ^ set(ref_w))}")
        if set(got_opt) != set(ref_opt):
            bad.append(f"optimizer state names {sorted(set(got_opt) ^ set(ref_opt))}")
        werr, identical = 0.0, True
        for want, got in ((ref_w, got_w), (ref_opt, got_opt)):
            for k in want:
                if k not in got:
                    continue
                identical &= want[k].tobytes() == got[k].tobytes()
                if want[k].dtype.kind != "f" or not want[k].size:
                    if not np.array_equal(want[k], got[k]):
                        bad.append(f"{k} differs")
                    continue
                d = np.abs(got[k].astype(np.float64) - want[k])
                tol = a.dp_w_rtol * np.abs(want[k]) + a.dp_w_atol
                werr = max(werr, float(np.max(d / tol)))
        if not werr <= 1:
            bad.append(f"weights/optimizer state error/tolerance {werr:.3g}")
        identical &= all(x["loss"] == y["loss"] for x, y in zip(got_rows, ref_rows))
        log(f"  {'FAIL' if bad else 'ok  '} {schedule} pp={stages} micro-batches={m} "
            + "".join(e + " " for e in extra)
            + (f"x dp={dp} ZeRO-{zero_stage} " if dp > 1 else "") +
            f"(micro-batch {micro}) vs 1 rank accumulation {micros}: loss rel {lrel:.2g}, grad "
            f"norm rel {grel:.2g}, weights/state error/tolerance {werr:.3g}; "
            f"{'bit-identical' if identical else 'not bit-identical'}; peak live activation "
            f"bytes per stage {got_peaks}" + (f"   {'; '.join(bad)}" if bad else ""))
        failures += [f"{tag}: {b}" for b in bad]
    # ZeRO inside the stages, from the runtime's resident bytes per rank against the
    # paper's per-rank formulas for the stage's parameters Psi_s (AdamW: 2 Psi_s of
    # state), Psi_s read off the replicated run (ZeRO-0 holds 3 Psi_s, + 8 bytes of
    # step counter on the first stage): ZeRO-1/2 Psi_s (1 + 2/N), ZeRO-3 3 Psi_s / N;
    # within 1% (the padding of each tensor to a multiple of N).
    for (stages, m, dp, z), tag in zero_runs.items():
        base = zero_runs.get((stages, m, dp, 0))
        if z == 0 or base is None:
            continue
        for r, (got, full) in enumerate(zip(resident[tag], resident[base])):
            psi = (full - (8 if r < dp else 0)) / 3
            want = psi * (1 + 2 / dp) if z in (1, 2) else 3 * psi / dp
            ok = abs(got - want) <= 0.01 * want + 8
            log(f"  {'ok  ' if ok else 'FAIL'} pp={stages} x dp={dp} ZeRO-{z} rank {r}: "
                f"{got} bytes of parameters + optimizer state, formula {want:.0f} "
                f"(Psi_s = {psi:.0f} bytes)")
            if not ok:
                failures.append(f"{tag} rank {r}: resident {got}, formula {want:.0f}")
    # Memory at a size where activations, not the gradients and optimizer step
    # both schedules share, set the peak: the stored batches tiled --pp-memory-scale
    # times along the batch and the sequence, one step of each schedule.
    scale = a.pp_memory_scale
    xfail = {tuple(int(x) for x in mark.split(":")) for mark in a.pp_memory_xfail}
    xfail_seen = set()
    # (a sequence: the last dim of integer [step, batch, seq] inputs, token ids and
    # labels; feature dims stay as the model fixes them)
    big = {k: np.ascontiguousarray(np.tile(v[:1], (1, scale) + (
        (scale,) if v.ndim == 3 and v.dtype.kind in "iu" else (1,) * (v.ndim - 2))))
           for k, v in data.items()}
    data_path = work / "big.safetensors"
    save_file(big, str(data_path))
    rows = rows * scale
    steps = 1
    for (schedule, stages, m) in list(peaks):
        if schedule != "1f1b" or m < stages or ("gpipe", stages, m) not in peaks:
            continue
        got, weights = {}, {}
        for sch in ("gpipe", "1f1b") + (("1f1b-ckpt",) if a.pp_ckpt == "on" else ()):
            micro = rows // m
            data = big
            tag = f"mem_{sch}_s{stages}_m{m}"
            ckpt = " activation-checkpoint-interval=1" if sch.endswith("ckpt") else ""
            zrt, w = compile_(tag, micro, m, f"pp={stages} micro-batches={m} "
                              f"schedule={sch.split('-')[0]}{ckpt}")
            _, weights[sch], _, got[sch] = train(tag, zrt, w, stages)
        # Activation checkpointing (every layer recomputed in backward): the same
        # bits, and a lower activation peak on the stage that needs the most (a
        # stage holding only an embedding has nothing to drop).
        if "1f1b-ckpt" not in got:
            continue
        pc = got["1f1b-ckpt"]
        same = all(weights["1f1b"][k].tobytes() == weights["1f1b-ckpt"][k].tobytes()
                   for k in weights["1f1b"])
        lower_ck = same and max(pc) < max(got["1f1b"])
        log(f"  {'ok  ' if lower_ck else 'FAIL'} pp={stages} M={m} 1F1B with "
            f"activation-checkpoint-interval=1: weights {'bit-identical' if same else 'DIFFER'}"
            f", peak live activation bytes per stage {pc} vs {got['1f1b']} without "
            f"(largest {max(pc)} vs {max(got['1f1b'])})")
        if not lower_ck:
            failures.append(f"pp={stages} M={m}: activation checkpointing: weights "
                            f"{'same' if same else 'differ'}, peaks {pc} vs {got['1f1b']}")
        # 1F1B keeps at most S - s micro-batches in flight on stage s, GPipe all M:
        # below GPipe's where S - s < M. Where S - s >= M both keep all M, and the
        # measured peaks may differ by a send still in flight (the communication
        # stream's timing): never above GPipe's by more than one message.
        p1, pg = got["1f1b"], got["gpipe"]
        slack = message[f"mem_1f1b_s{stages}_m{m}"]
        held = [x < y if stages - st < m else x <= y + slack[st]
                for st, (x, y) in enumerate(zip(p1, pg))]
        # Stages marked --pp-memory-xfail: their failure is reported XFAIL, their
        # passing fails (XPASS: the mark is stale).
        known = {st for (s_, m_, st) in xfail if (s_, m_) == (stages, m)}
        xfail_seen.update((stages, m, st) for st in known)
        lower = all(ok for st, ok in enumerate(held) if st not in known)
        log(f"  {'ok  ' if lower else 'FAIL'} pp={stages} M={m}, micro-batch "
            f"{rows // m}x{next(iter(big.values())).shape[2:]}: 1F1B peak live activation "
            f"bytes per stage {p1} vs GPipe's {pg} (below where S - stage < M, else at most)"
            + (f"; stages {sorted(known)} marked expected to fail" if known else ""))
        if not lower:
            failures.append(f"pp={stages} M={m}: 1F1B peak {p1} not below GPipe's {pg}")
        for st in sorted(known):
            if st >= len(held):
                failures.append(f"--pp-memory-xfail {stages}:{m}:{st}: pp={stages} has no "
                                f"stage {st}")
            elif held[st]:
                log(f"  XPASS pp={stages} M={m} stage {st}: 1F1B peak {p1[st]} vs GPipe's "
                    f"{pg[st]} holds, but is marked expected to fail (--pp-memory-xfail)")
                failures.append(f"pp={stages} M={m} stage {st}: XPASS (1F1B peak {p1[st]}, "
                                f"GPipe's {pg[st]}): remove its --pp-memory-xfail mark")
            else:
                log(f"  XFAIL pp={stages} M={m} stage {st}: 1F1B peak {p1[st]} not below "
                    f"GPipe's {pg[st]} (expected to fail: --pp-memory-xfail)")
    for mark in sorted(xfail - xfail_seen):
        failures.append(f"--pp-memory-xfail {':'.join(map(str, mark))}: no 1F1B/GPipe memory "
                        "comparison at that pp and M was run")
    return failures


def mode_zeropp(a, tools, name, work):
    """ZeRO++ in training, stage 3 over 4 ranks (2 per simulated node), on the stored
    reference's data tiled to --zeropp-steps (50) steps:
      * qwZ int8 + qgZ int4 (zero_quantized_weights / zero_quantized_gradients, blocks
        of 64 so the fixtures have many): every loss after step 10 within 2% of the
        fp32 run's (the same program without quantization); the largest relative loss
        difference per phase is printed. Bytes per rank and step, measured by the
        runtime: the world all-gathers move (N-1)(s + 4 ceil(s/64)) per shard gather
        and the gradients' all-to-alls (N-1)(s/2 + 4 ceil(s/64)) per parameter (one
        level: every rank's slice goes to its owner once), printed next to fp32.
      * hpZ (zero_hpz_partition_size 2): losses and weights bit-identical to hpZ off;
        the backward re-gathers went over the group only: the world group carries one
        gather of every shard per micro-batch, the hpz group (K-1)/K of the padded
        bytes the run without hpZ re-gathered over the world.
      * qgZ's hierarchical form (hpZ groups as nodes) within 2% of fp32 too."""
    stored = read_train_ref(a.models, name)
    cfg0, data = stored["config"], stored["data"]
    steps = a.zeropp_steps
    reps = -(-steps // stored["steps"])
    data = {k: np.concatenate([v] * reps)[:steps] for k, v in data.items()}
    rows = next(iter(data.values())).shape[1]
    ranks, group, block = 4, 2, 64
    if rows % ranks:
        raise Fail(f"{rows} rows per step do not split over {ranks} ranks: nothing "
                   "would be checked")
    data_path = work / "batches.safetensors"
    save_file({k: np.ascontiguousarray(v) for k, v in data.items()}, str(data_path))
    log(f"== train-zeropp {name}: {steps} steps (the stored {stored['steps']} batches "
        f"repeated), stage 3 over {ranks} ranks, micro-batch {rows // ranks}")

    def train(tag, zopts, accum=1, stages=1):
        cfg = {k: v for k, v in cfg0.items() if k not in (
            "train_batch_size", "train_micro_batch_size_per_gpu",
            "gradient_accumulation_steps")}
        micro = rows // ranks // accum
        cfg.update(train_batch_size=rows, train_micro_batch_size_per_gpu=micro,
                   gradient_accumulation_steps=accum)
        cfg["zero_optimization"] = dict(stage=3, stage3_param_persistence_threshold=0,
                                        stage3_max_reuse_distance=0, **zopts)
        cp = work / f"ds_{tag}.json"
        cp.write_text(json.dumps(cfg, indent=1) + "\n")
        shapes = {k: (micro,) + v.shape[2:] for k, v in data.items()}
        zrt, w = work / f"{tag}.zrt", work / f"init_{tag}.safetensors"
        pipeline = f"quant-block={block}" + (f" pp={stages}" if stages > 1 else "")
        tools.compile(Path(a.models) / f"{name}_loss.onnx", shapes,
                      ["--config", str(cp), f"--zero-pipeline={pipeline}"], zrt, w)
        lp, sp = work / f"log_{tag}.json", work / f"final_{tag}.safetensors"
        rp = work / f"report_{tag}.json"
        run(mpi.mpirun(ranks * stages, [tools.zero_run, str(zrt), "--weights", str(w), "--data",
                                        str(data_path), "--steps", str(steps), "--log-json",
                                        str(lp), "--save", str(sp), "--report-json", str(rp)]),
            "zero-run")
        return (read_log(lp, steps), load_file(str(sp)),
                json.loads(rp.read_text())["ranks"], load_file(str(w)))

    failures = []
    fp_rows, fp_w, fp_rep, init = train("fp32", {})
    # The parameters' shards; buffers (Llama's inv_freq) stay whole, never gathered.
    buffers = buffer_names(Path(a.models) / f"{name}_loss.onnx")
    shard = [-(-v.size // ranks) for k, v in init.items() if k not in buffers]

    def qbytes(s, bits):
        return (s if bits == 8 else (s + 1) // 2) + 4 * (-(-s // block))

    def loss_gap(rows_q):
        rel = [abs(x["loss"] - y["loss"]) / abs(y["loss"]) for x, y in zip(rows_q, fp_rows)]
        return max(rel[:10]), max(rel[10:])

    # qwZ + qgZ, one level.
    q_rows, _, q_rep, _ = train("qwz_qgz", dict(zero_quantized_weights=True,
                                                zero_quantized_gradients=True))
    early, late = loss_gap(q_rows)
    if not late <= 0.02:
        failures.append(f"qwZ+qgZ loss differs from fp32 by {late:.3g} after step 10")
    fp_gather = fp_rep[0]["bytes_sent"].get("AllGather", 0) // steps
    one = sum((ranks - 1) * 4 * s for s in shard)  # every shard gathered once
    trained = [-(-fp_w[k].size // ranks) for k in fp_w]
    # qgZ: each rank's slice for every other rank crosses once, as int4 + scales
    # (one level; the hierarchy sends (K-1)G + (G-1) = N-1 slices too).
    want_a2a = sum((ranks - 1) * qbytes(s, 4) for s in trained) * steps
    q_gather = q_rep[0]["bytes_sent"].get("AllGather", 0)
    for r in q_rep:
        got_a = r["bytes_sent"].get("AllToAll", 0)
        if got_a != want_a2a or r["bytes_sent"].get("ReduceScatter", 0):
            failures.append(f"rank {r['rank']} qwZ+qgZ sent AllToAll {got_a} / ReduceScatter "
                            f"{r['bytes_sent'].get('ReduceScatter', 0)}; formulas {want_a2a} / 0")
    fp_rs = fp_rep[0]["bytes_sent"].get("ReduceScatter", 0)
    log(f"  qwZ int8 + qgZ int4: loss within {early:.3g} of fp32 in steps 1-10, "
        f"{late:.3g} after (bound 0.02); bytes per rank: all-gather {q_gather} "
        f"(fp32 {fp_gather * steps}, {q_gather / (fp_gather * steps):.3f}x), gradients "
        f"{want_a2a} as the formula (fp32 reduce-scatter {fp_rs}, "
        f"{want_a2a / max(fp_rs, 1):.3f}x)")

    # hpZ: identical results, re-gathers inside the group.
    h_rows, h_w, h_rep, _ = train("hpz", dict(zero_hpz_partition_size=group))
    if [r["loss"] for r in h_rows] != [r["loss"] for r in fp_rows] or \
            any(h_w[k].tobytes() != fp_w[k].tobytes() for k in fp_w):
        failures.append("hpZ losses/weights are not bit-identical to hpZ off")
    # Without hpZ every re-gather went over the world: what it sent beyond one
    # gather of every shard is (N-1)/N of the re-gathered padded bytes.
    regathered = (fp_gather - one) * ranks // (ranks - 1)
    want_hpz = regathered * (group - 1) // group * steps
    for r_h in h_rep:
        by_group = r_h.get("bytes_sent_by_group", {})
        world_gather = r_h["bytes_sent"].get("AllGather", 0) - by_group.get("hpz", 0)
        # hpZ has work only where the backward re-gathers (NO_TRAINING_REGATHERS
        # names the fixtures where it does not, and why): anything else without
        # re-gathers fails, as does a named one that now re-gathers.
        none_expected = name in NO_TRAINING_REGATHERS
        if (regathered == 0) != none_expected or regathered < 0 or \
                by_group.get("hpz", 0) != want_hpz or world_gather != one * steps \
                or by_group.get("world", 0) + by_group.get("hpz", 0) != \
                sum(r_h["bytes_sent"].values()):
            failures.append(f"rank {r_h['rank']} hpZ bytes by group {by_group}, by kind "
                            f"{r_h['bytes_sent']}; expected hpz {want_hpz} and world "
                            f"all-gathers {one * steps} (re-gathered {regathered} padded "
                            f"bytes per step; "
                            + (f"none expected: {NO_TRAINING_REGATHERS[name]}; if it now "
                               "re-gathers, drop it from NO_TRAINING_REGATHERS)"
                               if none_expected else "some expected)"))
    if name in NO_TRAINING_REGATHERS:
        log(f"  hpZ groups of {group}: losses and weights bit-identical to hpZ off; no "
            f"re-gathers to keep in the group ({NO_TRAINING_REGATHERS[name]})")
    else:
        log(f"  hpZ groups of {group}: losses and weights bit-identical to hpZ off; world "
            f"all-gather {one} B/rank/step (each shard once), backward re-gathers "
            f"{want_hpz // steps} B/rank/step inside the group (were {fp_gather - one} "
            f"over the world)")

    # qgZ hierarchical (nodes of 2) with hpZ and qwZ: all of ZeRO++. The world
    # gathers are exactly one quantized gather of every shard per step (the
    # re-gathers stay inside the group, in fp32).
    a_rows, _, a_rep, _ = train("all", dict(zero_quantized_weights=True,
                                            zero_quantized_gradients=True,
                                            zero_hpz_partition_size=group))
    early, late = loss_gap(a_rows)
    if not late <= 0.02:
        failures.append(f"qwZ+hpZ+qgZ (hierarchical) loss differs from fp32 by {late:.3g} "
                        f"after step 10")
    want_q = sum((ranks - 1) * qbytes(s, 8) for s in shard) * steps
    for r in a_rep:
        by_group = r.get("bytes_sent_by_group", {})
        got_q = r["bytes_sent"].get("AllGather", 0) - by_group.get("hpz", 0)
        got_a = r["bytes_sent"].get("AllToAll", 0)
        if got_q != want_q or by_group.get("hpz", 0) != want_hpz or got_a != want_a2a:
            failures.append(f"rank {r['rank']} qwZ+hpZ+qgZ sent world all-gathers {got_q}, "
                            f"hpz {by_group.get('hpz')}, all-to-all {got_a}; formulas "
                            f"{want_q}, {want_hpz}, {want_a2a}")
    log(f"  qwZ + hpZ + hierarchical qgZ: loss within {early:.3g} of fp32 in steps 1-10, "
        f"{late:.3g} after; world all-gathers {want_q // steps} B/rank/step "
        f"((N-1)(s + 4 ceil(s/{block})) per shard: {want_q / (one * steps):.3f}x fp32), "
        f"in-group {want_hpz // steps}, all-to-alls {want_a2a // steps} as the formulas")

    if a.zeropp_pp:
        # All of ZeRO++ inside pipeline stages: pp=2 x dp=4 (8 ranks; stage s on
        # ranks [4s, 4s+4)), M micro-batches (the accumulation steps), the
        # DeepSpeed defaults' prefetch and buckets on each stage. The stages'
        # replicas quantize, re-gather and reduce exactly as the 4 ranks of the
        # unsplit step over the same micro-batches: losses and weights
        # bit-identical to it.
        micro = max(m for m in (1, 2) if rows % (ranks * m) == 0)
        zall = dict(zero_quantized_weights=True, zero_quantized_gradients=True,
                    zero_hpz_partition_size=group)
        if micro > 1:
            a_rows, a_w, _, _ = train(f"all_accum{micro}", zall, accum=micro)
        else:
            a_w = load_file(str(work / "final_all.safetensors"))
        p_rows, p_w, p_rep, _ = train("all_pp2", zall, accum=micro, stages=2)
        same = [r["loss"] for r in p_rows] == [r["loss"] for r in a_rows] and \
            all(p_w[k].tobytes() == a_w[k].tobytes() for k in a_w)
        if not same:
            gap = max(abs(x["loss"] - y["loss"]) for x, y in zip(p_rows, a_rows))
            failures.append(f"ZeRO++ at pp=2 x dp={ranks} (M={micro}) differs from the "
                            f"unsplit step over {ranks} ranks (largest loss gap {gap:.3g})")
        # Each stage's world gathers are its own parameters' (the report's
        # per-stage figure, as zero-run measured on every replica).
        for r in p_rep:
            by_group = r.get("bytes_sent_by_group", {})
            if not by_group.get("hpz", 0) or not by_group.get("dp", 0):
                failures.append(f"rank {r['rank']} at pp=2: bytes by group {by_group}; "
                                f"expected re-gathers inside hpz and gathers over dp")
        log(f"  qwZ + hpZ + hierarchical qgZ inside pp=2 x dp={ranks} stages (M={micro}, "
            f"{ranks * 2} ranks): losses and weights bit-identical to the unsplit step")
    return failures


def mode_ckpt(a, tools, name, work):
    """Checkpoints of a ZeRO-3 run: saved at step 5 and resumed to 10, bit-identical to
    the uninterrupted run; rank 0 killed while writing the step-10 checkpoint leaves the
    step-5 one loadable; a checkpoint saved at np 4 resumed at np 2 equals the np 2 run
    run with the same micro-batches (np 2 with accumulation 2: a micro-batch's loss is
    its own mean; losses rtol 1e-5, weights rtol 1e-4 + atol 1e-6); resuming without a
    checkpoint or past --steps is a clear error."""
    stored = read_train_ref(a.models, name)
    cfg0, data = stored["config"], stored["data"]
    rows = next(iter(data.values())).shape[1]
    steps, half = 10, 5
    data_path = work / "batches.safetensors"
    save_file({k: np.ascontiguousarray(v) for k, v in data.items()}, str(data_path))
    log(f"== train-ckpt {name}: ZeRO-3, {steps} steps, checkpoint at step {half}")

    def compile_(ranks, accum=1):
        cfg = {k: v for k, v in cfg0.items() if k not in ("train_batch_size",
               "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")}
        micro = rows // (ranks * accum)
        cfg.update(train_batch_size=rows, train_micro_batch_size_per_gpu=micro,
                   gradient_accumulation_steps=accum,
                   zero_optimization={"stage": 3, "stage3_param_persistence_threshold": 0,
                                      "stage3_max_reuse_distance": 0})
        cp = work / f"ds_n{ranks}_k{accum}.json"
        cp.write_text(json.dumps(cfg, indent=1) + "\n")
        shapes = {k: (micro,) + v.shape[2:] for k, v in data.items()}
        zrt, w = work / f"n{ranks}_k{accum}.zrt", work / f"init_n{ranks}_k{accum}.safetensors"
        tools.compile(Path(a.models) / f"{name}_loss.onnx", shapes, ["--config", str(cp)], zrt, w)
        return zrt, w

    def zrun(ranks, prog, tag, extra, env=None, expect_fail=False):
        zrt, w = prog
        lp, sp = work / f"log_{tag}.json", work / f"final_{tag}.safetensors"
        cmd = mpi.mpirun(ranks, [tools.zero_run, str(zrt), "--weights", str(w), "--data",
                                 str(data_path), "--log-json", str(lp), "--save", str(sp)] + extra)
        if expect_fail:
            log("  $ " + " ".join(_q(c) for c in cmd) + "   (expected to fail)")
            r = kit_tools.call(cmd, dict(ENV, **(env or {})), session=False)
            return r
        run(cmd, "zero-run")
        return read_log(lp, len(json.loads(lp.read_text()))), load_file(str(sp))

    failures = []
    two, four, two_k2 = compile_(2), compile_(4), compile_(2, 2)
    base_rows, base_w = zrun(2, two, "full", ["--steps", str(steps)])
    zrun(2, two, "first", ["--steps", str(half), "--save-dir", str(work / "ck2"),
                           "--save-every", str(half), "--save-optimizer",
                           str(work / "opt_first.safetensors")])
    # zero-ckpt consolidate: the ranks' pieces streamed into one file each, equal to
    # what --save / --save-optimizer wrote at the same step.
    zero_ckpt = str(Path(tools.zero_run).with_name("zero-ckpt"))
    run([zero_ckpt, "consolidate", str(work / "ck2"), "-o", str(work / "cons.safetensors"),
         "--optimizer", str(work / "cons_opt.safetensors")], "zero-ckpt")
    for got, want in (("cons.safetensors", "final_first.safetensors"),
                      ("cons_opt.safetensors", "opt_first.safetensors")):
        g, w_ = load_file(str(work / got)), load_file(str(work / want))
        same = set(g) == set(w_) and all(g[k].shape == w_[k].shape and
                                         g[k].tobytes() == w_[k].tobytes() for k in w_)
        log(f"  {'ok  ' if same else 'FAIL'} zero-ckpt consolidate -> {got}: {len(g)} tensors, "
            f"{'bit-identical to' if same else 'differs from'} {want}")
        if not same:
            failures.append(f"consolidate {got}")
    latest = (work / "ck2" / "latest").read_text().strip()
    if latest != f"step-{half:08d}":
        failures.append(f"latest is {latest!r}")
    # Rank 0 killed while writing the step-10 checkpoint's manifest.
    r = zrun(2, two, "killed", ["--steps", str(steps), "--resume", str(work / "ck2"),
                                "--save-dir", str(work / "ck2"), "--save-every", str(half)],
             env={"ZRT_FAULT_KILL_BEFORE_RENAME": "manifest.json"}, expect_fail=True)
    after = (work / "ck2" / "latest").read_text().strip()
    if r.returncode == 0 or after != f"step-{half:08d}" or (work / "ck2" / f"step-{steps:08d}").exists():
        failures.append(f"kill during save: exit {r.returncode}, latest {after!r}")
        log(f"  FAIL kill during save: exit {r.returncode}, latest {after!r}")
    else:
        log(f"  ok   rank 0 killed while saving step {steps}: latest still {after}")
    res_rows, res_w = zrun(2, two, "resumed", ["--steps", str(steps), "--resume", str(work / "ck2")])
    same = [x["loss"] for x in res_rows] == [x["loss"] for x in base_rows[half:]] and \
        set(res_w) == set(base_w) and all(res_w[k].tobytes() == base_w[k].tobytes() for k in base_w)
    log(f"  {'ok  ' if same else 'FAIL'} resumed at step {half + 1} (np 2): losses of steps "
        f"{half + 1}-{steps} and final weights bit-identical to the uninterrupted run")
    if not same:
        failures.append("resume not bit-identical")
    # Saved at np 4, resumed at np 2 (with the same micro-batches: accumulation 2).
    four_rows, four_w = zrun(4, four, "full4", ["--steps", str(steps)])
    zrun(4, four, "first4", ["--steps", str(half), "--save-dir", str(work / "ck4")])
    rs_rows, rs_w = zrun(2, two_k2, "resharded", ["--steps", str(steps), "--resume", str(work / "ck4")])
    lrel = max(abs(x["loss"] - y["loss"]) / abs(y["loss"]) for x, y in zip(rs_rows, four_rows[half:]))
    werr = max(float(np.max(np.abs(rs_w[k].astype(np.float64) - four_w[k]) /
                            (a.dp_w_rtol * np.abs(four_w[k]) + a.dp_w_atol))) for k in four_w)
    ok = lrel <= a.dp_loss_rtol and werr <= 1
    log(f"  {'ok  ' if ok else 'FAIL'} saved at np 4, resumed at np 2 (accumulation 2) vs the "
        f"np 4 run: loss rel {lrel:.2g}, "
        f"weights error/tolerance {werr:.3g}")
    if not ok:
        failures.append("resharded resume")
    if name == "gpt2":  # the fixture-independent memory bound, once
        failures += consolidate_memory(work, zero_ckpt)
    # Bad input.
    (work / "empty").mkdir(exist_ok=True)
    for tag, extra, want in (
            ("nockpt", ["--steps", str(steps), "--resume", str(work / "empty")], "no checkpoint"),
            ("past", ["--steps", str(half), "--resume", str(work / "ck2")],
             f"the checkpoint is at step {half}, --steps {half} asks for no more")):
        r = zrun(2, two, tag, extra, expect_fail=True)
        out = r.stdout + r.stderr
        if r.returncode == 0 or want not in out or (work / f"final_{tag}.safetensors").exists():
            failures.append(f"bad input {tag}")
            log(f"  FAIL {tag}: exit {r.returncode}, output {out[-500:]}")
        else:
            log(f"  ok   {tag}: exit {r.returncode}, '{want}'")
    return failures


def consolidate_memory(work, zero_ckpt, tensors=48, numel=1 << 20, ranks=2):
    """zero-ckpt consolidate's peak RSS on a checkpoint whose total (tensors x numel
    x 4 bytes, 192 MiB by default, in `ranks` pieces each) is far larger than its
    largest tensor (4 MiB): it must stay within the largest tensor plus 32 MiB (the
    streaming chunk is 16 MiB); the result must hold every tensor whole. The checkpoint is written here in zero-run's format
    (docs/training.md): rank files and manifest.json."""
    ck = work / "synthetic" / "step-00000001"
    ck.mkdir(parents=True, exist_ok=True)
    per = numel // ranks
    entries = []
    for r in range(ranks):
        save_file({f"t{i}": (np.arange(per, dtype=np.float32) + r * per + i)
                   for i in range(tensors)}, str(ck / f"model-rank-{r:05d}.safetensors"))
        save_file({}, str(ck / f"optimizer-rank-{r:05d}.safetensors"))
    for i in range(tensors):
        entries.append({"name": f"t{i}", "dtype": "F32", "shape": [numel], "kind": "model",
                        "pieces": [{"rank": r, "offset": r * per, "count": per}
                                   for r in range(ranks)]})
    (ck / "manifest.json").write_text(json.dumps({"format": "zero-checkpoint-2", "step": 1,
                                                  "world_size": ranks, "tensors": entries}))
    (work / "synthetic" / "latest").write_text("step-00000001\n")
    out = work / "synthetic_model.safetensors"
    # The peak is the kernel's VmHWM of the zero-ckpt process (its own address
    # space; a wait4 ru_maxrss would include this Python process's pages, which the
    # child carries until its exec).
    r = subprocess.run([zero_ckpt, "consolidate", str(work / "synthetic"), "-o", str(out)],
                       capture_output=True, text=True)
    m = re.search(r"peak RSS (\d+) KiB", r.stdout)
    peak = int(m.group(1)) * 1024 if m else 1 << 62
    total = tensors * numel * 4
    failures = []
    if r.returncode != 0 or not m:
        failures.append(f"zero-ckpt consolidate exited {r.returncode}: {r.stdout}{r.stderr}")
    else:
        from safetensors import safe_open
        with safe_open(str(out), "np") as f:
            ok = sorted(f.keys()) == sorted(f"t{i}" for i in range(tensors)) and all(
                np.array_equal(f.get_tensor(f"t{i}"), np.arange(numel, dtype=np.float32) + i)
                for i in (0, tensors // 2, tensors - 1))
        if not ok:
            failures.append("synthetic consolidation content")
        bound = numel * 4 + (32 << 20)
        if peak > bound:
            failures.append(f"zero-ckpt peak RSS {peak >> 20} MiB > the largest tensor + 32 MiB "
                            f"({bound >> 20} MiB) for a {total >> 20} MiB checkpoint")
    log(f"  {'ok  ' if not failures else 'FAIL'} zero-ckpt consolidate of a {total >> 20} MiB "
        f"checkpoint ({tensors} tensors of {numel * 4 >> 20} MiB in {ranks} pieces): peak RSS "
        f"{peak >> 20} MiB (bound: the largest tensor + 32 MiB)")
    out.unlink(missing_ok=True)
    shutil.rmtree(work / "synthetic", ignore_errors=True)
    return failures


def read_precision_ref(a, name, kind, work):
    """The stored PyTorch reference of 16-bit training, NAME_loss.KIND.ref.safetensors
    (train_reference.py --write-KIND-ref): its ds_config, its step.* arrays, and its
    batches written to work/batches.safetensors for zero-run --data."""
    from safetensors import safe_open
    path = Path(a.models) / f"{name}_loss.{kind}.ref.safetensors"
    if not path.exists():
        raise Fail(f"no {path.name}: the stored reference is missing "
                   f"(train_reference.py --write-{kind}-ref {name})")
    with safe_open(str(path), "np") as f:
        meta = dict(f.metadata() or {})
        data = {k[len("data."):]: f.get_tensor(k) for k in f.keys() if k.startswith("data.")}
        steps = {k[len("step."):]: f.get_tensor(k) for k in f.keys() if k.startswith("step.")}
    data_path = work / "batches.safetensors"
    save_file({k: np.ascontiguousarray(v) for k, v in data.items()}, str(data_path))
    return json.loads(meta["ds_config"]), data, steps, data_path


def train_variant(a, tools, name, work, cfg, data, data_path, tag, ranks, stage=None, accum=1,
                  zopts=None, run_args=()):
    """Compiles NAME_loss.onnx with `cfg` set for `ranks` ranks (ZeRO `stage`, `accum`
    micro-batches; `zopts`: --zero-pipeline, whose stages all read the same rows) and
    trains it on the batches; returns zero-run's --log-json rows."""
    rows = next(iter(data.values())).shape[1]
    c = dict(cfg)
    micro = rows // (ranks * accum) if not zopts else rows // accum
    c.update(train_batch_size=rows, train_micro_batch_size_per_gpu=micro,
             gradient_accumulation_steps=accum)
    if stage is not None:
        c["zero_optimization"] = {"stage": stage, "stage3_param_persistence_threshold": 0}
    cp = work / f"ds_{tag}.json"
    cp.write_text(json.dumps(c, indent=1) + "\n")
    shapes = {k: (micro,) + v.shape[2:] for k, v in data.items()}
    zrt, w = work / f"{tag}.zrt", work / f"init_{tag}.safetensors"
    extra = ["--config", str(cp)] + ([f"--zero-pipeline={zopts}"] if zopts else [])
    tools.compile(Path(a.models) / f"{name}_loss.onnx", shapes, extra, zrt, w)
    lp = work / f"log_{tag}.json"
    cmd = [tools.zero_run, str(zrt), "--weights", str(w), "--data", str(data_path),
           "--log-json", str(lp)] + list(run_args)
    if ranks > 1:
        cmd = mpi.mpirun(ranks, cmd)
    run(cmd, "zero-run")
    return json.loads(lp.read_text())


def check_model_states(a, tools, name, work, tag, data, report, opt_path, ranks, stage,
                       sizes, accum=1):
    """The report's model_state_bytes on every rank against ZeRO's formulas (Table 1 of
    the ZeRO paper), with DeepSpeed's per-parameter padding to a multiple of N: `sizes`
    = (parameter, gradient, optimizer) bytes per element, e.g. (2, 2, 12) for bf16 with
    fp32 masters and moments, (4, 4, 8) for fp32 AdamW. The parameters are those whose
    exp_avg --save-optimizer wrote (opt_path). Stage 0: whole, whole, whole; 1: whole,
    whole, shard; 2: whole, shard, shard; 3: shard, shard, shard. Also against zero-opt
    --estimate-memory on the same model and config (the formulas unpadded): its
    "bytes per rank" row of the stage equals the report within the padding. Returns
    failures."""
    opt = load_file(str(opt_path))
    numels = [v.size for k, v in opt.items() if k.endswith(".exp_avg")]
    n = ranks
    whole, shard = sum(numels), sum(-(-x // n) for x in numels)
    s = stage or 0
    pb, gb, kb = sizes
    want = {"parameters": pb * (shard if n > 1 and s == 3 else whole),
            "gradients": gb * (shard if n > 1 and s >= 2 else whole),
            "optimizer": kb * (shard if n > 1 and s >= 1 else whole)}
    failures = []
    for r in report["ranks"]:
        got = r.get("model_state_bytes")
        if got is None or any(got[k] != v for k, v in want.items()) or \
                got["total"] != sum(want.values()):
            failures.append(f"{tag}: rank {r['rank']} model_state_bytes {got}, ZeRO's "
                            f"formula {want}")
    # zero-opt --estimate-memory on the model, compiled with the same config (its
    # formulas know 2 + 2 + 12 and 4 + 4 + 8 bytes only).
    if sizes not in ((2, 2, 12), (4, 4, 8)):
        log(f"  {'ok  ' if not failures else 'FAIL'} {tag}: model_state_bytes per rank "
            f"{want} = ZeRO stage {s} over {n} rank(s) (Psi {whole})")
        return failures
    rows = next(iter(data.values())).shape[1]
    micro = rows // (ranks * accum)
    cmd = [tools.zero_opt, str(Path(a.models) / f"{name}_loss.onnx")]
    for k, v in data.items():
        cmd += ["--input-shape", f"{k}=" + "x".join(str(d) for d in (micro,) + v.shape[2:])]
    cmd += ["--train", "--config", str(work / f"ds_{tag}.json"), "--estimate-memory", ""]
    out = run(cmd, "zero-opt --estimate-memory")[0].stdout
    line = [ln for ln in out.splitlines() if ln.startswith(f"{s} (")][-1].split()
    est = dict(zip(("parameters", "gradients", "optimizer", "total"), map(int, line[-4:])))
    total = sum(want.values())
    slack = (pb + gb + kb) * len(numels)  # under one padding element per parameter
    if not (f"Psi = {whole} parameters, N = {n} ranks" in out and
            est["total"] <= total <= est["total"] + slack):
        failures.append(f"{tag}: --estimate-memory stage {s}: {est} against the report's "
                        f"{total}")
    log(f"  {'ok  ' if not failures else 'FAIL'} {tag}: model_state_bytes per rank {want} "
        f"= ZeRO stage {s} over {n} rank(s) (Psi {whole}); --estimate-memory "
        f"{est['total']} (unpadded)")
    return failures


def check_grad_accum(a, tools, name, work, cfg, data):
    """data_types.grad_accum_dtype against the 1-rank gradients of each micro-batch
    alone (--optimizer none: the step's gradients are its outputs). A step of 2
    micro-batches seeds each backward with 1/2, which scales every bf16 gradient by
    exactly 1/2; so with "fp32" the step's f32 gradient is bit for bit
    f32(g0/2) + f32(g1/2) of the two 1-micro-batch runs (numpy's f32 add), and with
    the default (bf16) that sum rounded once to bf16. Embedding tables (a Gather's
    data) are left out: their rows are scatter-added, repeated rows in another
    order. Returns failures."""
    import onnx
    from half_forward import as_f32, bf16_bits, read_st
    model = onnx.load(str(Path(a.models) / f"{name}_loss.onnx"), load_external_data=False)
    tables = {n.input[0] for n in model.graph.node if n.op_type == "Gather"}
    batch = {k: np.ascontiguousarray(v[0]) for k, v in data.items()}  # step 0's rows
    rows = next(iter(batch.values())).shape[0]
    half = rows // 2

    def grads(tag, accum, acc_dtype, inputs):
        c = {k: v for k, v in cfg.items() if k not in ("optimizer", "scheduler",
                                                      "gradient_clipping")}
        micro = rows // accum if accum > 1 else half
        c.update(train_batch_size=micro * accum, train_micro_batch_size_per_gpu=micro,
                 gradient_accumulation_steps=accum)
        if acc_dtype:
            c["data_types"] = {"grad_accum_dtype": acc_dtype}
        cp = work / f"ds_{tag}.json"
        cp.write_text(json.dumps(c) + "\n")
        zrt, w = work / f"{tag}.zrt", work / f"init_{tag}.safetensors"
        if not zrt.exists():
            tools.compile(Path(a.models) / f"{name}_loss.onnx",
                          {k: (micro,) + v.shape[1:] for k, v in batch.items()},
                          ["--config", str(cp), "--optimizer", "none"], zrt, w)
        outs = []
        for i, x in enumerate(inputs):
            ip, op = work / f"in_{tag}_{i}.safetensors", work / f"out_{tag}_{i}.safetensors"
            save_file(x, str(ip))
            run([tools.zero_run, str(zrt), "--weights", str(w), "--input", str(ip),
                 "--output", str(op)], "zero-run")
            outs.append({k[len("grad."):]: v for k, v in read_st(op).items()
                         if k.startswith("grad.")})
        return outs

    g0, g1 = grads("acc_k1", 1, None, [{k: v[:half] for k, v in batch.items()},
                                       {k: v[half:] for k, v in batch.items()}])
    (f32,) = grads("acc_fp32", 2, "fp32", [batch])
    (b16,) = grads("acc_bf16", 2, None, [batch])
    failures = []
    names = [k for k in g0 if k not in tables]
    for k in names:
        want = as_f32(*g0[k]) * np.float32(0.5) + as_f32(*g1[k]) * np.float32(0.5)
        if f32[k][0] != "F32" or f32[k][1].tobytes() != want.astype(np.float32).tobytes():
            failures.append(f"grad_accum_dtype fp32: {k} ({f32[k][0]}) is not f32(g0/2) + "
                            f"f32(g1/2)")
        if b16[k][0] != "BF16" or b16[k][1].tobytes() != bf16_bits(want).tobytes():
            failures.append(f"grad_accum_dtype bf16: {k} ({b16[k][0]}) is not bf16(g0/2 + g1/2)")
    # Some element must tell the two apart (else the check proves nothing).
    differ = sum(int(np.any(as_f32(*f32[k]) != as_f32(*b16[k]))) for k in names)
    if not differ:
        failures.append("grad_accum_dtype: fp32 and bf16 sums are equal everywhere")
    log(f"  {'ok  ' if not failures else 'FAIL'} grad_accum_dtype: over 2 micro-batches, "
        f"{len(names)} gradients (embedding tables aside) are f32(g0/2) + f32(g1/2) with "
        f"\"fp32\" and that sum rounded to bf16 by default, bit for bit ({differ} of them "
        f"differ between the two)")
    return failures


def mode_bf16(a, tools, name, work):
    """bf16 training (zero-opt's zero-mixed-precision: a bf16 forward and backward, fp32
    master weights and AdamW state) against the stored PyTorch reference
    NAME_loss.bf16.ref.safetensors (train_reference.py --write-bf16-ref: DeepSpeed's bf16
    optimizer emulated in PyTorch, and fp32 training, on the same data and config).
    PyTorch's own bf16 error is spread = max over steps |torch bf16 - torch fp32|; every
    run's losses must stay within 3 x spread of torch's fp32 losses, and (so that an fp32
    run cannot pass) at least 0.1 x spread away from zero-run's own fp32 losses on some
    step: at 1 rank, ZeRO stages 1, 2, 3 over 2 ranks and stage 3 over 4 ranks; --save
    writes the fp32 masters; and pp=2 pipeline stages give the bits of the 1-rank run
    accumulating the same micro-batches."""
    cfg, data, ref, data_path = read_precision_ref(a, name, "bf16", work)
    t16, t32 = ref["loss_bf16"], ref["loss_fp32"]
    steps = t16.shape[0]
    spread = float(np.abs(t16 - t32).max())
    log(f"== train-bf16 {name}: {steps} steps; PyTorch's bf16 vs fp32 losses differ by up to "
        f"{spread:.3g}")
    failures = []

    def train(tag, ranks, stage=None, bf16=True, accum=1, zopts=None, comm=None, acc32=False):
        c = dict(cfg)
        if not bf16:
            c.pop("bf16")
        if comm:
            c["communication_data_type"] = comm
        if acc32:
            c["data_types"] = {"grad_accum_dtype": "fp32"}
        rp = work / f"report_{tag}.json"
        rows_ = train_variant(a, tools, name, work, c, data, data_path, tag, ranks, stage, accum,
                              zopts, ["--report-json", str(rp),
                                      "--save", str(work / f"final_{tag}.safetensors"),
                                      "--save-optimizer", str(work / f"opt_{tag}.safetensors"),
                                      "--save-dir", str(work / f"ck_{tag}")])
        report = json.loads(rp.read_text())
        # What each rank holds of the model states: 2-byte parameters and gradients
        # and 12 bytes of fp32 master and moments (fp32: 4 + 4 + 8), by the stage;
        # with communication_data_type fp32 the reduced gradient shards are fp32.
        # grad_accum_dtype fp32: the gradients a rank sums over its micro-batches
        # (stages 0-1) are fp32.
        sizes = (2, 4 if (comm == "fp32" and (stage or 0) >= 2) or acc32 else 2, 12) \
            if bf16 else (4, 4, 8)
        if not zopts:
            failures.extend(check_model_states(a, tools, name, work, tag, data, report,
                                               work / f"opt_{tag}.safetensors", ranks,
                                               stage, sizes, accum))
        return np.array([r["loss"] for r in rows_]), report

    failures.extend(check_grad_accum(a, tools, name, work, cfg, data))
    z32, _ = train("fp32", 1, bf16=False)
    _, report32 = train("z3n2_fp32", 2, 3, bf16=False)
    train("z2n2_fp32", 2, 2, bf16=False)
    train("z2n2k2", 2, 2, accum=2)  # ZeRO-2 reduce-scatters every micro-step's gradient
    # grad_accum_dtype fp32: the micro-batches' gradients summed in fp32 reach the
    # optimizer unrounded on one rank (other losses than the bf16-summed run's); over
    # ranks they are all-reduced (stage 0) or reduce-scattered (stage 1) in bf16
    # (DeepSpeed's communication_data_type default): the bf16-summed run's bytes (with
    # 2 micro-batches, rounding the fp32 sum for the collective gives the bf16 sum's
    # bits but for the embedding rows' order).
    runs = [("k2", 1, None)] + [(f"z{st}n2k2", 2, st) for st in (0, 1)]
    for tag, ranks, stage in runs:
        got16, rep16 = train(tag, ranks, stage, accum=2)
        got, rep = train(tag + "_acc32", ranks, stage, accum=2, acc32=True)
        err = float(np.abs(got - t32).max())
        same = [r["bytes_sent"] for r in rep["ranks"]] == [r["bytes_sent"] for r in rep16["ranks"]]
        moved = got.tobytes() != got16.tobytes()
        ok = err <= 3 * spread and same and (moved or ranks > 1)
        log(f"  {'ok  ' if ok else 'FAIL'} bf16 {tag}, grad_accum_dtype fp32: |loss - torch "
            f"fp32| <= {err:.3g} ({err / spread:.2f} x spread); bytes sent "
            f"{'equal to' if same else 'differ from'} the bf16-summed run's; losses "
            f"{'differ from' if moved else 'equal to'} it")
        if not ok:
            failures.append(f"bf16 {tag} grad_accum_dtype fp32")
    for tag, ranks, stage in (("n1", 1, None), ("z0n2", 2, 0), ("z1n2", 2, 1), ("z2n2", 2, 2),
                              ("z3n2", 2, 3), ("z3n4", 4, 3)):
        got, report = train(tag, ranks, stage)
        if tag == "z3n2":
            report_z3 = report
            # ZeRO-3's collectives carry bf16: the all-gathers of the parameters and the
            # reduce-scatters of the gradients send half of fp32's bytes on every rank.
            # The model states a rank keeps (the report's resident globals, beside the
            # 8-byte step counter) are the ZeRO formula's per parameter of its shard:
            # fp32 4 (parameter) + 8 (moments) = 12, bf16 2 + 12 (master, moments) = 14.
            for r16, r32 in zip(report["ranks"], report32["ranks"]):
                for kind in ("AllGather", "ReduceScatter"):
                    b16, b32 = r16["bytes_sent"][kind], r32["bytes_sent"][kind]
                    if not (b32 > 0 and 2 * b16 == b32):
                        failures.append(f"bf16 z3n2: {kind} bytes {b16} vs fp32 {b32}")
                if name != "gpt2":
                    continue  # llama's rotary buffer (never trained, no master) adds a term
                shard, rest = divmod(r32["param_bytes_resident"] - 8, 12)
                if rest or r16["param_bytes_resident"] != 8 + 14 * shard:
                    failures.append(f"bf16 z3n2: model states {r16['param_bytes_resident']} "
                                    f"bytes, not 14/12 of fp32's {r32['param_bytes_resident']}")
            log(f"  ok   bf16 z3n2: all-gather and reduce-scatter bytes per rank "
                f"{report['ranks'][0]['bytes_sent']['AllGather']} + "
                f"{report['ranks'][0]['bytes_sent']['ReduceScatter']}, half of fp32's "
                f"{report32['ranks'][0]['bytes_sent']['AllGather']} + "
                f"{report32['ranks'][0]['bytes_sent']['ReduceScatter']}" +
                (f"; model states {report['ranks'][0]['param_bytes_resident']} bytes = 14/12 "
                 f"of fp32's {report32['ranks'][0]['param_bytes_resident']} (+ the step "
                 f"counter)" if name == "gpt2" else "")
                if not any("z3n2:" in f for f in failures) else
                "  FAIL bf16 z3n2: collective or model-state bytes off the formula")
        err = float(np.abs(got - t32).max())
        moved = float(np.abs(got - z32).max())
        ok = err <= 3 * spread and moved >= 0.1 * spread
        log(f"  {'ok  ' if ok else 'FAIL'} bf16 {tag}: |loss - torch fp32| <= {err:.3g} "
            f"({err / spread:.2f} x spread), |loss - zero-run fp32| up to {moved:.3g}")
        if not ok:
            failures.append(f"bf16 {tag}")
        # --save writes the fp32 masters (the trained parameters), not their bf16 copies.
        saved = load_file(str(work / f"final_{tag}.safetensors"))
        opt = load_file(str(work / f"opt_{tag}.safetensors"))
        same = all(saved[k].dtype == np.float32 and np.array_equal(saved[k], opt[k + ".master"])
                   for k in saved)
        finer = any(np.any((saved[k].view(np.uint32) & 0xFFFF) != 0) for k in saved)
        if not (same and finer):
            failures.append(f"bf16 {tag}: --save is not the fp32 masters")
            log(f"  FAIL bf16 {tag}: --save equal to --save-optimizer's masters: {same}, "
                f"finer than bf16: {finer}")
    # communication_data_type "fp32": the gradients' reduce-scatters carry fp32 (the
    # fp32 run's bytes), the parameters' all-gathers still bf16; the losses still within
    # the bound.
    got, rep = train("z3n2_comm32", 2, 3, comm="fp32")
    err = float(np.abs(got - t32).max())
    r, r16 = rep["ranks"][0]["bytes_sent"], report_z3["ranks"][0]["bytes_sent"]
    r32 = report32["ranks"][0]["bytes_sent"]
    ok = (r["ReduceScatter"] == r32["ReduceScatter"] and r["AllGather"] == r16["AllGather"]
          and err <= 3 * spread)
    log(f"  {'ok  ' if ok else 'FAIL'} bf16 z3n2, communication_data_type fp32: reduce-scatter "
        f"bytes {r['ReduceScatter']} (fp32's {r32['ReduceScatter']}), all-gather "
        f"{r['AllGather']} (bf16's {r16['AllGather']}); |loss - torch fp32| <= {err:.3g}")
    if not ok:
        failures.append("bf16 communication_data_type fp32")
    # zero-ckpt consolidate of the 1-rank run's checkpoint: the fp32 masters by default
    # (equal to --save), and --dtype bf16 their rounding to nearest even (numpy here).
    from half_forward import bf16_bits, read_st  # BF16 as uint16 bits, numpy has no bf16
    zero_ckpt = str(Path(tools.zero_run).with_name("zero-ckpt"))
    saved = load_file(str(work / "final_n1.safetensors"))
    for dt in ("", "bf16"):
        out = work / f"cons_{dt or 'default'}.safetensors"
        run([zero_ckpt, "consolidate", str(work / "ck_n1"), "-o", str(out)] +
            (["--dtype", dt] if dt else []), "zero-ckpt")
        got = read_st(out)
        if dt:
            want = {k: bf16_bits(v) for k, v in saved.items()}
        else:
            want = {k: v for k, v in saved.items()}
        same = set(got) == set(want) and all(
            got[k][1].tobytes() == np.ascontiguousarray(want[k]).tobytes() for k in want)
        log(f"  {'ok  ' if same else 'FAIL'} zero-ckpt consolidate {('--dtype ' + dt) if dt else ''}"
            f": {'the fp32 masters, equal to --save' if not dt else 'the masters rounded to bf16'}")
        if not same:
            failures.append(f"bf16 consolidate {dt or 'default'}")
    # Pipeline stages: pp=2 over 2 micro-batches (1F1B) gives the bits of the 1-rank
    # bf16 run accumulating the same 2 micro-batches (a cut moves bytes, the tied
    # embedding's stages sum in the same order).
    for suffix in ("", "_acc32"):
        one = np.array([r["loss"] for r in
                        json.loads((work / f"log_k2{suffix}.json").read_text())])
        pp, _ = train("pp2" + suffix, 2, accum=2, zopts="pp=2 micro-batches=2",
                      acc32=bool(suffix))
        ok = one.tobytes() == pp.tobytes()
        log(f"  {'ok  ' if ok else 'FAIL'} bf16 pp=2 (1F1B, 2 micro-batches"
            f"{', grad_accum_dtype fp32' if suffix else ''}): losses "
            f"{'bit-identical to' if ok else 'differ from'} the 1-rank run accumulating them")
        if not ok:
            failures.append("bf16 pp=2" + suffix)
    return failures


def mode_fp16(a, tools, name, work):
    """fp16 training with DeepSpeed's dynamic loss scaler against the stored PyTorch
    reference NAME_loss.fp16.ref.safetensors (train_reference.py --write-fp16-ref): the
    scaler starts at 2^20, where the fixtures' gradients overflow, so the run skips steps,
    spends the hysteresis, halves the scale and doubles it after clean windows. Every
    step's loss scale and skipped flag (zero-run --log-json) must equal PyTorch's, step
    for step, at 1 rank and under ZeRO 1, 2, 3 over 2 ranks (against PyTorch's 2-rank
    emulation: each rank's fp16 gradients, summed in fp16); the losses must stay within
    3 x PyTorch's own fp16 spread (max over steps |torch fp16 - torch fp32|) of the fp32
    losses."""
    cfg, data, ref, data_path = read_precision_ref(a, name, "fp16", work)
    t16, t32 = ref["loss_fp16"], ref["loss_fp32"]
    expected = {1: (ref["loss_scale"], ref["skipped"]), 2: (ref["loss_scale_n2"], ref["skipped_n2"])}
    spread = float(np.abs(t16 - t32).max())
    log(f"== train-fp16 {name}: PyTorch skips steps "
        f"{[i + 1 for i, x in enumerate(ref['skipped']) if x]}; its fp16 vs fp32 losses differ "
        f"by up to {spread:.3g}")
    failures = []
    for tag, ranks, stage in (("n1", 1, None), ("z1n2", 2, 1), ("z2n2", 2, 2), ("z3n2", 2, 3)):
        rows_ = train_variant(a, tools, name, work, cfg, data, data_path, tag, ranks, stage)
        scales, skipped = expected[ranks]
        got_scales = [r["loss_scale"] for r in rows_]
        got_skipped = [bool(r["skipped"]) for r in rows_]
        losses = np.array([r["loss"] for r in rows_])
        same = got_scales == [float(x) for x in scales] and got_skipped == [bool(x) for x in skipped]
        err = float(np.abs(losses - t32).max())
        ok = same and err <= 3 * spread
        log(f"  {'ok  ' if ok else 'FAIL'} fp16 {tag}: loss scales and skipped steps "
            f"{'equal to' if same else 'differ from'} PyTorch's; |loss - torch fp32| <= "
            f"{err:.3g} ({err / spread:.2f} x spread)")
        if not same:
            log(f"       zero-run scales {got_scales}\n       torch    scales {list(scales)}\n"
                f"       zero-run skipped {got_skipped}\n       torch    skipped {list(skipped)}")
        if not ok:
            failures.append(f"fp16 {tag}")
    # Pipeline stages: pp=2 over 2 micro-batches (1F1B) gives the bits of the 1-rank fp16
    # run accumulating the same 2 micro-batches: every loss, loss scale and skipped flag
    # (the overflow flag and the scaler's state agree across the stages).
    def summary(rows_):
        return [(r["loss"], r["loss_scale"], bool(r["skipped"])) for r in rows_]
    one = train_variant(a, tools, name, work, cfg, data, data_path, "k2", 1, accum=2)
    pp = train_variant(a, tools, name, work, cfg, data, data_path, "pp2", 2, accum=2,
                       zopts="pp=2 micro-batches=2")
    same = np.array([x[0] for x in summary(one)]).tobytes() == \
        np.array([x[0] for x in summary(pp)]).tobytes() and \
        [x[1:] for x in summary(one)] == [x[1:] for x in summary(pp)]
    skips = sum(x[2] for x in summary(one))
    log(f"  {'ok  ' if same and skips else 'FAIL'} fp16 pp=2 (1F1B, 2 micro-batches): losses, "
        f"loss scales and skipped steps ({skips} skipped) "
        f"{'bit-identical to' if same else 'differ from'} the 1-rank run accumulating them")
    if not (same and skips):
        failures.append("fp16 pp=2")
    return failures


def note_stored_data(a, name, st, data):
    """--live with the stored reference's settings: say whether the freshly generated
    data equals the stored batches (numpy's generator streams are not guaranteed
    across versions; the stored mode does not depend on them)."""
    path = Path(a.models) / TRAIN_REF.format(name)
    if not path.exists() or a.freeze:
        return
    try:
        stored = read_train_ref(a.models, name)
    except Fail as e:
        log(f"  note: {str(e).splitlines()[0]}")
        return
    try:
        if train_settings(a, stored) != st:
            return
    except Fail:  # other settings than the stored reference's: nothing to compare
        return
    same = set(stored["data"]) == set(data) and all(
        stored["data"][k].shape == data[k].shape and np.array_equal(stored["data"][k], data[k])
        for k in data)
    log(f"  note: the generated data {'equals' if same else 'DIFFERS FROM'} the batches stored in "
        f"{path.name}" + ("" if same else " (numpy's generator changed? the stored mode is unaffected)"))


# ---------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", default=str(ROOT / "build" / "bin"),
                    help="directory holding zero-opt and zero-run (default build/bin)")
    ap.add_argument("--zero-opt", default=None, help="zero-opt binary (overrides --bin-dir)")
    ap.add_argument("--zero-run", default=None, help="zero-run binary (overrides --bin-dir)")
    ap.add_argument("--models", default=str(ROOT / "test" / "models"))
    ap.add_argument("--work", default=None,
                    help="scratch directory (default: a new temporary directory, removed on success)")
    ap.add_argument("--np", type=int, default=0,
                    help="run zero-run under mpirun -np N (default: plain zero-run, one rank)")
    ap.add_argument("--grads", action="append", default=[], choices=FIXTURES, metavar="NAME")
    ap.add_argument("--adamw-step", action="append", default=[], choices=FIXTURES, metavar="NAME")
    ap.add_argument("--train", action="append", default=[], choices=FIXTURES, metavar="NAME")
    ap.add_argument("--dp", action="append", default=[], choices=FIXTURES, metavar="NAME",
                    help="training over ranks at ZeRO stages 0-2 vs the 1-rank training")
    ap.add_argument("--ckpt", action="append", default=[], choices=FIXTURES, metavar="NAME",
                    help="ZeRO-3 checkpoints: save, kill during save, resume, reshard")
    ap.add_argument("--dp-configs",
                    default="0:2,1:2,1:2:2,2:2,2:2:2,3:2,3:2:2,0:4,1:4,2:4,3:4,3:1,0:4:1:20000,"
                            "2:2:1:20000,3:4:1:20000,3:2:1:0:ds",
                    help="with --dp: STAGE:RANKS[:ACCUMULATION[:REDUCE_BUCKET_SIZE[:ds]]] list "
                         "(ds: DeepSpeed's stage-3 defaults instead of persistence threshold "
                         "and reuse distance 0; the byte formulas are then not checked)")
    ap.add_argument("--dp-steps", type=int, default=10)
    ap.add_argument("--pp", action="append", default=[], choices=FIXTURES, metavar="NAME",
                    help="training through pipeline stages (GPipe, 1F1B) vs the 1-rank training")
    ap.add_argument("--pp-configs", default="gpipe:2:4,1f1b:2:4,gpipe:4:4,1f1b:4:4,1f1b:3:2,"
                    "1f1b/tied-grads=step:2:4,"
                    "1f1b:2:2:2:0,1f1b:2:2:2:1,gpipe:2:2:2:2,1f1b:2:2:2:3,"
                    "1f1b/prefetch=2/bucket-bytes=65536:2:2:2:3",
                    help="with --pp: SCHEDULE:STAGES:MICRO_BATCHES[:DP:ZERO_STAGE] list "
                         "(DP replicas of the pipeline, ZeRO stage inside each stage's "
                         "replicas: mpirun -np STAGES x DP)")
    ap.add_argument("--pp-steps", type=int, default=6)
    ap.add_argument("--pp-ckpt", choices=("on", "off"), default="on",
                    help="with --pp: also compare activation-checkpoint-interval=1 with "
                         "1F1B at the memory scale (bit-identical, lower largest peak)")
    ap.add_argument("--pp-memory-scale", type=int, default=4,
                    help="with --pp: the memory comparison's batches, the stored ones tiled "
                         "this many times along the batch and the sequence")
    ap.add_argument("--pp-memory-xfail", action="append", default=[], metavar="S:M:STAGE",
                    help="with --pp: the memory comparison (1F1B's peak against GPipe's) on "
                         "STAGE of pp=S micro-batches=M is a known failure: reported XFAIL, "
                         "and a failure of the run if it holds (XPASS)")
    ap.add_argument("--bf16", action="append", default=[], choices=FIXTURES, metavar="NAME",
                    help="bf16 training (fp32 masters) against the stored PyTorch bf16 reference, "
                         "at 1 rank and ZeRO 1-3 over 2 and 4 ranks")
    ap.add_argument("--fp16", action="append", default=[], choices=FIXTURES, metavar="NAME",
                    help="fp16 training with the dynamic loss scaler against the stored PyTorch "
                         "fp16 reference, at 1 rank and ZeRO 1-3 over 2 ranks")
    ap.add_argument("--zeropp", action="append", default=[], choices=FIXTURES, metavar="NAME",
                    help="ZeRO++ training (qwZ, qgZ, hpZ) at stage 3 over 4 ranks")
    ap.add_argument("--zeropp-steps", type=int, default=50)
    ap.add_argument("--zeropp-pp", action="store_true",
                    help="with --zeropp: also ZeRO++ inside pp=2 pipeline stages (8 ranks), "
                         "bit-identical to the unsplit step")
    ap.add_argument("--dp-loss-rtol", type=float, default=1e-5)
    ap.add_argument("--dp-w-rtol", type=float, default=1e-4)
    ap.add_argument("--dp-w-atol", type=float, default=1e-6)
    ap.add_argument("--threads-sweep", nargs="?", const="1,3", default="",
                    help="with --train: --threads counts whose runs must be bit-identical (default 1,3)")
    ap.add_argument("--live", action="store_true",
                    help="with --train: recompute the PyTorch reference on freshly generated data "
                         "(needs torch + transformers) instead of reading the stored "
                         "NAME_loss.train.ref.safetensors")
    d = TRAIN_DEFAULTS
    ap.add_argument("--steps", type=int, default=None, help=f"--train steps (default {d['steps']})")
    ap.add_argument("--accum", type=int, default=None,
                    help=f"gradient_accumulation_steps (default {d['accum']})")
    ap.add_argument("--clip", type=float, default=None, help=f"gradient_clipping (default {d['clip']})")
    ap.add_argument("--eps", type=float, default=None,
                    help=f"AdamW eps of the --train config (default {d['eps']})")
    ap.add_argument("--seed", type=int, default=None, help=f"data seed (default {d['seed']})")
    ap.add_argument("--freeze", default=None,
                    help="with --train --live: zero-opt --freeze REGEX; the reference freezes the "
                         "parameters whose ONNX initializer name or PyTorch name the regex matches "
                         "(re.search)")
    ap.add_argument("--rtol", type=float, default=1e-4, help="gradient rtol")
    ap.add_argument("--atol", type=float, default=1e-6, help="gradient atol")
    ap.add_argument("--step-rtol", type=float, default=1e-5, help="AdamW step rtol")
    ap.add_argument("--step-atol", type=float, default=1e-7, help="AdamW step atol")
    ap.add_argument("--loss-rtol", type=float, default=1e-4)
    ap.add_argument("--gn-rtol", type=float, default=1e-4)
    ap.add_argument("--lr-rtol", type=float, default=1e-5)
    ap.add_argument("--w-rtol", type=float, default=1e-3)
    ap.add_argument("--w-atol", type=float, default=1e-5)
    a = ap.parse_args()
    for mark in a.pp_memory_xfail:
        if not re.fullmatch(r"\d+:\d+:\d+", mark):
            ap.error(f"--pp-memory-xfail {mark}: expected STAGES:MICRO_BATCHES:STAGE")
    if not (a.grads or a.adamw_step or a.train or a.dp or a.ckpt or a.zeropp or a.pp or a.bf16 or a.fp16):
        ap.error("nothing to do: give --grads, --adamw-step, --train and/or --dp NAME")

    tmp = None
    if a.work:
        root = Path(a.work)
        root.mkdir(parents=True, exist_ok=True)
    else:
        tmp = root = Path(tempfile.mkdtemp(prefix="train-e2e-"))
    results = {}
    try:
        tools = Tools(a)
    except Fail as e:
        log(f"FAIL: {e}")
        return 1
    jobs = [("grads", n, mode_grads) for n in a.grads] + \
           [("adamw-step", n, mode_adamw_step) for n in a.adamw_step] + \
           [("train", n, mode_train) for n in a.train] + \
           [("dp", n, mode_dp) for n in a.dp] + \
           [("ckpt", n, mode_ckpt) for n in a.ckpt] + \
           [("zeropp", n, mode_zeropp) for n in a.zeropp] + \
           [("pp", n, mode_pp) for n in a.pp] + \
           [("bf16", n, mode_bf16) for n in a.bf16] + \
           [("fp16", n, mode_fp16) for n in a.fp16]
    for mode, name, fn in jobs:
        work = root / f"{mode}-{name}"
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        key = f"{mode} {name}"
        try:
            failures = fn(a, tools, name, work)
            results[key] = ("FAIL", failures) if failures else ("PASS", None)
        except Skip as e:
            results[key] = ("SKIP", str(e))
        except Fail as e:
            results[key] = ("FAIL", str(e))
    log("== summary")
    for key, (st, why) in results.items():
        if st == "PASS":
            log(f"PASS {key}")
        elif st == "SKIP":
            log(f"SKIP {key}: {why}")
        else:
            why = why if isinstance(why, str) else f"{len(why)} mismatches: " + ", ".join(why[:12]) + \
                (" ..." if len(why) > 12 else "")
            log(f"FAIL {key}: {why}")
    states = [st for st, _ in results.values()]
    if "FAIL" in states:
        log(f"(scratch files kept in {root})")
        return 1
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)
    if all(st == "SKIP" for st in states):
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
