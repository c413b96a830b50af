"""Real-world DeepSpeed configs, unchanged, on the GPT-2 loss fixture
(train-configs.test).

Each config below has the shape of one that users copy: the Hugging Face Trainer's
zero2 and zero3 templates (full of "auto"), a DeepSpeedExamples-style fp16 +
ZeRO-1 config, LLaMA-Factory's ds_z3_offload_config with bf16, a ZeRO-Infinity
NVMe config (with its "aio" block), ZeRO++ (qwZ, hpZ, qgZ) with bf16, and
gradient accumulation with WarmupCosineLR and "Adam" + torch_adam. Each is
compiled with zero-opt --config (the Trainer's command-line values where the
template says "auto": --optimizer lr) and trained with zero-run on byte tokens of
a real text (the GPL-3 as Debian ships it) over 2 ranks (4 for hpZ). Checks, per
config:
  falls      the loss falls by more than 0.5 nats (mean of the first 5 steps
             against the last 5 of 40);
  precision  the report's model_state_bytes (rank 0) are ZeRO's figures for the
             precision and stage the config asks for, from the parameter count
             Psi of the ONNX file: 16-bit parameters 2 bytes, fp32 4; gradients
             in the parameters' dtype; optimizer 12 bytes (fp32 master + two
             moments) with 16 bits, 8 with fp32; partitioned by N per stage,
             within DeepSpeed's per-parameter padding to N;
  fp16       fp16 configs log a loss_scale every step;
  eval       every run evaluates on held-out chunks of the text every 20 steps
             (--eval-tokens): the eval loss is finite and falls from step 20 to
             40, and the run logs the same training losses as one without
             evaluations (bit for bit; every config's program, so evaluation
             steps are checked on fp16, bf16, offloaded and ZeRO++ programs).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import onnx

from zerokit import mpi
from zerokit.data import GPL3, gpl3_split
from zerokit.tools import run, zero_opt


HF_FP16 = {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000,
           "initial_scale_power": 16, "hysteresis": 2, "min_loss_scale": 1}

CONFIGS = {
    # transformers' docs: ds_config_zero2.json
    "hf-zero2": ({
        "fp16": HF_FP16, "bf16": {"enabled": "auto"},
        "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                                  "weight_decay": "auto"}},
        "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto",
                                                     "warmup_max_lr": "auto",
                                                     "warmup_num_steps": "auto"}},
        "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": True},
                              "allgather_partitions": True, "allgather_bucket_size": 2e8,
                              "overlap_comm": True, "reduce_scatter": True,
                              "reduce_bucket_size": 2e8, "contiguous_gradients": True},
        "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
        "steps_per_print": 2000, "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": False},
        2, ["--optimizer", "adamw lr=3e-3"], "fp32", 2),
    # transformers' docs: ds_config_zero3.json
    "hf-zero3": ({
        "fp16": HF_FP16, "bf16": {"enabled": "auto"},
        "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                                  "weight_decay": "auto"}},
        "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto",
                                                     "warmup_max_lr": "auto",
                                                     "warmup_num_steps": "auto"}},
        "zero_optimization": {"stage": 3,
                              "offload_optimizer": {"device": "cpu", "pin_memory": True},
                              "offload_param": {"device": "cpu", "pin_memory": True},
                              "overlap_comm": True, "contiguous_gradients": True,
                              "sub_group_size": 1e9, "reduce_bucket_size": "auto",
                              "stage3_prefetch_bucket_size": "auto",
                              "stage3_param_persistence_threshold": "auto",
                              "stage3_max_live_parameters": 1e9,
                              "stage3_max_reuse_distance": 1e9,
                              "stage3_gather_16bit_weights_on_model_save": True},
        "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
        "steps_per_print": 2000, "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": False},
        2, ["--optimizer", "adamw lr=3e-3"], "fp32", 3),
    # DeepSpeedExamples-style: fp16 with a dynamic scaler, ZeRO-1
    "dse-fp16-z1": ({
        "train_batch_size": 16, "train_micro_batch_size_per_gpu": 8, "steps_per_print": 10,
        "optimizer": {"type": "Adam", "params": {"lr": 3e-3, "betas": [0.8, 0.999], "eps": 1e-8,
                                                 "weight_decay": 3e-7}},
        "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 3e-3,
                                                     "warmup_num_steps": 5}},
        "gradient_clipping": 1.0, "prescale_gradients": False,
        "fp16": {"enabled": True, "fp16_master_weights_and_grads": False, "loss_scale": 0,
                 "loss_scale_window": 500, "hysteresis": 2, "min_loss_scale": 1,
                 "initial_scale_power": 15},
        "wall_clock_breakdown": False,
        "zero_optimization": {"stage": 1, "allgather_partitions": True, "reduce_scatter": True,
                              "allgather_bucket_size": 50000000,
                              "reduce_bucket_size": 50000000, "overlap_comm": True,
                              "contiguous_gradients": True}},
        2, [], "fp16", 1),
    # LLaMA-Factory's ds_z3_offload_config.json, with --bf16
    "llamafactory-bf16-z3-offload": ({
        "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
        "zero_allow_untested_optimizer": True,
        "fp16": {"enabled": False}, "bf16": {"enabled": True},
        "zero_optimization": {"stage": 3,
                              "offload_optimizer": {"device": "cpu", "pin_memory": True},
                              "offload_param": {"device": "cpu", "pin_memory": True},
                              "overlap_comm": False, "contiguous_gradients": True,
                              "sub_group_size": 1e9, "reduce_bucket_size": "auto",
                              "stage3_prefetch_bucket_size": "auto",
                              "stage3_param_persistence_threshold": "auto",
                              "stage3_max_live_parameters": 1e9,
                              "stage3_max_reuse_distance": 1e9,
                              "stage3_gather_16bit_weights_on_model_save": True}},
        2, ["--optimizer", "adamw lr=3e-3"], "bf16", 3),
    # ZeRO-Infinity: optimizer state on NVMe; parameters too, past max_in_cpu
    # (1e9 elements: this model's shards all stay in host memory, as in DeepSpeed)
    "zero-infinity-nvme": ({
        "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1,
        "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.01}},
        "zero_optimization": {"stage": 3, "contiguous_gradients": True,
                              "stage3_max_live_parameters": 1e9,
                              "stage3_max_reuse_distance": 1e9,
                              "stage3_prefetch_bucket_size": 1e7,
                              "stage3_param_persistence_threshold": 1e5,
                              "reduce_bucket_size": 1e7, "sub_group_size": 1e9,
                              "offload_optimizer": {"device": "nvme", "nvme_path": "NVME",
                                                    "pin_memory": True, "buffer_count": 4,
                                                    "fast_init": False},
                              "offload_param": {"device": "nvme", "nvme_path": "NVME",
                                                "pin_memory": True, "buffer_count": 5,
                                                "buffer_size": 1e8, "max_in_cpu": 1e9}},
        "aio": {"block_size": 262144, "queue_depth": 32, "thread_count": 1,
                "single_submit": False, "overlap_events": True}},
        2, [], "fp32", 3),
    # ZeRO++: quantized weights, hierarchical partition, quantized gradients
    "zeropp-bf16": ({
        "train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True},
        "optimizer": {"type": "AdamW", "params": {"lr": 3e-3}},
        "zero_optimization": {"stage": 3, "reduce_bucket_size": 1e7,
                              "zero_quantized_weights": True, "zero_hpz_partition_size": 2,
                              "zero_quantized_gradients": True, "contiguous_gradients": True,
                              "overlap_comm": True}},
        4, [], "bf16", 3),
    # Accumulation, WarmupCosineLR, Adam with torch_adam (AdamW: adam_w_mode)
    "accum-cosine-torch-adam": ({
        "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
        "optimizer": {"type": "Adam", "params": {"lr": 3e-3, "torch_adam": True,
                                                 "weight_decay": 0.01}},
        "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 40,
                                                           "warmup_num_steps": 5}},
        "zero_optimization": {"stage": 2}},
        2, [], "fp32", 2),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", help="one config's name")
    a = ap.parse_args()
    w = a.work
    os.makedirs(w, exist_ok=True)
    split = gpl3_split(w)
    if not split:
        print(f"UNSUPPORTED: {GPL3} is missing (Debian's base-files ships it)")
        return
    _, _, tokens, held = split
    model = os.path.join(a.models, "gpt2_loss.onnx")
    m = onnx.load(model)
    sizes = [int(np.prod(t.dims)) for t in m.graph.initializer
             if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) > 0]
    steps, S, global_batch = 40, 32, 16
    for name, (cfg, ranks, extra, precision, stage) in CONFIGS.items():
        if a.only and name != a.only:
            continue
        nvme = os.path.join(w, name + "-nvme")
        os.makedirs(nvme, exist_ok=True)
        text = json.dumps(cfg).replace('"NVME"', json.dumps(nvme))
        path = os.path.join(w, name + ".json")
        with open(path, "w") as f:
            f.write(text)
        accumulation = cfg.get("gradient_accumulation_steps", 1)
        accumulation = accumulation if isinstance(accumulation, int) else 1
        # ZeRO++'s hpZ needs the data-parallel ranks; the rest run dp = ranks.
        batch = global_batch // ranks // accumulation
        prog = os.path.join(w, name + ".zrt")
        run(zero_opt(a.zero_opt, model, {"input_ids": (batch, S), "labels": (batch, S)},
                     ["--train", "--config", path, "--zero-pipeline", f"dp={ranks}", *extra],
                     prog, os.path.join(w, name + ".init.safetensors")))
        log, report = os.path.join(w, name + "-log.json"), os.path.join(w, name + "-report.json")
        base = mpi.mpirun(ranks, [a.zero_run, prog, "--weights",
                                  os.path.join(w, name + ".init.safetensors"), "--tokens",
                                  tokens, "--seed", "1", "--steps", str(steps), "--threads", "1"])
        run(base + ["--log-json", log, "--report-json", report, "--eval-tokens", held,
                    "--eval-every", "20", "--eval-batches", "2"])
        plain = os.path.join(w, name + "-plain.json")
        run(base + ["--log-json", plain])
        evals = [(r["step"], r["eval_loss"]) for r in json.load(open(log)) if "eval_loss" in r]
        if [s for s, _ in evals] != [20, 40] or not all(math.isfinite(v) for _, v in evals) \
                or not evals[1][1] < evals[0][1]:
            sys.exit(f"FAIL: {name}: eval losses {evals}, expected finite and falling at 20, 40")
        def values(path):
            keys = ("step", "loss", "grad_norm", "lr", "loss_scale", "skipped")
            return [{k: r.get(k) for k in keys} for r in json.load(open(path)) if "loss" in r]

        if values(log) != values(plain):
            sys.exit(f"FAIL: {name}: training with evaluations differs from training without")
        records = [r for r in json.load(open(log)) if "loss" in r]
        losses = [r["loss"] for r in records]
        first, last = np.mean(losses[:5]), np.mean(losses[-5:])
        if not first - last > 0.5:
            sys.exit(f"FAIL: {name}: the loss fell by {first - last:.3f} nats ({first:.3f} -> "
                     f"{last:.3f}), not more than 0.5")
        if precision == "fp16" and not all("loss_scale" in r for r in records):
            sys.exit(f"FAIL: {name}: fp16 steps without a loss_scale")
        # ZeRO's figures for this precision and stage.
        p_bytes, o_bytes = (2, 12) if precision in ("bf16", "fp16") else (4, 8)
        n = ranks

        # DeepSpeed keeps a ZeRO-3 parameter of at most
        # stage3_param_persistence_threshold elements whole on every rank
        # (default 1e5, also what "auto" resolves to); its gradient and
        # optimizer state are partitioned like the others'.
        threshold = cfg["zero_optimization"].get("stage3_param_persistence_threshold", 1e5)
        threshold = 1e5 if threshold == "auto" else threshold

        def part(per, shard, persist=False):
            return sum(per * (s if not shard or (persist and s <= threshold) else -(-s // n))
                       for s in sizes)

        want = {"parameters": part(p_bytes, stage >= 3, persist=True),
                "gradients": part(p_bytes, stage >= 2), "optimizer": part(o_bytes, stage >= 1)}
        got = json.load(open(report))["ranks"][0]["model_state_bytes"]
        for k, v in want.items():
            # fp16's dynamic loss scaler adds its scalars to the optimizer's.
            slack = 64 if k == "optimizer" and precision == "fp16" else 0
            if not 0 <= got[k] - v <= slack:
                sys.exit(f"FAIL: {name}: model_state_bytes.{k} = {got[k]}, ZeRO's {precision} "
                         f"stage {stage} figure over {n} ranks is {v}")
        print(f"{name}: ok over {ranks} ranks, {precision}, stage {stage}: loss "
              f"{first:.3f} -> {last:.3f}; model state {got['parameters']} + "
              f"{got['gradients']} + {got['optimizer']} bytes = ZeRO's figures; eval loss "
              f"{evals[0][1]:.3f} -> {evals[1][1]:.3f}, training untouched")


if __name__ == "__main__":
    main()
