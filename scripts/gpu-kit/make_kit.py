#!/usr/bin/env python3
"""Writes the programs, inputs and CPU reference outputs of the GPU run kit
(scripts/gpu-kit.sh calls this; docs/gpu-kit.md).

Into KIT/cases/NAME/ for every case, and KIT/cases.json listing them:
  forward  every fixture with a reference file in test/models (NAME.ref.safetensors:
           its inputs), and bart_mask_ts17 on seeded random inputs (4 x 8, as
           test/e2e/pipeline-encoder.test runs it), compiled at 1 rank:
           model.zrt, weights.safetensors, inputs.safetensors, and ref.safetensors =
           the CPU zero-run's outputs
  train    gpt2_loss and llama_loss, 3 AdamW steps (lr 1e-3) on the first 3 batches
           of their stored training reference: train.zrt, init.safetensors,
           data.safetensors, ref.log.json (the CPU run's losses) and ref.safetensors
           (its weights after the 3 steps); gpt2_loss again in bf16 (the config's
           "bf16"), its losses within bf16's rounding (the case's rtol, atol); and
           gpt2_loss with offload_optimizer device "cpu" (the state in pinned host
           memory), in fp32 and in bf16 (the fp32 masters too), each also
           bit-identical to the same run without offload on the device
Into KIT/headline/, when a GPT-2-small ONNX model is given (bench/make_gpt2_small.sh):
  train.zrt (8 x 128, AdamW lr 1e-4) and forward.zrt (1 x 128) without weights, and
  weights.json: the names, dtypes and shapes of the weights each program reads, so
  run.sh writes seeded random weights on the device (the weights are ~500 MB).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from safetensors.numpy import load_file, save_file

TRAIN_STEPS = 3
TRAIN_OPTIMIZER = "adamw lr=1e-3"
HEADLINE_OPTIMIZER = "adamw lr=1e-4"  # bench/train_step.py's default
HEADLINE_TRAIN = (8, 128)
HEADLINE_FORWARD = (1, 128)
# Fixtures run on random inputs (no reference file): name -> {input: (shape, high)}.
RANDOM_INPUT_FIXTURES = {
    "bart_mask_ts17": {"input_ids": ((4, 8), 2), "attention_mask": ((4, 8), 2)},
}
TRAIN_FIXTURES = ["gpt2_loss", "llama_loss"]
# bf16 training (the config's "bf16": zero-mixed-precision, fp32 masters) of these,
# its losses compared within bf16's rounding (the backends sum in other orders).
BF16_TRAIN_FIXTURES = ["gpt2_loss"]
BF16_TOLERANCE = {"rtol": 2e-2, "atol": 1e-3}
# ZeRO-Offload to the CPU (offload_optimizer device "cpu": the optimizer state in
# pinned host memory that the GPU's kernels read over the bus) of these: the
# losses and weights bit-identical to the same fixture's run without it on the
# same device (offload moves bytes, not arithmetic).
OFFLOAD_CPU_TRAIN_FIXTURES = ["gpt2_loss"]


def run(cmd, what):
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"make_kit: {what} failed ({r.returncode}): {' '.join(cmd)}\n"
                 f"{r.stdout[-4000:]}{r.stderr[-4000:]}")
    return time.perf_counter() - t


def shape_args(shapes):
    args = []
    for name, shape in shapes.items():
        args += ["--input-shape", f"{name}=" + "x".join(str(d) for d in shape)]
    return args


def safetensors_header(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header


def forward_case(a, name, inputs, kit):
    case_dir = os.path.join(kit, "cases", name)
    os.makedirs(case_dir)
    zrt, weights = os.path.join(case_dir, "model.zrt"), os.path.join(case_dir, "weights.safetensors")
    ins, ref = os.path.join(case_dir, "inputs.safetensors"), os.path.join(case_dir, "ref.safetensors")
    save_file({k: np.ascontiguousarray(v) for k, v in inputs.items()}, ins)
    run([a.zero_opt, os.path.join(a.models, name + ".onnx"), "--emit=zrt", "-o", zrt,
         "--weights-out", weights] + shape_args({k: v.shape for k, v in inputs.items()}),
        f"compiling {name}")
    run([a.zero_run, zrt, "--weights", weights, "--input", ins, "--output", ref,
         "--backend", "cpu"], f"the CPU run of {name}")
    return {"name": name, "kind": "forward", "dir": f"cases/{name}", "program": "model.zrt",
            "weights": "weights.safetensors", "inputs": "inputs.safetensors",
            "ref": "ref.safetensors"}


def train_case(a, name, kit, bf16=False, offload_cpu=False):
    stored = load_file(os.path.join(a.models, name + ".train.ref.safetensors"))
    data = {k[len("data."):]: np.ascontiguousarray(v[:TRAIN_STEPS])
            for k, v in stored.items() if k.startswith("data.")}
    if any(v.dtype.kind == "f" or v.dtype == np.int8 for v in data.values()):
        sys.exit(f"make_kit: {name}: only integer token batches are supported here")
    base = f"{name}-train" + ("-bf16" if bf16 else "")
    tag = base + ("-offload-cpu" if offload_cpu else "")
    case_dir = os.path.join(kit, "cases", tag)
    os.makedirs(case_dir)
    extra = []
    if bf16 or offload_cpu:
        cfg = os.path.join(case_dir, "ds_config.json")
        micro = next(iter(data.values())).shape[1]
        # No clipping, as the base case's --optimizer alone (DeepSpeed 0.19 clips
        # at 1.0 where a config does not say): same_bits_as compares the two.
        config = {"train_micro_batch_size_per_gpu": micro, "gradient_clipping": 0}
        if bf16:
            config["bf16"] = {"enabled": True}
        if offload_cpu:
            config["zero_optimization"] = {"stage": 0, "offload_optimizer": {"device": "cpu"}}
        with open(cfg, "w") as f:
            json.dump(config, f)
        extra = ["--config", cfg]
    zrt, init = os.path.join(case_dir, "train.zrt"), os.path.join(case_dir, "init.safetensors")
    data_path = os.path.join(case_dir, "data.safetensors")
    save_file(data, data_path)
    run([a.zero_opt, os.path.join(a.models, name + ".onnx"), "--train", "--optimizer",
         TRAIN_OPTIMIZER, "--emit=zrt", "-o", zrt, "--weights-out", init] + extra
        + shape_args({k: v.shape[1:] for k, v in data.items()}), f"compiling {tag}")
    run([a.zero_run, zrt, "--weights", init, "--data", data_path, "--steps", str(TRAIN_STEPS),
         "--log-json", os.path.join(case_dir, "ref.log.json"),
         "--save", os.path.join(case_dir, "ref.safetensors"), "--backend", "cpu"],
        f"the CPU training run of {tag}")
    case = {"name": tag, "kind": "train", "dir": f"cases/{tag}", "program": "train.zrt",
            "weights": "init.safetensors", "data": "data.safetensors", "steps": TRAIN_STEPS,
            "ref_log": "ref.log.json", "ref": "ref.safetensors", "optimizer": TRAIN_OPTIMIZER}
    if bf16:
        case.update(BF16_TOLERANCE)
    if offload_cpu:
        case["same_bits_as"] = base
    return case


def headline(a, kit, work):
    out = os.path.join(kit, "headline")
    os.makedirs(out)
    progs = {}
    for tag, (b, s), extra in (
            ("train", HEADLINE_TRAIN, ["--train", "--loss", "causal-lm:labels",
                                       "--optimizer", HEADLINE_OPTIMIZER]),
            ("forward", HEADLINE_FORWARD, [])):
        zrt = os.path.join(out, f"{tag}.zrt")
        weights = os.path.join(work, f"{tag}.safetensors")
        secs = run([a.zero_opt, a.gpt2_small, f"--input-shape=input_ids={b}x{s}"] + extra
                   + ["--emit=zrt", "-o", zrt, "--weights-out", weights],
                   f"compiling GPT-2-small ({tag})")
        header = safetensors_header(weights)
        os.unlink(weights)
        progs[tag] = {"program": f"{tag}.zrt", "batch": b, "seq": s, "compile_s": round(secs, 1),
                      "weights": {k: {"dtype": v["dtype"], "shape": v["shape"]}
                                  for k, v in sorted(header.items())}}
    progs["train"]["optimizer"] = HEADLINE_OPTIMIZER
    meta = {"model": "GPT-2-small (bench/make_gpt2_small.sh: GPT2LMHeadModel default config, "
                     "12 layers, 768 hidden, 12 heads, 50257 vocab, tied embedding)",
            "vocab": 50257, "programs": progs}
    with open(os.path.join(out, "weights.json"), "w") as f:
        json.dump(meta, f, indent=1)
    n = sum(int(np.prod(v["shape"])) for v in progs["train"]["weights"].values())
    print(f"make_kit: headline: GPT-2-small train {HEADLINE_TRAIN[0]}x{HEADLINE_TRAIN[1]} and "
          f"forward {HEADLINE_FORWARD[0]}x{HEADLINE_FORWARD[1]} programs, {n} parameters "
          f"(weights written on the device)")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True, help="the CPU zero-run (the reference)")
    ap.add_argument("--models", required=True)
    ap.add_argument("--kit", required=True)
    ap.add_argument("--gpt2-small", default="", help="GPT-2-small ONNX (headline); empty: none")
    ap.add_argument("--work", required=True, help="scratch directory (removed by the caller)")
    ap.add_argument("--only", default="", help="comma-separated case names (a quicker kit)")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    t0 = time.perf_counter()
    cases = []
    # NAME.ref.safetensors beside NAME.onnx (the training references, e.g.
    # NAME_loss.bf16.ref.safetensors, have no model of that name).
    refs = sorted(f[:-len(".ref.safetensors")] for f in os.listdir(a.models)
                  if f.endswith(".ref.safetensors") and not f.endswith(".train.ref.safetensors")
                  and os.path.exists(os.path.join(a.models, f[:-len(".ref.safetensors")] + ".onnx")))
    # mlp first: the smallest, it shows at once whether zero-run runs at all.
    for name in sorted(refs + list(RANDOM_INPUT_FIXTURES), key=lambda n: (n != "mlp", n)):
        if only and name not in only:
            continue
        if name in RANDOM_INPUT_FIXTURES:
            rng = np.random.default_rng(0)
            inputs = {k: rng.integers(0, high, size=shape, dtype=np.int64)
                      for k, (shape, high) in RANDOM_INPUT_FIXTURES[name].items()}
        else:
            ref = load_file(os.path.join(a.models, name + ".ref.safetensors"))
            inputs = {k[len("input."):]: v for k, v in ref.items() if k.startswith("input.")}
        cases.append(forward_case(a, name, inputs, a.kit))
    for name in TRAIN_FIXTURES:
        if only and f"{name}-train" not in only:
            continue
        cases.append(train_case(a, name, a.kit))
    for name in BF16_TRAIN_FIXTURES:
        if only and f"{name}-train-bf16" not in only:
            continue
        cases.append(train_case(a, name, a.kit, bf16=True))
    for name in OFFLOAD_CPU_TRAIN_FIXTURES:
        if not only or f"{name}-train-offload-cpu" in only:
            cases.append(train_case(a, name, a.kit, offload_cpu=True))
        if name in BF16_TRAIN_FIXTURES and (not only or f"{name}-train-bf16-offload-cpu" in only):
            cases.append(train_case(a, name, a.kit, bf16=True, offload_cpu=True))
    with open(os.path.join(a.kit, "cases.json"), "w") as f:
        json.dump({"rtol": 1e-4, "atol": 1e-5, "cases": cases}, f, indent=1)
    print(f"make_kit: {len(cases)} cases ({sum(c['kind'] == 'forward' for c in cases)} forward, "
          f"{sum(c['kind'] == 'train' for c in cases)} training) with CPU references "
          f"in {time.perf_counter() - t0:.1f} s")
    if a.gpt2_small:
        headline(a, a.kit, a.work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
