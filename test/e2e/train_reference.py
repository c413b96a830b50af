#!/usr/bin/env python3
"""PyTorch reference for training the fixture models (test/models), independent of
zero-opt / zero-run.

The model is rebuilt with test/models/export.py's own builder (imported as a module,
so architecture and configuration are the exporter's), and its parameters are then
loaded FROM THE ONNX INITIALIZERS of NAME_loss.onnx through the `param_map` /
`transposed` metadata of NAME_loss.ref.safetensors: the reference starts from exactly
the weights a compiler reads from the ONNX file.

Training follows DeepSpeed's engine on one rank (float32 throughout):

    for each step:
        for each of the K micro-batches (rows [j*B, (j+1)*B) of the step's global batch):
            loss_j = model(micro-batch)          # the loss of the _loss ONNX graph
            (loss_j / K).backward()
        grad_norm = clip_grad_norm_(trainable, gradient_clipping)   # total 2-norm
        optimizer.step()      # with the lr the scheduler set for this step
        scheduler.step()      # DeepSpeed calls it after every optimizer step
        zero_grad()
    loss of the step = mean of the K micro losses

Learning-rate schedules replicate deepspeed/runtime/lr_schedules.py (WarmupLR,
WarmupDecayLR, WarmupCosineLR): the scheduler is constructed with
last_batch_iteration = -1 and immediately writes get_lr() into the optimizer (so the
first step uses warmup_min_lr, or 0 for WarmupCosineLR), and after optimizer step t
(0-based) the engine calls scheduler.step(), setting last_batch_iteration = t. Hence
optimizer step t uses get_lr() evaluated at last_batch_iteration = t - 1.

Optimizers (ds_config "optimizer"): AdamW -> torch.optim.AdamW; Adam -> DeepSpeed's
rule: adam_w_mode defaults to true, so "Adam" is AdamW (decoupled weight decay) unless
params.adam_w_mode is false (then torch.optim.Adam, L2 weight decay); SGD ->
torch.optim.SGD(momentum, dampening, nesterov, weight_decay). Defaults are DeepSpeed's
(FusedAdam: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0).

Embedding padding_idx: PyTorch gives the padding row of an nn.Embedding no gradient
(BERT's word embeddings: padding_idx = pad_token_id = 0). That is not part of the
function the exported graph computes (a plain Gather, whose gradient reaches every
gathered row), so the reference drops padding_idx (forward unchanged) and trains the
function of NAME_loss.onnx: generated batches may contain token id 0 anywhere.

Library use (from training/train.py, train_e2e.py --train --live):
    ref = Reference("gpt2")            # model built, weights loaded from the ONNX file
    data = make_data("gpt2", steps, K, B, S, seed)
    result = ref.train(data, ds_config_dict, steps)   # losses, grad_norms, lrs, params

CLI:
    train_reference.py --check-ref [--models DIR] [NAME ...]
        one AdamW step (K=1, no clipping) on the fixture's reference inputs; gradients
        must equal the stored grad.* and the stepped parameters the stored adamw.*
    train_reference.py --model NAME --config ds.json --steps N --data-out batches.safetensors
                       --log-json log.json --save final.safetensors [--seed S]
        generate the data, train, write the log (JSON list of step/loss/grad_norm/lr)
        and the final parameters (ONNX names and layout)
    train_reference.py --write-train-ref [NAME ...] [--models DIR]
        write DIR/NAME_loss.train.ref.safetensors (default: every fixture, into
        test/models): the stored reference of `train_e2e.py --train NAME` (its default
        settings: 20 steps, accumulation 2, clipping 1.0, AdamW eps 1e-6, WarmupLR,
        data seed 1234), so that the test needs no torch. Keys: data.<input> (the
        batches), step.loss / step.grad_norm / step.lr (float64 [steps]),
        step.micro_loss ([steps, K]), final.<initializer> (F32; vit's data.pixel_values
        int8, metadata data_scale: the batch is q x 1/32); metadata: ds_config,
        steps, seed, versions, sha256 of NAME_loss.onnx, regenerate (this command).
        Regenerate after test/models/export.py or a change of this reference:
            scripts/setup-pyenv.sh full
            build/pyenv/bin/python test/e2e/train_reference.py --write-train-ref
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import re
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODELS = HERE.parent / "models"
FIXTURES = ["mlp", "gpt2", "bert", "llama", "vit"]
# vit's pixel_values: N(0, 1) rounded to multiples of PIXEL_STEP (clipped to int8 range x
# PIXEL_STEP, about +-4 sigma), as 8-bit images are quantized: the stored training
# reference keeps them as int8 (metadata data_scale), a quarter of float32's bytes.
PIXEL_STEP = 1.0 / 32

_export_mod = None


def export_module(models_dir: Path = MODELS):
    """test/models/export.py, imported once as a module (its builders and constants)."""
    global _export_mod
    if _export_mod is None:
        spec = importlib.util.spec_from_file_location("fixture_export", Path(models_dir) / "export.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _export_mod = mod
    return _export_mod


def set_deterministic():
    import torch
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


# ---------------------------------------------------------------------------
# Reference file and ONNX initializers
# ---------------------------------------------------------------------------

def read_ref(path):
    """(tensors, metadata) of a .ref.safetensors file."""
    from safetensors import safe_open
    with safe_open(str(path), "np") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})


def onnx_initializers(path):
    import onnx
    from onnx import numpy_helper
    m = onnx.load(str(path), load_external_data=True)
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def graph_inputs(path):
    import onnx
    m = onnx.load(str(path), load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    return [i.name for i in m.graph.input if i.name not in inits]


def parse_shapes(s):
    """'input_ids=2x8,labels=2x8' -> {'input_ids': (2, 8), 'labels': (2, 8)}"""
    out = {}
    for item in s.split(","):
        k, _, v = item.partition("=")
        out[k] = tuple(int(d) for d in v.split("x")) if v else ()
    return out


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

def fixture_dims(name, models_dir: Path = MODELS):
    """(B, S) of the fixture's reference inputs (S is None for the mlp and vit)."""
    _, meta = read_ref(Path(models_dir) / f"{name}_loss.ref.safetensors")
    shapes = parse_shapes(meta["input_shapes"])
    if name == "mlp":
        return shapes["x"][0], None
    if name == "vit":
        return shapes["pixel_values"][0], None
    return shapes["input_ids"]


def make_data(name, steps, accum, batch, seq=None, seed=1234, models_dir: Path = MODELS):
    """Deterministic training data: {graph input name: array [steps, accum*batch, ...]}.

    Like the fixtures' reference inputs: token ids uniform in [0, vocab); gpt2/llama
    labels random ids (the graph shifts them); bert attention_mask ones with some rows
    padded at the end, labels -100 except at about 40% of the unpadded positions (the
    first position of every row is always labelled, so no micro-batch is all-ignored);
    mlp x ~ N(0, 1) float32 and class ids in [0, classes); vit pixel_values [3, 32, 32]
    ~ N(0, 1) float32 on a grid of PIXEL_STEP (see there) and class ids in [0, num_labels).
    """
    fx = export_module(models_dir)
    rng = np.random.default_rng(seed)
    rows = accum * batch
    if name == "mlp":
        x = rng.standard_normal((steps, rows, fx.MLP_IN)).astype(np.float32)
        labels = rng.integers(0, fx.MLP_CLASSES, (steps, rows), dtype=np.int64)
        return {"x": x, "labels": labels}
    if name == "vit":
        shape = (steps, rows, 3, fx.IMAGE_SIZE, fx.IMAGE_SIZE)
        q = np.clip(np.rint(rng.standard_normal(shape) / PIXEL_STEP), -128, 127)
        px = (q * PIXEL_STEP).astype(np.float32)  # exact: PIXEL_STEP is a power of 2
        labels = rng.integers(0, fx.VIT_LABELS, (steps, rows), dtype=np.int64)
        return {"pixel_values": px, "labels": labels}
    vocab = fx.VOCAB[name]
    ids = rng.integers(0, vocab, (steps, rows, seq), dtype=np.int64)
    labels = rng.integers(0, vocab, (steps, rows, seq), dtype=np.int64)
    if name != "bert":
        return {"input_ids": ids, "labels": labels}
    mask = np.ones((steps, rows, seq), dtype=np.int64)
    pad = rng.integers(0, 3, (steps, rows))          # 0, 1 or 2 padded tokens at the end
    pad[rng.random((steps, rows)) < 0.5] = 0          # about half of the rows unpadded
    for s in range(steps):
        for r in range(rows):
            if pad[s, r]:
                mask[s, r, seq - pad[s, r]:] = 0
    keep = rng.random((steps, rows, seq)) < 0.4
    keep[:, :, 0] = True
    labels = np.where(keep & (mask == 1), labels, np.int64(-100))
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def save_safetensors(path, tensors, metadata=None):
    from safetensors.numpy import save_file
    save_file({k: np.array(v, order="C") for k, v in tensors.items()}, str(path),
              metadata=metadata)


# ---------------------------------------------------------------------------
# Learning-rate schedules (deepspeed/runtime/lr_schedules.py)
# ---------------------------------------------------------------------------

def deepspeed_lr(scheduler, base_lr, t):
    """The lr DeepSpeed's engine uses for optimizer step t (0-based).

    scheduler: the ds_config "scheduler" object (or None: constant base_lr). The
    scheduler is built with last_batch_iteration=-1 (its __init__ writes get_lr() into
    the optimizer) and stepped after every optimizer step, so step t sees
    last_batch_iteration = t - 1.
    """
    if not scheduler:
        return float(base_lr)
    kind = scheduler.get("type")
    p = dict(scheduler.get("params", {}))
    it = t - 1  # last_batch_iteration when optimizer step t runs
    if kind in ("WarmupLR", "WarmupDecayLR"):
        min_lr = float(p.get("warmup_min_lr", 0.0))
        # WarmupLR's warmup_max_lr None is the optimizer's lr; WarmupDecayLR's is 0.001.
        max_lr = float(p.get("warmup_max_lr", base_lr if kind == "WarmupLR" else 0.001))
        wsteps = max(2, int(p.get("warmup_num_steps", 1000)))
        wtype = p.get("warmup_type", "log")
        if wtype not in ("log", "linear"):
            wtype = "log"  # DeepSpeed warns and uses log
        if it < 0:  # "Attempting to get learning rate from scheduler before it has started"
            return min_lr
        if it < wsteps:
            if wtype == "log":
                gamma = (1.0 / math.log(wsteps)) * math.log(it + 1)
            else:
                gamma = it / wsteps
        elif kind == "WarmupLR":
            gamma = 1.0
        else:
            total = int(p["total_num_steps"])
            gamma = max(0.0, float(total - it) / float(max(1.0, total - wsteps)))
        return min_lr + (max_lr - min_lr) * gamma
    if kind == "WarmupCosineLR":
        total = int(p["total_num_steps"])
        wmin = float(p.get("warmup_min_ratio", 0.0))
        wsteps = max(2, int(p.get("warmup_num_steps", 1000)))
        cos_min = float(p.get("cos_min_ratio", 0.0001))
        wtype = p.get("warmup_type", "log")
        if it < 0:
            return 0.0  # get_lr() returns [0.0] before the first scheduler step
        if it < wsteps:
            if wtype == "log":
                ratio = (1.0 / math.log(wsteps)) * math.log(it + 1)
            elif wtype == "linear":
                ratio = it / wsteps
            else:
                raise ValueError(f"WarmupCosineLR: warmup_type {wtype!r}")
            ratio = wmin + ratio * (1.0 - wmin)
        else:
            # DeepSpeed 0.19 clamps the progress: past total_num_steps (or with
            # total <= warmup) the ratio stays at cos_min_ratio.
            real_last = it - wsteps + 1
            real_total = max(1, total - wsteps)
            ratio = (1 + math.cos(math.pi * min(1.0, real_last / real_total))) / 2
            ratio = max(0.0, cos_min + (1.0 - cos_min) * ratio)
        return float(base_lr) * ratio
    raise ValueError(f"unsupported scheduler type {kind!r}")


def make_optimizer(params, opt_cfg):
    """torch optimizer for a ds_config "optimizer" object (None: AdamW, DeepSpeed defaults)."""
    import torch
    opt_cfg = opt_cfg or {"type": "AdamW", "params": {}}
    kind = opt_cfg.get("type", "AdamW")
    p = dict(opt_cfg.get("params", {}))
    lr = float(p.get("lr", 1e-3))
    if kind.lower() in ("adamw", "adam"):
        adam_w_mode = p.get("adam_w_mode", True)
        decoupled = kind.lower() == "adamw" or adam_w_mode
        kw = dict(lr=lr, betas=tuple(float(b) for b in p.get("betas", (0.9, 0.999))),
                  eps=float(p.get("eps", 1e-8)), weight_decay=float(p.get("weight_decay", 0.0)))
        cls = torch.optim.AdamW if decoupled else torch.optim.Adam
        return cls(params, **kw, foreach=False)
    if kind.lower() == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=float(p.get("momentum", 0.0)),
                               dampening=float(p.get("dampening", 0.0)),
                               nesterov=bool(p.get("nesterov", False)),
                               weight_decay=float(p.get("weight_decay", 0.0)), foreach=False)
    raise ValueError(f"unsupported optimizer type {kind!r}")


# ---------------------------------------------------------------------------
# The reference model
# ---------------------------------------------------------------------------

class Reference:
    """The fixture's torch loss model with its parameters loaded from NAME_loss.onnx."""

    def __init__(self, name, models_dir: Path = MODELS, freeze: str | None = None,
                 dtype: str = "float32"):
        import torch
        set_deterministic()
        self.dtype = getattr(torch, dtype)
        self.name = name
        self.models_dir = Path(models_dir)
        fx = export_module(self.models_dir)
        _, loss_m, _, _, _ = fx.build(name)
        self.model = loss_m.float().eval()
        self.onnx_path = self.models_dir / f"{name}_loss.onnx"
        self.ref, self.meta = read_ref(self.models_dir / f"{name}_loss.ref.safetensors")
        self.param_map = json.loads(self.meta["param_map"])
        self.transposed = set(json.loads(self.meta["transposed"]))
        self.inputs = graph_inputs(self.onnx_path)
        inits = onnx_initializers(self.onnx_path)
        named = dict(self.model.named_parameters())  # deduplicated: tied parameters once
        if set(named) != set(self.param_map):
            raise SystemExit(f"FAIL: {name}: torch parameters {sorted(set(named) ^ set(self.param_map))} "
                             "do not match the reference file's param_map")
        # Load every parameter from its initializer (ONNX layout -> torch layout) and
        # note how far the rebuilt (seeded) model was from it: it should be 0.
        self.init_diff = 0.0
        with torch.no_grad():
            for n, p in named.items():
                key = self.param_map[n]
                if key not in inits:
                    raise SystemExit(f"FAIL: {name}: initializer {key} (parameter {n}) not in {self.onnx_path}")
                a = inits[key]
                if key in self.transposed:
                    a = a.T
                if tuple(a.shape) != tuple(p.shape):
                    raise SystemExit(f"FAIL: {name}: initializer {key} has shape {a.shape}, "
                                     f"parameter {n} {tuple(p.shape)}")
                t = torch.from_numpy(np.array(a, dtype=np.float32))
                self.init_diff = max(self.init_diff, float((p - t).abs().max()))
                p.copy_(t)
        # padding_idx is a PyTorch training rule the ONNX graph does not carry (see the
        # module docstring): the reference trains the graph's function.
        self.padding_dropped = []
        for mn, mod in self.model.named_modules():
            if isinstance(mod, torch.nn.Embedding) and mod.padding_idx is not None:
                self.padding_dropped.append(f"{mn}.padding_idx={mod.padding_idx}")
                mod.padding_idx = None
        # float64 is for measuring float32 rounding effects only (the reference is float32).
        self.model.to(self.dtype)
        named = dict(self.model.named_parameters())
        self.named = named
        self.frozen = set()
        if freeze:
            rx = re.compile(freeze)
            for n, p in named.items():
                if rx.search(self.param_map[n]) or rx.search(n):
                    p.requires_grad_(False)
                    self.frozen.add(n)
        self.trainable = [n for n in named if n not in self.frozen]

    # ONNX name <-> torch -------------------------------------------------

    def onnx_name(self, torch_name):
        return self.param_map[torch_name]

    def to_onnx_layout(self, torch_name, t):
        a = t.detach().cpu().numpy().astype(np.float32)
        return np.array(a.T if self.param_map[torch_name] in self.transposed else a, order="C")

    def params_onnx(self, which="trainable"):
        names = self.trainable if which == "trainable" else list(self.named)
        return {self.onnx_name(n): self.to_onnx_layout(n, self.named[n]) for n in names}

    def grads_onnx(self):
        return {self.onnx_name(n): self.to_onnx_layout(n, self.named[n].grad)
                for n in self.trainable if self.named[n].grad is not None}

    def ref_inputs(self):
        return {k[len("input."):]: v for k, v in self.ref.items() if k.startswith("input.")}

    # forward ---------------------------------------------------------------

    def loss(self, batch):
        """The _loss graph's scalar loss on one (micro-)batch of numpy arrays."""
        import torch
        kw = {}
        for k, v in batch.items():
            t = torch.from_numpy(np.array(v))
            kw[k] = t.to(self.dtype) if t.is_floating_point() else t
        return self.model(**kw)

    # training ----------------------------------------------------------------

    def train(self, data, config=None, steps=None, log=None):
        """Trains on data ({input: [steps, K*B, ...]}) with a ds_config dict.

        Returns dict(losses, micro_losses, grad_norms, lrs, params) where params are the
        final trainable parameters under their ONNX initializer names, ONNX layout.
        """
        import torch
        config = config or {}
        K = int(config.get("gradient_accumulation_steps", 1))
        # DeepSpeed 0.19 clips at 1.0 when a config leaves gradient_clipping out
        # (zero-opt without --config does not clip).
        clip = float(config.get("gradient_clipping", 1.0 if config else 0.0))
        opt_cfg = config.get("optimizer")
        sched_cfg = config.get("scheduler")
        steps = steps if steps is not None else next(iter(data.values())).shape[0]
        rows = next(iter(data.values())).shape[1]
        if rows % K:
            raise ValueError(f"{rows} rows per step is not a multiple of K={K}")
        B = rows // K
        if "train_micro_batch_size_per_gpu" in config and int(config["train_micro_batch_size_per_gpu"]) != B:
            raise ValueError(f"data has micro-batch {B}, config says "
                             f"{config['train_micro_batch_size_per_gpu']}")
        params = [self.named[n] for n in self.trainable]
        opt = make_optimizer(params, opt_cfg)
        base_lr = opt.param_groups[0]["lr"]
        out = dict(losses=[], micro_losses=[], grad_norms=[], lrs=[])
        for t in range(steps):
            lr = deepspeed_lr(sched_cfg, base_lr, t)
            for g in opt.param_groups:
                g["lr"] = lr
            micro = []
            for j in range(K):
                batch = {k: v[t, j * B:(j + 1) * B] for k, v in data.items()}
                loss = self.loss(batch)
                (loss / K).backward()
                micro.append(float(loss.detach()))
            grads = [p.grad for p in params if p.grad is not None]
            if clip > 0:
                gn = torch.nn.utils.clip_grad_norm_(params, clip, foreach=False)
            else:
                gn = torch.linalg.vector_norm(torch.stack(
                    [torch.linalg.vector_norm(g, 2) for g in grads]), 2)
            opt.step()
            opt.zero_grad(set_to_none=True)
            # The step's loss: mean of the micro losses (float64 mean of float32 values).
            step_loss = float(np.mean(np.asarray(micro, dtype=np.float64)))
            out["losses"].append(step_loss)
            out["micro_losses"].append(micro)
            out["grad_norms"].append(float(gn))
            out["lrs"].append(lr)
            if log:
                log(f"  ref step {t:3d} loss {step_loss:.7f} grad_norm {float(gn):.6f} lr {lr:.6g}")
        out["params"] = self.params_onnx()
        return out


    def train_bf16(self, data, config, steps):
        """DeepSpeed's bf16 training (runtime/bf16_optimizer.py) on one rank, K = 1: the
        model converted with .to(torch.bfloat16); an fp32 master copy of every trainable
        parameter made from the converted one (.float()); each step the bf16 forward
        and backward, the gradients widened to fp32, clipped (total norm over the
        masters) and AdamW applied to the masters; the model's parameters are then the
        masters rounded to bf16 (to nearest even). Returns dict(losses, grad_norms)."""
        import torch
        if int(config.get("gradient_accumulation_steps", 1)) != 1:
            raise ValueError("train_bf16 takes K = 1")
        # DeepSpeed 0.19 clips at 1.0 when a config leaves gradient_clipping out
        # (zero-opt without --config does not clip).
        clip = float(config.get("gradient_clipping", 1.0 if config else 0.0))
        self.model.to(torch.bfloat16)
        self.dtype = torch.bfloat16
        params = [self.named[n] for n in self.trainable]
        masters = [p.detach().float().clone().requires_grad_(True) for p in params]
        opt = make_optimizer(masters, config.get("optimizer"))
        base_lr = opt.param_groups[0]["lr"]
        out = dict(losses=[], grad_norms=[])
        for t in range(steps):
            lr = deepspeed_lr(config.get("scheduler"), base_lr, t)
            for g in opt.param_groups:
                g["lr"] = lr
            loss = self.loss({k: v[t] for k, v in data.items()})
            loss.backward()
            for m, p in zip(masters, params):
                m.grad = None if p.grad is None else p.grad.float()
            gn = torch.nn.utils.clip_grad_norm_(masters, clip if clip > 0 else float("inf"),
                                                foreach=False)
            opt.step()
            opt.zero_grad(set_to_none=True)
            self.model.zero_grad(set_to_none=True)
            with torch.no_grad():
                for m, p in zip(masters, params):
                    p.copy_(m.to(torch.bfloat16))
            out["losses"].append(float(loss.detach().float()))
            out["grad_norms"].append(float(gn))
        return out


    def train_fp16(self, data, config, steps, ranks=1):
        """DeepSpeed's fp16 training on one rank, K = 1: the model converted with .half(),
        fp32 masters made from it; each step the loss x scale backward in fp16, overflow =
        a non-finite norm of the (scaled) gradients, the scale updated by DeepSpeed's
        DynamicLossScaler.update_scale (runtime/fp16/loss_scaler.py: hysteresis,
        loss_scale_window, min_loss_scale), an overflowing step skipped (no update, no
        scheduler step, Adam's step count unchanged), else the gradients unscaled by the
        scale the backward used, clipped and AdamW applied to the masters, the model's
        parameters the masters rounded to fp16. The scale doubles after a clean step
        whose stable interval (cur_iter - last_overflow_iter - 1, DeepSpeed 0.19) is a
        positive multiple of loss_scale_window. With ranks > 1, data parallelism as
        DeepSpeed's ZeRO 1-3 run it: each rank's backward on its rows (its own mean
        loss), each rank's fp16 gradient divided by the ranks in fp16 and the results
        summed in fp16 (the reduction; a sum past fp16's range overflows); the logged
        loss is the ranks' mean. Returns dict(losses, scales, skipped)."""
        import torch
        fp = config["fp16"]
        # DeepSpeed 0.19 clips at 1.0 when a config leaves gradient_clipping out
        # (zero-opt without --config does not clip).
        clip = float(config.get("gradient_clipping", 1.0 if config else 0.0))
        H = int(fp.get("hysteresis", 2))
        window = int(fp.get("loss_scale_window", 1000))
        min_scale = float(fp.get("min_loss_scale", 1))
        consecutive = bool(fp.get("consecutive_hysteresis", False))
        cur_scale = 2.0 ** int(fp.get("initial_scale_power", 16))
        cur_iter, last_overflow, cur_h = 0, -1, H
        self.model.half()
        self.dtype = torch.float16
        params = [self.named[n] for n in self.trainable]
        masters = [p.detach().float().clone().requires_grad_(True) for p in params]
        opt = make_optimizer(masters, config.get("optimizer"))
        base_lr = opt.param_groups[0]["lr"]
        done = 0  # optimizer steps taken (the scheduler's count)
        out = dict(losses=[], scales=[], skipped=[])
        for t in range(steps):
            lr = deepspeed_lr(config.get("scheduler"), base_lr, done)
            for g in opt.param_groups:
                g["lr"] = lr
            rows = next(iter(data.values())).shape[1] // ranks
            summed, losses = None, []
            for r in range(ranks):
                loss = self.loss({k: v[t, r * rows:(r + 1) * rows] for k, v in data.items()})
                (loss.float() * cur_scale).backward()
                losses.append(float(loss.detach().float()))
                # ZeRO 1-3 divide each rank's gradient before the reduction.
                g = [None if p.grad is None else p.grad.detach().clone() * (1.0 / ranks)
                     if ranks > 1 else p.grad.detach().clone() for p in params]
                summed = g if summed is None else [
                    None if x is None else x + y for x, y in zip(summed, g)]  # fp16 adds
                self.model.zero_grad(set_to_none=True)
            sq = sum(float((x.float() ** 2).sum()) for x in summed if x is not None)
            overflow = not math.isfinite(sq)
            used = cur_scale
            out["losses"].append(float(np.mean(losses)))
            out["scales"].append(used)
            out["skipped"].append(overflow)
            # DynamicLossScaler.update_scale(overflow)
            if overflow:
                if H == 1 or cur_h == 1:
                    cur_scale = max(cur_scale / 2.0, min_scale)
                else:
                    cur_h -= 1
                last_overflow = cur_iter
            else:
                if consecutive:
                    cur_h = H
                stable = cur_iter - last_overflow - 1
                if stable > 0 and stable % window == 0:
                    if not consecutive:
                        cur_h = H
                    cur_scale *= 2.0
            cur_iter += 1
            if not overflow:
                for m, x in zip(masters, summed):
                    m.grad = None if x is None else x.float() * (1.0 / used)
                torch.nn.utils.clip_grad_norm_(masters, clip if clip > 0 else float("inf"),
                                               foreach=False)
                opt.step()
                done += 1
                with torch.no_grad():
                    for m, p in zip(masters, params):
                        p.copy_(m.half())
            opt.zero_grad(set_to_none=True)
            self.model.zero_grad(set_to_none=True)
        return out


def fp16_config(B):
    """The ds_config of train_e2e.py --fp16: --bf16's with fp16 instead, the dynamic scaler
    starting at 2^20 (the fixtures' gradients overflow there), a window of 3 clean steps
    and DeepSpeed's hysteresis 2, so that a 20-step run skips, halves and doubles."""
    cfg = bf16_config(B)
    del cfg["bf16"]
    cfg["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 20,
                   "loss_scale_window": 3, "hysteresis": 2, "min_loss_scale": 1}
    return cfg


def precision_data(name, models_dir, steps, rows):
    """The batches of the 16-bit training references: `rows` rows a step (1, 2 and 4
    ranks split them), train_e2e's data seed."""
    sys.path.insert(0, str(HERE))
    from training import common as te
    _, S = fixture_dims(name, models_dir)
    return make_data(name, steps, 1, rows, S, te.TRAIN_DEFAULTS["seed"], models_dir)


def save_precision_ref(name, models_dir, kind, cfg, steps, data, arrays, reference):
    """Writes models_dir/NAME_loss.KIND.ref.safetensors: data.* and the step.* `arrays`,
    with the config, the source model's sha256 and how to regenerate it; returns its
    path."""
    import torch
    sys.path.insert(0, str(HERE))
    from training import common as te
    tensors = {f"data.{k}": v for k, v in data.items()}
    tensors.update({f"step.{k}": v for k, v in arrays.items()})
    onnx_path = models_dir / f"{name}_loss.onnx"
    meta = {
        "format": f"zero {kind} training reference 1 (test/e2e/train_e2e.py --{kind})",
        "model": name, "onnx": onnx_path.name, "onnx_sha256": te.sha256_file(onnx_path),
        "ds_config": json.dumps(cfg, sort_keys=True), "steps": str(steps),
        "reference": reference,
        "torch_version": torch.__version__,
        "regenerate": "scripts/setup-pyenv.sh full && build/pyenv/bin/python "
                      f"test/e2e/train_reference.py --write-{kind}-ref {name}",
    }
    path = models_dir / f"{name}_loss.{kind}.ref.safetensors"
    export_module(models_dir).save_ref(path, {k: np.array(v, order="C")
                                              for k, v in tensors.items()}, meta)
    os.chmod(path, 0o644)
    return path


def write_fp16_ref(name, models_dir=MODELS, steps=20, rows=4):
    """Writes models_dir/NAME_loss.fp16.ref.safetensors: the data, and per step the loss,
    the loss scale and whether the step was skipped in DeepSpeed's fp16 training
    (train_fp16), and the fp32 losses on the same data and config."""
    models_dir = Path(models_dir)
    data = precision_data(name, models_dir, steps, rows)
    cfg = fp16_config(rows)
    fp32 = Reference(name, models_dir).train(
        data, {k: v for k, v in cfg.items() if k != "fp16"}, steps)
    fp16 = Reference(name, models_dir).train_fp16(data, cfg, steps)
    fp16n2 = Reference(name, models_dir).train_fp16(data, cfg, steps, ranks=2)
    f64, i64 = np.float64, np.int64
    path = save_precision_ref(name, models_dir, "fp16", cfg, steps, data, {
        "loss_fp32": np.asarray(fp32["losses"], f64),
        "loss_fp16": np.asarray(fp16["losses"], f64),
        "loss_scale": np.asarray(fp16["scales"], f64),
        "skipped": np.asarray(fp16["skipped"], i64),
        "loss_fp16_n2": np.asarray(fp16n2["losses"], f64),
        "loss_scale_n2": np.asarray(fp16n2["scales"], f64),
        "skipped_n2": np.asarray(fp16n2["skipped"], i64)},
        "train_reference.Reference.train_fp16 (DeepSpeed's fp16 training with "
        "DynamicLossScaler on one rank) and .train (fp32), 1 thread")
    for tag, res in (("1 rank", fp16), ("2 ranks", fp16n2)):
        print(f"wrote {path}: {tag}: skipped steps "
              f"{[i + 1 for i, s in enumerate(res['skipped']) if s]}, scales "
              f"{sorted(set(res['scales']))}")
    return path


def bf16_config(B):
    """The ds_config of train_e2e.py --bf16: --train's, K = 1, with bf16 enabled."""
    sys.path.insert(0, str(HERE))
    from training import common as te
    cfg = te.train_config(B, 1, te.TRAIN_DEFAULTS["clip"], te.TRAIN_DEFAULTS["eps"])
    cfg["bf16"] = {"enabled": True}
    return cfg


def write_bf16_ref(name, models_dir=MODELS, steps=20, rows=4):
    """Writes models_dir/NAME_loss.bf16.ref.safetensors: the data (rows rows a step, so
    that 1, 2 and 4 ranks split it), and per step the loss of DeepSpeed's bf16
    training (train_bf16) and of fp32 training on the same data and config: their
    difference is PyTorch's own bf16 spread, the yardstick of train_e2e.py --bf16."""
    models_dir = Path(models_dir)
    data = precision_data(name, models_dir, steps, rows)
    cfg = bf16_config(rows)
    fp32 = Reference(name, models_dir).train(
        data, {k: v for k, v in cfg.items() if k != "bf16"}, steps)
    bf16 = Reference(name, models_dir).train_bf16(data, cfg, steps)
    tensors = {"loss_fp32": np.asarray(fp32["losses"], np.float64),
               "loss_bf16": np.asarray(bf16["losses"], np.float64),
               "grad_norm_bf16": np.asarray(bf16["grad_norms"], np.float64)}
    path = save_precision_ref(name, models_dir, "bf16", cfg, steps, data, tensors,
                              "train_reference.Reference.train_bf16 (DeepSpeed's bf16 "
                              "optimizer on one rank) and .train (fp32), 1 thread, "
                              "deterministic algorithms")
    spread = np.abs(tensors["loss_bf16"] - tensors["loss_fp32"]).max()
    print(f"wrote {path}: torch bf16 vs fp32 loss, max over {steps} steps {spread:.3g}")
    return path


# ---------------------------------------------------------------------------
# Sanity check against the stored reference (grad.* and adamw.*)
# ---------------------------------------------------------------------------

def compare(what, got, want, rtol, atol):
    """(ok, max_abs, max_rel) with max_rel over elements where |want| > atol."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return False, float("inf"), float("inf")
    d = np.abs(got - want)
    max_abs = float(d.max()) if d.size else 0.0
    big = np.abs(want) > atol
    max_rel = float((d[big] / np.abs(want[big])).max()) if big.any() else 0.0
    ok = bool(np.allclose(got, want, rtol=rtol, atol=atol))
    return ok, max_abs, max_rel


def check_ref(name, models_dir=MODELS, rtol=1e-5, atol=1e-7, verbose=True):
    """One AdamW step (K=1, no clipping, the fixture's settings) on the reference
    inputs; gradients vs grad.*, parameters vs adamw.*, loss vs torch.loss."""
    ref = Reference(name, models_dir)
    meta = ref.meta
    cfg = {"gradient_accumulation_steps": 1, "gradient_clipping": 0,  # adamw.* is unclipped
           "optimizer": {"type": "AdamW", "params": {
               "lr": float(meta["lr"]), "betas": [float(meta["beta1"]), float(meta["beta2"])],
               "eps": float(meta["eps"]), "weight_decay": float(meta["weight_decay"])}}}
    inputs = ref.ref_inputs()
    failures = []
    print(f"== {name}: rebuilt model vs ONNX initializers: max |diff| {ref.init_diff:.3g} "
          f"(loaded from the ONNX file either way)")
    # loss and gradients of one backward
    loss = ref.loss(inputs)
    loss.backward()
    loss = loss.detach()
    ok, ma, mr = compare("loss", loss.numpy(), ref.ref["torch.loss"], rtol, atol)
    print(f"  {'ok  ' if ok else 'FAIL'} loss {float(loss):.7f} vs torch.loss "
          f"{float(ref.ref['torch.loss']):.7f} (abs {ma:.3g}), ort.loss {float(ref.ref['ort.loss']):.7f}")
    if not ok:
        failures.append("loss")
    grads = ref.grads_onnx()
    want_g = {k[5:]: v for k, v in ref.ref.items() if k.startswith("grad.")}
    if set(grads) != set(want_g):
        failures.append("grad set")
        print(f"  FAIL gradient names differ: only torch {sorted(set(grads) - set(want_g))}, "
              f"only ref {sorted(set(want_g) - set(grads))}")
    worst = (0.0, 0.0, "")
    for k in sorted(want_g):
        if k not in grads:
            continue
        ok, ma, mr = compare(k, grads[k], want_g[k], rtol, atol)
        if not ok:
            failures.append(f"grad.{k}")
            print(f"  FAIL grad.{k}: max abs {ma:.3g} max rel {mr:.3g}")
        if ma > worst[0]:
            worst = (ma, mr, k)
    print(f"  {len(want_g)} gradients vs grad.*: worst max abs {worst[0]:.3g} (rel {worst[1]:.3g}) at {worst[2]}")
    for p in ref.named.values():
        p.grad = None
    # one optimizer step through the training loop (same code as train())
    data = {k: v[None] for k, v in inputs.items()}
    res = ref.train(data, cfg, steps=1)
    want_p = {k[6:]: v for k, v in ref.ref.items() if k.startswith("adamw.")}
    if set(res["params"]) != set(want_p):
        failures.append("adamw set")
    # Elementwise rtol fails where the gradient is float32 noise (|g| <~ eps: the
    # attention key bias, whose true gradient is 0): AdamW's first step moves by
    # lr*g/(|g|+eps). Such elements are judged as train_e2e.py --adamw-step does: the
    # allowed error includes lr x the effect of the gradient tolerance on g/(|g|+eps).
    sys.path.insert(0, str(HERE))
    from training.grads import adam_step1_allowed
    worst = (0.0, 0.0, "")
    strict_bad = {}
    for k in sorted(want_p):
        got = res["params"].get(k, np.zeros(0))
        ok, ma, mr = compare(k, got, want_p[k], rtol, atol)
        if not ok:
            allowed, _ = adam_step1_allowed(want_p[k], want_g[k], float(meta["lr"]), float(meta["eps"]),
                                            rtol, atol, rtol, atol)
            d = np.abs(got.astype(np.float64) - want_p[k]) if got.shape == want_p[k].shape else None
            n_strict = int(np.sum(~np.isclose(got, want_p[k], rtol=rtol, atol=atol))) if d is not None else -1
            strict_bad[k] = n_strict
            if d is None or np.any(d > allowed):
                failures.append(f"adamw.{k}")
                print(f"  FAIL adamw.{k}: max abs {ma:.3g} max rel {mr:.3g}")
            else:
                print(f"  note adamw.{k}: {n_strict} element(s) outside rtol {rtol} (max abs {ma:.3g}), "
                      f"all where the stored gradient is at noise level (within lr x gradient "
                      f"tolerance effect)")
        if ma > worst[0]:
            worst = (ma, mr, k)
    print(f"  {len(want_p)} parameters after one AdamW step vs adamw.*: worst max abs {worst[0]:.3g} "
          f"(rel {worst[1]:.3g}) at {worst[2]}; loss {res['losses'][0]:.7f} grad_norm "
          f"{res['grad_norms'][0]:.6f} lr {res['lrs'][0]}")
    print(f"  {'PASS' if not failures else 'FAIL'} {name}: reference rebuild "
          f"{'matches' if not failures else 'does not match'} the stored grad.*/adamw.* "
          f"(rtol {rtol}, atol {atol})")
    return failures


# ---------------------------------------------------------------------------

def write_train_ref(name, models_dir=MODELS):
    """Writes models_dir/NAME_loss.train.ref.safetensors (see the module docstring);
    returns its path."""
    import torch
    import transformers
    sys.path.insert(0, str(HERE))
    from training import common as te
    models_dir = Path(models_dir)
    d = te.TRAIN_DEFAULTS
    B, S = fixture_dims(name, models_dir)
    K, steps = d["accum"], d["steps"]
    cfg = te.train_config(B, K, d["clip"], d["eps"])
    data = make_data(name, steps, K, B, S, d["seed"], models_dir)
    ref = Reference(name, models_dir)
    res = ref.train(data, cfg, steps)
    tensors = {f"data.{k}": v for k, v in data.items()}
    data_scale = {}
    if name == "vit":  # int8 on the pixel grid; training.common.read_train_ref multiplies back
        q = data["pixel_values"] / np.float32(PIXEL_STEP)
        q8 = q.astype(np.int8)
        if not np.array_equal(q8.astype(np.float32) * np.float32(PIXEL_STEP), data["pixel_values"]):
            raise SystemExit("FAIL: vit pixel_values are not int8 multiples of PIXEL_STEP")
        tensors["data.pixel_values"] = q8
        data_scale["pixel_values"] = PIXEL_STEP
    tensors["step.loss"] = np.asarray(res["losses"], dtype=np.float64)
    tensors["step.grad_norm"] = np.asarray(res["grad_norms"], dtype=np.float64)
    tensors["step.lr"] = np.asarray(res["lrs"], dtype=np.float64)
    tensors["step.micro_loss"] = np.asarray(res["micro_losses"], dtype=np.float32)
    for k, v in res["params"].items():
        tensors[f"final.{k}"] = np.asarray(v, dtype=np.float32)
    onnx_path = models_dir / f"{name}_loss.onnx"
    meta = {
        "format": "zero training reference 1 (test/e2e/train_e2e.py --train)",
        "model": name,
        "onnx": onnx_path.name,
        "onnx_sha256": te.sha256_file(onnx_path),
        "ds_config": json.dumps(cfg, sort_keys=True),
        "steps": str(steps),
        "micro_batch": str(B),
        "gradient_accumulation_steps": str(K),
        "seed": str(d["seed"]),
        "data": "train_reference.make_data(name, steps, K, B, S, seed): numpy default_rng",
        **({"data_scale": json.dumps(data_scale, sort_keys=True)} if data_scale else {}),
        "reference": "train_reference.Reference: float32, 1 thread, deterministic algorithms; "
                     "embedding padding_idx dropped (" + (", ".join(ref.padding_dropped) or "none") + ")",
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "regenerate": "scripts/setup-pyenv.sh full && " + te.REGEN_TRAIN_REF.format(name),
    }
    path = models_dir / te.TRAIN_REF.format(name)
    # export.py's writer: the header rewritten with sorted keys (the Rust writer emits the
    # metadata in hash-map order), so a re-run with the same versions is byte-identical.
    export_module(models_dir).save_ref(path, {k: np.array(v, order="C") for k, v in tensors.items()}, meta)
    os.chmod(path, 0o644)
    print(f"wrote {path} ({path.stat().st_size} bytes: {len(res['params'])} parameters, "
          f"{steps} steps; final loss {res['losses'][-1]:.7f})")
    return path


def write_log(path, res):
    rows = [dict(step=i, loss=res["losses"][i], grad_norm=res["grad_norms"][i], lr=res["lrs"][i],
                 micro_losses=res["micro_losses"][i]) for i in range(len(res["losses"]))]
    Path(path).write_text(json.dumps(rows, indent=1) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=str(MODELS))
    ap.add_argument("--check-ref", nargs="*", metavar="NAME", default=None,
                    help="sanity check against the stored grad.*/adamw.* (default: all fixtures)")
    ap.add_argument("--write-train-ref", nargs="*", metavar="NAME", default=None, choices=FIXTURES,
                    help="write DIR/NAME_loss.train.ref.safetensors, the stored reference of "
                         "train_e2e.py --train (default: all fixtures; DIR is --models)")
    ap.add_argument("--write-bf16-ref", nargs="+", metavar="NAME", default=None,
                    choices=FIXTURES,
                    help="write DIR/NAME_loss.bf16.ref.safetensors, the stored reference of "
                         "train_e2e.py --bf16")
    ap.add_argument("--write-fp16-ref", nargs="+", metavar="NAME", default=None,
                    choices=FIXTURES,
                    help="write DIR/NAME_loss.fp16.ref.safetensors, the stored reference of "
                         "train_e2e.py --fp16")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--atol", type=float, default=1e-7)
    ap.add_argument("--model", choices=FIXTURES)
    ap.add_argument("--config", help="ds_config.json")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--batch", type=int, default=None, help="micro-batch (default: the fixture's)")
    ap.add_argument("--seq", type=int, default=None, help="sequence (default: the fixture's)")
    ap.add_argument("--data", help="read the data from this file instead of generating it")
    ap.add_argument("--data-out", help="write the generated data here")
    ap.add_argument("--freeze", default=None, help="regex: parameters (ONNX or torch name) not trained")
    ap.add_argument("--log-json")
    ap.add_argument("--save")
    a = ap.parse_args()
    if a.write_fp16_ref is not None:
        for n in a.write_fp16_ref:
            write_fp16_ref(n, Path(a.models))
        return
    if a.write_bf16_ref is not None:
        for n in a.write_bf16_ref:
            write_bf16_ref(n, Path(a.models))
        return
    if a.write_train_ref is not None:
        total = 0
        for n in a.write_train_ref or FIXTURES:
            total += write_train_ref(n, Path(a.models)).stat().st_size
        print(f"total {total} bytes")
        return
    if a.check_ref is not None:
        names = a.check_ref or FIXTURES
        bad = {}
        for n in names:
            f = check_ref(n, Path(a.models), a.rtol, a.atol)
            if f:
                bad[n] = f
        if bad:
            sys.exit(f"FAIL: {bad}")
        print(f"PASS: reference matches the stored gradients and AdamW step for {', '.join(names)}")
        return
    if not a.model:
        ap.error("--model or --check-ref")
    config = json.loads(Path(a.config).read_text()) if a.config else {}
    K = int(config.get("gradient_accumulation_steps", 1))
    B0, S0 = fixture_dims(a.model, Path(a.models))
    B = a.batch or int(config.get("train_micro_batch_size_per_gpu", B0))
    S = a.seq or S0
    if a.data:
        from safetensors.numpy import load_file
        data = load_file(a.data)
    else:
        data = make_data(a.model, a.steps, K, B, S, a.seed, Path(a.models))
        if a.data_out:
            save_safetensors(a.data_out, data)
    ref = Reference(a.model, Path(a.models), freeze=a.freeze)
    res = ref.train(data, config, a.steps, log=print)
    if a.log_json:
        write_log(a.log_json, res)
    if a.save:
        save_safetensors(a.save, res["params"])


if __name__ == "__main__":
    main()
