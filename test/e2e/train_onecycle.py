"""DeepSpeed's OneCycle scheduler, with cycle_momentum, end to end
(train-onecycle.test).

A linear least-squares loss model made here (loss = ReduceMean((X W + b - Y)^2),
W [8, 4], b [4]) is trained for 16 steps with AdamW under a ds_config OneCycle
schedule of an asymmetric cycle (4 steps up, 6 down) followed by decay
(decay_step_size 2, decay_lr_rate 0.5, decay_mom_rate 0.01), over 1 rank and
over 2 (ZeRO-2). The reference is written here from DeepSpeed's OneCycle
(lr_schedules.py) and PyTorch's AdamW, in float64 numpy, with the gradient
of the loss computed analytically:
  - the scheduler is built before step 1 (lr = cycle_min_lr, betas =
    (cycle_min_mom, 0.99)) and stepped after every optimizer step;
  - its scale factor at last_batch_iteration k uses k + 1; after the cycle the
    lr is cycle_min_lr / (1 + decay_lr_rate * d / decay_step_size) and beta1
    cycle_max_mom * (1 + decay_mom_rate * d / decay_step_size), d = k - total + 1;
  - AdamW reads the step's betas (bias corrections with the step's beta1).
Checks: each step's logged lr equals the reference's (rtol 1e-6, it is an
f32); the saved W and b equal the reference's after 16 steps (rtol 1e-4); the
2-rank run logs the 1-rank losses (rtol 1e-6). Then DeepSpeed's LRRangeTest
(staircase, step size 3, rate 0.5; lr_range_test_min_lr before the first
scheduler step, then min * (1 + rate * floor((k + 1) / size))) the same way
at 1 rank, betas the optimizer's. And the OneCycle cycle in stairs (DeepSpeed
0.19's cycle_first_stair_count 2, cycle_second_stair_count 3: lr and beta1
held flat on the stair of each half's integer position) at 1 rank.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file, save_file

from zerokit import mpi
from zerokit.tools import run, zero_opt

STEPS, B, IN, OUT = 16, 8, 8, 4
SCHED = {"cycle_min_lr": 0.01, "cycle_max_lr": 0.1, "decay_lr_rate": 0.5,
         "cycle_first_step_size": 4, "cycle_second_step_size": 6, "decay_step_size": 2,
         "cycle_momentum": True, "cycle_min_mom": 0.85, "cycle_max_mom": 0.95,
         "decay_mom_rate": 0.01}
EPS, WD = 1e-8, 0.01


class OneCycle:
    """DeepSpeed's OneCycle, as lr_schedules.py defines it."""

    def __init__(self, p):
        self.p = p
        self.total = p["cycle_first_step_size"] + p["cycle_second_step_size"]
        self.ratio = p["cycle_first_step_size"] / self.total
        self.k = -1
        self.lr, self.mom = p["cycle_min_lr"], p["cycle_min_mom"]

    def scale(self):
        it = self.k + 1
        cycle = math.floor(1 + it / self.total)
        x = 1.0 + it / self.total - cycle
        rising = x <= self.ratio
        stairs = self.p.get("cycle_first_stair_count", 0)
        if not rising:
            stairs = self.p.get("cycle_second_stair_count", stairs)
        if stairs > 0:  # DeepSpeed 0.19: the stair of the half's integer position
            first, second = self.p["cycle_first_step_size"], self.p["cycle_second_step_size"]
            pos = it % self.total
            pos = pos * stairs / first if pos <= first else (self.total - pos) * stairs / second
            return math.floor(pos) / stairs
        return x / self.ratio if rising else (x - 1) / (self.ratio - 1)

    def step(self):
        self.k += 1
        p = self.p
        if self.k < self.total:
            s = self.scale()
            self.lr = p["cycle_min_lr"] + (p["cycle_max_lr"] - p["cycle_min_lr"]) * s
            self.mom = p["cycle_max_mom"] - (p["cycle_max_mom"] - p["cycle_min_mom"]) * s
        else:
            d = self.k - self.total + 1
            self.lr = p["cycle_min_lr"] / (1 + p["decay_lr_rate"] * d / p["decay_step_size"])
            self.mom = p["cycle_max_mom"] * (1 + p["decay_mom_rate"] * d / p["decay_step_size"])


class LRRangeTest:
    """DeepSpeed's LRRangeTest, as lr_schedules.py defines it."""

    def __init__(self, p):
        self.p, self.k = p, -1
        self.lr, self.mom = p["lr_range_test_min_lr"], None

    def step(self):
        self.k += 1
        p = self.p
        interval = (self.k + 1) / p["lr_range_test_step_size"]
        if p["lr_range_test_staircase"]:
            interval = math.floor(interval)
        self.lr = p["lr_range_test_min_lr"] * (1 + p["lr_range_test_step_rate"] * interval)


RANGE = {"lr_range_test_min_lr": 0.01, "lr_range_test_step_size": 3,
         "lr_range_test_step_rate": 0.5, "lr_range_test_staircase": True}


def reference(sched, W0, b0, xs, ys, betas=None):
    """float64 AdamW (PyTorch's) under `sched`'s lr and, when it has one, beta1
    (beta2 0.99, as DeepSpeed's OneCycle sets it); else `betas`."""
    W, b = W0.astype(np.float64), b0.astype(np.float64)
    m = {"W": np.zeros_like(W), "b": np.zeros_like(b)}
    v = {"W": np.zeros_like(W), "b": np.zeros_like(b)}
    lrs = []
    for t in range(1, STEPS + 1):
        x, y = xs[t - 1].astype(np.float64), ys[t - 1].astype(np.float64)
        r = x @ W + b - y
        grads = {"W": 2 * x.T @ r / r.size, "b": 2 * r.sum(0) / r.size}
        lr = sched.lr
        beta1, beta2 = (sched.mom, 0.99) if sched.mom is not None else betas
        lrs.append(lr)
        for name, p in (("W", W), ("b", b)):
            g = grads[name]
            p *= 1 - lr * WD
            m[name] = beta1 * m[name] + (1 - beta1) * g
            v[name] = beta2 * v[name] + (1 - beta2) * g * g
            denom = np.sqrt(v[name]) / math.sqrt(1 - beta2 ** t) + EPS
            p -= lr / (1 - beta1 ** t) * m[name] / denom
        sched.step()
    return W, b, lrs


def model(path, w, b):
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"]),
             helper.make_node("Add", ["xw", "b"], ["z"]),
             helper.make_node("Sub", ["z", "y"], ["r"]),
             helper.make_node("Mul", ["r", "r"], ["r2"]),
             helper.make_node("ReduceMean", ["r2"], ["loss"], keepdims=0)]
    g = helper.make_graph(
        nodes, "least_squares",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", IN]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", OUT])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    w = a.work
    os.makedirs(w, exist_ok=True)
    rng = np.random.default_rng(5)
    W0 = rng.normal(size=(IN, OUT)).astype(np.float32)
    b0 = rng.normal(size=(OUT,)).astype(np.float32)
    xs = rng.normal(size=(STEPS, B, IN)).astype(np.float32)
    ys = rng.normal(size=(STEPS, B, OUT)).astype(np.float32)
    onnx_path = os.path.join(w, "ls.onnx")
    model(onnx_path, W0, b0)
    data = os.path.join(w, "data.safetensors")
    save_file({"x": xs, "y": ys}, data)
    cfg = os.path.join(w, "ds.json")
    with open(cfg, "w") as f:
        json.dump({"optimizer": {"type": "AdamW", "params": {"lr": 0.001, "eps": EPS,
                                                             "weight_decay": WD}},
                   "scheduler": {"type": "OneCycle", "params": SCHED},
                   "gradient_clipping": 0}, f)  # the reference does not clip

    # The reference: float64 AdamW under OneCycle's lr and betas.
    W, b, lrs = reference(OneCycle(SCHED), W0, b0, xs, ys)

    logs = {}
    for ranks in (1, 2):
        prog = os.path.join(w, f"ls{ranks}.zrt")
        batch = B // ranks
        run(zero_opt(a.zero_opt, onnx_path, {"x": (batch, IN), "y": (batch, OUT)},
                     ["--train", "--config", cfg, "--zero-pipeline",
                      f"dp={ranks} stage={2 if ranks > 1 else 0}"],
                     prog, os.path.join(w, "init.safetensors")))
        log, saved = os.path.join(w, f"log{ranks}.json"), os.path.join(w, f"w{ranks}.safetensors")
        cmd = [a.zero_run, prog, "--weights", os.path.join(w, "init.safetensors"), "--data", data,
               "--log-json", log, "--save", saved]
        if ranks > 1:
            cmd = mpi.mpirun(ranks, cmd + ["--threads", "1"])
        run(cmd)
        logs[ranks] = json.load(open(log))
        got = load_file(saved)
        for name, want in (("W", W), ("b", b)):
            if not np.allclose(got[name], want, rtol=1e-4, atol=1e-6):
                sys.exit(f"FAIL: {ranks} rank(s): {name} after {STEPS} steps differs from the "
                         f"reference by {np.abs(got[name] - want).max():.3g}")
        print(f"params ok: {ranks} rank(s): W and b after {STEPS} steps equal the float64 "
              "AdamW under OneCycle's lr and beta1 (rtol 1e-4)")
    got_lrs = [r["lr"] for r in logs[1]]
    if not np.allclose(got_lrs, lrs, rtol=1e-6, atol=0):
        sys.exit(f"FAIL: logged lrs {got_lrs} != OneCycle's {lrs}")
    print("lr ok: " + " ".join(f"{x:.4g}" for x in got_lrs))
    l1, l2 = [r["loss"] for r in logs[1]], [r["loss"] for r in logs[2]]
    if not np.allclose(l1, l2, rtol=1e-6):
        sys.exit(f"FAIL: 2 ranks log {l2}, 1 rank {l1}")
    print("ranks ok: ZeRO-2 over 2 ranks logs the 1-rank losses")

    # OneCycle in stairs (DeepSpeed 0.19): 2 up, 3 down, at 1 rank.
    stairs = dict(SCHED, cycle_first_stair_count=2, cycle_second_stair_count=3)
    W, b, lrs = reference(OneCycle(stairs), W0, b0, xs, ys)
    with open(cfg, "w") as f:
        json.dump({"optimizer": {"type": "AdamW", "params": {"lr": 0.001, "eps": EPS,
                                                             "weight_decay": WD}},
                   "scheduler": {"type": "OneCycle", "params": stairs},
                   "gradient_clipping": 0}, f)  # the reference does not clip
    prog, log = os.path.join(w, "stairs.zrt"), os.path.join(w, "stairs.json")
    saved = os.path.join(w, "stairs.safetensors")
    run(zero_opt(a.zero_opt, onnx_path, {"x": (B, IN), "y": (B, OUT)}, ["--train", "--config", cfg],
                 prog, os.path.join(w, "init.safetensors")))
    run([a.zero_run, prog, "--weights", os.path.join(w, "init.safetensors"), "--data", data,
         "--log-json", log, "--save", saved])
    got_lrs = [r["lr"] for r in json.load(open(log))]
    if not np.allclose(got_lrs, lrs, rtol=1e-6, atol=0):
        sys.exit(f"FAIL: stairs: logged lrs {got_lrs} != OneCycle's {lrs}")
    got = load_file(saved)
    for name, want in (("W", W), ("b", b)):
        if not np.allclose(got[name], want, rtol=1e-4, atol=1e-6):
            sys.exit(f"FAIL: stairs: {name} after {STEPS} steps differs from the reference by "
                     f"{np.abs(got[name] - want).max():.3g}")
    print("stairs ok: lr " + " ".join(f"{x:.4g}" for x in got_lrs) + "; W and b equal the reference")

    # LRRangeTest, betas the optimizer's (0.9, 0.999).
    with open(cfg, "w") as f:
        json.dump({"optimizer": {"type": "AdamW", "params": {"lr": 0.001, "eps": EPS,
                                                             "weight_decay": WD}},
                   "scheduler": {"type": "LRRangeTest", "params": RANGE},
                   "gradient_clipping": 0}, f)  # the reference does not clip
    W, b, lrs = reference(LRRangeTest(RANGE), W0, b0, xs, ys, betas=(0.9, 0.999))
    prog = os.path.join(w, "range.zrt")
    run(zero_opt(a.zero_opt, onnx_path, {"x": (B, IN), "y": (B, OUT)},
                 ["--train", "--config", cfg], prog, os.path.join(w, "init.safetensors")))
    log, saved = os.path.join(w, "range.json"), os.path.join(w, "range.safetensors")
    run([a.zero_run, prog, "--weights", os.path.join(w, "init.safetensors"), "--data", data,
         "--log-json", log, "--save", saved])
    got = load_file(saved)
    got_lrs = [r["lr"] for r in json.load(open(log))]
    if not np.allclose(got_lrs, lrs, rtol=1e-6, atol=0):
        sys.exit(f"FAIL: LRRangeTest: logged lrs {got_lrs} != {lrs}")
    for name, want in (("W", W), ("b", b)):
        if not np.allclose(got[name], want, rtol=1e-4, atol=1e-6):
            sys.exit(f"FAIL: LRRangeTest: {name} differs by {np.abs(got[name] - want).max():.3g}")
    print("LRRangeTest ok: lr " + " ".join(f"{x:.4g}" for x in got_lrs) + "; W and b equal "
          "the reference")


if __name__ == "__main__":
    main()
