#!/usr/bin/env python3
"""Data-parallel training step: zero-run ZeRO stages 0-3 vs PyTorch DDP, FSDP2 and
DeepSpeed's own ZeRO-3.

One invocation, on the same machine, N ranks (default 2) with the same threads per
rank (default 1), GPT-2-small (bench/make_gpt2_small.sh), global batch B x S
(default 4 x 128, each rank B/N rows), AdamW lr 1e-4 (torch's other defaults):

  zero-run   zero-opt --train --loss causal-lm:labels with a ds_config giving N ranks and
             zero_optimization.stage S (S = 0..3; stage 3 with DeepSpeed's defaults:
             parameters under 1e5 elements stay whole), then
             mpirun -np N zero-run --threads T --data --steps K --log-json --report-json;
             step time = the log's time_s (the slowest rank), peak RSS per rank from the
             report (getrusage)
  DDP        torch.nn.parallel.DistributedDataParallel, gloo, N processes
  FSDP2      torch.distributed.fsdp.fully_shard on every transformer block and the
             root (reshard_after_forward=True: ZeRO-3), gloo
  DeepSpeed  DeepSpeed 0.19's engine (DS_ACCELERATOR=cpu, gloo, its CPU shared-memory
             all-reduce), ZeRO-3 in fp32 and in bf16 (its defaults: parameters under
             1e5 elements whole), optimizer AdamW with torch_adam; beside it zero-run's
             ZeRO-3 in bf16 on the same config (--deepspeed; needs
             scripts/setup-pyenv.sh deepspeed)
The PyTorch and DeepSpeed sides load zero-opt's --weights-out file (the same initial weights) and
train on the same batches; their step time is the slowest rank's, their peak RSS each
process's ru_maxrss. The first step of every run is warm-up and left out; the table
gives medians and the ratios to DDP. Step-1 losses of all runs must agree to rtol 1e-3
(exit status 1 otherwise). No timing is asserted.

Usage: build/pyenv/bin/python bench/train_dp.py [--ranks 2] [--threads 1]
       [--batch 4 --seq 128 --steps 3] [--stages 0,1,2,3] [--quick]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from train_step import read_safetensors_into, sh
from zerokit import mpi, tools

VOCAB = 50257


def torch_rank(rank, a, out):
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    import torch
    import torch.distributed as dist
    import transformers as tf
    from safetensors.numpy import load_file
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    cfg = tf.GPT2Config(attn_implementation="eager", use_cache=False,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = tf.GPT2LMHeadModel(cfg)
    params = dict(model.named_parameters(remove_duplicate=False))
    del params["transformer.wte.weight"]  # tied to lm_head.weight
    read_safetensors_into(a.weights, params)
    model.train()
    engine = None
    if a.kind == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
    elif a.kind == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        for block in model.transformer.h:
            fully_shard(block)
        fully_shard(model)
    else:
        import deepspeed
        os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(a.ranks),
                          LOCAL_SIZE=str(a.ranks))
        deepspeed.init_distributed(dist_backend="gloo")
        engine, _, _, _ = deepspeed.initialize(
            model=model, model_parameters=model.parameters(),
            config=ds_config(a, bf16=a.kind == "deepspeed-bf16", torch_adam=True))
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr) if engine is None else None
    data = load_file(a.data)
    b = a.batch // a.ranks
    ids_all = torch.from_numpy(data["input_ids"][:, rank * b:(rank + 1) * b])
    log = []
    for s in range(a.steps):
        dist.barrier()
        t = time.perf_counter()
        if engine is not None:
            loss = engine(input_ids=ids_all[s], labels=ids_all[s]).loss
            engine.backward(loss)
            engine.step()
        else:
            loss = model(input_ids=ids_all[s], labels=ids_all[s]).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        mean = loss.detach().float().clone()
        dist.all_reduce(mean)
        dt = torch.tensor([time.perf_counter() - t])
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)
        log.append({"loss": mean.item() / a.ranks, "time_s": dt.item()})
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with open(f"{out}.{rank}", "w") as f:
        json.dump({"steps": log, "peak_rss": rss}, f)
    dist.destroy_process_group()


def ds_config(a, bf16=False, torch_adam=False, stage=3):
    """The run's ds_config (zero-run's and DeepSpeed's): no clipping (DDP and FSDP2
    here do not clip; DeepSpeed 0.19 clips at 1.0 where a config does not say)."""
    params = {"lr": a.lr, "weight_decay": 0.01}
    if torch_adam:
        params["torch_adam"] = True
    cfg = {"train_batch_size": a.batch, "train_micro_batch_size_per_gpu": a.batch // a.ranks,
           "gradient_accumulation_steps": 1, "zero_optimization": {"stage": stage},
           "gradient_clipping": 0, "optimizer": {"type": "AdamW", "params": params}}
    if bf16:
        cfg["bf16"] = {"enabled": True}
    return cfg


def torch_worker(a):
    import glob
    import torch.multiprocessing as mp
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    os.environ["DS_ACCELERATOR"] = "cpu"
    try:
        mp.spawn(torch_rank, args=(a, a.out), nprocs=a.ranks, join=True)
    finally:
        # DeepSpeed's CPU all-reduce leaves its shared-memory buffers behind.
        port = os.environ["MASTER_PORT"]
        for path in glob.glob(f"/dev/shm/deepspeed_allreduce_buffer_*_{port}_*"):
            os.remove(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=None)
    ap.add_argument("--work", default=None)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--stages", default="0,1,2,3")
    ap.add_argument("--quick", action="store_true", help="batch 2 x seq 64")
    ap.add_argument("--deepspeed", action="store_true",
                    help="also DeepSpeed's ZeRO-3 (fp32, bf16) and zero-run's ZeRO-3 in bf16")
    ap.add_argument("--torch-worker", choices=["ddp", "fsdp2", "deepspeed", "deepspeed-bf16"],
                    help=argparse.SUPPRESS)
    ap.add_argument("--kind", help=argparse.SUPPRESS)
    ap.add_argument("--weights", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_worker:
        a.kind = a.torch_worker
        return torch_worker(a)
    if a.quick:
        a.batch, a.seq = 2, 64
    if a.batch % a.ranks:
        ap.error("--batch must be a multiple of --ranks")
    N, B, S, T, K = a.ranks, a.batch, a.seq, a.threads, a.steps
    model = a.model or os.path.join(a.build, "bench", "gpt2_small.onnx")
    if not os.path.exists(model):
        sys.exit(f"missing {model}; run bench/make_gpt2_small.sh")
    work = a.work or os.path.join(a.build, "bench", "train_dp")
    os.makedirs(work, exist_ok=True)
    zero_opt = os.path.join(a.build, "bin", "zero-opt")
    zero_run = os.path.join(a.build, "bin", "zero-run")

    from safetensors.numpy import save_file
    data = os.path.join(work, f"batches_b{B}s{S}_n{K}.safetensors")
    ids = np.random.default_rng(0).integers(0, VOCAB, size=(K, B, S), dtype=np.int64)
    save_file({"input_ids": ids, "labels": ids.copy()}, data)
    env = mpi.env(root=True, oversubscribe=True, threads=T)

    results, init = {}, None
    runs = [(int(s), False) for s in a.stages.split(",")] + ([(3, True)] if a.deepspeed else [])
    for stage, bf16 in runs:
        tag = f"s{stage}" + ("_bf16" if bf16 else "")
        cfg = os.path.join(work, f"ds_{tag}.json")
        with open(cfg, "w") as f:
            json.dump(ds_config(a, bf16=bf16, stage=stage), f)
        zrt = os.path.join(work, f"{tag}.zrt")
        w = os.path.join(work, "init.safetensors")
        t = time.perf_counter()
        sh(tools.zero_opt(zero_opt, model, {"input_ids": (B // N, S)},
                          ["--train", "--loss", "causal-lm:labels", "--config", cfg], zrt, w))
        init = w
        log, rep = os.path.join(work, f"log_{tag}.json"), os.path.join(work, f"rep_{tag}.json")
        cmd = mpi.mpirun(N, [zero_run, zrt, "--weights", w, "--data", data, "--steps", str(K),
                             "--threads", str(T), "--log-json", log, "--report-json", rep],
                         oversubscribe=False, bind_to="none")
        sh(cmd, env=env)
        steps = json.load(open(log))
        report = json.load(open(rep))
        name = f"zero-run stage {stage}" + (" bf16" if bf16 else "")
        results[name] = {
            "losses": [s["loss"] for s in steps], "times": [s["time_s"] for s in steps[1:]],
            "rss": max(r["peak_rss_bytes"] for r in report["ranks"]), "bf16": bf16}
        print(f"{name}: steps {[round(s['time_s'], 2) for s in steps]} s, "
              f"peak RSS/rank {results[name]['rss'] / 2**20:.0f} MiB "
              f"({time.perf_counter() - t:.0f} s)", flush=True)
    peers = ("ddp", "fsdp2") + (("deepspeed", "deepspeed-bf16") if a.deepspeed else ())
    for kind in peers:
        out = os.path.join(work, f"torch_{kind}.json")
        t = time.perf_counter()
        sh([sys.executable, os.path.abspath(__file__), "--torch-worker", kind, "--ranks", str(N),
            "--threads", str(T), "--batch", str(B), "--steps", str(K), "--lr", repr(a.lr),
            "--weights", init, "--data", data, "--out", out], env=env)
        per = [json.load(open(f"{out}.{r}")) for r in range(N)]
        name = {"ddp": "PyTorch DDP", "fsdp2": "PyTorch FSDP2", "deepspeed": "DeepSpeed ZeRO-3",
                "deepspeed-bf16": "DeepSpeed ZeRO-3 bf16"}[kind]
        results[name] = {"losses": [s["loss"] for s in per[0]["steps"]],
                         "times": [s["time_s"] for s in per[0]["steps"][1:]],
                         "rss": max(p["peak_rss"] for p in per), "bf16": kind.endswith("bf16")}
        print(f"{name}: steps {[round(s['time_s'], 2) for s in per[0]['steps']]} s, peak RSS/rank "
              f"{results[name]['rss'] / 2**20:.0f} MiB ({time.perf_counter() - t:.0f} s)", flush=True)

    base = results["PyTorch DDP"]
    bt = statistics.median(base["times"])
    print()
    print(f"GPT-2-small training step, global batch {B} x {S}, {N} ranks x {T} thread(s), "
          f"AdamW; median of {K - 1} step(s) after a warm-up step")
    print(f"{'':22} {'step ms':>9} {'x DDP':>7} {'peak RSS/rank MiB':>18} {'x DDP':>7} {'step-1 loss':>12}")
    ok = True
    for name, r in results.items():
        st = statistics.median(r["times"])
        print(f"{name:22} {st * 1e3:9.0f} {st / bt:7.2f} {r['rss'] / 2**20:18.0f} "
              f"{r['rss'] / base['rss']:7.2f} {r['losses'][0]:12.6f}")
        # bf16 rounds the weights and activations: its step-1 loss within 1e-2.
        if abs(r["losses"][0] - base["losses"][0]) > (1e-2 if r.get("bf16") else 1e-3) * abs(
                base["losses"][0]):
            ok = False
    if not ok:
        print("step-1 losses disagree beyond rtol 1e-3 (bf16: 1e-2)")
        sys.exit(1)


if __name__ == "__main__":
    main()
