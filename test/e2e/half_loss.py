#!/usr/bin/env python3
"""A model whose own loss is 16-bit, trained as DeepSpeed 0.19's fp16 and bf16
engines train it (e2e/train-half-loss.test).

The model (Inputs/half_classifier.onnx, 12 KB): Embedding(64, 16) -> Linear(16,
32) -> ReLU -> Linear(32, 32) -> Tanh -> Linear(32, 8) -> torch.nn.CrossEntropyLoss
on the logits, inputs `ids` and `labels` int64 [rows, 4], exported as it is
(torch.onnx.export, dynamo). DeepSpeed's fp16 runs the model as `model.half()`
does: the logits are fp16, so are the loss and the scaled loss ZeRO's
optimizers backward from (loss * scale). At DeepSpeed's default scale 2^16 the
backward's seed is inf (fp16's largest finite value is 65504) and every gradient
is non-finite: steps 1 and 2 are skipped, the second halves the scale (hysteresis
2), step 3 trains at 32768. A model that casts its logits to f32 first (the
`upcast` cases: `loss_fn(logits.float(), ...)`, as transformers' language-model
losses do; the export is the same graph, the cast of an f32 tensor to f32
dropped) never overflows there: zero-opt --fp32-loss.

`--write` (torch, DeepSpeed: scripts/setup-pyenv.sh deepspeed) exports the model
and runs DeepSpeed's engine (DS_ACCELERATOR=cpu, gloo, torch's AdamW) on each case,
every rank on the rows zero-run gives it (rank r: rows [r*B*K, (r+1)*B*K) of each
step), and stores per step the loss (the ranks' mean), the fp16 loss scale and the
skip in half_loss.ref.json with the batches.

`--zero-opt Z --zero-run R --work DIR` compiles each case with zero-opt (the
case's config, --fp32-loss for the upcast cases) and trains it with zero-run on
the stored batches. Every step's loss scale and skip must equal DeepSpeed's, and
every loss agree within LOSS_TOL (relative). Prints one line per case; exit
status 1 on a mismatch.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import platform
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODEL = HERE / "Inputs" / "half_classifier.onnx"
REF = HERE / "half_loss.ref.json"
VOCAB, DIM, HID, CLASSES, SEQ = 64, 16, 32, 8, 4
STEPS, ROWS, SEED = 8, 16, 54
# zero-run's 16-bit loss and DeepSpeed's differ in the last bits: PyTorch rounds
# the log-probabilities to 16 bits before the mean, zero-run's kernel does not;
# fp16's spacing at 2 is 2^-9 (relative 1e-3), bf16's 2^-6.
LOSS_TOL = {"fp16": 3e-3, "bf16": 2e-2}


def config(precision, stage, micro, accum):
    return {"train_micro_batch_size_per_gpu": micro, "gradient_accumulation_steps": accum,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "weight_decay": 0.01}},
            precision: {"enabled": True}, "zero_optimization": {"stage": stage}}


# name: precision, ZeRO stage, ranks, micro-batch, accumulation, upcast
CASES = {
    "fp16-z2": ("fp16", 2, 1, 16, 1, False),
    "fp16-z1-dp2": ("fp16", 1, 2, 8, 1, False),
    "fp16-z3-dp2": ("fp16", 3, 2, 8, 1, False),
    "fp16-z2-accum2": ("fp16", 2, 1, 8, 2, False),
    "bf16-z2": ("bf16", 2, 1, 16, 1, False),
    "fp16-z2-upcast": ("fp16", 2, 1, 16, 1, True),
}


def batches():
    rng = np.random.default_rng(SEED)
    ids = rng.integers(0, VOCAB, (STEPS, ROWS, SEQ), dtype=np.int64)
    labels = rng.integers(0, CLASSES, (STEPS, ROWS, SEQ), dtype=np.int64)
    return ids, labels


# --- DeepSpeed's side (--write) ----------------------------------------------

def classifier(upcast=False):
    import torch
    import torch.nn as nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, DIM)
            self.fc1, self.act1 = nn.Linear(DIM, HID), nn.ReLU()
            self.fc2, self.act2 = nn.Linear(HID, HID), nn.Tanh()
            self.head = nn.Linear(HID, CLASSES)
            self.loss_fn = nn.CrossEntropyLoss()

        def forward(self, ids, labels):
            logits = self.head(self.act2(self.fc2(self.act1(self.fc1(self.emb(ids))))))
            logits = logits.reshape(-1, CLASSES)
            return self.loss_fn(logits.float() if upcast else logits, labels.reshape(-1))

    torch.manual_seed(0)
    return Classifier()


def rank_main(rank, world, port, name, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_SIZE=str(world),
                      DS_ACCELERATOR="cpu")
    import torch
    import torch.distributed as dist
    import deepspeed
    from deepspeed.accelerator import get_accelerator
    deepspeed.init_distributed(dist_backend="gloo")
    get_accelerator().is_fp16_supported = lambda: True  # the CPU runs fp16 ops
    precision, stage, ranks, micro, accum, upcast = CASES[name]
    cfg = config(precision, stage, micro, accum)
    cfg["optimizer"]["params"]["torch_adam"] = True
    model = classifier(upcast)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=list(model.parameters()),
                                           config=cfg)
    ids, labels = batches()
    steps = []
    for s in range(STEPS):
        scale = float(engine.optimizer.loss_scale) if precision == "fp16" else None
        skipped = engine.skipped_steps
        losses = []
        for j in range(accum):
            lo = rank * micro * accum + j * micro
            loss = engine(torch.from_numpy(ids[s, lo:lo + micro]),
                          torch.from_numpy(labels[s, lo:lo + micro]))
            engine.backward(loss)
            losses.append(float(loss.detach().float()))
            engine.step()
        mean = torch.tensor(float(np.mean(losses)), dtype=torch.float64)
        dist.all_reduce(mean)
        steps.append(dict(step=s + 1, loss=float(mean) / world, loss_scale=scale,
                          skipped=engine.skipped_steps != skipped))
    if rank == 0:
        json.dump(dict(steps=steps, loss_dtype=str(loss.dtype)), open(out, "w"))


def run_deepspeed(name):
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="half-loss-") as tmp:
        out = os.path.join(tmp, "result.json")
        try:
            mp.start_processes(rank_main, args=(CASES[name][2], port, name, out),
                               nprocs=CASES[name][2], start_method="spawn")
            return json.load(open(out))
        finally:
            for path in glob.glob(f"/dev/shm/deepspeed_allreduce_buffer_*_127.0.0.1_{port}_*"):
                os.remove(path)


def export():
    import torch
    model = classifier().eval()
    ids, labels = batches()
    MODEL.parent.mkdir(exist_ok=True)
    program = torch.onnx.export(
        model, (torch.from_numpy(ids[0]), torch.from_numpy(labels[0])), dynamo=True,
        input_names=["ids", "labels"], output_names=["loss"],
        dynamic_shapes={"ids": {0: torch.export.Dim("batch")},
                        "labels": {0: torch.export.Dim("batch")}})
    # Stack traces hold this checkout's paths (test/models/export.py drops them too).
    for node in program.model.graph.all_nodes():
        node.metadata_props.pop("pkg.torch.onnx.stack_trace", None)
    program.save(str(MODEL))


def write():
    import deepspeed
    import torch
    export()
    ids, labels = batches()
    meta = dict(deepspeed=deepspeed.__version__, torch=torch.__version__,
                python=platform.python_version(), machine=platform.machine(),
                model_sha256=hashlib.sha256(MODEL.read_bytes()).hexdigest(),
                regenerate="build/pyenv/bin/python test/e2e/half_loss.py --write")
    cases = {}
    for name in CASES:
        r = run_deepspeed(name)
        cases[name] = dict(config=config(*CASES[name][:2], *CASES[name][3:5]),
                           world=CASES[name][2], upcast=CASES[name][5], **r)
        print(name, r["loss_dtype"], [(s["loss_scale"], s["skipped"]) for s in r["steps"][:4]],
              flush=True)
    REF.write_text(json.dumps(dict(meta=meta, ids=ids.tolist(), labels=labels.tolist(),
                                   cases=cases), indent=None, sort_keys=True) + "\n")
    print(f"wrote {REF}, {MODEL}")


# --- zero-run's side (the check) ---------------------------------------------

def check(a):
    from safetensors.numpy import save_file
    from zerokit import mpi
    from zerokit.tools import run, zero_opt
    ref = json.load(open(REF))
    if ref["meta"]["model_sha256"] != hashlib.sha256(MODEL.read_bytes()).hexdigest():
        sys.exit(f"FAIL: {MODEL.name} is not the model {REF.name} was written for "
                 "(half_loss.py --write)")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    data = work / "batches.safetensors"
    save_file({"ids": np.array(ref["ids"], np.int64),
               "labels": np.array(ref["labels"], np.int64)}, str(data))
    failed = False
    for name, case in ref["cases"].items():
        precision, stage, ranks, micro, accum, upcast = CASES[name]
        cfg = work / f"{name}.json"
        cfg.write_text(json.dumps(case["config"]))
        prog, init = work / f"{name}.zrt", work / f"{name}.init.safetensors"
        extra = ["--train", "--config", str(cfg), "--zero-pipeline", f"stage={stage} dp={ranks}"]
        run(zero_opt(a.zero_opt, str(MODEL), {"ids": (micro, SEQ), "labels": (micro, SEQ)},
                     extra + (["--fp32-loss"] if upcast else []), str(prog), str(init)))
        log = work / f"{name}-log.json"
        cmd = [a.zero_run, str(prog), "--weights", str(init), "--data", str(data),
               "--log-json", str(log), "--threads", "1"]
        run(mpi.mpirun(ranks, cmd) if ranks > 1 else cmd)
        got = [s for s in json.load(open(log)) if "loss" in s]
        want = case["steps"]
        pattern = lambda steps: [(s.get("loss_scale"), bool(s.get("skipped"))) for s in steps]
        worst = max(abs(g["loss"] - w["loss"]) / abs(w["loss"]) for g, w in zip(got, want))
        if len(got) != len(want) or pattern(got) != pattern(want):
            print(f"FAIL: {name}: (loss scale, skipped) per step\n  zero-run  {pattern(got)}\n"
                  f"  DeepSpeed {pattern(want)}")
            failed = True
        elif worst > LOSS_TOL[precision]:
            print(f"FAIL: {name}: losses differ by {worst:.2e} (relative) from DeepSpeed's, "
                  f"over {LOSS_TOL[precision]:.0e}:\n  zero-run  {[g['loss'] for g in got]}\n"
                  f"  DeepSpeed {[w['loss'] for w in want]}")
            failed = True
        else:
            skips = [s["step"] for s in want if s["skipped"]]
            scales = sorted({s["loss_scale"] for s in want if s["loss_scale"]}, reverse=True)
            print(f"{name}: DeepSpeed's pattern: skipped {skips or 'none'}, scales {scales or '-'}; "
                  f"losses within {worst:.1e}")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--zero-opt")
    ap.add_argument("--zero-run")
    ap.add_argument("--work")
    a = ap.parse_args()
    if a.write:
        write()
        return 0
    if not (a.zero_opt and a.zero_run and a.work):
        ap.error("--zero-opt, --zero-run and --work (or --write)")
    return check(a)


if __name__ == "__main__":
    sys.exit(main())
