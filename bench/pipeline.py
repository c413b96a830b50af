#!/usr/bin/env python3
"""Pipeline stages on GPT-2-small, forward: pp=2 (fill/drain over M micro-batches)
vs the 1-rank run and vs dp=2 ZeRO-3, in one invocation on the same inputs.

  1 rank     zero-opt at B x S, zero-run with 2 threads per rank x 1 rank
  pp=2 M=k   zero-opt --zero-pipeline "pp=2 micro-batches=k" at (B/k) x S,
             zero-run on 2 ranks x 1 thread (one stage each)
  dp=2 Z3    zero-opt --zero-pipeline "stage=3 dp=2 prefetch=2" at (B/2) x S,
             2 ranks x 1 thread, each rank a half of the batch
Each is run with --repeat R --warmup 1; time = the median of the timed runs on the
slowest rank. Printed per variant: time and its ratio to the 1-rank run, peak RSS
per rank (max over ranks), and for the pipelines the measured bubble of each stage
(1 - kernel time / wall time, from zero-run's report) next to fill/drain's
(S-1)/(M+S-1). The pipeline outputs are checked bit-identical to the 1-rank run.
No timing is asserted.

With --train, the same comparison for an AdamW training step (causal-LM loss on the
logits, the global batch B x S in every variant, --steps steps of random tokens):

  1 rank     accumulation M over micro-batches of B/M rows, 2 threads
  pp=2 M     --zero-pipeline "pp=2 micro-batches=M schedule=1f1b" (and gpipe),
             2 ranks x 1 thread
  dp=2 Z3    --zero-pipeline "stage=3 dp=2", accumulation M/2 per rank, 2 x 1 thread
Time = the median step time after the first step (zero-run's --log-json, slowest
rank); the pipelines' final weights are checked bit-identical to the 1-rank run's.

Usage: build/pyenv/bin/python bench/pipeline.py [--batch 8] [--seq 128] [--repeat 3]
       [--micro 1,2,4,8] [--quick] [--train [--steps 4]]
"""
import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from train_step import sh
from zerokit import mpi, tools

VOCAB = 50257


def train_run(zero_opt, zero_run, work, tag, model, shapes, loss, accum, pipeline, np_,
              threads, data, steps, env):
    """Compiles `model` at the input shapes `shapes` ({name: dims}) for an AdamW
    training step (accumulation `accum`, lr 1e-4, --zero-pipeline `pipeline` if
    given), trains `steps` steps of `data` on `np_`
    ranks x `threads` threads and returns the median step time after the first, the
    report's ranks in rank order, and the saved final weights' path."""
    zrt, w = os.path.join(work, f"{tag}.zrt"), os.path.join(work, f"{tag}.safetensors")
    cfg = os.path.join(work, f"{tag}.json")
    with open(cfg, "w") as f:
        json.dump({"gradient_accumulation_steps": accum,
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}, f)
    args = ["--train", "--loss", loss, "--config", cfg]
    args += [f"--zero-pipeline={pipeline}"] if pipeline else []
    sh(tools.zero_opt(zero_opt, model, shapes, args, zrt, w))
    rep, log_ = os.path.join(work, f"{tag}.report.json"), os.path.join(work, f"{tag}.log.json")
    saved = os.path.join(work, f"{tag}.final.safetensors")
    sh(mpi.mpirun(np_, [zero_run, zrt, "--weights", w, "--data", data, "--steps", str(steps),
                        "--threads", str(threads), "--log-json", log_, "--report-json", rep,
                        "--save", saved], oversubscribe=False, bind_to="none"), env=env)
    times = sorted(r["time_s"] for r in json.load(open(log_))[1:])
    ranks = sorted(json.load(open(rep))["ranks"], key=lambda r: r["rank"])
    return times[len(times) // 2], ranks, saved


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=None)
    ap.add_argument("--work", default=None)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--micro", default="1,2,4,8")
    ap.add_argument("--quick", action="store_true", help="4 x 32, micro 1,4, 2 repeats")
    ap.add_argument("--train", action="store_true", help="a training step instead")
    ap.add_argument("--partition", default="parameters",
                    help="with --train: the pipelines' partition-method (parameters, "
                         "uniform, type:REGEX, compute)")
    ap.add_argument("--steps", type=int, default=4, help="with --train: steps per run")
    ap.add_argument("--tied-grads", default="micro-batch",
                    help="with --train: the pipelines' tied-grads (micro-batch: the 1-rank "
                         "sum, weights checked bit-identical; step: DeepSpeed's, weights "
                         "checked within rtol 1e-4)")
    ap.add_argument("--schedules", default="1f1b,gpipe", help="with --train")
    a = ap.parse_args()
    if a.train:
        return train_bench(a)
    if a.quick:
        a.batch, a.seq, a.repeat, a.micro = 4, 32, 2, "1,4"
    B, S = a.batch, a.seq
    micro = [int(m) for m in a.micro.split(",") if B % int(m) == 0]
    model = a.model or os.path.join(a.build, "bench", "gpt2_small.onnx")
    if not os.path.exists(model):
        sys.exit(f"missing {model}; run bench/make_gpt2_small.sh")
    work = a.work or os.path.join(a.build, "bench", "pipeline")
    os.makedirs(work, exist_ok=True)
    zero_opt = os.path.join(a.build, "bin", "zero-opt")
    zero_run = os.path.join(a.build, "bin", "zero-run")
    env = mpi.env(root=True, oversubscribe=True, yield_when_idle=True)
    from safetensors.numpy import load_file

    ids = np.random.default_rng(0).integers(0, VOCAB, size=(B, S), dtype=np.int64)
    full = os.path.join(work, f"ids_{B}x{S}.npy")
    np.save(full, ids)
    # dp=2: each rank runs half the batch (the same half on both: the same work).
    half = os.path.join(work, f"ids_{B // 2}x{S}.npy")
    np.save(half, ids[:B // 2])

    def run(tag, shape, pipeline, np_, threads, inputs):
        zrt, w = os.path.join(work, f"{tag}.zrt"), os.path.join(work, f"{tag}.safetensors")
        sh(tools.zero_opt(zero_opt, model, {"input_ids": shape},
                          [f"--zero-pipeline={pipeline}"] if pipeline else [], zrt, w))
        rep, out = os.path.join(work, f"{tag}.json"), os.path.join(work, f"{tag}.out")
        run_args = [zero_run, zrt, "--weights", w, "--output", out, "--threads", str(threads),
                    "--repeat", str(a.repeat), "--warmup", "1", "--report-json", rep]
        cmd = mpi.mpirun(np_, run_args + ["--input", f"input_ids={inputs}"],
                         oversubscribe=False, bind_to="none")
        sh(cmd, env=env)
        report = json.load(open(rep))
        wall = max(r.get("wall_time_median_s", r["wall_time_s"]) for r in report["ranks"])
        rss = max(r["peak_rss_bytes"] for r in report["ranks"]) / 2**20
        bubbles = [r.get("pipeline_bubble") for r in report["ranks"]]
        return wall, rss, bubbles, out

    rows = []
    base_wall, base_rss, _, base_out = run("np1", f"{B}x{S}", "", 1, 2, full)
    rows.append(("1 rank x 2 threads", base_wall, 1.0, base_rss, "", ""))
    print(f"1 rank: {base_wall:.3f} s, peak RSS {base_rss:.0f} MiB", flush=True)
    ref = load_file(base_out)["logits"]
    for m in micro:
        tag = f"pp2_m{m}"
        wall, rss, bubbles, out = run(tag, f"{B // m}x{S}", f"pp=2 micro-batches={m}", 2, 1,
                                      full)
        same = np.array_equal(load_file(out)["logits"], ref)
        if not same:
            sys.exit(f"FAIL: pp=2 micro-batches={m} logits differ from the 1-rank run")
        predicted = (2 - 1) / (m + 2 - 1)
        rows.append((f"pp=2 M={m}, 2 ranks x 1 thread", wall, wall / base_wall, rss,
                     " / ".join(f"{b:.2f}" for b in bubbles), f"{predicted:.2f}"))
        print(f"pp=2 M={m}: {wall:.3f} s, peak RSS {rss:.0f} MiB, bubble {bubbles} "
              f"(fill/drain {predicted:.2f})", flush=True)
    wall, rss, _, _ = run("dp2_z3", f"{B // 2}x{S}", "stage=3 dp=2 prefetch=2", 2, 1, half)
    rows.append(("dp=2 ZeRO-3, 2 ranks x 1 thread", wall, wall / base_wall, rss, "", ""))
    print(f"dp=2 ZeRO-3: {wall:.3f} s, peak RSS {rss:.0f} MiB", flush=True)

    print(f"\nGPT-2-small forward, batch {B} x {S}, median of {a.repeat} runs "
          f"(after 1 warm-up), slowest rank")
    print(f"| run | time (s) | vs 1 rank | peak RSS/rank (MiB) | bubble per stage | "
          f"fill/drain (S-1)/(M+S-1) |")
    print("|---|---|---|---|---|---|")
    for name, wall, ratio, rss, bub, pred in rows:
        print(f"| {name} | {wall:.3f} | {ratio:.2f}x | {rss:.0f} | {bub} | {pred} |")


def train_bench(a):
    if a.quick:
        a.batch, a.seq, a.micro = 4, 32, "2,4"
    B, S = a.batch, a.seq
    micro = [int(m) for m in a.micro.split(",") if int(m) >= 2 and B % int(m) == 0]
    model = a.model or os.path.join(a.build, "bench", "gpt2_small.onnx")
    if not os.path.exists(model):
        sys.exit(f"missing {model}; run bench/make_gpt2_small.sh")
    work = a.work or os.path.join(a.build, "bench", "pipeline-train")
    os.makedirs(work, exist_ok=True)
    zero_opt = os.path.join(a.build, "bin", "zero-opt")
    zero_run = os.path.join(a.build, "bin", "zero-run")
    env = mpi.env(root=True, oversubscribe=True, yield_when_idle=True)
    from safetensors.numpy import load_file, save_file

    rng = np.random.default_rng(0)
    ids = rng.integers(0, VOCAB, size=(a.steps, B, S), dtype=np.int64)
    data = os.path.join(work, f"data_{B}x{S}.safetensors")
    save_file({"input_ids": ids, "labels": ids.copy()}, data)

    def run(tag, rows, accum, pipeline, np_, threads):
        t, ranks, saved = train_run(zero_opt, zero_run, work, tag, model,
                                    {"input_ids": (rows, S)},
                                    "causal-lm:labels", accum, pipeline, np_, threads,
                                    data, a.steps, env)
        report = {"ranks": ranks}
        rss = max(r["peak_rss_bytes"] for r in report["ranks"]) / 2**20
        # Per stage: the whole step's idle fraction, and the schedule's alone
        # (the forward and backward steps, without the optimizer).
        bubbles = [(r.get("pipeline_bubble"), r.get("pipeline_schedule_bubble"))
                   for r in sorted(report["ranks"], key=lambda r: r["rank"])]
        return t, rss, bubbles, saved

    rows = []
    for m in micro:
        base, base_rss, _, base_w = run(f"np1_m{m}", B // m, m, "", 1, 2)
        rows.append((f"1 rank x 2 threads, accumulation {m}", base, 1.0, base_rss, "", "", ""))
        print(f"1 rank, accumulation {m}: {base:.3f} s/step, peak RSS {base_rss:.0f} MiB",
              flush=True)
        ref = load_file(base_w)
        for sch in a.schedules.split(","):
            tag = f"pp2_{sch}_m{m}_{a.tied_grads}"
            t, rss, bubbles, saved = run(tag, B // m, m,
                                         f"pp=2 micro-batches={m} schedule={sch} "
                                         f"partition-method={a.partition} "
                                         f"tied-grads={a.tied_grads}", 2, 1)
            got = load_file(saved)
            if a.tied_grads == "micro-batch":
                if any(got[k].tobytes() != ref[k].tobytes() for k in ref):
                    sys.exit(f"FAIL: {tag}: final weights differ from the 1-rank run")
            else:
                # The sum rounds differently; AdamW normalises each element's
                # step, so an element with a near-zero gradient can move by up
                # to lr either way: compare with how far the tensor moved.
                init = load_file(os.path.join(work, f"np1_m{m}.safetensors"))
                worst = max(float(np.max(np.abs(got[k].astype(np.float64) - ref[k])))
                            / max(float(np.max(np.abs(ref[k].astype(np.float64) - init[k]))),
                                  1e-30) for k in ref if k in init)
                print(f"{tag}: largest weight difference from the 1-rank run "
                      f"{worst:.3g} of the tensor's largest move", flush=True)
                if worst > 0.05:
                    sys.exit(f"FAIL: {tag}: final weights differ from the 1-rank run by "
                             f"{worst:.3g} of their largest move")
            predicted = (2 - 1) / (m + 2 - 1)
            rows.append((f"pp=2 {sch} M={m}, 2 ranks x 1 thread", t, t / base, rss,
                         " / ".join(f"{b:.2f}" for b, _ in bubbles if b is not None),
                         " / ".join(f"{b:.2f}" for _, b in bubbles if b is not None),
                         f"{predicted:.2f}"))
            print(f"pp=2 {sch} M={m}: {t:.3f} s/step, peak RSS {rss:.0f} MiB, bubble "
                  f"{bubbles} (predicted {predicted:.2f})", flush=True)
        t, rss, _, _ = run(f"dp2_z3_m{m}", B // m, m // 2, "stage=3 dp=2", 2, 1)
        rows.append((f"dp=2 ZeRO-3, accumulation {m // 2}, 2 ranks x 1 thread", t, t / base,
                     rss, "", "", ""))
        print(f"dp=2 ZeRO-3: {t:.3f} s/step, peak RSS {rss:.0f} MiB", flush=True)
    print(f"\nGPT-2-small training step (AdamW), global batch {B} x {S}, median step "
          f"time of steps 2-{a.steps}, slowest rank; pipelines partition-method="
          f"{a.partition}")
    print("| run | s/step | vs 1 rank | peak RSS/rank (MiB) | idle per stage (step) | "
          "bubble per stage (schedule) | (S-1)/(M+S-1) |")
    print("|---|---|---|---|---|---|---|")
    for name, t, ratio, rss, bub, sched, pred in rows:
        print(f"| {name} | {t:.3f} | {ratio:.2f}x | {rss:.0f} | {bub} | {sched} | {pred} |")


if __name__ == "__main__":
    main()
