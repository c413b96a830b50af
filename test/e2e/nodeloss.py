#!/usr/bin/env python3
"""A node lost mid-run: training on a cluster of network namespaces on this
machine (zerokit.cluster, scripts/cluster.sh) of 2 nodes x 2 slots, ZeRO-3 over
4 ranks at zero-run --timeout 20, writing a checkpoint every 5 steps; once one is
written, node 1 (ranks 2 and 3) is lost.

Cases (--case, repeatable; default both):
  cut   node 1's link cut (its bridge port set down, as a pulled cable): every
        process of the job (mpirun, the daemons and zero-run in both nodes) ends
        within 80 s of the cut, mpirun's exit status is non-zero, and the output
        names node 1, its ranks and the training step; the last checkpoint
        verifies (zero-ckpt verify). Then it resumes on node 0 alone (2 ranks,
        accumulation 2: the same global batch) for 3 more steps, whose losses
        equal the uninterrupted 4-rank run's (rtol 1e-5).
  kill  node 1's zero-run processes killed (kill -9): the same ending, within
        80 s, with the same naming; the last checkpoint verifies.

Exit status: 0 passed, 1 a failure, 77 where no cluster can be made here (not
root, namespaces not permitted, ...), printing "UNSUPPORTED: <reason>".
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from multinode import Runs, cluster_unsupported, driver_arguments
from training.common import Fail, log, read_log, run, Tools
from zerokit import cluster, mpi

RANKS, TIMEOUT, SAVE_EVERY = 4, 20, 5
LIMIT = 80  # seconds from the fault to the last process of the job gone
CASES = ("cut", "kill")


class LossRuns(Runs):
    """multinode's runs, with programs for fewer ranks and the same global
    batch (accumulation makes up the ranks lost)."""

    def program_at(self, tag, ranks, accumulation=1):
        if tag not in self.programs:
            micro = self.rows // (ranks * accumulation)
            if micro != self.rows // RANKS:
                raise Fail(f"{ranks} ranks x {accumulation} micro-batches change the "
                           f"micro-batch of {self.rows // RANKS} rows")
            cfg = dict(self.cfg0, train_batch_size=self.rows,
                       train_micro_batch_size_per_gpu=micro,
                       gradient_accumulation_steps=accumulation)
            cfg["zero_optimization"] = dict(stage=3)
            cp = self.work / f"ds_{tag}.json"
            cp.write_text(json.dumps(cfg, indent=1) + "\n")
            zrt, w = self.work / f"{tag}.zrt", self.work / f"init_{tag}.safetensors"
            self.tools.compile(Path(self.a.models) / f"{self.a.model}_loss.onnx", self.shapes,
                               ["--config", str(cp)], zrt, w)
            self.programs[tag] = (zrt, w)
        return self.programs[tag]


def host_side_link(ns):
    """The bridge's end (in this namespace) of node NS's eth0."""
    out = subprocess.run(["ip", "-n", ns, "-o", "link", "show", "eth0"],
                         capture_output=True, text=True, check=True).stdout
    peer = re.search(r"eth0@if(\d+)", out).group(1)
    for line in subprocess.run(["ip", "-o", "link", "show"], capture_output=True,
                               text=True, check=True).stdout.splitlines():
        index, name = line.split(":")[:2]
        if index == peer:
            return name.strip().split("@")[0]
    raise Fail(f"no link here is the peer of {ns}'s eth0 (ifindex {peer})")


def processes(ns):
    """The pids and names of the processes inside namespace NS."""
    pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                          text=True).stdout.split()
    found = []
    for pid in pids:
        try:
            found.append((int(pid), Path(f"/proc/{pid}/comm").read_text().strip()))
        except OSError:
            pass  # ended meanwhile
    return found


def latest_step(save_dir):
    latest = save_dir / "latest"
    if not latest.exists():
        return 0
    return int(latest.read_text().strip().removeprefix("step-"))


def lose_node(runs, c, case):
    """Trains on cluster C until a checkpoint is written, then loses node 1 as
    CASE says; returns (seconds from the fault to the job's end, mpirun's exit
    status, its output, the save directory, the names of node 1 and its ranks)."""
    nodes = [n for n, _, _ in c.nodes]
    save_dir = runs.work / f"ck_{case}"
    shutil.rmtree(save_dir, ignore_errors=True)  # an earlier run's checkpoints
    cmd = c.mpirun(RANKS, runs.args("n4", case) + [
        "--timeout", str(TIMEOUT), "--save-dir", str(save_dir),
        "--save-every", str(SAVE_EVERY)], map_by="slot")
    log("  $ " + " ".join(map(str, cmd)))
    out_path = runs.work / f"out_{case}.txt"
    with mpi.session(mpi.env(root=True, oversubscribe=True)) as env, \
            open(out_path, "w") as out:
        job = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.time() + 60
            while latest_step(save_dir) < SAVE_EVERY * 2 and job.poll() is None:
                if time.time() > deadline:
                    raise Fail(f"{case}: no checkpoint of step {SAVE_EVERY * 2} after 60 s")
                time.sleep(0.2)
            if job.poll() is not None:
                raise Fail(f"{case}: the job ended (exit {job.returncode}) before the "
                           f"fault:\n{out_path.read_text()[-3000:]}")
            fault = time.time()
            if case == "cut":
                subprocess.run(["ip", "link", "set", host_side_link(nodes[1]), "down"],
                               check=True)
            else:
                for pid, name in processes(nodes[1]):
                    if name == "zero-run":
                        subprocess.run(["kill", "-9", str(pid)], check=False)
            while time.time() - fault < LIMIT and (
                    job.poll() is None or any(processes(n) for n in nodes)):
                time.sleep(0.2)
            seconds = time.time() - fault
            left = {n: processes(n) for n in nodes}
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
    return seconds, job.returncode, out_path.read_text(), save_dir, left, nodes


def case_loss(runs, case):
    """One node lost as CASE says; after the cut, the job resumes on the
    surviving node."""
    with cluster.cluster(2, slots=2) as c:
        seconds, code, out, save_dir, left, nodes = lose_node(runs, c, case)
        bad = judge(runs, case, seconds, code, out, save_dir, left, nodes)
        if case == "cut" and not bad:
            bad += case_resume(runs, c, save_dir)
    return bad


def judge(runs, case, seconds, code, out, save_dir, left, nodes):
    """What is wrong with the lost job's ending, output and checkpoint."""
    bad = []
    what = {"cut": "node 1's link cut", "kill": "node 1's zero-run processes killed"}[case]
    if code is None or seconds >= LIMIT or any(left.values()):
        bad.append(f"{what}: the job did not end within {LIMIT} s: mpirun "
                   f"{'running' if code is None else f'exit {code}'}, left in the nodes: "
                   f"{ {n: p for n, p in left.items() if p} }")
    elif code == 0:
        bad.append(f"{what}: mpirun exited 0")
    # Node 1 by name (Open MPI's message), its ranks (zero-run's placement)
    # and the step (zero-run's note or its watchdog's message).
    named = nodes[1] in out and f"{nodes[1]}: ranks 2-3" in out
    step = re.search(r"training step (\d+)", out)
    if not named or not step:
        bad.append(f"{what}: the output does not name {nodes[1]}, its ranks 2-3 and the "
                   f"training step:\n{out[-3000:]}")
    log(f"  {what}: every process of the job ended {seconds:.1f} s after the fault, mpirun "
        f"exit {code}; {nodes[1]} and its ranks {'named' if named else 'NOT named'}, step "
        f"{step.group(1) if step else 'NOT named'}")
    for line in out.splitlines():
        if nodes[1] in line or "training step" in line:
            log(f"    | {line.strip()}")
    return bad + verify(runs, save_dir, what)


def verify(runs, save_dir, what):
    """zero-ckpt verify of the lost job's last checkpoint."""
    zero_ckpt = str(Path(runs.tools.zero_run).with_name("zero-ckpt"))
    r = subprocess.run([zero_ckpt, "verify", str(save_dir)], capture_output=True, text=True)
    out = (r.stdout + r.stderr).strip()
    if r.returncode != 0:
        return [f"{what}: zero-ckpt verify of the last checkpoint failed (exit "
                f"{r.returncode}):\n{out}"]
    log(f"  {what}: the last checkpoint verifies: {out[-200:]}")
    return []


def case_resume(runs, c, save_dir):
    """The lost job's last checkpoint resumes on cluster C's node 0 alone (2
    ranks, accumulation 2), equal to the uninterrupted 4-rank run."""
    step = latest_step(save_dir)
    total = step + 3
    args = runs.args("n2k2", "resumed")
    args[args.index("--steps") + 1] = str(total)
    run(c.mpirun(2, ["--host", f"{c.nodes[0][0]}:2", *args, "--resume", str(save_dir)]),
        "zero-run (resumed on the surviving node)")
    args = runs.args("n4", "whole")
    args[args.index("--steps") + 1] = str(total)
    run(mpi.mpirun(RANKS, args), "zero-run (uninterrupted)")
    got = read_log(runs.work / "log_resumed.json", 3)
    want = read_log(runs.work / "log_whole.json", total)[step:]
    worst = max(abs(g["loss"] - w["loss"]) / abs(w["loss"]) for g, w in zip(got, want))
    steps = [g["step"] for g in got]
    log(f"  resumed on the surviving node (2 ranks) at steps {steps}: loss rel {worst:.2g} "
        f"to the uninterrupted 4-rank run")
    if steps != list(range(step + 1, total + 1)) or worst > 1e-5:
        return [f"resume on the surviving node: steps {steps}, loss rel {worst:.2g} (want steps "
                f"{step + 1}-{total}, rtol 1e-5)"]
    return []


def main():
    a = driver_arguments(__doc__, "mlp", (20000, "steps of the job (it is lost long before)"),
                         CASES)
    cases = a.case or list(CASES)
    skip = cluster_unsupported()
    if skip is not None:
        return skip
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    bad = []
    try:
        runs = LossRuns(a, Tools(a), work)
        runs.program_at("n4", RANKS)
        runs.program_at("n2k2", 2, accumulation=2)
        log(f"== nodeloss {a.model}: stage 3 over {RANKS} ranks on 2 nodes x 2, "
            f"--timeout {TIMEOUT}, cases {', '.join(cases)}")
        for case in cases:
            bad += case_loss(runs, case)
    except cluster.Unsupported as e:
        print(f"UNSUPPORTED: {e}")
        return cluster.UNSUPPORTED
    except Fail as e:
        bad.append(str(e))
    for b in bad:
        log(f"FAIL: {b}")
    log("PASS" if not bad else f"{len(bad)} failure(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
