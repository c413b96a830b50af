#!/usr/bin/env python3
"""ZeRO-Offload to NVMe: what it costs and what it makes possible.

cost      GPT-2-small (bench/make_gpt2_small.sh), ZeRO-3 over N ranks (default 2,
          1 thread each), global batch B x S (default 4 x 128), AdamW: the same
          zero-opt step compiled without and with
          zero_optimization.offload_optimizer {"device": "nvme"} (+ offload_param with
          --params), run alternately --rounds times; step time = the log's time_s
          (slowest rank; first step of each run left out), peak RSS and
          offloaded bytes per rank from --report-json. Prints the medians, the ratio
          offload / memory, and checks the losses are bit-identical.
headline  (--headline) a model larger than this machine can train in memory: L x
          Linear(W, W) (default 56 x 5632: 1.78e9 parameters, more than GPT-2-XL),
          made here with the onnx package (random init, its weights streamed to an
          external data file in --work, never committed), fp32 AdamW at 1 rank: parameters 4 B + gradients 4 B +
          moments 8 B per parameter = 24.4 GB of training state against this
          machine's MemTotal; trained --steps steps with the optimizer state in
          NVMe swap files; prints the peak RSS, the offloaded bytes, the storage
          traffic and the step times. (The in-memory run is not attempted: its
          state alone exceeds the RAM.)

No timing is asserted.
Usage: build/pyenv/bin/python bench/offload.py [--ranks 2] [--rounds 3] [--steps 4]
       [--params] [--headline [--layers 56 --width 5632]] [--work DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from zerokit import mpi, tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    return r


def mpi_env():
    return mpi.with_session(mpi.env(root=True))


def mem_total():
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


def run_zero(a, prog, init, data, tag, ranks, threads):
    log, rep = os.path.join(a.work, tag + ".log.json"), os.path.join(a.work, tag + ".rep.json")
    cmd = [os.path.join(a.build, "bin", "zero-run"), prog, "--weights", init, "--data", data,
           "--steps", str(a.steps), "--log-json", log, "--report-json", rep,
           "--threads", str(threads)]
    if ranks > 1:
        cmd = mpi.mpirun(ranks, cmd)
    t = time.perf_counter()
    sh(cmd, mpi_env())
    steps = json.load(open(log))
    return {"times": [s["time_s"] for s in steps[1:]], "losses": [s["loss"] for s in steps],
            "report": json.load(open(rep)), "wall": time.perf_counter() - t}


def cost(a):
    import numpy as np
    from safetensors.numpy import save_file
    model = os.path.join(a.build, "bench", "gpt2_small.onnx")
    if not os.path.exists(model):
        sys.exit(f"{model} is missing: run bench/make_gpt2_small.sh first")
    B, S = a.batch, a.seq
    swap = os.path.join(a.work, "swap")
    os.makedirs(swap, exist_ok=True)
    progs = {}
    for side in ("memory", "offload"):
        z = {"stage": 3}
        if side == "offload":
            z["offload_optimizer"] = {"device": "nvme", "nvme_path": swap}
            if a.params:
                z["offload_param"] = {"device": "nvme", "nvme_path": swap, "max_in_cpu": 0}
        cfg = os.path.join(a.work, side + ".json")
        json.dump({"zero_optimization": z}, open(cfg, "w"))
        progs[side] = os.path.join(a.work, side + ".zrt")
        sh(tools.zero_opt(os.path.join(a.build, "bin", "zero-opt"), model,
                          {"input_ids": (B // a.ranks, S)},
                          ["--train", "--loss", "causal-lm:labels", "--optimizer", "adamw lr=1e-4",
                           "--config", cfg, f"--zero-pipeline=dp={a.ranks}"], progs[side],
                          os.path.join(a.work, "init.safetensors")))
    ids = np.random.default_rng(0).integers(0, 50257, size=(a.steps, B, S), dtype=np.int64)
    data = os.path.join(a.work, "data.safetensors")
    save_file({"input_ids": ids, "labels": ids.copy()}, data)
    init = os.path.join(a.work, "init.safetensors")
    runs = {"memory": [], "offload": []}
    for r in range(a.rounds):
        for side in (("memory", "offload") if r % 2 == 0 else ("offload", "memory")):
            res = run_zero(a, progs[side], init, data, f"{side}{r}", a.ranks, a.threads)
            runs[side].append(res)
            print(f"round {r + 1}/{a.rounds} {side:7}: step times "
                  + " ".join(f"{t:.2f}" for t in res["times"]) + " s", flush=True)
    if runs["memory"][0]["losses"] != runs["offload"][0]["losses"]:
        sys.exit("FAIL: the losses differ with offload")
    med = {s: statistics.median([t for r in runs[s] for t in r["times"]]) for s in runs}
    rss = {s: max(k["peak_rss_bytes"] for r in runs[s] for k in r["report"]["ranks"])
           for s in runs}
    off = max(k.get("offloaded_bytes", 0) for r in runs["offload"] for k in r["report"]["ranks"])
    print(f"\nGPT-2-small, ZeRO-3 over {a.ranks} ranks x {a.threads} thread(s), global batch "
          f"{B} x {S}, AdamW{', offload_param too' if a.params else ''}; {a.rounds} rounds x "
          f"{a.steps} steps (first left out), medians; losses bit-identical")
    print(f"{'':10} {'step ms':>9} {'peak RSS MiB (max rank)':>24}")
    for s in runs:
        print(f"{s:10} {med[s] * 1e3:9.0f} {rss[s] / 2**20:24.0f}")
    print(f"{'ratio':10} {med['offload'] / med['memory']:9.2f} {rss['offload'] / rss['memory']:24.2f}"
          f"   (offloaded per rank {off / 2**20:.0f} MiB)")


def headline(a):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper
    from safetensors.numpy import save_file
    L, W = a.layers, a.width
    params = L * (W * W + W)
    state = params * 16
    print(f"model: {L} x Linear({W}, {W}) = {params / 1e9:.2f}e9 parameters; fp32 AdamW "
          f"training state {state / 1e9:.1f} GB (params + grads + 2 moments); MemTotal "
          f"{mem_total() / 1e9:.1f} GB", flush=True)
    model = os.path.join(a.work, f"wide_{L}x{W}.onnx")
    if not os.path.exists(model):
        # Each weight generated and appended to the external data file in turn
        # (the graph only references it): a few hundred MB of Python memory.
        rng = np.random.default_rng(0)
        data_name = os.path.basename(model) + ".data"
        nodes, inits = [], []
        x = "x"
        offset = 0
        with open(os.path.join(a.work, data_name), "wb") as f:
            def add(name, array):
                nonlocal offset
                array.tofile(f)
                t = TensorProto()
                t.name = name
                t.data_type = TensorProto.FLOAT
                t.dims.extend(array.shape)
                t.data_location = TensorProto.EXTERNAL
                for k, v in (("location", data_name), ("offset", str(offset)),
                             ("length", str(array.nbytes))):
                    e = t.external_data.add()
                    e.key, e.value = k, v
                offset += array.nbytes
                inits.append(t)
            for i in range(L):
                w = rng.standard_normal((W, W), dtype=np.float32)
                w *= np.float32(1 / np.sqrt(W))
                add(f"fc{i}.weight", w)
                del w
                add(f"fc{i}.bias", np.zeros(W, np.float32))
                nodes.append(helper.make_node("Gemm", [x, f"fc{i}.weight", f"fc{i}.bias"],
                                              [f"h{i}"], transB=1, name=f"fc{i}"))
                x = f"h{i}"
                if i + 1 < L:
                    nodes.append(helper.make_node("Relu", [x], [x + "r"], name=f"relu{i}"))
                    x += "r"
        g = helper.make_graph(nodes, "wide",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", W])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["b", W])],
                              inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        onnx.save(m, model)
        print(f"wrote {model} (+ {data_name}, {offset / 2**30:.1f} GiB)", flush=True)
    swap = os.path.join(a.work, "swap")
    os.makedirs(swap, exist_ok=True)
    cfg = os.path.join(a.work, "headline.json")
    json.dump({"zero_optimization": {"stage": 0, "offload_optimizer": {
        "device": "nvme", "nvme_path": swap, "buffer_count": 2}}}, open(cfg, "w"))
    prog, init = os.path.join(a.work, "headline.zrt"), os.path.join(a.work, "headline.init.safetensors")
    t = time.perf_counter()
    sh(tools.zero_opt(os.path.join(a.build, "bin", "zero-opt"), model, {"x": (a.batch, W)},
                      ["--train", "--loss", "cross-entropy:labels", "--optimizer", "adamw lr=1e-4",
                       "--config", cfg], prog, init))
    print(f"compiled in {time.perf_counter() - t:.0f} s", flush=True)
    rng = np.random.default_rng(1)
    data = os.path.join(a.work, "headline.data.safetensors")
    save_file({"x": rng.standard_normal((a.steps, a.batch, W), dtype=np.float32),
               "labels": rng.integers(0, W, (a.steps, a.batch)).astype(np.int64)}, data)
    res = run_zero(a, prog, init, data, "headline", 1, a.threads)
    r = res["report"]["ranks"][0]
    print(f"\nheadline: {params / 1e9:.2f}e9 parameters, fp32 AdamW, 1 rank x {a.threads} "
          f"threads, batch {a.batch}, {a.steps} steps in {res['wall']:.0f} s")
    print(f"  training state {state / 2**30:.1f} GiB; MemTotal {mem_total() / 2**30:.1f} GiB")
    print(f"  offloaded {r['offloaded_bytes'] / 2**30:.1f} GiB, planned resident at most "
          f"{r['offload_resident_bound_bytes'] / 2**30:.2f} GiB")
    print(f"  peak RSS {r['peak_rss_bytes'] / 2**30:.1f} GiB; storage read "
          f"{r.get('storage_read_bytes', 0) / 2**30:.1f} GiB, written "
          f"{r.get('storage_write_bytes', 0) / 2**30:.1f} GiB")
    print("  step times " + " ".join(f"{t:.1f}" for t in res["times"]) + " s; losses "
          + " ".join(f"{l:.4f}" for l in res["losses"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench", "offload"))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--params", action="store_true")
    ap.add_argument("--headline", action="store_true")
    ap.add_argument("--layers", type=int, default=56)
    ap.add_argument("--width", type=int, default=5632)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    if a.headline:
        headline(a)
    else:
        cost(a)


if __name__ == "__main__":
    main()
