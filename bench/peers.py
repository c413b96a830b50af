#!/usr/bin/env python3
"""Peers: GPT-2-small forward, zero-run vs PyTorch eager, onnxruntime and PyTorch FSDP2.

One invocation, the same machine, the same ONNX file (bench/make_gpt2_small.sh) and the
same weights, forward pass only, input 1 x S random token ids per rank (default S 128):

  PyTorch eager  transformers GPT2LMHeadModel with the exported model's config (eager
                 attention, dropout 0), zero-opt's --weights-out file read straight into
                 its parameters (bench/train_step.py), torch.set_num_threads(T), 1 process,
                 forward under torch.no_grad()
  onnxruntime    InferenceSession on the same .onnx, intra_op_num_threads T, sequential
  FSDP2          torch.distributed.fsdp.fully_shard on every transformer block and the
                 root (reshard_after_forward=True: ZeRO-3), gloo, N = 2 and 4 processes
                 x 1 thread, forward under torch.no_grad(), 1 x S per rank
  zero-run       1 rank x T threads (no ZeRO): zero-opt --emit=zrt, zero-run --threads T;
                 ZeRO-3: zero-opt --zero-pipeline "stage=3 dp=N prefetch=2" at N = 2 and 4,
                 mpirun -np N --bind-to none zero-run --threads 1; and N = 2 with
                 prefetch=0 for the prefetch on/off ratio (both with --overlap auto)
Each run is its own process (or process group): load, 1 untimed warm-up forward, then R
timed forwards (zero-run: --repeat R --warmup 1 --report-json). A run's time is the
median of its R forwards, on the slowest rank for N > 1 (zero-run: the largest
wall_time_median_s over the report's ranks; PyTorch: each rank times its own forwards,
after a barrier). Its peak RSS per rank is the largest rank's: getrusage ru_maxrss for
the Python processes (they include the interpreter, torch / transformers or onnxruntime,
and, for FSDP2, the whole model each rank loads before fully_shard shards it), the
report's peak_rss_bytes for zero-run (each rank reads only its own shards).
--rounds K (default 3) repeats every run K times, alternating the order (forwards, then
backwards); the table gives the median of the K run times (and their min-max), the
largest peak RSS, and the ratios: zero-run 1 rank vs onnxruntime (same threads) and vs
PyTorch eager, ZeRO-3 at N vs FSDP2 at N (time and RSS), prefetch=2 vs prefetch=0. A
time ratio is that of the two medians, followed by each round's own ratio (the two
runs of one round are close in time, so on a shared machine those are the steadier
figures). WORK/results.json keeps every run's figures.

zero-run's 1-rank logits must match onnxruntime's (rtol 1e-4, atol 1e-5), or the
script exits with status 1; the other runs' largest differences are printed. No timing
is asserted: read the min-max spread and the load averages printed with the table
(ranks x threads above the core count share cores; mpirun runs with
yield_when_idle as bench/zeropp.py does: zerokit.mpi.env).

Usage: build/pyenv/bin/python bench/peers.py [--threads 2] [--repeat 5] [--rounds 3]
       [--seq 128] [--ranks 2,4] [--quick]       (--quick: seq 32, 2 repeats, 1 round)
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from train_step import read_safetensors_into, sh
from zerokit import mpi, tools

VOCAB = 50257


# ---------------------------------------------------------------------------
# Python-side runs (each in its own process: --worker)
# ---------------------------------------------------------------------------

def gpt2_model(weights):
    import transformers as tf
    # As bench/make_gpt2_small.sh exports it (test/models/export.py), dropout off.
    cfg = tf.GPT2Config(attn_implementation="eager", use_cache=False,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = tf.GPT2LMHeadModel(cfg)
    params = dict(model.named_parameters(remove_duplicate=False))
    assert params["lm_head.weight"] is params["transformer.wte.weight"], "embedding not tied"
    del params["transformer.wte.weight"]  # one initializer, lm_head.weight
    read_safetensors_into(weights, params)
    return model.eval()


def eager_worker(a):
    import torch
    torch.set_num_threads(a.threads)
    model = gpt2_model(a.weights)
    ids = torch.from_numpy(np.load(a.ids))
    times = []
    with torch.no_grad():
        for i in range(a.repeat + 1):
            t = time.perf_counter()
            logits = model(input_ids=ids).logits
            if i:
                times.append(time.perf_counter() - t)
    np.save(a.out + ".npy", logits.numpy())
    with open(a.out, "w") as f:
        json.dump({"ranks": [{"times": times, "threads": torch.get_num_threads(),
                              "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}],
                   "versions": {"torch": torch.__version__}}, f)


def ort_worker(a):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    feed = {"input_ids": np.load(a.ids)}
    times = []
    for i in range(a.repeat + 1):
        t = time.perf_counter()
        logits = sess.run(None, feed)[0]
        if i:
            times.append(time.perf_counter() - t)
    np.save(a.out + ".npy", logits)
    with open(a.out, "w") as f:
        json.dump({"ranks": [{"times": times,
                              "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}],
                   "versions": {"onnxruntime": ort.__version__}}, f)


def fsdp2_rank(rank, a):
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    model = gpt2_model(a.weights)
    for block in model.transformer.h:
        fully_shard(block)
    fully_shard(model)
    ids = torch.from_numpy(np.load(a.ids))
    times = []
    with torch.no_grad():
        for i in range(a.repeat + 1):
            dist.barrier()
            t = time.perf_counter()
            logits = model(input_ids=ids).logits
            if i:
                times.append(time.perf_counter() - t)
    if rank == 0:
        np.save(a.out + ".npy", logits.numpy())
    with open(f"{a.out}.{rank}", "w") as f:
        json.dump({"times": times,
                   "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}, f)
    dist.destroy_process_group()


def fsdp2_worker(a):
    import torch.multiprocessing as mp
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 2000))
    mp.spawn(fsdp2_rank, args=(a,), nprocs=a.ranks, join=True)
    ranks = []
    for r in range(a.ranks):
        with open(f"{a.out}.{r}") as f:
            ranks.append(json.load(f))
    import torch
    with open(a.out, "w") as f:
        json.dump({"ranks": ranks, "versions": {"torch": torch.__version__}}, f)


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=None, help="default BUILD/bench/gpt2_small.onnx")
    ap.add_argument("--work", default=None, help="scratch directory (default BUILD/bench/peers)")
    ap.add_argument("--threads", type=int, default=2, help="threads of the 1-process runs")
    ap.add_argument("--repeat", type=int, default=5, help="timed forwards per run")
    ap.add_argument("--rounds", type=int, default=3, help="runs of everything, order alternating")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--ranks", default="2,4", help="N for FSDP2 and ZeRO-3 (1 thread per rank)")
    ap.add_argument("--quick", action="store_true", help="seq 32, 2 repeats, 1 round")
    ap.add_argument("--worker", choices=["eager", "ort", "fsdp2"], help=argparse.SUPPRESS)
    ap.add_argument("--weights", help=argparse.SUPPRESS)
    ap.add_argument("--ids", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    model = a.model or os.path.join(a.build, "bench", "gpt2_small.onnx")
    a.model = model
    if a.worker:
        a.ranks = int(a.ranks)
        return {"eager": eager_worker, "ort": ort_worker, "fsdp2": fsdp2_worker}[a.worker](a)
    if a.quick:
        a.seq, a.repeat, a.rounds = 32, 2, 1
    if not os.path.exists(model):
        sys.exit(f"missing {model}; run bench/make_gpt2_small.sh")
    S, T, R = a.seq, a.threads, a.repeat
    Ns = [int(n) for n in a.ranks.split(",")]
    work = a.work or os.path.join(a.build, "bench", "peers")
    os.makedirs(work, exist_ok=True)
    zero_opt = os.path.join(a.build, "bin", "zero-opt")
    zero_run = os.path.join(a.build, "bin", "zero-run")
    ncpu = os.cpu_count()
    load0 = os.getloadavg()
    print(f"{ncpu} cores, load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} at start",
          flush=True)

    ids_path = os.path.join(work, f"ids_1x{S}.npy")
    np.save(ids_path, np.random.default_rng(0).integers(0, VOCAB, size=(1, S), dtype=np.int64))

    # Compile every zero-run program once (outside the timing).
    progs = {}  # key -> (zrt, weights, ranks)
    for key, n, pipe in [("zr1", 1, "")] + [(f"z3_{n}_p2", n, f"stage=3 dp={n} prefetch=2")
                                             for n in Ns] + \
                        ([("z3_2_p0", 2, "stage=3 dp=2 prefetch=0")] if 2 in Ns else []):
        # The weights file is the ordinary, unsharded one, the same bytes for every program.
        zrt, w = os.path.join(work, f"{key}_s{S}.zrt"), os.path.join(work, "weights.safetensors")
        cmd = tools.zero_opt(zero_opt, model, {"input_ids": (1, S)},
                             [f"--zero-pipeline={pipe}"] if pipe else [], zrt, w)
        t = time.perf_counter()
        sh(cmd)
        print(f"compiled {key} in {time.perf_counter() - t:.1f} s: {' '.join(cmd[1:])}", flush=True)
        progs[key] = (zrt, w, n)
    weights = progs["zr1"][1]

    def env_for(threads):
        return mpi.env(root=True, oversubscribe=True, yield_when_idle=True, threads=threads)

    def python_run(kind, out, threads, ranks=1):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--model", model,
               "--weights", weights, "--ids", ids_path, "--out", out, "--threads", str(threads),
               "--repeat", str(R), "--ranks", str(ranks)]
        sh(cmd, env=env_for(threads))
        with open(out) as f:
            d = json.load(f)
        t = max(statistics.median(r["times"]) for r in d["ranks"])
        return {"time": t, "rss": max(r["peak_rss"] for r in d["ranks"]), "logits": out + ".npy",
                "versions": d["versions"],
                "per_rank": [round(statistics.median(r["times"]) * 1e3, 1) for r in d["ranks"]]}

    def zero_run_run(key, out):
        zrt, w, n = progs[key]
        threads = T if n == 1 else 1
        rep, res = out + ".report.json", out + ".safetensors"
        cmd = mpi.mpirun(n, oversubscribe=False, bind_to="none") if n > 1 else []
        cmd += [zero_run, zrt, "--weights", w, "--input", f"input_ids={ids_path}",
                "--output", res, "--threads", str(threads), "--repeat", str(R),
                "--warmup", "1", "--report-json", rep]
        sh(cmd, env=env_for(threads))
        with open(rep) as f:
            report = json.load(f)
        ranks = report["ranks"]
        return {"time": max(r.get("wall_time_median_s", r["wall_time_s"]) for r in ranks),
                "rss": max(r["peak_rss_bytes"] for r in ranks), "logits": res,
                "turns": report.get("streams_take_turns"),
                "per_rank": [round(r.get("wall_time_median_s", r["wall_time_s"]) * 1e3, 1) for r in ranks]}

    runs = [("eager", f"PyTorch eager, 1 process x {T} threads",
             lambda o: python_run("eager", o, T)),
            ("ort", f"onnxruntime, {T} threads", lambda o: python_run("ort", o, T)),
            ("zr1", f"zero-run, 1 rank x {T} threads", lambda o: zero_run_run("zr1", o))]
    for n in Ns:
        runs.append((f"fsdp2_{n}", f"PyTorch FSDP2, {n} ranks x 1 thread",
                     lambda o, n=n: python_run("fsdp2", o, 1, n)))
        runs.append((f"z3_{n}_p2", f"zero-run ZeRO-3 prefetch=2, {n} ranks x 1 thread",
                     lambda o, n=n: zero_run_run(f"z3_{n}_p2", o)))
    if "z3_2_p0" in progs:
        runs.append(("z3_2_p0", "zero-run ZeRO-3 prefetch=0, 2 ranks x 1 thread",
                     lambda o: zero_run_run("z3_2_p0", o)))

    results = {key: [] for key, _, _ in runs}
    for rnd in range(a.rounds):
        order = runs if rnd % 2 == 0 else runs[::-1]
        print(f"round {rnd + 1}/{a.rounds}: {', '.join(k for k, _, _ in order)}", flush=True)
        for key, label, fn in order:
            t = time.perf_counter()
            r = fn(os.path.join(work, f"{key}_r{rnd}"))
            results[key].append(r)
            la = os.getloadavg()[0]
            extra = "" if r.get("turns") is None else \
                f", streams take turns: {r['turns']}"
            print(f"  {label}: {r['time'] * 1e3:.1f} ms (per rank {r['per_rank']}), peak RSS/rank "
                  f"{r['rss'] / 2**20:.0f} MiB{extra} [{time.perf_counter() - t:.0f} s, "
                  f"load {la:.2f}]", flush=True)

    # Correctness: zero-run 1 rank against onnxruntime (asserted); the others printed.
    from safetensors.numpy import load_file
    ref = np.load(results["ort"][0]["logits"])

    def logits_of(r):
        p = r["logits"]
        return load_file(p)["logits"] if p.endswith(".safetensors") else np.load(p)
    ok = True
    print(f"\nlogits vs onnxruntime (shape {list(ref.shape)}, max |ref| {np.abs(ref).max():.3f}):")
    for key, label, _ in runs:
        if key == "ort":
            continue
        got = logits_of(results[key][0]).reshape(ref.shape)
        close = np.allclose(got, ref, rtol=1e-4, atol=1e-5)
        print(f"  {label}: max abs diff {np.abs(got - ref).max():.3g} "
              f"({'within' if close else 'NOT within'} rtol 1e-4, atol 1e-5)")
        if key == "zr1" and not close:
            ok = False

    med = {k: statistics.median(r["time"] for r in v) for k, v in results.items()}
    rng = {k: (min(r["time"] for r in v), max(r["time"] for r in v)) for k, v in results.items()}
    rss = {k: max(r["rss"] for r in v) for k, v in results.items()}
    load1 = os.getloadavg()
    versions = {**results["eager"][0]["versions"], **results["ort"][0]["versions"]}

    def tcell(k):
        lo, hi = rng[k]
        return f"{med[k] * 1e3:.1f} ms" + (f" ({lo * 1e3:.1f}-{hi * 1e3:.1f})" if a.rounds > 1 else "")

    def mib(k):
        return f"{rss[k] / 2**20:.0f} MiB"
    def vs(k, base, name):
        """k's time over base's: the ratio of the medians, and each round's own ratio
        (the two runs of a round are close in time, so these see the same load)."""
        per = [rk["time"] / rb["time"] for rk, rb in zip(results[k], results[base])]
        return f"{med[k] / med[base]:.2f}x" + (f" {name}" if name else "") + \
            (f" (rounds {', '.join(f'{x:.2f}' for x in per)})" if a.rounds > 1 else "")
    rows = [("eager", "baseline", mib("eager")),
            ("ort", vs("ort", "eager", "PyTorch eager"), mib("ort")),
            ("zr1", f"{vs('zr1', 'ort', 'onnxruntime')}; {vs('zr1', 'eager', 'PyTorch eager')}",
             f"{mib('zr1')} ({rss['zr1'] / rss['ort']:.2f}x onnxruntime, "
             f"{rss['zr1'] / rss['eager']:.2f}x PyTorch eager)")]
    for n in Ns:
        f, z = f"fsdp2_{n}", f"z3_{n}_p2"
        rows.append((f, f"baseline for {n} ranks", mib(f)))
        rows.append((z, vs(z, f, f"FSDP2 at {n} ranks"),
                     f"{mib(z)} ({rss[z] / rss[f]:.2f}x FSDP2)"))
    if "z3_2_p0" in progs:
        rows.append(("z3_2_p0", "prefetch=2 / prefetch=0: " + vs("z3_2_p2", "z3_2_p0", ""),
                     mib("z3_2_p0")))
    labels = {k: lbl for k, lbl, _ in runs}
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump({"seq": S, "threads": T, "repeat": R, "rounds": a.rounds,
                   "load_start": load0, "load_end": load1,
                   "runs": {k: {"label": labels[k],
                                "rounds": [{x: r[x] for x in ("time", "rss", "per_rank")}
                                           for r in v]} for k, v in results.items()}}, f, indent=1)

    print(f"\nGPT-2-small forward, 1 x {S} token ids per rank, {R} timed forwards after 1 "
          f"warm-up per run, median; {a.rounds} round(s), order alternating"
          + (" (time: median of the rounds, min-max)" if a.rounds > 1 else "")
          + f"; {ncpu} cores, load average {load0[0]:.2f} at start, {load1[0]:.2f} {load1[1]:.2f} "
            f"{load1[2]:.2f} at end; " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    print("| run | time | vs | peak RSS per rank |")
    print("|---|---|---|---|")
    for k, vs, r in rows:
        print(f"| {labels[k]} | {tcell(k)} | {vs} | {r} |")
    if not ok:
        print("zero-run's 1-rank logits differ from onnxruntime's beyond rtol 1e-4, atol 1e-5")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
