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


def adamw_settings(meta):
    """The fixture's AdamW settings (lr, beta1, beta2, eps, weight decay) and the
    --optimizer line that compiles them."""
    lr, b1, b2 = float(meta["lr"]), float(meta["beta1"]), float(meta["beta2"])
    eps, wd = float(meta["eps"]), float(meta["weight_decay"])
    return lr, b1, b2, eps, wd, f"adamw lr={lr!r} betas={b1!r},{b2!r} eps={eps!r} weight-decay={wd!r}"


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
    lr, b1, b2, eps, wd, opt = adamw_settings(meta)
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


def adamw_reference(w, m, v, g, t, lr, b1, b2, eps, wd):
    """PyTorch's AdamW step t (torch.optim.AdamW, decoupled weight decay) in float64
    from the state after step t-1: returns (w, exp_avg, exp_avg_sq) after step t."""
    w, m, v, g = (x.astype(np.float64) for x in (w, m, v, g))
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    denom = np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps
    return w * (1 - lr * wd) - (lr / (1 - b1 ** t)) * m / denom, m, v


def mode_adamw_later(a, tools, name, work, later=3):
    """AdamW's step `later` (moments non-zero, bias corrections of step `later`) against
    PyTorch's update rule in float64, applied to the state zero-run saved after step
    later-1 (--save, --save-optimizer) and the gradient its --optimizer none program
    gives at those weights (checked against PyTorch's at step 1 by --grads). Every step
    trains on the fixture's reference batch. The parameters must land within 1e-3 of
    their update (plus 2 float32 units of the weight), the moments within 1e-4 (plus
    1e-5 of the tensor's largest)."""
    log(f"== train-adamw-step {name}: AdamW step {later} (non-zero moments) vs the update "
        f"rule in float64")
    ref, meta = read_ref(a.models, name)
    inputs = ref_inputs(ref)
    lr, b1, b2, eps, wd, opt = adamw_settings(meta)
    zrt, weights = work / "later.zrt", work / "later_init.safetensors"
    gzrt, gweights = work / "later_grad.zrt", work / "later_grad_init.safetensors"
    tools.compile(Path(a.models) / f"{name}_loss.onnx", shapes_of(inputs), ["--optimizer", opt],
                  zrt, weights)
    tools.compile(Path(a.models) / f"{name}_loss.onnx", shapes_of(inputs),
                  ["--optimizer", "none"], gzrt, gweights)
    batches = work / "later_batches.safetensors"
    save_file({k: np.ascontiguousarray(np.stack([v] * later)) for k, v in inputs.items()},
              str(batches))
    save_file(inputs, str(work / "in.safetensors"))
    state = {}
    for t in (later - 1, later):
        w_path, o_path = work / f"w{t}.safetensors", work / f"opt{t}.safetensors"
        tools.zrun(zrt, ["--weights", str(weights), "--data", str(batches), "--steps", str(t),
                         "--save", str(w_path), "--save-optimizer", str(o_path)])
        state[t] = (load_file(str(w_path)), load_file(str(o_path)))
    w_prev, o_prev = state[later - 1]
    w_got, o_got = state[later]
    # The gradient program binds every initializer: the model's buffers (never
    # trained, not in --save's file) from its initial weights, the parameters of step
    # later-1.
    gw = dict(load_file(str(gweights)))
    gw.update(w_prev)
    save_file(gw, str(work / "later_grad_weights.safetensors"))
    tools.zrun(gzrt, ["--weights", str(work / "later_grad_weights.safetensors"), "--input",
                      str(work / "in.safetensors"), "--output", str(work / "later_grad.safetensors")])
    grads = prefixed(load_file(str(work / "later_grad.safetensors")), "grad.")
    want_names = sorted(prefixed(ref, "grad."))
    failures = []
    if sorted(grads) != want_names:
        failures.append("gradient set")
        log(f"  FAIL the gradient program's outputs {sorted(grads)} are not the trained "
            f"parameters {want_names}")
        return failures
    want_w, allowed_w, want_m, want_v = {}, {}, {}, {}
    for k in want_names:
        m_key, v_key = f"{k}.exp_avg", f"{k}.exp_avg_sq"
        if m_key not in o_prev or v_key not in o_prev:
            failures.append(f"state {k}")
            log(f"  FAIL --save-optimizer holds no {m_key} / {v_key}")
            continue
        if not np.any(o_prev[m_key]):
            failures.append(f"moments {k}")
            log(f"  FAIL {m_key} after step {later - 1} is all zero: the check would not "
                f"exercise the moments")
            continue
        w_new, m_new, v_new = adamw_reference(w_prev[k], o_prev[m_key], o_prev[v_key],
                                              grads[k], later, lr, b1, b2, eps, wd)
        want_w[k], want_m[k], want_v[k] = (x.astype(np.float32) for x in (w_new, m_new, v_new))
        ulp = np.spacing(np.abs(w_new).astype(np.float32)).astype(np.float64)
        allowed_w[k] = 1e-3 * np.abs(w_new - w_prev[k].astype(np.float64)) + 2 * ulp
    failures += compare_tensors(f"step {later} ", w_got, want_w, 0, 0, allowed_w)
    m_got = {k: o_got.get(f"{k}.exp_avg") for k in want_m if f"{k}.exp_avg" in o_got}
    v_got = {k: o_got.get(f"{k}.exp_avg_sq") for k in want_v if f"{k}.exp_avg_sq" in o_got}
    # The moments: 1e-4 of each element, and 1e-5 of the tensor's largest (a moment
    # near zero is a difference of two terms, where the gradient's own rounding shows).
    def moment_allowed(want):
        return {k: 1e-4 * np.abs(x.astype(np.float64)) + 1e-5 * float(np.max(np.abs(x)))
                for k, x in want.items()}
    failures += compare_tensors("exp_avg ", m_got, want_m, 0, 0, moment_allowed(want_m))
    failures += compare_tensors("exp_avg_sq ", v_got, want_v, 0, 0, moment_allowed(want_v))
    return failures
