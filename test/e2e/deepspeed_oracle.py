#!/usr/bin/env python3
"""DeepSpeed 0.19 as the oracle: its own engine trains the GPT-2 loss fixture on a
ds_config, and what it did is stored for the tests that hold zero-opt / zero-run to it.

    deepspeed_oracle.py --write [--only NAME ...] [--out FILE]

needs torch, transformers (with accelerate) and deepspeed (`scripts/setup-pyenv.sh
deepspeed`). For each case it starts the case's world of ranks (torch.multiprocessing,
gloo, DS_ACCELERATOR=cpu), builds the fixture's torch model with its parameters read
from gpt2_loss.onnx (train_reference.Reference), calls deepspeed.initialize with the
case's config and trains it, every rank on the rows zero-run --tokens gives it: the
GPL-3 split of zerokit.data into byte tokens, the windows of TokenData.h's formula
(zerokit.data.token_window, seed 1), rank r's rows [r*K*b, (r+1)*K*b) of the step's
global batch, micro-batch j its rows [j*b, (j+1)*b).

Per step it records what DeepSpeed's engine reports: the loss (the mean over ranks and
micro-batches of the micro losses), the global gradient norm
(engine.get_global_grad_norm(); where the engine keeps none, ZeRO stage 0 in
fp32, the 2-norm of the gradients it averaged, before its step), the lr the
optimizer applied, the fp16 loss scale the
backward used and whether the step was skipped (engine.skipped_steps). Per case it
also records the values DeepSpeed resolved: batch sizes, gradient accumulation,
clipping, the optimizer's class and hyper-parameters.

Configs with "auto" are filled by the Hugging Face Trainer itself
(transformers.integrations.deepspeed.HfTrainerDeepSpeedConfig with the Trainer's
arguments the case names), as a Trainer user's run would be. Where DeepSpeed cannot
run a config on a CPU as written, the case's `ds_changes` say what the DeepSpeed run
changed and why (each leaves the arithmetic as the config asks).

The result goes to test/e2e/deepspeed_oracle.ref.json (versions and the sha256 of the
model and the text in its "meta"). Regenerate after a change of the fixture, the
cases or this script:
    scripts/setup-pyenv.sh deepspeed
    build/pyenv/bin/python test/e2e/deepspeed_oracle.py --write
"""
from __future__ import annotations

import argparse
import copy
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
sys.path.insert(0, str(HERE))
REF = HERE / "deepspeed_oracle.ref.json"
MODELS = HERE.parent / "models"

# The data every case trains on (train_configs.py's): sequence length, global
# batch (rows per optimizer step over all ranks and micro-batches), token seed.
SEQ, GLOBAL_BATCH, SEED = 32, 16, 1


def cases():
    """{name: case}: the real-world configs of train_configs.py (40 steps each), then
    CONFIGS below (deepspeed_configs.py's)."""
    from train_configs import CONFIGS as REAL
    out = {}
    for name, (cfg, ranks, extra, precision, stage) in REAL.items():
        out[name] = dict(config=cfg, world=ranks, steps=40, trainer=trainer_args(extra, cfg),
                         zero_opt=extra, kind="real-world")
    for name, case in CONFIGS.items():
        case = dict(case)
        case.setdefault("world", 2)
        case.setdefault("steps", 12)
        case.setdefault("zero_opt", [])
        case.setdefault("trainer", trainer_args(case["zero_opt"], case["config"]))
        case["kind"] = "config"
        out[name] = case
    return out


# The Trainer's optimizer where a config has none (--learning_rate 3e-3, its
# weight_decay default 0; torch's AdamW, zero-opt's --optimizer adamw, defaults
# to 0.01).
TRAINER_ADAMW = ["--optimizer", "adamw lr=3e-3 weight-decay=0"]
# The optimizer and data most cases share: AdamW at lr 3e-3, 8 rows per rank.
ADAMW = {"type": "AdamW", "params": {"lr": 3e-3}}
MICRO8 = {"train_micro_batch_size_per_gpu": 8}


def adamw(**params):
    return {"type": "AdamW", "params": {"lr": 3e-3, **params}}


def plain(**keys):
    """AdamW, 8 rows per rank, and `keys`."""
    return {**MICRO8, "optimizer": ADAMW, **keys}


def llamafactory(stage):
    """LLaMA-Factory's examples/deepspeed/ds_z{stage}_config.json (stages 0 and 2)."""
    return {
        "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
        "zero_allow_untested_optimizer": True,
        "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000,
                 "initial_scale_power": 16, "hysteresis": 2, "min_loss_scale": 1},
        "bf16": {"enabled": "auto"},
        "zero_optimization": {"stage": stage, "allgather_partitions": True,
                              "allgather_bucket_size": 5e8, "overlap_comm": False,
                              "reduce_scatter": True, "reduce_bucket_size": 5e8,
                              "contiguous_gradients": True, "round_robin_gradients": True}}


# Each config as a user writes it, and what it stands for. Cases whose config has no
# "optimizer" train with the framework's own (`client`: torch's AdamW with these
# settings, zero-opt's --optimizer the same); "auto" is the Hugging Face Trainer's.
CONFIGS = {
    # Issue-listed differences, one key each (the rest DeepSpeed's defaults).
    "clip-absent": dict(config=plain()),  # 0.19 clips at 1.0
    "clip-zero": dict(config=plain(gradient_clipping=0.0)),
    "warmuplr-no-max": dict(config=plain(scheduler={
        "type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_num_steps": 5}})),
    "warmuplr-linear": dict(config=plain(scheduler={
        "type": "WarmupLR", "params": {"warmup_min_lr": 1e-4, "warmup_max_lr": 3e-3,
                                       "warmup_num_steps": 6, "warmup_type": "linear"}})),
    "warmuplr-last-batch": dict(config=plain(scheduler={
        "type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 3e-3,
                                       "warmup_num_steps": 10, "last_batch_iteration": 4}})),
    "warmupdecay": dict(config=plain(scheduler={
        "type": "WarmupDecayLR", "params": {"total_num_steps": 12, "warmup_num_steps": 3,
                                            "warmup_max_lr": 3e-3}})),
    "warmupdecay-total-le-warmup": dict(config=plain(scheduler={
        "type": "WarmupDecayLR", "params": {"total_num_steps": 4, "warmup_num_steps": 5,
                                            "warmup_max_lr": 3e-3}})),
    "cosine-past-total": dict(steps=14, config=plain(scheduler={
        "type": "WarmupCosineLR", "params": {"total_num_steps": 8, "warmup_num_steps": 3}})),
    "onecycle": dict(steps=14, config=plain(scheduler={
        "type": "OneCycle", "params": {"cycle_min_lr": 1e-3, "cycle_max_lr": 5e-3,
                                       "cycle_first_step_size": 4, "decay_lr_rate": 0.1,
                                       "decay_step_size": 2}})),
    "onecycle-stairs": dict(steps=14, config=plain(scheduler={
        "type": "OneCycle", "params": {"cycle_min_lr": 1e-3, "cycle_max_lr": 5e-3,
                                       "cycle_first_step_size": 4, "cycle_first_stair_count": 2,
                                       "decay_lr_rate": 0.1, "decay_step_size": 2,
                                       "cycle_momentum": False}})),
    "onecycle-last-batch": dict(steps=10, config=plain(scheduler={
        "type": "OneCycle", "params": {"cycle_min_lr": 1e-3, "cycle_max_lr": 5e-3,
                                       "cycle_first_step_size": 4, "decay_lr_rate": 0.1,
                                       "decay_step_size": 2, "last_batch_iteration": 2}})),
    "lr-range-test": dict(config=plain(scheduler={
        "type": "LRRangeTest", "params": {"lr_range_test_min_lr": 1e-3,
                                          "lr_range_test_step_size": 3,
                                          "lr_range_test_step_rate": 0.5,
                                          "lr_range_test_staircase": True}})),
    "torch-adam-no-wd": dict(config={**MICRO8, "optimizer": {
        "type": "Adam", "params": {"lr": 3e-3, "torch_adam": True}}}),
    "adam-l2": dict(config={**MICRO8, "optimizer": {
        "type": "Adam", "params": {"lr": 3e-3, "torch_adam": True, "adam_w_mode": False,
                                   "weight_decay": 0.1}}}),
    "adam-no-bias-correction": dict(config={**MICRO8, "optimizer": {
        "type": "Adam", "params": {"lr": 3e-3, "bias_correction": False}}}),
    "adamw-amsgrad": dict(config={**MICRO8, "optimizer": adamw(amsgrad=True)}),
    "adamw-max-grad-norm": dict(config={**MICRO8, "optimizer": adamw(max_grad_norm=1.0)}),
    "sgd-momentum": dict(config={**MICRO8, "optimizer": {
        "type": "SGD", "params": {"lr": 0.05, "momentum": 0.9}}}),
    "batch-only": dict(config={"train_batch_size": 16, "optimizer": ADAMW}),
    "batch-and-micro": dict(config={"train_batch_size": 32, "train_micro_batch_size_per_gpu": 8,
                                    "optimizer": ADAMW}),
    "batch-micro-accum-mismatch": dict(config={
        "train_batch_size": 32, "train_micro_batch_size_per_gpu": 8,
        "gradient_accumulation_steps": 4, "optimizer": ADAMW}),
    "accum2-zero1": dict(config={"train_micro_batch_size_per_gpu": 4,
                                 "gradient_accumulation_steps": 2, "optimizer": ADAMW,
                                 "zero_optimization": {"stage": 1}}),
    "legacy-bfloat16": dict(config=plain(bfloat16={"enabled": True},
                                         zero_optimization={"stage": 1})),
    "bf16-zero2": dict(config=plain(bf16={"enabled": True}, zero_optimization={"stage": 2})),
    "bf16-comm-fp32": dict(config=plain(bf16={"enabled": True}, communication_data_type="fp32",
                                        zero_optimization={"stage": 1})),
    "allreduce-sum-zero1": dict(config=plain(gradient_allreduce_op="sum",
                                             zero_optimization={"stage": 1})),
    "allreduce-sum-zero3": dict(config=plain(gradient_allreduce_op="sum",
                                             zero_optimization={"stage": 3})),
    "auto-outside-trainer": dict(zero_opt=["--optimizer", "adamw lr=3e-3"], config={
        **MICRO8, "optimizer": {"type": "AdamW", "params": {"lr": "auto"}},
        "zero_optimization": {"stage": "auto", "overlap_comm": "auto", "sub_group_size": "auto",
                              "offload_optimizer": {"device": "auto", "pin_memory": "auto"}}}),
    "fp16-min-scale-1000": dict(config=plain(fp16={"enabled": True, "min_loss_scale": 1000},
                                             zero_optimization={"stage": 1})),
    "fp16-static-scale": dict(config=plain(fp16={"enabled": True, "loss_scale": 1024,
                                                 "min_loss_scale": 1000},
                                           zero_optimization={"stage": 1})),
    "fp16-overflow": dict(config=plain(fp16={"enabled": True, "initial_scale_power": 24,
                                             "hysteresis": 1, "loss_scale_window": 4},
                                       zero_optimization={"stage": 2})),
    "accum-fp16-fp32": dict(config={
        "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
        "optimizer": ADAMW, "fp16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp32"},
        "zero_optimization": {"stage": 1}}),
    "accum-bf16-fp32-zero0": dict(config={
        "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
        "optimizer": ADAMW, "bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp32"}}),
    "accum-bf16-fp32-zero1": dict(config={
        "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
        "optimizer": ADAMW, "bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp32"},
        "zero_optimization": {"stage": 1}}),
    "accum-bf16-fp32-zero2": dict(config={
        "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
        "optimizer": ADAMW, "bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp32"},
        "zero_optimization": {"stage": 2}}),
    "accum-bf16-fp32-zero3": dict(config={
        "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
        "optimizer": ADAMW, "bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp32"},
        "zero_optimization": {"stage": 3}}),
    "accum-bf16-fp16": dict(config={
        "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
        "optimizer": ADAMW, "bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp16"},
        "zero_optimization": {"stage": 1}}),
    "fp32-spellings": dict(config=plain(communication_data_type="FP32",
                                        data_types={"grad_accum_dtype": "float32"},
                                        zero_optimization={"stage": 1})),
    "zero-optimization-true": dict(config=plain(zero_optimization=True)),
    "misspelled-zero-key": dict(config=plain(zero_optimization={
        "stage": 3, "stage3_prefetch_bucket_sze": 1000})),
    "zero3-fp32": dict(config=plain(zero_optimization={
        "stage": 3, "stage3_param_persistence_threshold": 0})),
    "zero3-offload-param": dict(config=plain(zero_force_ds_cpu_optimizer=False, zero_optimization={
        "stage": 3, "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu"}})),
    "one-rank": dict(world=1, config={"train_micro_batch_size_per_gpu": 16, "optimizer": ADAMW}),
    # Public templates, as their projects write them.
    # DeepSpeedExamples training/cifar/ds_config.json (bf16 in place of fp16 here).
    "dse-cifar": dict(config={
        "train_batch_size": 16, "steps_per_print": 2000,
        "optimizer": {"type": "Adam", "params": {"lr": 1e-3, "betas": [0.8, 0.999], "eps": 1e-8,
                                                 "weight_decay": 3e-7}},
        "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 1e-3,
                                                     "warmup_num_steps": 1000}},
        "gradient_clipping": 1.0, "prescale_gradients": False, "bf16": {"enabled": True},
        "wall_clock_breakdown": False,
        "zero_optimization": {"stage": 0, "allgather_partitions": True, "reduce_scatter": True,
                              "allgather_bucket_size": 50000000, "reduce_bucket_size": 50000000,
                              "overlap_comm": True, "contiguous_gradients": True,
                              "cpu_offload": False}}),
    # DeepSpeed-Chat's get_train_ds_config (step 1, ZeRO-2, fp16), its optimizer
    # FusedAdam(lr, betas (0.9, 0.95)) passed in.
    "dschat-step1": dict(
        zero_opt=["--optimizer", "adamw lr=3e-3 betas=0.9,0.95 weight-decay=0"],
        client=dict(lr=3e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0), config={
            "train_batch_size": 16, "train_micro_batch_size_per_gpu": 8, "steps_per_print": 10,
            "zero_optimization": {"stage": 2, "offload_param": {"device": "none"},
                                  "offload_optimizer": {"device": "none"},
                                  "stage3_param_persistence_threshold": 1e4,
                                  "stage3_max_live_parameters": 3e7,
                                  "stage3_prefetch_bucket_size": 3e7,
                                  "memory_efficient_linear": False},
            "fp16": {"enabled": True, "loss_scale_window": 100}, "gradient_clipping": 1.0,
            "prescale_gradients": False, "wall_clock_breakdown": False}),
    # OpenRLHF's get_train_ds_config (ZeRO-2, bf16, fp32 gradient accumulation), its
    # optimizer passed in.
    "openrlhf-zero2": dict(
        zero_opt=["--optimizer", "adamw lr=3e-3 betas=0.9,0.95 weight-decay=0"],
        client=dict(lr=3e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0), config={
            "steps_per_print": 100,
            "zero_optimization": {"stage": 2, "offload_param": {"device": "none"},
                                  "offload_optimizer": {"device": "none", "pin_memory": True},
                                  "sub_group_size": "auto",
                                  "stage3_max_live_parameters": "auto",
                                  "stage3_max_reuse_distance": "auto",
                                  "stage3_param_persistence_threshold": "auto",
                                  "stage3_prefetch_bucket_size": "auto",
                                  "reduce_bucket_size": "auto", "zero_hpz_partition_size": 1,
                                  "zero_quantized_weights": False,
                                  "zero_quantized_gradients": False},
            "bf16": {"enabled": True}, "gradient_clipping": 1.0, "prescale_gradients": False,
            "wall_clock_breakdown": False, "data_types": {"grad_accum_dtype": "fp32"},
            "train_micro_batch_size_per_gpu": 8, "train_batch_size": 16}),
    # LLaMA-Factory examples/deepspeed/ds_z2_config.json and ds_z0_config.json
    # ("auto": the Trainer's, without --bf16 / --fp16).
    "llamafactory-z2": dict(zero_opt=TRAINER_ADAMW, config=llamafactory(2)),
    "llamafactory-z0": dict(zero_opt=TRAINER_ADAMW, config=llamafactory(0)),
    # Megatron-DeepSpeed's examples (ZeRO-1, bf16), Megatron's Adam passed in
    # (betas 0.9, 0.95, weight decay 0.1).
    "megatron-ds-zero1": dict(
        zero_opt=["--optimizer", "adamw lr=3e-3 betas=0.9,0.95 weight-decay=0.1"],
        client=dict(lr=3e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1), config={
            "train_batch_size": 16, "train_micro_batch_size_per_gpu": 8, "steps_per_print": 10,
            "zero_optimization": {"stage": 1}, "gradient_clipping": 1.0,
            "prescale_gradients": False, "bf16": {"enabled": True},
            "wall_clock_breakdown": False}),
}


def trainer_args(extra, cfg):
    """The Trainer's arguments a case's zero-opt command line stands for: --optimizer
    "adamw lr=X" is the Trainer's --learning_rate X; a config that turns bf16 or fp16
    on is run with the Trainer's --bf16 / --fp16 (as LLaMA-Factory's --bf16 does)."""
    args = {k: True for k in ("bf16", "fp16")
            if isinstance(cfg.get(k), dict) and cfg[k].get("enabled") is True}
    for i, a in enumerate(extra):
        if a == "--optimizer":
            for item in extra[i + 1].split()[1:]:
                k, _, v = item.partition("=")
                if k == "lr":
                    args["learning_rate"] = float(v)
    return args


# ---------------------------------------------------------------------------
# DeepSpeed's run
# ---------------------------------------------------------------------------

def cpu_changes(cfg):
    """The config DeepSpeed runs on this CPU, and what was changed (see the module
    docstring): nvme offload (DeepSpeed's async_io op needs libaio and a build)
    becomes cpu offload, and an offloaded optimizer other than DeepSpeedCPUAdam is
    allowed (zero_force_ds_cpu_optimizer false: the config's torch optimizer runs
    on the host copy, as DeepSpeed's own CPU Adam would)."""
    cfg = copy.deepcopy(cfg)
    changes = []
    zo = cfg.get("zero_optimization")
    if isinstance(zo, dict):
        for key in ("offload_optimizer", "offload_param"):
            off = zo.get(key)
            if isinstance(off, dict) and off.get("device") == "nvme":
                zo[key] = {"device": "cpu", "pin_memory": off.get("pin_memory", False)}
                changes.append(f"zero_optimization.{key}.device nvme -> cpu (no async_io op)")
        if any(isinstance(zo.get(k), dict) and zo[k].get("device") in ("cpu", "nvme")
               for k in ("offload_optimizer",)):
            cfg["zero_force_ds_cpu_optimizer"] = False
            changes.append("zero_force_ds_cpu_optimizer false (the config's optimizer "
                           "runs on the host copy)")
            opt = cfg.get("optimizer")
            if isinstance(opt, dict) and opt.get("type") in ("Adam", "AdamW"):
                params = opt.setdefault("params", {})
                params["torch_adam"] = True
                # DeepSpeedCPUAdam's weight decay default, 0 (torch_adam's is 0.01).
                params.setdefault("weight_decay", 0.0)
                changes.append("optimizer.params.torch_adam true, weight_decay as given or "
                               "DeepSpeedCPUAdam's 0 (DeepSpeedCPUAdam is a build; torch's "
                               "AdamW computes the same update)")
    if isinstance(zo, dict):
        quantized = [k for k in ("zero_quantized_weights", "zero_quantized_gradients")
                     if zo.get(k)]
        for k in quantized:
            del zo[k]
        if quantized:
            changes.append(f"{' and '.join(quantized)} removed: DeepSpeed's quantizer op has "
                           "no CPU kernel (its run is ZeRO-3 with hpZ, unquantized)")
    if "aio" in cfg:
        del cfg["aio"]
        changes.append("aio removed (no nvme)")
    fp16 = cfg.get("fp16")
    if isinstance(fp16, dict) and fp16.get("enabled") is True:
        changes.append("the CPU accelerator's fp16 test (oneDNN's, true with AVX512-FP16 "
                       "or AMX-FP16) answers true: torch computes fp16 on any CPU")
    return cfg, changes


def hf_fill(cfg, trainer, world, steps, model):
    """A config with "auto" filled as the Hugging Face Trainer fills it."""
    if "auto" not in json.dumps(cfg):
        return cfg
    from transformers import TrainingArguments
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig
    micro = GLOBAL_BATCH // world
    args = TrainingArguments(output_dir=tempfile.mkdtemp(prefix="ds-oracle-"),
                             per_device_train_batch_size=micro, use_cpu=True,
                             report_to=[], **trainer)
    hf = HfTrainerDeepSpeedConfig(copy.deepcopy(cfg))
    hf.trainer_config_process(args)
    # The world is DeepSpeed's (the Trainer reads it from torch.distributed).
    if hf.config.get("train_batch_size") not in (None, "auto"):
        hf.config["train_batch_size"] = micro * world * int(
            hf.config.get("gradient_accumulation_steps", 1))
    hf.trainer_config_finalize(args, model, steps)
    return hf.config


def windows(tokens, steps, rows):
    """[steps, rows, SEQ] token windows of zero-run --tokens (seed SEED)."""
    from zerokit.data import token_window
    n = len(tokens) - SEQ + 1
    out = np.zeros((steps, rows, SEQ), np.int64)
    for s in range(steps):
        for r in range(rows):
            o = token_window(SEED, s, r, n)
            out[s, r] = tokens[o:o + SEQ]
    return out


def train_steps(engine, data, rank, world, K, b, steps, record):
    """DeepSpeed's steps, each recorded (see the module docstring)."""
    import torch
    import torch.distributed as dist
    for s in range(steps):
        lr = None
        started = time.time()
        skipped_before = engine.skipped_steps
        scale = float(engine.optimizer.cur_scale) if engine.fp16_enabled() else None
        micro = []
        for j in range(K):
            lo = rank * K * b + j * b
            ids = torch.from_numpy(data[s, lo:lo + b])
            loss = engine(input_ids=ids, labels=ids)
            engine.backward(loss)
            micro.append(float(loss.detach().float()))
            if j == K - 1:  # the lr the optimizer applies at this step
                lr = float(engine.optimizer.param_groups[0]["lr"])
                # The averaged gradients' 2-norm, for an engine that keeps none
                # (ZeRO stage 0 in fp32: the torch optimizer's own step).
                grads = [p.grad.double() for p in engine.module.parameters()
                         if p.grad is not None]
                own = float(torch.sqrt(sum((g * g).sum() for g in grads))) if grads else None
            engine.step()
        mean = torch.tensor(float(np.mean(micro)), dtype=torch.float64)
        dist.all_reduce(mean)
        gn = engine.get_global_grad_norm()
        gn = own if gn is None else float(gn)
        record["steps"].append(dict(step=s + 1, loss=float(mean) / world, grad_norm=gn, lr=lr,
                                    loss_scale=scale,
                                    skipped=engine.skipped_steps != skipped_before,
                                    seconds=time.time() - started))


def rank_main(rank, world, port, case, tokens, result_path):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_SIZE=str(world),
                      DS_ACCELERATOR="cpu")
    import torch
    import torch.distributed as dist
    import deepspeed
    from train_reference import Reference
    from deepspeed.accelerator import get_accelerator
    deepspeed.init_distributed(dist_backend="gloo")
    get_accelerator().is_fp16_supported = lambda: True  # see cpu_changes
    ref = Reference("gpt2", MODELS)
    model = ref.model
    steps = case["steps"]
    cfg, changes = cpu_changes(case["config"])
    cfg = hf_fill(cfg, case.get("trainer", {}), world, steps, model)
    record = dict(ds_config=cfg, ds_changes=changes, steps=[])
    # A config without "optimizer" trains with the Trainer's own: torch's AdamW at
    # its --learning_rate (betas 0.9, 0.999, eps 1e-8, weight decay 0), the
    # schedule constant (--lr_scheduler_type constant).
    client = None
    if "optimizer" not in cfg:
        settings = case.get("client") or dict(lr=case["trainer"]["learning_rate"],
                                              betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
        client = torch.optim.AdamW(model.parameters(), **settings)
        record["ds_changes"] = changes + [
            f"no optimizer in the config: the framework's torch.optim.AdamW({settings}), "
            "schedule constant"]
    try:
        engine, optimizer, _, _ = deepspeed.initialize(
            model=model, model_parameters=[p for p in model.parameters()], config=cfg,
            optimizer=client)
    except Exception as e:  # DeepSpeed refuses the config
        record["error"] = f"{type(e).__name__}: {e}"
        if rank == 0:
            json.dump(record, open(result_path, "w"))
        return
    K = engine.gradient_accumulation_steps()
    b = engine.train_micro_batch_size_per_gpu()
    data = windows(tokens, steps, b * K * world)
    resolved = dict(train_batch_size=engine.train_batch_size(), micro_batch=b,
                    gradient_accumulation_steps=K, gradient_clipping=engine.gradient_clipping(),
                    precision="fp16" if engine.fp16_enabled() else (
                        "bf16" if engine.bfloat16_enabled() else "fp32"),
                    zero_stage=engine.zero_optimization_stage())
    # The torch optimizer DeepSpeed built (ZeRO wraps it).
    base = (getattr(engine, "basic_optimizer", None) or getattr(engine.optimizer, "optimizer", None)
            or engine.optimizer)
    group = {k: v for k, v in base.param_groups[0].items() if k != "params"}
    resolved["optimizer"] = dict(cls=type(base).__name__, **{
        k: (list(v) if isinstance(v, tuple) else v) for k, v in group.items()
        if isinstance(v, (int, float, bool, tuple, list, str)) or v is None})
    record["resolved"] = resolved
    try:
        train_steps(engine, data, rank, world, K, b, steps, record)
    except Exception as e:  # DeepSpeed stops during training
        record["error"] = f"step {len(record['steps']) + 1}: {type(e).__name__}: {e}"
    if rank == 0:
        json.dump(record, open(result_path, "w"))
    # Every rank leaves the group together (gloo's threads abort a process
    # that exits while a peer still talks to it).
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_case(name, case, tokens, timeout=600):
    """DeepSpeed's run of a case: rank 0's record, with DeepSpeed's error when it
    refuses the config or stops in training. A rank that dies otherwise (an
    import, a crash) or a run past `timeout` seconds stops the generator: that
    is no answer of DeepSpeed's."""
    import glob
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="ds-oracle-") as tmp:
        try:
            return spawn_case(name, case, tokens, timeout, port, os.path.join(tmp, "result.json"))
        finally:
            # DeepSpeed's CPU all-reduce leaves its shared-memory buffers (named
            # by the run's port) behind: this run's go.
            for path in glob.glob(f"/dev/shm/deepspeed_allreduce_buffer_*_127.0.0.1_{port}_*"):
                os.remove(path)


def spawn_case(name, case, tokens, timeout, port, out):
    import torch.multiprocessing as mp
    ctx = mp.start_processes(rank_main, args=(case["world"], port, case, tokens, out),
                             nprocs=case["world"], join=False, start_method="spawn")
    deadline = time.time() + timeout
    try:
        while not ctx.join(timeout=5):
            if time.time() > deadline:
                raise TimeoutError(f"DeepSpeed's run passed {timeout} s")
    except Exception as e:
        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
        if os.path.exists(out):
            return json.load(open(out))
        sys.exit(f"{name}: DeepSpeed's run failed without an answer: "
                 f"{type(e).__name__}: {str(e).strip().splitlines()[-1]}")
    return json.load(open(out))


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def write(out_path, only):
    import deepspeed
    import torch
    import transformers
    from zerokit.data import GPL3, gpl3_split
    with tempfile.TemporaryDirectory(prefix="ds-oracle-") as tmp:
        split = gpl3_split(tmp)
        if not split:
            sys.exit(f"{GPL3} is missing (Debian's base-files ships it)")
        tokens = split[0]
    old = json.load(open(out_path)) if only and os.path.exists(out_path) else {"cases": {}}
    results = old["cases"]
    meta = dict(deepspeed=deepspeed.__version__, torch=torch.__version__,
                transformers=transformers.__version__, python=platform.python_version(),
                machine=platform.machine(), model_sha256=sha256(MODELS / "gpt2_loss.onnx"),
                text_sha256=sha256(GPL3), seq=SEQ, global_batch=GLOBAL_BATCH, seed=SEED,
                regenerate="build/pyenv/bin/python test/e2e/deepspeed_oracle.py --write")
    for name, case in cases().items():
        if only and name not in only:
            continue
        print(f"{name}: DeepSpeed over {case['world']} ranks, {case['steps']} steps", flush=True)
        r = run_case(name, case, tokens)
        results[name] = dict(config=case["config"], world=case["world"], **r)
        if r.get("error"):
            print(f"  DeepSpeed refuses it: {r['error']}")
        else:
            print(f"  loss {r['steps'][0]['loss']:.4f} -> {r['steps'][-1]['loss']:.4f}")
        # Written after each case, complete each time (a long run keeps what it did).
        with open(out_path + ".tmp", "w") as f:
            json.dump(dict(meta=meta, cases=results), f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(out_path + ".tmp", out_path)
    print(f"wrote {out_path}: {len(results)} cases")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", required=True)
    ap.add_argument("--out", default=str(REF))
    ap.add_argument("--only", nargs="*", default=[])
    a = ap.parse_args()
    write(a.out, set(a.only))


if __name__ == "__main__":
    main()
