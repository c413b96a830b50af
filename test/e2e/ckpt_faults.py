#!/usr/bin/env python3
"""Checkpoints and training runs under hostile conditions (ZeRO-3 over 2 ranks, one
fixture's loss model): what must be refused, and what must survive.

  - A clean checkpoint passes `zero-ckpt verify`, consolidates, and resumes.
  - Weights files (zero-opt --weights-out, zero-run --save) carry per-tensor checksums
    in their metadata: they verify, and a damaged one is refused by zero-run --weights
    (before step 1) and by `zero-ckpt verify FILE`, naming the tensor.
  - Damaged rank files (1e4 written into ten elements of a tensor, two flipped bytes at
    seeded random places, a flipped header byte, a truncated file) are refused by
    --resume, `zero-ckpt consolidate` and `zero-ckpt verify`, each naming the file (and
    the tensor, where its data is what changed); nothing is written under --save / -o.
  - Edited manifests (a tensor entry removed, world_size changed) are refused, with the
    manifest's checksum in place and, converted to the checksum-less format 2, by the
    consistency checks alone; `latest` pointing outside the folder or holding garbage
    bytes is refused, the bytes escaped.
  - Outputs that cannot be created (--save, --save-optimizer, --log-json, --report-json,
    --trace, --save-dir) fail before step 1.
  - A second job on a held --save-dir is refused within seconds, naming the first job's
    pid, while the first finishes and its checkpoints verify.
  - A run stopped by a non-finite loss at step 2 keeps step 1 in --log-json.
  - A rank stopped (SIGSTOP) mid-training ends the job, the message naming a training
    step, not the start-up barrier.
  - Token ids outside the embedding (too large, negative) in --data are refused before
    step 1, naming the array, the step and the row.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from training.common import ENV, Fail, Tools, log, read_train_ref, run
from zerokit import mpi, tools

RANKS = 2


def header(path):
    """(header dict, data start) of a safetensors file."""
    raw = Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    return json.loads(raw[8:8 + n]), 8 + n


class Case:
    def __init__(self, a, work):
        self.a, self.work = a, work
        self.tools = Tools(a)
        self.zero_ckpt = str(Path(self.tools.zero_run).with_name("zero-ckpt"))
        self.failures = []

    def check(self, ok, what, detail=""):
        log(f"  {'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail and not ok else ""))
        if not ok:
            self.failures.append(what)

    def mpirun(self, args, env=None, timeout=120):
        cmd = mpi.mpirun(RANKS, args)
        log("  $ " + " ".join(map(str, cmd)))
        t0 = time.time()
        r = tools.call(cmd, dict(ENV, **(env or {})), timeout=timeout)
        return r, time.time() - t0

    def zrun(self, prog, extra, env=None, timeout=120):
        zrt, w = prog
        return self.mpirun([self.tools.zero_run, str(zrt), "--weights", str(w), "--data",
                            str(self.data)] + extra, env=env, timeout=timeout)

    def ckpt_tool(self, *args):
        r = subprocess.run([self.zero_ckpt] + [str(x) for x in args], capture_output=True,
                           text=True)
        return r


def compile_(c, name, cfg0, data, lr=None, tag="n2"):
    cfg = {k: v for k, v in cfg0.items() if k not in (
        "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")}
    rows = next(iter(data.values())).shape[1]
    micro = rows // RANKS
    cfg.update(train_batch_size=rows, train_micro_batch_size_per_gpu=micro,
               gradient_accumulation_steps=1,
               zero_optimization={"stage": 3, "stage3_param_persistence_threshold": 0})
    if lr is not None:
        cfg["optimizer"] = {"type": "AdamW", "params": {"lr": lr}}
        cfg.pop("scheduler", None)
        cfg.pop("gradient_clipping", None)
    cp = c.work / f"ds_{tag}.json"
    cp.write_text(json.dumps(cfg, indent=1) + "\n")
    shapes = {k: (micro,) + v.shape[2:] for k, v in data.items()}
    zrt, w = c.work / f"{tag}.zrt", c.work / f"init_{tag}.safetensors"
    c.tools.compile(Path(c.a.models) / f"{name}_loss.onnx", shapes, ["--config", str(cp)], zrt, w)
    return zrt, w


def refused(c, what, r, must, forbid=(), outputs=()):
    out = r.stdout + r.stderr
    missing = [m for m in must if m not in out]
    present = [m for m in forbid if m in out]
    left = [str(o) for o in outputs if Path(o).exists()]
    ok = r.returncode != 0 and not missing and not present and not left
    c.check(ok, what, f"exit {r.returncode}, missing {missing}, present {present}, "
            f"left {left}, output: {out[-1500:]}")
    if ok:
        first = next((l for l in out.splitlines() if "error" in l), "")
        log(f"       {first[:240]}")


def damaged_copy(c, src, tag):
    dst = c.work / f"case_{tag}"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def all_refuse(c, prog, ck, what, must):
    """--resume, consolidate and verify all refuse checkpoint dir `ck`."""
    out = c.work / "refused.safetensors"
    r, _ = c.zrun(prog, ["--steps", "6", "--resume", str(ck), "--save", str(out)])
    refused(c, f"{what}: --resume refuses", r, must, outputs=[out])
    r = c.ckpt_tool("consolidate", ck, "-o", out)
    refused(c, f"{what}: zero-ckpt consolidate refuses", r, must, outputs=[out])
    r = c.ckpt_tool("verify", ck)
    refused(c, f"{what}: zero-ckpt verify refuses", r, must)


def weights_cases(c, prog):
    for f in (prog[1], c.work / "w4.safetensors"):
        r = c.ckpt_tool("verify", f)
        c.check(r.returncode == 0 and "every checksum matches" in r.stdout,
                f"{Path(f).name} (written by {'zero-opt' if f == prog[1] else 'zero-run --save'}) "
                "verifies", r.stdout + r.stderr)
    bad = c.work / "damaged_init.safetensors"
    hdr, start = header(prog[1])
    name = sorted(k for k in hdr if k != "__metadata__")[-1]
    raw = bytearray(Path(prog[1]).read_bytes())
    raw[start + hdr[name]["data_offsets"][0] + 1] ^= 0x04
    bad.write_bytes(bytes(raw))
    r, _ = c.zrun((prog[0], bad), ["--steps", "2"])
    refused(c, "zero-run refuses a damaged --weights file before step 1", r,
            [bad.name, f'"{name}"', "does not match the checksum"], forbid=["step 1/"])
    r = c.ckpt_tool("verify", bad)
    refused(c, "zero-ckpt verify refuses it too", r, [bad.name, f'"{name}"'])


def damage_cases(c, prog, ck):
    step = ck / "step-00000004"
    rng = random.Random(1234)
    # 1e4 in ten elements of a tensor's data (in the rank-0 model file).
    d = damaged_copy(c, ck, "values")
    f = d / "step-00000004" / "model-rank-00000.safetensors"
    hdr, start = header(f)
    name = sorted(k for k in hdr if k != "__metadata__" and hdr[k]["dtype"] == "F32"
                  and hdr[k]["data_offsets"][1] - hdr[k]["data_offsets"][0] >= 40)[0]
    raw = bytearray(f.read_bytes())
    b = start + hdr[name]["data_offsets"][0]
    raw[b:b + 40] = np.full(10, 1e4, np.float32).tobytes()
    f.write_bytes(bytes(raw))
    all_refuse(c, prog, d, f"1e4 in ten elements of {name}", [str(f.name), f'"{name}"'])
    # Two flipped bytes at random places of the rank-1 optimizer file's data.
    d = damaged_copy(c, ck, "flips")
    f = d / "step-00000004" / "optimizer-rank-00001.safetensors"
    hdr, start = header(f)
    raw = bytearray(f.read_bytes())
    for _ in range(2):
        raw[rng.randrange(start, len(raw))] ^= 0x10
    f.write_bytes(bytes(raw))
    all_refuse(c, prog, d, "two flipped bytes in optimizer-rank-00001", [f.name])
    # A flipped byte in a header's padding or names: the file's checksum, not a tensor's.
    d = damaged_copy(c, ck, "header")
    f = d / "step-00000004" / "model-rank-00001.safetensors"
    raw = bytearray(f.read_bytes())
    hdr, start = header(f)
    pos = bytes(raw).index(b'"shape"', 8)
    raw[pos + 1] = ord("S")  # "Shape": still JSON, no longer the file that was written
    f.write_bytes(bytes(raw))
    all_refuse(c, prog, d, "a header byte changed in model-rank-00001", [f.name])
    # A truncated file.
    d = damaged_copy(c, ck, "truncated")
    f = d / "step-00000004" / "optimizer-rank-00000.safetensors"
    f.write_bytes(f.read_bytes()[:-100])
    all_refuse(c, prog, d, "optimizer-rank-00000 truncated by 100 bytes", [f.name])
    del step


def manifest_cases(c, prog, ck):
    def edit(tag, fn, legacy):
        d = damaged_copy(c, ck, tag)
        mp = d / "step-00000004" / "manifest.json"
        m = json.loads(mp.read_text())
        if legacy:  # format 2: no checksums, only the consistency checks
            m["format"] = "zero-checkpoint-2"
            for k in ("manifest_xxh3", "files", "tensor_count"):
                m.pop(k, None)
            for t in m["tensors"]:
                for p in t["pieces"]:
                    p.pop("xxh3", None)
        fn(m)
        mp.write_text(json.dumps(m, indent=1) + "\n")
        return d

    def drop_entry(m):
        m["tensors"].pop(len(m["tensors"]) // 2)

    def world4(m):
        m["world_size"] = 4

    # The format-2 copy, unedited, still loads (with a warning): the legacy reader.
    d = edit("legacy", lambda m: None, True)
    r = c.ckpt_tool("verify", d)
    c.check(r.returncode == 0 and "no checksums" in r.stdout + r.stderr,
            "an unedited checkpoint in format 2 (no checksums) still verifies, with a warning",
            r.stdout + r.stderr)
    for legacy in (False, True):
        kind = "format 2, consistency checks" if legacy else "checksummed manifest"
        d = edit(f"drop{int(legacy)}", drop_entry, legacy)
        all_refuse(c, prog, d, f"a tensor entry removed ({kind})",
                   ["does not list" if legacy else "manifest.json"])
        d = edit(f"world{int(legacy)}", world4, legacy)
        all_refuse(c, prog, d, f"world_size edited to 4 ({kind})",
                   ["model-rank-00002.safetensors is missing" if legacy else "manifest.json"])
    # latest pointing outside the folder, and garbage bytes in it.
    other = c.work / "other"
    shutil.rmtree(other, ignore_errors=True)
    shutil.copytree(ck, other)
    d = damaged_copy(c, ck, "latest_out")
    (d / "latest").write_text("../other/step-00000004\n")
    all_refuse(c, prog, d, "latest naming ../other/step-00000004",
               ["latest should name a checkpoint directory", "../other/step-00000004"])
    d = damaged_copy(c, ck, "latest_garbage")
    (d / "latest").write_bytes(b"\x00\xffstep\x1b[2J\n")
    all_refuse(c, prog, d, "garbage bytes in latest", ["\\x00\\xffstep\\x1b[2J"],)


def output_cases(c, prog):
    blocker = c.work / "a_file"
    blocker.write_text("not a directory\n")
    bad = str(blocker / "sub" / "out")
    for flag in ("--save", "--save-optimizer", "--log-json", "--report-json", "--trace"):
        r, dt = c.zrun(prog, ["--steps", "4", flag, bad])
        refused(c, f"{flag} under a file fails before step 1 ({dt:.1f} s)", r, [flag, bad],
                forbid=["step 1/"])
    r, dt = c.zrun(prog, ["--steps", "4", "--save-dir", bad])
    refused(c, f"--save-dir under a file fails before step 1 ({dt:.1f} s)", r,
            ["--save-dir", bad], forbid=["step 1/"])
    ro = c.work / "no_such_dir" / "x.safetensors"
    r, dt = c.zrun(prog, ["--steps", "4", "--save", str(ro)])
    refused(c, "--save in a missing directory fails before step 1", r,
            ["--save", "does not exist"], forbid=["step 1/"])


def lock_case(c, prog, long_steps):
    held = c.work / "held"
    shutil.rmtree(held, ignore_errors=True)
    session = mpi.with_session(ENV)
    cmd = mpi.mpirun(RANKS, [c.tools.zero_run, str(prog[0]), "--weights", str(prog[1]), "--data",
                             str(c.long_data), "--steps", str(long_steps), "--save-dir",
                             str(held), "--save-every", "50", "--log-every", "1000"])
    log("  $ " + " ".join(cmd) + " &")
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=session)
    lockfile = held / ".zero-run.lock"
    t0 = time.time()
    while time.time() - t0 < 60 and not (lockfile.exists() and lockfile.read_text().strip()):
        time.sleep(0.05)
    holder = lockfile.read_text().strip() if lockfile.exists() else ""
    r, dt = c.zrun(prog, ["--steps", "3", "--save-dir", str(held)])
    still = first.poll() is None
    pid = holder.split("pid ")[1].split(",")[0] if "pid " in holder else "?"
    refused(c, f"a second job on a held --save-dir is refused in {dt:.1f} s, naming the first",
            r, ["is in use by another zero-run", f"pid {pid}"], forbid=["step 1/"])
    c.check(still, "the first job was still running when the second was refused")
    out, _ = first.communicate(timeout=300)
    shutil.rmtree(session[mpi.SESSION_DIR], ignore_errors=True)
    v = c.ckpt_tool("verify", held)
    c.check(first.returncode == 0 and v.returncode == 0,
            "the first job finished and its last checkpoint verifies",
            f"exit {first.returncode}: {out[-800:]}; verify: {v.stdout}{v.stderr}")


def failing_log_case(c, name, cfg0, data):
    prog = compile_(c, name, cfg0, data, lr=1e30, tag="lr1e30")
    lp = c.work / "log_lr1e30.json"
    r, _ = c.zrun(prog, ["--steps", "4", "--log-json", str(lp)])
    out = r.stdout + r.stderr
    rows = json.loads(lp.read_text()) if lp.exists() else None
    ok = r.returncode != 0 and "loss is" in out and rows is not None and \
        [x["step"] for x in rows] == [1]
    c.check(ok, "lr=1e30: stopped at step 2's non-finite loss, --log-json keeps step 1",
            f"exit {r.returncode}, log {rows}, output {out[-600:]}")


def watchdog_case(c, prog, long_steps):
    script = c.work / "stop-rank1.sh"
    script.write_text(f'#!/bin/sh\nrank="{mpi.SH_RANK}"\n'
                      'if [ "$rank" = 1 ]; then (sleep 2; kill -STOP $$) >/dev/null 2>&1 & fi\n'
                      f'exec {c.tools.zero_run} "$@"\n')
    script.chmod(0o755)
    r, dt = c.mpirun([str(script), str(prog[0]), "--weights", str(prog[1]), "--data",
                      str(c.long_data), "--steps", str(long_steps), "--log-every", "1000",
                      "--timeout", "3"], timeout=120)
    out = r.stdout + r.stderr
    ok = r.returncode != 0 and dt < 30 and "training step" in out and \
        "did not complete within 3 s" in out and "start-up" not in out
    c.check(ok, f"rank 1 stopped mid-training: the job ends in {dt:.1f} s, the message names "
            "the training step", f"exit {r.returncode}, output {out[-1200:]}")
    if ok:
        log("       " + next(l for l in out.splitlines() if "did not complete" in l)[:240])


def token_cases(c, prog, data):
    ids = next(k for k, v in data.items() if v.dtype == np.int64 and k.startswith("input"))
    for tag, value in (("large", 100000), ("negative", -1)):
        bad = {k: v.copy() for k, v in data.items()}
        bad[ids][2, 1, 3] = value  # step 3, row 1 (rank 0's second row), position 3
        p = c.work / f"tokens_{tag}.safetensors"
        save_file(bad, str(p))
        r, _ = c.mpirun([c.tools.zero_run, str(prog[0]), "--weights", str(prog[1]), "--data",
                         str(p), "--steps", "4"])
        refused(c, f"a {tag} token id in --data is refused before step 1", r,
                [f'array "{ids}", step 3, row 1', f"token id {value}"], forbid=["step 1/"])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    a.zero_opt = a.zero_run = None
    a.np = 0
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    try:
        c = Case(a, work)
    except Fail as e:
        print(f"FAIL: {e}")
        return 1
    stored = read_train_ref(a.models, a.model)
    cfg0, data = stored["config"], {k: np.ascontiguousarray(v) for k, v in stored["data"].items()}
    c.data = work / "batches.safetensors"
    save_file(data, str(c.data))
    # A long run for the lock and the watchdog: the stored steps, tiled.
    long_steps = 12000
    reps = -(-long_steps // next(iter(data.values())).shape[0])
    c.long_data = work / "long.safetensors"
    save_file({k: np.ascontiguousarray(np.tile(v, (reps,) + (1,) * (v.ndim - 1)))
               for k, v in data.items()}, str(c.long_data))
    log(f"== checkpoint and run faults: {a.model}, ZeRO-3 over {RANKS} ranks")
    try:
        prog = compile_(c, a.model, cfg0, data)
        ck = work / "ck"
        shutil.rmtree(ck, ignore_errors=True)
        r, _ = c.zrun(prog, ["--steps", "4", "--save-dir", str(ck), "--save-every", "2",
                             "--save", str(work / "w4.safetensors")])
        if r.returncode != 0:
            raise Fail(f"the clean run failed: {r.stdout}{r.stderr}")
        v = c.ckpt_tool("verify", ck)
        c.check(v.returncode == 0 and "every checksum matches" in v.stdout,
                "a clean checkpoint verifies", v.stdout + v.stderr)
        cons = c.ckpt_tool("consolidate", ck, "-o", work / "cons.safetensors")
        # Every parameter --save wrote (at least one), each in the consolidated file
        # and equal.
        saved = load_file(str(work / "w4.safetensors"))
        got = load_file(str(work / "cons.safetensors")) if cons.returncode == 0 else {}
        missing, extra = sorted(set(saved) - set(got)), sorted(set(got) - set(saved))
        same = cons.returncode == 0 and bool(saved) and not missing and not extra and all(
            np.array_equal(got[k], x) for k, x in saved.items())
        c.check(same, f"it consolidates to what --save wrote ({len(saved)} tensors)",
                cons.stdout + cons.stderr + f"; missing {missing}, extra {extra}")
        r, _ = c.zrun(prog, ["--steps", "6", "--resume", str(ck)])
        c.check(r.returncode == 0 and "step 5/6" in r.stdout, "and resumes",
                r.stdout + r.stderr)
        weights_cases(c, prog)
        damage_cases(c, prog, ck)
        manifest_cases(c, prog, ck)
        output_cases(c, prog)
        lock_case(c, prog, long_steps)
        failing_log_case(c, a.model, cfg0, data)
        watchdog_case(c, prog, long_steps)
        token_cases(c, prog, data)
    except Fail as e:
        c.failures.append(str(e))
        log(f"FAIL {e}")
    log("== summary")
    for f in c.failures:
        log(f"FAIL {f}")
    if not c.failures:
        log("PASS checkpoint and run faults")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
