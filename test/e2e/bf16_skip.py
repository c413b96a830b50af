"""bf16 training skips a step whose gradients are not finite, as DeepSpeed 0.19
does (bf16.check_grad_overflow, on by default; train-bf16-skip.test).

The MLP loss fixture is compiled with a bf16 config (AdamW, WarmupLR over 4
steps, so that the schedule's position shows) and trained on 5 steps of data
whose step 3 holds an inf in one row. DeepSpeed skips such a step: no update of
the parameters or the optimizer state, Adam's step count and the schedule stay
where they were. So the run must log step 3 skipped (and only it), and log for
steps 4 and 5 what a run on the same data without step 3 logs for its steps 3
and 4 (loss, grad norm, lr: bit for bit), and save the same trained weights.
Checked at 1 rank and at ZeRO-2 over 2 ranks (the inf on rank 1's rows only:
the ranks agree on the skip). With "check_grad_overflow": false the step is
taken and its non-finite loss stops the run with zero-run's error naming it.
"""
import argparse
import json
import os
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

from zerokit import mpi
from zerokit.tools import run, zero_opt

ROWS, FEATURES, CLASSES, STEPS, BAD = 8, 16, 4, 5, 3


def config(check):
    cfg = {"train_micro_batch_size_per_gpu": ROWS, "bf16": {"enabled": True},
           "gradient_clipping": 1.0,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "weight_decay": 0.01}},
           "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0,
                                                        "warmup_max_lr": 1e-2,
                                                        "warmup_num_steps": 4}}}
    if check is not None:
        cfg["bf16"]["check_grad_overflow"] = check
    return cfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    w = a.work
    os.makedirs(w, exist_ok=True)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((STEPS, 2 * ROWS, FEATURES)).astype(np.float32)
    labels = rng.integers(0, CLASSES, (STEPS, 2 * ROWS), dtype=np.int64)
    # Rank 1's rows at 2 ranks (rows ROWS..2*ROWS-1); the 1-rank runs train rows 0..ROWS-1.
    x[BAD - 1, ROWS + 1, 5] = np.inf
    model = os.path.join(a.models, "mlp_loss.onnx")

    def data(path, rows, keep):
        save_file({"x": np.ascontiguousarray(x[keep][:, rows]),
                   "labels": np.ascontiguousarray(labels[keep][:, rows])}, path)
        return path

    def compile_(name, ranks, check=None):
        cfg = os.path.join(w, name + ".json")
        json.dump(config(check), open(cfg, "w"))
        prog = os.path.join(w, name + ".zrt")
        run(zero_opt(a.zero_opt, model, {"x": (ROWS, FEATURES), "labels": (ROWS,)},
                     ["--train", "--config", cfg, "--zero-pipeline", f"stage=2 dp={ranks}"],
                     prog, os.path.join(w, name + ".init.safetensors")))
        return prog, os.path.join(w, name + ".init.safetensors")

    def train(prog, init, batches, name, ranks, ok=True):
        log, saved = os.path.join(w, name + "-log.json"), os.path.join(w, name + "-trained.safetensors")
        cmd = [a.zero_run, prog, "--weights", init, "--data", batches, "--log-json", log,
               "--save", saved, "--threads", "1"]
        r = run(mpi.mpirun(ranks, cmd) if ranks > 1 else cmd, ok=ok)
        if not ok:
            return r.stdout + r.stderr
        return [s for s in json.load(open(log)) if "loss" in s], load_file(saved)

    keys = ("loss", "grad_norm", "lr")
    every = list(range(STEPS))
    without = [s for s in every if s != BAD - 1]
    for ranks in (1, 2):
        rows = list(range(ROWS * ranks)) if ranks == 2 else list(range(ROWS, 2 * ROWS))
        prog, init = compile_(f"bf16-dp{ranks}", ranks)
        # 1 rank trains rank 1's rows (those with the inf).
        with_bad, params = train(prog, init, data(os.path.join(w, f"all{ranks}.safetensors"),
                                                  rows, every), f"all{ranks}", ranks)
        clean, clean_params = train(prog, init, data(os.path.join(w, f"clean{ranks}.safetensors"),
                                                     rows, without), f"clean{ranks}", ranks)
        skipped = [s["step"] for s in with_bad if s.get("skipped")]
        if skipped != [BAD] or len(with_bad) != STEPS:
            sys.exit(f"FAIL: {ranks} rank(s): skipped steps {skipped} of {len(with_bad)}, "
                     f"expected [{BAD}] of {STEPS}")
        got = [[s[k] for k in keys] for s in with_bad if s["step"] != BAD]
        want = [[s[k] for k in keys] for s in clean]
        if got != want:
            sys.exit(f"FAIL: {ranks} rank(s): the steps after the skipped one log\n  {got}\n"
                     f"the run without that step\n  {want}")
        if sorted(params) != sorted(clean_params) or not params or any(
                not np.array_equal(params[k], clean_params[k]) for k in params):
            sys.exit(f"FAIL: {ranks} rank(s): the trained weights differ from the run without "
                     "the skipped step")
        lrs = " ".join(f"{s['lr']:.4g}" for s in with_bad)
        print(f"skip ok: {ranks} rank(s): step {BAD} skipped; steps 4-5 and the weights equal "
              f"the run without it (lr {lrs})")
    prog, init = compile_("bf16-nocheck", 1, check=False)
    out = train(prog, init, os.path.join(w, "all1.safetensors"), "nocheck", 1, ok=False)
    if f"step {BAD}" not in out:
        sys.exit(f"FAIL: check_grad_overflow false: expected zero-run to stop at step {BAD}, "
                 f"got:\n{out}")
    print(f"no check ok: check_grad_overflow false takes step {BAD} and stops on its loss")


if __name__ == "__main__":
    main()
