"""train_e2e.py --ckpt: ZeRO-3 checkpoints saved, killed while saving, resumed and
resharded, and zero-ckpt consolidate (its peak RSS on a synthetic checkpoint).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from zerokit import mpi, tools as kit_tools

from .common import ENV, _q, log, read_log, read_train_ref, run


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
