"""train_e2e.py --grads and --adamw-step: one training step at the fixture's
reference shapes against the stored gradients and AdamW step
(NAME_loss.ref.safetensors); adam_step1_allowed is the AdamW step tolerance of
train_e2e.py's docstring.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from .common import compare_tensors, err_stats, log, prefixed, read_ref, ref_inputs, shapes_of


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
