#!/usr/bin/env python3
"""Training-step benchmark: zero-run vs PyTorch eager on GPT-2-small.

One invocation measures, interleaved on the same machine and thread count:
  zero-run  `zero-opt MODEL --train --loss causal-lm:labels --optimizer "adamw lr=LR"`
            then `zero-run --data batches.safetensors --steps N --log-json log.json`;
            per-step times are log.json's time_s, peak RSS from /usr/bin/time -v
            (or, without it, zero-run's --report-json peak_rss_bytes)
  PyTorch   transformers GPT2LMHeadModel (same config, dropout 0, eager attention
            as exported) with the same initial weights (zero-opt's --weights-out
            file, read straight into the parameters) and torch.optim.AdamW, run in
            a subprocess; peak RSS is that process's resource.getrusage ru_maxrss
Both train on the same batches (random tokens, labels = input_ids), AdamW with
torch's defaults otherwise (betas 0.9,0.999, eps 1e-8, weight decay 0.01), no
clipping unless --clip. The first step of every run is warm-up and is left out
of the step-time medians. Rounds alternate which side runs first. The losses at
step 1 must agree (rtol 1e-3): both compute the same step from the same weights.

With --precision bf16 it compares three sides instead: zero-run fp32, zero-run bf16
(the config's "bf16": zero-mixed-precision, fp32 masters) and PyTorch eager under CPU
autocast to bf16, and adds each zero-run program's bytes sent per rank at ZeRO-3 over 2
ranks (one step, --report-json); step-1 losses must then agree to rtol 2e-2.

Usage: build/pyenv/bin/python bench/train_step.py [--threads 2] [--quick]
       [--batch 8 --seq 128 --steps 3 --rounds 3] [--precision fp32|bf16]
       [--clip NORM] [--torch-adamw default|foreach|fused] [--model build/bench/gpt2_small.onnx]
(bench/make_gpt2_small.sh writes the model; the virtualenv needs torch + transformers.)
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

from zerokit import mpi, tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = 50257


def sh(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return r


def time_v_rss(stderr):
    """Maximum resident set size (bytes) from /usr/bin/time -v output, or None."""
    for line in stderr.splitlines():
        if "Maximum resident set size" in line:
            return int(line.rsplit(":", 1)[1]) * 1024
    return None


# ---------------------------------------------------------------------------
# PyTorch side (runs in its own process: --torch-worker)
# ---------------------------------------------------------------------------

def read_safetensors_into(path, params):
    """Reads each tensor of a safetensors file straight into params[name] (no
    intermediate copy, no mmap: the file's pages are not counted in the RSS)."""
    import torch
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        base = 8 + n
        done = set()
        for name, info in sorted(header.items(), key=lambda kv: kv[1].get("data_offsets", [0])[0]
                                 if isinstance(kv[1], dict) else -1):
            if name == "__metadata__":
                continue
            if name not in params:
                sys.exit(f"weights file has {name}, not a parameter of the PyTorch model")
            p = params[name]
            if info["dtype"] != "F32" or list(p.shape) != info["shape"]:
                sys.exit(f"{name}: file {info['dtype']} {info['shape']}, model {p.dtype} {list(p.shape)}")
            lo, hi = info["data_offsets"]
            f.seek(base + lo)
            with torch.no_grad():
                buf = p.data.numpy().reshape(-1).view(np.uint8)
                if f.readinto(memoryview(buf)) != hi - lo:
                    sys.exit(f"{name}: short read")
            done.add(name)
    missing = set(params) - done
    if missing:
        sys.exit(f"weights file lacks {sorted(missing)}")


def torch_worker(a):
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    import torch
    import transformers as tf
    from safetensors.numpy import load_file
    torch.set_num_threads(a.threads)
    # As bench/make_gpt2_small.sh exports it (test/models/export.py), dropout off.
    cfg = tf.GPT2Config(attn_implementation="eager", use_cache=False,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    model = tf.GPT2LMHeadModel(cfg)
    # Initializer names are the state_dict names; the tied embedding / LM head is
    # one initializer, lm_head.weight.
    params = dict(model.named_parameters(remove_duplicate=False))
    assert params["lm_head.weight"] is params["transformer.wte.weight"], "embedding not tied"
    del params["transformer.wte.weight"]
    read_safetensors_into(a.weights, params)
    model.train()
    import contextlib
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if a.precision == "bf16"
                else contextlib.nullcontext())
    kw = {"foreach": dict(foreach=True), "fused": dict(fused=True)}.get(a.torch_adamw, {})
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, **kw)  # torch's defaults otherwise
    data = load_file(a.data)
    ids_all = torch.from_numpy(data["input_ids"])
    labels_all = torch.from_numpy(data["labels"])
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    log = []
    for s in range(a.steps):
        ids, labels = ids_all[s], labels_all[s]
        t = time.perf_counter()
        with autocast:
            loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip) if a.clip > 0 else None
        opt.step()
        opt.zero_grad(set_to_none=True)
        dt = time.perf_counter() - t
        log.append({"step": s + 1, "loss": loss.item(), "time_s": dt,
                    "grad_norm": None if gn is None else gn.item()})
        print(f"torch step {s + 1}/{a.steps}  loss {loss.item():.6f}  time {dt * 1e3:.1f} ms",
              file=sys.stderr, flush=True)
    out = {"steps": log, "rss_before_train": rss_before,
           "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
           "threads": torch.get_num_threads(), "torch": torch.__version__,
           "transformers": tf.__version__}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def bytes_at_zero3(a, model, work, zero_opt, zero_run, env, B, S):
    """Bytes sent per rank by one ZeRO-3 step over 2 ranks, fp32 and bf16 programs (the
    report's bytes_sent): the bf16 step's collectives carry half of fp32's bytes."""
    cfg = os.path.join(work, "z3.json")
    sent = {}
    for prec in ("fp32", "bf16"):
        c = {"train_batch_size": 2 * B, "train_micro_batch_size_per_gpu": B,
             "zero_optimization": {"stage": 3}}
        if prec == "bf16":
            c["bf16"] = {"enabled": True}
        with open(cfg, "w") as f:
            json.dump(c, f)
        zrt = os.path.join(work, f"z3_{prec}.zrt")
        w = os.path.join(work, f"z3_{prec}.safetensors")
        sh(tools.zero_opt(zero_opt, model, {"input_ids": (B, S)},
                          ["--train", "--loss", "causal-lm:labels", "--optimizer",
                           f"adamw lr={a.lr:g}", "--config", cfg, "--zero-pipeline=dp=2"],
                          zrt, w))
        ids = np.random.default_rng(1).integers(0, VOCAB, size=(1, 2 * B, S), dtype=np.int64)
        from safetensors.numpy import save_file
        d = os.path.join(work, "z3_data.safetensors")
        save_file({"input_ids": ids, "labels": ids.copy()}, d)
        rep = os.path.join(work, f"z3_{prec}_report.json")
        sh(mpi.mpirun(2, [zero_run, zrt, "--weights", w, "--data", d, "--report-json", rep,
                          "--threads", "1"]), env=mpi.env(env, root=True, oversubscribe=True))
        with open(rep) as f:
            sent[prec] = [r["bytes_sent_total"] for r in json.load(f)["ranks"]]
    print(f"ZeRO-3 over 2 ranks, one step: bytes sent per rank fp32 "
          f"{[round(x / 2**20) for x in sent['fp32']]} MiB, bf16 "
          f"{[round(x / 2**20) for x in sent['bf16']]} MiB "
          f"(ratio {sent['bf16'][0] / sent['fp32'][0]:.3f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=None, help="logits ONNX model (default BUILD/bench/gpt2_small.onnx)")
    ap.add_argument("--work", default=None, help="scratch directory (default BUILD/bench/train)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3, help="steps per run; the first is warm-up")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each side, interleaved")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--clip", type=float, default=0.0, help="max global grad norm (0: no clipping)")
    ap.add_argument("--torch-adamw", choices=["default", "foreach", "fused"], default="default",
                    help="torch.optim.AdamW implementation (default: torch's choice, the "
                         "per-tensor loop on CPU)")
    ap.add_argument("--quick", action="store_true", help="batch 4 x seq 64, 3 steps, 1 round")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: zero-run fp32 and bf16 against PyTorch under bf16 autocast")
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--weights", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_worker:
        return torch_worker(a)
    if a.quick:
        a.batch, a.seq, a.steps, a.rounds = 4, 64, 3, 1
    if a.steps < 2:
        ap.error("--steps must be at least 2 (the first step is warm-up)")
    model = a.model or os.path.join(a.build, "bench", "gpt2_small.onnx")
    if not os.path.exists(model):
        sys.exit(f"missing {model}; run bench/make_gpt2_small.sh")
    work = a.work or os.path.join(a.build, "bench", "train")
    os.makedirs(work, exist_ok=True)
    zero_opt = os.path.join(a.build, "bin", "zero-opt")
    zero_run = os.path.join(a.build, "bin", "zero-run")
    time_v = ["/usr/bin/time", "-v"] if os.access("/usr/bin/time", os.X_OK) else []
    B, S, N, T = a.batch, a.seq, a.steps, a.threads
    tag = f"b{B}s{S}"

    # Compile one AdamW step.
    zrt = os.path.join(work, f"train_{tag}.zrt")
    init = os.path.join(work, f"init_{tag}.safetensors")
    opt = f"adamw lr={a.lr:g}" + (f" clip={a.clip:g}" if a.clip > 0 else "")
    cmd = tools.zero_opt(zero_opt, model, {"input_ids": (B, S)},
                         ["--train", "--loss", "causal-lm:labels", "--optimizer", opt], zrt, init)
    t = time.perf_counter()
    sh(cmd)
    print(f"compiled in {time.perf_counter() - t:.1f} s: {' '.join(cmd)}", flush=True)
    programs = {"zero-run": zrt}
    if a.precision == "bf16":
        cfg = os.path.join(work, "bf16.json")
        with open(cfg, "w") as f:
            json.dump({"train_micro_batch_size_per_gpu": B, "bf16": {"enabled": True}}, f)
        programs["zero bf16"] = os.path.join(work, f"train_{tag}_bf16.zrt")
        t = time.perf_counter()
        sh(cmd[:-4] + ["--config", cfg, "-o", programs["zero bf16"], "--weights-out",
                       os.path.join(work, f"init_{tag}_bf16.safetensors")])
        print(f"compiled the bf16 step in {time.perf_counter() - t:.1f} s", flush=True)

    # The batches: N steps of random tokens, labels = input_ids (Hugging Face's
    # causal-LM convention; both sides shift by one).
    from safetensors.numpy import save_file
    data = os.path.join(work, f"batches_{tag}_n{N}.safetensors")
    ids = np.random.default_rng(0).integers(0, VOCAB, size=(N, B, S), dtype=np.int64)
    save_file({"input_ids": ids, "labels": ids.copy()}, data)

    env = mpi.env(threads=T)
    runs = {name: [] for name in list(programs) + ["pytorch"]}

    def run_zero(r, name="zero-run"):
        log = os.path.join(work, f"zero_log_{r}.json")
        rep = os.path.join(work, f"zero_report_{r}.json")
        cmd = [zero_run, programs[name], "--weights", init, "--data", data, "--steps", str(N),
               "--log-json", log, "--report-json", rep, "--threads", str(T)]
        if r == 0:
            print("zero-run: " + " ".join(cmd), flush=True)
        p = sh(time_v + cmd, env=env)
        with open(log) as f:
            steps = json.load(f)
        with open(rep) as f:
            report = json.load(f)
        rss = time_v_rss(p.stderr) or report["ranks"][0]["peak_rss_bytes"]
        return {"steps": steps, "peak_rss": rss,
                "report_rss": report["ranks"][0]["peak_rss_bytes"]}

    def run_torch(r):
        out = os.path.join(work, f"torch_log_{r}.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", "--threads", str(T),
               "--weights", init, "--data", data, "--steps", str(N), "--lr", repr(a.lr),
               "--clip", repr(a.clip), "--torch-adamw", a.torch_adamw, "--out", out,
               "--precision", a.precision]
        sh(cmd, env=env)
        with open(out) as f:
            return json.load(f)

    load0 = open("/proc/loadavg").read().split()[0]
    t0 = time.perf_counter()
    for r in range(a.rounds):
        order = [(n, lambda r, n=n: run_zero(r, n)) for n in programs] + [("pytorch", run_torch)]
        if r % 2:
            order.reverse()
        for name, fn in order:
            t = time.perf_counter()
            res = fn(r)
            runs[name].append(res)
            times = [s["time_s"] for s in res["steps"]]
            print(f"round {r + 1}/{a.rounds} {name:8}: step times "
                  + " ".join(f"{x:.2f}" for x in times) + f" s, peak RSS "
                  f"{res['peak_rss'] / 2**20:.0f} MiB ({time.perf_counter() - t:.0f} s)", flush=True)
    wall = time.perf_counter() - t0

    # Figures.
    def step_times(name):
        return [s["time_s"] for run in runs[name] for s in run["steps"][1:]]

    def peak(name):
        return max(run["peak_rss"] for run in runs[name])

    zt, pt = (statistics.median(step_times(n)) for n in ("zero-run", "pytorch"))
    zm, pm = peak("zero-run"), peak("pytorch")
    names = list(programs) + ["pytorch"]
    nt = len(step_times("zero-run"))
    tv = runs["pytorch"][0]
    print()
    print(f"GPT-2-small training step, batch {B} x seq {S}, AdamW lr {a.lr:g} "
          f"({'clip ' + format(a.clip, 'g') if a.clip > 0 else 'no clipping'}), "
          f"torch AdamW {a.torch_adamw}, {T} thread(s); {a.rounds} round(s) x {N} steps, "
          f"first step of each run left out: median of {nt} steps each "
          f"(torch {tv['torch']}, transformers {tv['transformers']}; {wall:.0f} s; "
          f"load average before {load0}, after {open('/proc/loadavg').read().split()[0]})")
    print(f"{'':10} {'step ms':>9} {'min ms':>8} {'max ms':>8} {'tokens/s':>9} {'peak RSS MiB':>13}")
    for name in names:
        ts, m = step_times(name), peak(name)
        st = statistics.median(ts)
        print(f"{name:10} {st * 1e3:9.0f} {min(ts) * 1e3:8.0f} {max(ts) * 1e3:8.0f} "
              f"{B * S / st:9.1f} {m / 2**20:13.0f}")
    print(f"{'ratio z/pt':10} {zt / pt:9.2f} {'':8} {'':8} {pt / zt:9.2f} {zm / pm:13.2f}")
    if "zero bf16" in programs:
        bt, bm = statistics.median(step_times("zero bf16")), peak("zero bf16")
        print(f"{'bf16/fp32':10} {bt / zt:9.2f} {'':8} {'':8} {zt / bt:9.2f} {bm / zm:13.2f}")
        print(f"{'bf16/pt':10} {bt / pt:9.2f} {'':8} {'':8} {pt / bt:9.2f} {bm / pm:13.2f}")
        bytes_at_zero3(a, model, work, zero_opt, zero_run, env, B, S)
    print(f"(pytorch RSS after loading, before step 1: {tv['rss_before_train'] / 2**20:.0f} MiB; "
          f"zero-run --report-json peak RSS: "
          f"{max(r['report_rss'] for r in runs['zero-run']) / 2**20:.0f} MiB)")

    # Sanity: the same step from the same weights on the same batch (bf16: PyTorch's
    # autocast against zero-run's bf16 program, within bf16's rounding).
    zl = [s["loss"] for s in runs["zero bf16" if "zero bf16" in programs else "zero-run"][0]["steps"]]
    pl = [s["loss"] for s in runs["pytorch"][0]["steps"]]
    rel = [abs(z - p) / abs(p) for z, p in zip(zl, pl)]
    rtol = 2e-2 if a.precision == "bf16" else 1e-3
    ok = rel[0] <= rtol
    print(f"loss step 1: zero-run {zl[0]:.6f}, pytorch {pl[0]:.6f}, rel diff {rel[0]:.2e} "
          f"({'ok' if ok else 'MISMATCH'}, rtol {rtol:g}); later steps max rel diff "
          f"{max(rel[1:]) if len(rel) > 1 else 0:.2e}")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
