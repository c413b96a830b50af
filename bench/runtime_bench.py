#!/usr/bin/env python3
"""Runtime benchmarks, each reported as a ratio against a baseline measured in
the same invocation.

  latency   zero-run forward time vs onnxruntime at the same thread count, on
            the GPT-2 fixture and on a GPT-2-small export; plus the memory plan
            (planned activation arena vs the no-reuse total and the lower bound)
  zero      GPT-2-small sharded over N = 1, 2, 4 ranks: per-rank peak memory as
            a ratio of the 1-rank run, forward time with prefetch on vs off,
            and all-gather bytes vs the ZeRO-3 closed form

Usage: build/pyenv/bin/python bench/runtime_bench.py {latency,zero} [--runs K]
(bench/run.sh makes the GPT-2-small export and the virtualenv first.)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from zerokit import mpi, tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


ENV = mpi.env(root=mpi.is_root())  # Open MPI refuses root otherwise


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, **kw)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    return r


class Bench:
    def __init__(self, args):
        self.build = args.build
        self.work = os.path.join(self.build, "bench", "runtime")
        os.makedirs(self.work, exist_ok=True)
        self.zero_opt = os.path.join(self.build, "bin", "zero-opt")
        self.zero_run = os.path.join(self.build, "bin", "zero-run")
        self.runs = args.runs
        self.threads = args.threads

    def compile(self, model, shapes, name, pipeline=""):
        zrt = os.path.join(self.work, name + ".zrt")
        weights = os.path.join(self.work, name + ".safetensors")
        sh(tools.zero_opt(self.zero_opt, model, shapes,
                          [f"--zero-pipeline={pipeline}"] if pipeline else [], zrt, weights))
        return zrt, weights

    def run(self, zrt, weights, inputs, ranks=1, threads=None):
        report = zrt + ".report.json"
        cmd = mpi.mpirun(ranks) if ranks > 1 else []
        cmd += [self.zero_run, zrt, "--weights", weights, "--report-json", report,
                "--threads", str(threads or self.threads)]
        for name, path in inputs.items():
            cmd += ["--input", f"{name}={path}"]
        reports = []
        for _ in range(self.runs):
            sh(cmd)
            with open(report) as f:
                reports.append(json.load(f))
        return reports

    def inputs_for(self, shapes, vocab):
        paths = {}
        rng = np.random.default_rng(0)
        for name, shape in shapes.items():
            p = os.path.join(self.work, f"{name}_{'x'.join(map(str, shape))}.npy")
            np.save(p, rng.integers(0, vocab, size=shape, dtype=np.int64))
            paths[name] = p
        return paths

    def ort_time(self, model, inputs):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        feed = {k: np.load(v) for k, v in inputs.items()}
        sess.run(None, feed)
        times = []
        for _ in range(self.runs):
            t = time.perf_counter()
            sess.run(None, feed)
            times.append(time.perf_counter() - t)
        return statistics.median(times)


def latency(b):
    cases = [("gpt2 fixture (2x8)", os.path.join(ROOT, "test", "models", "gpt2.onnx"),
              {"input_ids": [2, 8]}, 256),
             ("gpt2-small (1x128)", os.path.join(b.build, "bench", "gpt2_small.onnx"),
              {"input_ids": [1, 128]}, 50257)]
    print(f"forward latency, {b.threads} thread(s), median of {b.runs} runs")
    print(f"{'model':24} {'zero-run ms':>12} {'onnxruntime ms':>15} {'ratio':>7}")
    for label, model, shapes, vocab in cases:
        if not os.path.exists(model):
            print(f"{label:24} (missing {model}; run bench/make_gpt2_small.sh)")
            continue
        name = os.path.basename(model)[:-5]
        zrt, weights = b.compile(model, shapes, name)
        inputs = b.inputs_for(shapes, vocab)
        reps = b.run(zrt, weights, inputs)
        z = statistics.median(r["wall_time_s"] for r in reps)
        o = b.ort_time(model, inputs)
        print(f"{label:24} {z*1e3:12.2f} {o*1e3:15.2f} {z/o:7.2f}")
        act = [a for a in reps[0]["ranks"][0]["arenas"] if a["name"] == "activations"][0]
        print(f"  activation arena: planned {act['planned_bytes']/2**20:.1f} MiB, "
              f"no-reuse {act['no_reuse_bytes']/2**20:.1f} MiB "
              f"({act['planned_bytes']/act['no_reuse_bytes']:.2f}x), lower bound "
              f"{act['lower_bound_bytes']/2**20:.1f} MiB "
              f"(planned/bound {act['planned_bytes']/max(1, act['lower_bound_bytes']):.3f})")


def zero(b):
    model = os.path.join(b.build, "bench", "gpt2_small.onnx")
    if not os.path.exists(model):
        sys.exit("missing gpt2_small.onnx; run bench/make_gpt2_small.sh")
    shapes = {"input_ids": [1, 128]}
    inputs = b.inputs_for(shapes, 50257)
    base = None
    print(f"GPT-2-small ZeRO-3, 1 thread per rank, median of {b.runs} runs; "
          "reuse = max-reuse-distance (-1: keep a gathered parameter until its "
          "last use; 0: re-gather for every distant use)")
    print(f"{'N':>2} {'prefetch':>8} {'reuse':>6} {'fwd ms':>8} {'peak RSS MiB':>13} "
          f"{'vs N=1':>7} {'params MiB':>11} {'gathered MiB':>13} {'closed form':>12}")
    psi = None
    for n in (1, 2, 4):
        for prefetch, reuse in (((0, -1),) if n == 1 else ((0, -1), (2, -1), (2, 0))):
            pipe = (f"stage=3 dp={n} prefetch={prefetch} max-reuse-distance={reuse}"
                    if n > 1 else "")
            zrt, weights = b.compile(model, shapes, f"g2s_dp{n}_p{prefetch}_r{reuse}", pipe)
            reps = b.run(zrt, weights, inputs, ranks=n, threads=1)
            t = statistics.median(r["wall_time_s"] for r in reps)
            r0 = reps[-1]["ranks"]
            rss = max(r["peak_rss_bytes"] for r in r0)
            params = r0[0]["param_bytes_resident"]
            sent = r0[0]["bytes_sent"].get("AllGather", 0)
            if psi is None:
                psi = params  # the 1-rank run holds every parameter byte
            closed = psi * (n - 1) // n
            if base is None:
                base = rss
            print(f"{n:2} {prefetch:8} {reuse:6} {t*1e3:8.1f} {rss/2**20:13.0f} "
                  f"{rss/base:7.2f} {params/2**20:11.1f} {sent/2**20:13.1f} "
                  f"{closed/2**20:12.1f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["latency", "zero"])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    b = Bench(args)
    {"latency": latency, "zero": zero}[args.what](b)


if __name__ == "__main__":
    main()
