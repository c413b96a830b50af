"""train_e2e.py --train: 20 steps with gradient accumulation, clipping and a
warm-up schedule against the PyTorch reference, stored
(NAME_loss.train.ref.safetensors) or recomputed (--live), and --threads-sweep.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file


from .common import (Fail, HERE, Skip, TRAIN_REF, compare_tensors, log, read_log,
                     read_train_ref, train_config, train_settings)


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
