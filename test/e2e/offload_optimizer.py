"""ZeRO-Offload to NVMe end to end (offload-optimizer.test).

A wide model made here (L x Linear(W, W) with ReLU between, a classifier
loss; written to the work directory, never stored) is trained with and
without zero_optimization.offload_optimizer {"device": "nvme"}:
  bits      at 1 rank (stage 0; and bf16, whose fp32 masters are offloaded
            too) and over 2 ranks (stages 2 and 3, and stage 3 with
            offload_param: the parameter shards too): the logged losses and
            grad norms, the saved parameters and every optimizer state tensor
            are bit-identical with and without offload;
  resume    an offloaded run saved at step 2 (--save-dir) and resumed to step
            3 saves the uninterrupted run's parameters and state;
  swaps     (optimizer state alone) each step swaps every update's state in
            once and out once, and loading sends it out once: the report's
            bytes_in = steps x offloaded, bytes_out = (steps + 1) x offloaded;
  memory    each rank's peak RSS (the runtime's own counter, --report-json)
            is lower with offload by at least the offloaded bytes the report
            gives less what the plan keeps resident (its bound on swapped-in
            bytes, offload_resident_bound_bytes, and the update awaiting its
            SwapOut), less 10%;
  files     the swap files are gone after the run (unlinked once open): the
            nvme_path directory is empty; also after a run killed (SIGKILL)
            after its second checkpoint, which then resumes from it;
  errors    an nvme_path that is not a directory fails before step 1, naming
            it; so does one on a full filesystem (a 64 KiB tmpfs mounted in a
            mount namespace: unshare -rm; reported UNSUPPORTED where that is not
            permitted); device nvme without nvme_path is a config error.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file, save_file

from zerokit import mpi
from zerokit.tools import run, zero_opt


def wide_model(path, layers, width):
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    x = "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        b = np.zeros(width, np.float32)
        inits += [numpy_helper.from_array(w, f"fc{i}.weight"),
                  numpy_helper.from_array(b, f"fc{i}.bias")]
        y = f"h{i}"
        nodes.append(helper.make_node("Gemm", [x, f"fc{i}.weight", f"fc{i}.bias"], [y],
                                      transB=1, name=f"fc{i}"))
        x = y
        if i + 1 < layers:
            nodes.append(helper.make_node("Relu", [x], [x + "r"], name=f"relu{i}"))
            x += "r"
    graph = helper.make_graph(
        nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", width])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--width", type=int, default=1024)
    a = ap.parse_args()
    w = a.work
    os.makedirs(w, exist_ok=True)
    model = os.path.join(w, "wide.onnx")
    wide_model(model, a.layers, a.width)
    B, steps = 8, 3
    rng = np.random.default_rng(1)
    data = os.path.join(w, "data.safetensors")
    save_file({"x": rng.standard_normal((steps, B, a.width)).astype(np.float32),
               "labels": rng.integers(0, a.width, (steps, B)).astype(np.int64)}, data)
    swap = os.path.join(w, "swap")
    os.makedirs(swap, exist_ok=True)
    buffers = 1

    def compile_(name, stage, world, offload, bf16=False, params=None, device="nvme"):
        cfg = {"zero_optimization": {"stage": stage}}
        if bf16:
            cfg["bf16"] = {"enabled": True}
        if offload and device == "cpu":
            cfg["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
            if params:
                cfg["zero_optimization"]["offload_param"] = {"device": "cpu"}
        elif offload:
            cfg["zero_optimization"]["offload_optimizer"] = {
                "device": "nvme", "nvme_path": swap, "buffer_count": buffers}
            if params is not None:
                # offload_param with max_in_cpu `params`: 0 sends every shard
                # to NVMe (DeepSpeed's default keeps the first 1e9 elements
                # in host memory).
                cfg["zero_optimization"]["offload_param"] = {
                    "device": "nvme", "nvme_path": swap, "buffer_count": buffers,
                    "max_in_cpu": params}
        cfg_path = os.path.join(w, name + ".json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        prog = os.path.join(w, name + ".zrt")
        args = ["--train", "--loss", "cross-entropy:labels", "--optimizer", "adamw lr=1e-3",
                "--config", cfg_path]
        if world > 1:
            args.append(f"--zero-pipeline=dp={world}")
        run(zero_opt(a.zero_opt, model, {"x": (B // world, a.width)}, args, prog,
                     os.path.join(w, "init.safetensors")))
        return prog

    def train(prog, tag, world, save, extra=(), n=steps):
        out = {k: os.path.join(w, f"{tag}.{k}") for k in ("log", "rep", "w", "opt")}
        cmd = [a.zero_run, prog, "--weights", os.path.join(w, "init.safetensors"), "--data", data,
               "--steps", str(n), "--log-json", out["log"], "--report-json", out["rep"],
               "--threads", "1", *extra]
        if save:
            cmd += ["--save", out["w"], "--save-optimizer", out["opt"]]
        if world > 1:
            cmd = mpi.mpirun(world, cmd)
        run(cmd)
        return out

    def with_and_without(tag, stage, world, bf16, params, device="nvme"):
        """Compiles and trains the model with and without offload; exits unless
        the losses, grad norms, saved parameters and optimizer state are
        bit-identical. Returns the programs and the runs, by offload."""
        progs = {off: compile_(f"{tag}-{'off' if off else 'mem'}", stage, world, off, bf16,
                               params, device)
                 for off in (False, True)}
        runs = {off: train(progs[off], f"{tag}-{'off' if off else 'mem'}", world, True)
                for off in (False, True)}
        logs = [[(s["loss"], s["grad_norm"]) for s in json.load(open(runs[o]["log"]))]
                for o in (False, True)]
        if logs[0] != logs[1]:
            sys.exit(f"FAIL: {tag}: losses or grad norms differ with offload")
        for k in ("w", "opt"):
            x, y = load_file(runs[False][k]), load_file(runs[True][k])
            bad = [n for n in x if n not in y or not np.array_equal(x[n], y[n])]
            if sorted(x) != sorted(y) or bad:
                sys.exit(f"FAIL: {tag}: saved {k} differ with offload: {bad[:3]}")
        return progs, runs

    def resumes(prog, tag, world, final):
        """Saves at step steps - 1 (--save-dir), resumes to steps; exits unless
        the parameters and optimizer state equal `final`'s bit for bit."""
        ck = os.path.join(w, tag + "ck")
        train(prog, tag + "half", world, False, ["--save-dir", ck], n=steps - 1)
        resumed = train(prog, tag + "resumed", world, True, ["--resume", ck])
        for k in ("w", "opt"):
            x, y = load_file(final[k]), load_file(resumed[k])
            if sorted(x) != sorted(y) or any(not np.array_equal(x[n], y[n]) for n in x):
                sys.exit(f"FAIL: {tag}the resumed offloaded run's saved {k} differ")

    def killed(prog, data):
        """A run killed (SIGKILL) after its second checkpoint leaves no swap file in
        nvme_path nor in the checkpoint folder, and resumes from the last checkpoint."""
        ck = os.path.join(w, "ck-killed")
        cmd = [a.zero_run, prog, "--weights", os.path.join(w, "init.safetensors"), "--data",
               data, "--steps", str(steps), "--save-dir", ck, "--save-every", "1",
               "--threads", "1"]
        # Steps 1-2 checkpointed, then killed during step 3 at the latest: the
        # data has `steps` steps, so run them again and again until killed.
        many = os.path.join(w, "many.safetensors")
        d = load_file(data)
        save_file({k: np.concatenate([v] * 40) for k, v in d.items()}, many)
        cmd[cmd.index(data)] = many
        cmd[cmd.index("--steps") + 1] = str(steps * 40)
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=mpi.with_session(mpi.env(root=True)))
        latest = os.path.join(ck, "latest")
        deadline = time.time() + 120
        while time.time() < deadline and p.poll() is None:
            name = open(latest).read().strip() if os.path.exists(latest) else ""
            if name.startswith("step-") and name[5:].isdigit() and int(name[5:]) >= 2:
                break
            time.sleep(0.05)
        p.kill()
        p.wait()
        if p.returncode != -9:
            sys.exit(f"FAIL: the run to kill ended by itself ({p.returncode})")
        left = [f for f in os.listdir(swap)]
        stray = [os.path.join(dp, f) for dp, _, fs in os.walk(ck) for f in fs
                 if f.endswith(".swap")]
        if left or stray:
            sys.exit(f"FAIL: swap files left after SIGKILL: {left + stray}")
        run([a.zero_run, prog, "--weights", os.path.join(w, "init.safetensors"), "--data",
             many, "--steps", str(steps * 40), "--resume", ck, "--threads", "1"])
        print(f"killed ok: SIGKILL after checkpoint {open(latest).read().strip()}: no swap file "
              "left; resumed from it to the end")

    def drop(tag):
        """Removes a checked case's saved weights, optimizer state and
        checkpoints (hundreds of MB each) so the test's folder stays small."""
        for f in os.listdir(w):
            p = os.path.join(w, f)
            if f.startswith(tag) and (f.endswith((".w", ".opt")) or os.path.isdir(p)):
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)

    # offload_param's max_in_cpu: 0, then the first half of the weights' shards
    # (DeepSpeed keeps those in host memory; the biases stay whole, below the
    # persistence threshold, and count for nothing).
    shard_elems = a.width * a.width // 2
    half = a.layers // 2 * shard_elems
    for stage, world, bf16, params in ((0, 1, False, None), (0, 1, True, None),
                                       (2, 2, False, None), (3, 2, False, None),
                                       (3, 2, False, 0), (3, 2, False, half)):
        tag = f"z{stage}n{world}" + ("-bf16" if bf16 else "") + \
            ("" if params is None else f"-incpu{params}")
        what = ("bf16 " if bf16 else "") + \
            ("" if params is None else "with offload_param " if params == 0 else
             f"with offload_param (max_in_cpu {params}) ")
        progs, runs = with_and_without(tag, stage, world, bf16, params)
        print(f"bits ok: {what}stage {stage} over {world} rank(s): losses, grad norms, "
              f"{len(load_file(runs[True]['w']))} parameters and "
              f"{len(load_file(runs[True]['opt']))} optimizer tensors bit-identical")
        if os.listdir(swap):
            sys.exit(f"FAIL: swap files left in {swap}: {os.listdir(swap)}")
        # Memory: runs without --save-optimizer (which reads the state back).
        mem = {o: json.load(open(train(progs[o], f"{tag}-rss-{int(o)}", world, False)["rep"]))
               for o in (False, True)}
        for r0, r1 in zip(mem[False]["ranks"], mem[True]["ranks"]):
            offloaded = r1.get("offloaded_bytes", 0)
            # The plan's bound on the swapped-in bytes at a time, plus one
            # consumer awaiting its SwapOut (the update before).
            bound = r1.get("offload_resident_bound_bytes", offloaded)
            window = bound * (buffers + 1) / buffers
            saved = r0["peak_rss_bytes"] - r1["peak_rss_bytes"]
            need = 0.9 * (offloaded - window)
            if offloaded <= 0 or saved < need:
                sys.exit(f"FAIL: {tag} rank {r1['rank']}: peak RSS {r1['peak_rss_bytes']} with "
                         f"offload, {r0['peak_rss_bytes']} without: {saved} bytes less, "
                         f"expected at least {need:.0f} (offloaded {offloaded})")
            # What was offloaded, by kind: all the optimizer state, and with
            # offload_param the weights' shards (the biases, below the
            # persistence threshold, stay whole and resident, as DeepSpeed's
            # persistent parameters); never a gradient. Each global starts on
            # a page of the swap file.
            ms = r1["model_state_bytes"]
            off = ms.get("offloaded", {})
            # DeepSpeed's max_in_cpu: the first shards adding up to at most
            # it stay in host memory.
            kept = 0 if params is None else min(a.layers, params // (a.width * a.width // world))
            shards = (a.layers - kept) * (a.width * a.width // world) * 4
            want = {"parameters": shards if params is not None else 0, "gradients": 0,
                    "optimizer": ms["optimizer"]}
            if off != want or not 0 <= offloaded - sum(want.values()) < 4096 * 512:
                sys.exit(f"FAIL: {tag} rank {r1['rank']}: model_state_bytes.offloaded {off}, "
                         f"expected {want} (offloaded_bytes {offloaded})")
            # Each step swaps every update's state in once and out once; the
            # state also went out once after loading (the report's counters).
            sw = r1["offload_swap"]
            if params is None and (sw["bytes_in"] != steps * offloaded or
                               sw["bytes_out"] != (steps + 1) * offloaded):
                sys.exit(f"FAIL: {tag} rank {r1['rank']}: swapped in {sw['bytes_in']}, out "
                         f"{sw['bytes_out']}; expected {steps} and {steps + 1} x {offloaded}")
            print(f"  rank {r1['rank']}: offloaded {offloaded / 2**20:.1f} MiB (planned resident "
                  f"at most {bound / 2**20:.1f}), peak RSS "
                  f"{r0['peak_rss_bytes'] / 2**20:.1f} -> {r1['peak_rss_bytes'] / 2**20:.1f} MiB")
        print(f"memory ok: {what}stage {stage} over {world} rank(s): peak RSS "
              "lower by at least the offloaded bytes less the resident window; the "
              "offloaded optimizer state" + (" and parameters" if params is not None else "") +
              " by kind in model_state_bytes")
        if stage == 0 and not bf16:
            resumes(progs[True], "", world, runs[True])
            print(f"resume ok: saved at step {steps - 1}, resumed to {steps}: parameters and "
                  "optimizer state bit for bit")
            killed(progs[True], data)
            drop("ck")  # ck and ck-killed
            drop("resumed")
        drop(tag)

    # Offload device "cpu": the optimizer state (and, with offload_param at
    # stage 3, the weights' shards) in the host arena, which is pinned host
    # memory on --backend cuda (the GPU kit runs it there) and memory like
    # any other on the CPU backend: the bits, the report's placement and a
    # resume are checked here, not memory.
    for stage, world, bf16, params in ((0, 1, True, False), (3, 2, False, True)):
        tag = f"cpu-z{stage}n{world}" + ("-bf16" if bf16 else "") + ("-params" if params else "")
        progs, runs = with_and_without(tag, stage, world, bf16, params, device="cpu")
        for r1 in json.load(open(runs[True]["rep"]))["ranks"]:
            ms = r1["model_state_bytes"]
            # Every optimizer-state tensor, and the weights' shards (the
            # biases stay whole, below the persistence threshold, in the
            # params arena); nothing in a swap file.
            shards = a.layers * (a.width * a.width // world) * 4 if params else 0
            want = {"parameters": shards, "gradients": 0, "optimizer": ms["optimizer"]}
            if ms.get("host_arena") != want or "offloaded" in ms or "offloaded_bytes" in r1:
                sys.exit(f"FAIL: {tag} rank {r1['rank']}: model_state_bytes {ms}, expected "
                         f"host_arena {want} and nothing offloaded to NVMe")
        resumes(progs[True], tag + "-", world, runs[True])
        print(f"device cpu ok: {'bf16 ' if bf16 else ''}stage {stage} over {world} rank(s)"
              f"{' with offload_param' if params else ''}: losses, parameters and optimizer "
              "state bit-identical to the run without offload, and after a resume; the state "
              f"{'and the shards ' if params else ''}in the host arena")
        drop(tag)

    # errors
    cfg = os.path.join(w, "nopath.json")
    with open(cfg, "w") as f:
        json.dump({"zero_optimization": {"offload_optimizer": {"device": "nvme"}}}, f)
    r = run([a.zero_opt, model, f"--input-shape=x={B}x{a.width}", "--train", "--loss",
             "cross-entropy:labels", "--config", cfg, "-o", os.path.join(w, "x.mlir")], ok=False)
    print("error:", r.stderr.strip().splitlines()[-1])

    def nvme_program(name):
        """A program whose optimizer state goes to nvme_path WORK/NAME."""
        cfg = os.path.join(w, name + ".json")
        with open(cfg, "w") as f:
            json.dump({"zero_optimization": {"offload_optimizer": {
                "device": "nvme", "nvme_path": os.path.join(w, name)}}}, f)
        prog = os.path.join(w, name + ".zrt")
        run([a.zero_opt, model, f"--input-shape=x={B}x{a.width}", "--train", "--loss",
             "cross-entropy:labels", "--config", cfg, "--emit=zrt", "-o", prog])
        return os.path.join(w, name), prog

    gone, prog = nvme_program("gone")
    r = run([a.zero_run, prog, "--weights", os.path.join(w, "init.safetensors"), "--data", data,
             "--steps", "1"], ok=False)
    print("error:", r.stderr.strip().splitlines()[-1])
    # A full filesystem: nvme_path on a 64 KiB tmpfs, mounted in a mount
    # namespace of this process alone (unshare -rm), smaller than the state.
    full, prog = nvme_program("full")
    os.makedirs(full)
    probe = subprocess.run(["unshare", "-rm", "sh", "-c",
                            f"mount -t tmpfs -o size=64k none '{full}'"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print("full: UNSUPPORTED (a tmpfs cannot be mounted in a mount namespace here: "
              f"{probe.stderr.strip()})")
        return
    r = run(["unshare", "-rm", "sh", "-c",
             f"mount -t tmpfs -o size=64k none '{full}' && exec '{a.zero_run}' '{prog}' "
             f"--weights '{os.path.join(w, 'init.safetensors')}' --data '{data}' --steps 1 "
             f"--log-json '{os.path.join(w, 'full-log.json')}'"], ok=False)
    print("error:", r.stderr.strip().splitlines()[-1])
    if os.path.exists(os.path.join(w, "full-log.json")):
        sys.exit("FAIL: the run on a full nvme_path logged a step")


if __name__ == "__main__":
    main()
