#!/usr/bin/env python3
"""ZeRO-3 and hpZ across nodes: training on a cluster of network namespaces on
this machine (zerokit.cluster, scripts/cluster.sh: each node its own network on a
bridge, its own hostname and /dev/shm; shared memory inside a node, TCP between
nodes) against the same program on one node (plain mpirun). The fixture's
stored training data (NAME_loss.train.ref.safetensors) tiled to --steps steps;
stage 3 over 4 ranks, no persistent parameters and reuse distance 0, so the
backward re-gathers every parameter (hpZ's work).

Cases (--case, repeatable; default all but uneven):
  cluster the cluster itself: 3 nodes of 1, 2 and 1 slots with a 1gbit link;
          mpirun -np 4 --map-by slot places 1, 2 and 1 processes on them, each
          with its node's hostname and /dev/shm (one tmpfs per node, none shared
          with this machine's), every node's link shaped to 1gbit; after the
          context manager nothing of it is left (namespaces, bridge, state).
  zero3   ZeRO-3 on 2 nodes x 2 slots: losses, grad norms and saved weights
          bit-identical to one node.
  hpz     hpZ (zero_hpz_partition_size 2) and plain ZeRO-3 on 2 nodes x 2 under
          --map-by slot and --map-by node: each bit-identical to the same program
          on one node; zero-run's placement lines exact (under --map-by node both
          are renumbered node by node: program ranks 0, 1 are launcher ranks 0,
          2 on the first node); what the nodes' links sent (their veth counters)
          for hpZ at most 0.75x ZeRO-3's under the same --map-by, each program's
          under node within 5% of under slot (the world's all-gathers and
          reduce-scatters cross the least in either placement), zero-run's
          report's bytes_sent_across_nodes (all ranks) within 15% of the links',
          and zero-opt --report --nodes 2's bytes across per step, times the
          steps, equal to zero-run's count (in total and per rank).
  groups  qgZ inside hpZ's groups, and a pipeline of 2 stages x 2 replicas, on 2
          nodes x 2 under --map-by slot and --map-by node: bit-identical to one
          node, renumbered node by node under --map-by node (placement lines),
          the same bytes across in both placements (within 5%), the reports'
          bytes across (zero-run's, and zero-opt --report --nodes 2's per step
          times the steps) within 15% of the links'.
  uneven  hpZ 2 on nodes of 3 slots + 1: no renumbering puts the group {2, 3}
          inside one node, so zero-run must refuse before step 1, exiting
          non-zero with one line naming the ranks, their nodes and the fix
          (--map-by slot / the hostfile's slots): refusal() below.

Exit status: 0 passed, 1 a mismatch or a failed command, 77 where no cluster can
be made here (not root, namespaces not permitted, ...), printing
"UNSUPPORTED: <reason>".
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from training.common import Fail, log, read_log, read_train_ref, run, Tools
from zerokit import cluster, mpi, tools as kit_tools

RANKS, GROUP, NODES = 4, 2, 2
CASES = ("cluster", "zero3", "hpz", "groups", "uneven")
# hpZ's re-gathers stay inside a node: of a step's three world collectives'
# crossing bytes (gather, re-gather, reduce-scatter) about one third goes.
HPZ_CROSSING_MAX = 0.75
# zero-run's bytes_sent_across_nodes against the links' counters (which add the
# TCP/IP headers, acknowledgements and Open MPI's own setup traffic).
REPORT_TOLERANCE = 0.15


def refusal(text, nodes):
    """Whether TEXT holds zero-run's refusal of the uneven placement: one line
    naming ranks 2 and 3, both nodes, and the fix (--map-by or slots)."""
    for line in text.splitlines():
        if all(n in line for n in nodes) and re.search(r"\b2\b", line) and \
                re.search(r"\b3\b", line) and re.search(r"rank", line, re.I) and \
                ("--map-by" in line or "slots" in line):
            return True
    return False


class Runs:
    """The fixture compiled once per ZeRO config, and zero-run over its data."""

    def __init__(self, a, tools, work):
        stored = read_train_ref(a.models, a.model)
        self.a, self.tools, self.work, self.steps = a, tools, work, a.steps
        reps = -(-a.steps // stored["steps"])
        data = {k: np.concatenate([v] * reps)[:a.steps] for k, v in stored["data"].items()}
        self.rows = next(iter(data.values())).shape[1]
        if self.rows % RANKS:
            raise Fail(f"{self.rows} rows per step do not split over {RANKS} ranks")
        self.data = work / "batches.safetensors"
        save_file({k: np.ascontiguousarray(v) for k, v in data.items()}, str(self.data))
        self.shapes = {k: (self.rows // RANKS,) + v.shape[2:] for k, v in data.items()}
        self.cfg0 = {k: v for k, v in stored["config"].items() if k not in (
            "train_batch_size", "train_micro_batch_size_per_gpu",
            "gradient_accumulation_steps")}
        self.programs = {}
        self.compile_args = {}
        self.reports = {}
        self.results = {}

    def program(self, tag, zopts, stages=1):
        """Program TAG: ZEROPTS over the RANKS ranks, cut into STAGES pipeline
        stages of RANKS / STAGES replicas each when STAGES > 1."""
        if tag not in self.programs:
            dp = RANKS // stages
            cfg = dict(self.cfg0, train_batch_size=self.rows,
                       train_micro_batch_size_per_gpu=self.rows // dp,
                       gradient_accumulation_steps=1)
            cfg["zero_optimization"] = dict(stage=3, stage3_param_persistence_threshold=0,
                                            stage3_max_reuse_distance=0, **zopts)
            cp = self.work / f"ds_{tag}.json"
            cp.write_text(json.dumps(cfg, indent=1) + "\n")
            zrt, w = self.work / f"{tag}.zrt", self.work / f"init_{tag}.safetensors"
            shapes = {k: (self.rows // dp,) + v[1:] for k, v in self.shapes.items()}
            pipeline = [f"--zero-pipeline=pp={stages}"] if stages > 1 else []
            self.tools.compile(Path(self.a.models) / f"{self.a.model}_loss.onnx", shapes,
                               ["--config", str(cp), *pipeline], zrt, w)
            self.programs[tag] = (zrt, w)
            self.compile_args[tag] = (shapes, ["--config", str(cp), *pipeline])
        return self.programs[tag]

    def report(self, tag):
        """zero-opt --report --nodes 2 of program TAG: its text (once per TAG)."""
        if tag not in self.reports:
            shapes, extra = self.compile_args[tag]
            cmd = kit_tools.zero_opt(self.tools.zero_opt,
                                     Path(self.a.models) / f"{self.a.model}_loss.onnx", shapes,
                                     ["--train", *extra, "--report", f"--nodes={NODES}"],
                                     self.work / f"{tag}_report.zrt",
                                     self.work / f"{tag}_report.safetensors")
            r, _ = run(cmd, "zero-opt --report")
            # zero-opt prints its report on stderr (stdout may be the program).
            self.reports[tag] = r.stderr
        return self.reports[tag]

    def pipeline_sends(self, tag):
        """Bytes a step of pipeline program TAG sends between its stages, per
        replica, as zero-opt --report plans them (its "sent per step" column,
        summed over the stages): the activations forward, their gradients back."""
        rows = re.findall(r"^\s+stage \d+\s+\d+\s+(\d+)\s+\d+", self.report(tag), re.M)
        return sum(int(x) for x in rows) if rows else None

    def planned_across(self, tag):
        """zero-opt --report --nodes 2's bytes a step of TAG sends across the
        nodes, all ranks (its "total" row under "across nodes"), and per rank."""
        text = self.report(tag)
        total = re.search(r"^\s+total\s+(\d+)\s+\d+\s+\d+$", text, re.M)
        per_rank = re.search(r"^\s+across nodes per rank[^:]*:((?: \d+)+)$", text, re.M)
        if not total or not per_rank:
            return None, None
        return int(total[1]), [int(x) for x in per_rank[1].split()]

    def args(self, tag, run_tag):
        zrt, w = self.programs[tag]
        lp, sp = self.work / f"log_{run_tag}.json", self.work / f"final_{run_tag}.safetensors"
        return [self.tools.zero_run, str(zrt), "--weights", str(w), "--data", str(self.data),
                "--steps", str(self.steps), "--log-json", str(lp), "--save", str(sp),
                "--report-json", str(self.work / f"report_{run_tag}.json")]

    def train(self, tag, zopts, run_tag, launch=None, stages=1):
        """Trains program TAG under LAUNCH (np, cmd -> mpirun's line; one node's
        mpirun when None); returns (log rows, saved weights), once per RUN_TAG.
        self.stdout(RUN_TAG) is what zero-run printed."""
        if run_tag not in self.results:
            self.program(tag, zopts, stages)
            launch = launch or mpi.mpirun
            r, _ = run(launch(RANKS, self.args(tag, run_tag)), f"zero-run ({run_tag})")
            self.results[run_tag] = (
                (read_log(self.work / f"log_{run_tag}.json", self.steps),
                 load_file(str(self.work / f"final_{run_tag}.safetensors"))), r.stdout)
        return self.results[run_tag][0]

    def stdout(self, run_tag):
        return self.results[run_tag][1]

    def across(self, run_tag):
        """zero-run's bytes_sent_across_nodes of RUN_TAG: (all ranks, per rank)."""
        r = json.loads((self.work / f"report_{run_tag}.json").read_text())
        return r.get("bytes_sent_across_nodes"), [
            x.get("bytes_sent_across_nodes") for x in r["ranks"]]


def report_vs_wire(runs, tag, run_tag, name, wire):
    """The reports' bytes across the nodes against what the links carried:
    zero-run's (this run's) within REPORT_TOLERANCE of the wire, and zero-opt
    --report --nodes 2's plan of a step equal to zero-run's count per step, for
    every rank (both model each collective as it runs). (failures, a phrase for
    the log)."""
    total, per_rank = runs.across(run_tag)
    if total is None or None in per_rank or sum(per_rank) != total:
        return [f"{name}: zero-run's report has bytes_sent_across_nodes {total}, per rank "
                f"{per_rank}: expected a total and every rank's share"], "no report"
    ratio = total / wire
    bad = [] if abs(ratio - 1) <= REPORT_TOLERANCE else [
        f"{name}: zero-run reports {total} B sent across the nodes, the links carried "
        f"{wire} B ({ratio:.3f}x; within {REPORT_TOLERANCE:.0%} expected)"]
    planned, planned_ranks = runs.planned_across(tag)
    steps = runs.steps
    if planned is None:
        bad.append(f"{name}: zero-opt --report --nodes {NODES} printed no bytes across nodes")
    elif planned * steps != total or [p * steps for p in planned_ranks] != per_rank:
        bad.append(f"{name}: zero-opt --report --nodes {NODES} plans {planned} B per step "
                   f"across the nodes (per rank {planned_ranks}), x {steps} steps "
                   f"{planned * steps} B; zero-run counted {total} B (per rank {per_rank})")
    else:
        planned_ratio = planned * steps / wire
        if abs(planned_ratio - 1) > REPORT_TOLERANCE:
            bad.append(f"{name}: zero-opt --report plans {planned * steps} B across the nodes "
                       f"over the run, the links carried {wire} B ({planned_ratio:.3f}x)")
    return bad, (f"zero-run's report {total} B ({ratio:.3f}x; per rank "
                 f"{', '.join(map(str, per_rank))}), zero-opt --report's plan "
                 f"{planned} B/step x {steps}")


def differences(got, want, what):
    """What differs, bit for bit, between two (log rows, weights) results."""
    (g_rows, g_w), (w_rows, w_w) = got, want
    bad = []
    for key in ("loss", "grad_norm"):
        g, w = [r[key] for r in g_rows], [r[key] for r in w_rows]
        if g != w:
            i = next(i for i, (x, y) in enumerate(zip(g, w)) if x != y)
            bad.append(f"{what}: {key} at step {i + 1} is {g[i]!r}, one node's {w[i]!r}")
    if sorted(g_w) != sorted(w_w):
        bad.append(f"{what}: saved tensors {sorted(g_w)}, one node's {sorted(w_w)}")
    bad += [f"{what}: weight {k} differs from one node's" for k in sorted(w_w)
            if k in g_w and g_w[k].tobytes() != w_w[k].tobytes()]
    return bad


def case_cluster():
    """What every other case stands on: the nodes are separate machines to Open MPI."""
    probe = "echo $(hostname) $(stat -c %d /dev/shm)"
    shm_here = subprocess.run(["stat", "-c", "%d", "/dev/shm"], capture_output=True,
                              text=True, check=True).stdout.strip()
    with cluster.cluster(3, slots=(1, 2, 1), rate="1gbit") as c:
        names = [n for n, _, _ in c.nodes]
        r = run(c.mpirun(4, ["sh", "-c", probe], map_by="slot"), "mpirun (cluster probe)")[0]
        shaped = [subprocess.run(["tc", "-n", n, "class", "show", "dev", "eth0"],
                                 capture_output=True, text=True).stdout for n in names]
        state = c.state
    seen = sorted(line.split() for line in r.stdout.splitlines() if line.strip())
    hosts = [h for h, _ in seen]
    shm = {h: d for h, d in seen}
    bad = []
    if hosts != sorted([names[0], names[1], names[1], names[2]]):
        bad.append(f"cluster: processes ran on {hosts}, expected 1, 2 and 1 on {names}")
    if len(set(shm.values())) != 3 or shm_here in shm.values():
        bad.append(f"cluster: /dev/shm devices {shm} (this machine's {shm_here}): "
                   "expected one of its own per node")
    bad += [f"cluster: {n}'s link is not shaped to 1gbit: {s!r}"
            for n, s in zip(names, shaped) if "rate 1Gbit" not in s]
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    if any(n in left for n in names) or state.exists():
        bad.append(f"cluster: left behind after down: namespaces {left.split()}, "
                   f"state {state} exists: {state.exists()}")
    log(f"  cluster of 3 nodes (1, 2, 1 slots): processes on {', '.join(hosts)}; "
        f"/dev/shm of their own; links at 1gbit; {'nothing' if not bad else 'something'} "
        "left after down")
    return bad


def case_zero3(runs, c2x2):
    """ZeRO-3 on 2 x 2 equals one node; and the job did cross the link: a node
    cannot learn the other's shards unless they are sent, so each node's link
    carried at least half the parameters' bytes per step (every parameter is
    gathered at least once a step)."""
    one = runs.train("zero3", {}, "zero3_one")
    before = c2x2.bytes_sent()
    got = runs.train("zero3", {}, "zero3_2x2", c2x2.mpirun)
    sent = {n: b - before[n] for n, b in c2x2.bytes_sent().items()}
    bad = differences(got, one, "ZeRO-3 on 2 nodes x 2")
    params = sum(v.nbytes for v in load_file(str(runs.programs["zero3"][1])).values())
    floor = params // 2 * runs.steps
    bad += [f"ZeRO-3 on 2 nodes x 2: {n}'s link sent {b} B, less than half the parameters' "
            f"{params} B per step ({floor} B): did the ranks run on two nodes?"
            for n, b in sent.items() if b < floor]
    log(f"  ZeRO-3, 2 nodes x 2: {'bit-identical to' if not bad else 'DIFFERS from'} one node "
        f"(step {runs.steps} loss {got[0][-1]['loss']!r}, one node {one[0][-1]['loss']!r}); "
        f"the links sent {', '.join(f'{n} {b}' for n, b in sent.items())} B (at least "
        f"{floor} each)")
    return bad


def placement_lines(nodes, map_by):
    """zero-run's placement lines for 4 ranks on 2 nodes x 2: the nodes in
    launcher-rank order; under --map-by node launcher ranks 0, 2 are on the first
    node and become program ranks 0, 1 (node by node, for every program)."""
    if map_by == "slot":
        return [f"zero-run: node {nodes[0]}: ranks 0, 1", f"zero-run: node {nodes[1]}: ranks 2, 3"]
    return [f"zero-run: node {nodes[0]}: ranks 0, 1 (launcher ranks 0, 2)",
            f"zero-run: node {nodes[1]}: ranks 2, 3 (launcher ranks 1, 3)"]


def check_run(runs, tag, map_by, name, got, one, wire, nodes):
    """One run on 2 nodes x 2 against one node's (bit for bit), its report's bytes
    across the nodes against the WIRE's, and the placement zero-run printed
    against the node-by-node numbering: (failures, its placement lines, a phrase
    on the report for the log)."""
    run_tag = f"{tag}_{map_by}"
    diff = differences(got, one, name)
    reported, said = report_vs_wire(runs, tag, run_tag, name, wire)
    diff += reported
    want = placement_lines(nodes, map_by)
    lines = [ln for ln in runs.stdout(run_tag).splitlines() if ln.startswith("zero-run: node ")]
    if lines != want:
        diff.append(f"{name}: zero-run's placement {lines}, expected {want}")
    return diff, lines, said


def case_hpz(runs, c2x2):
    """hpZ and plain ZeRO-3 under both placements: bit-identical to one node, the
    placement zero-run reports, and the bytes that crossed between the nodes."""
    hpz = dict(zero_hpz_partition_size=GROUP)
    nodes = [n for n, _, _ in c2x2.nodes]
    one = {"zero3": runs.train("zero3", {}, "zero3_one"), "hpz": runs.train("hpz", hpz, "hpz_one")}
    bad, crossed = [], {}
    for map_by in ("slot", "node"):
        for tag, zopts in (("zero3", {}), ("hpz", hpz)):
            name = f"{'hpZ ' + str(GROUP) if tag == 'hpz' else 'ZeRO-3'}, --map-by {map_by}"
            before = c2x2.bytes_sent()
            got = runs.train(tag, zopts, f"{tag}_{map_by}",
                             lambda np_, cmd, m=map_by: c2x2.mpirun(np_, cmd, map_by=m))
            sent = {n: b - before[n] for n, b in c2x2.bytes_sent().items()}
            crossed[tag, map_by] = sum(sent.values())
            diff, lines, said = check_run(runs, tag, map_by, name, got, one[tag],
                                          crossed[tag, map_by], nodes)
            bad += diff
            log(f"  {name}, 2 nodes x 2: {'bit-identical to' if not diff else 'DIFFERS from'} "
                f"one node (step {runs.steps} loss {got[0][-1]['loss']!r}); {'; '.join(lines)}; "
                f"the nodes' links sent {crossed[tag, map_by]} B "
                f"({', '.join(f'{n} {b}' for n, b in sent.items())}); {said}")
    # Against ZeRO-3 under the same --map-by: both are numbered node by node,
    # so only hpZ's re-gathers differ (the world's collectives cross the least
    # in both, whatever the launcher's order).
    for map_by in ("slot", "node"):
        h, z = crossed["hpz", map_by], crossed["zero3", map_by]
        log(f"  --map-by {map_by}: hpZ sent {h} B across, {h / z:.3f}x ZeRO-3's {z} B")
        if h > HPZ_CROSSING_MAX * z:
            bad.append(f"hpZ {GROUP}, --map-by {map_by}: the links sent {h} B, more than "
                       f"{HPZ_CROSSING_MAX}x ZeRO-3's {z} B: are its groups split across nodes?")
    for tag in ("zero3", "hpz"):
        slot, node = crossed[tag, "slot"], crossed[tag, "node"]
        if abs(node - slot) > 0.05 * slot:
            bad.append(f"{tag}: the links sent {node} B under --map-by node, {slot} B "
                       "under --map-by slot: more than 5% apart")
    return bad


def case_groups(runs, c2x2):
    """The other node groups: qgZ's hierarchical form (its all-to-all inside hpZ's
    groups, then across) and a pipeline of 2 stages x 2 replicas (each stage on a
    node, its replicas' ZeRO-3 inside it; item 5 of issue 50). Under --map-by node
    zero-run renumbers both as under --map-by slot: losses, grad norms and weights
    bit-identical to one node, the same bytes across (within 5%)."""
    programs = (("qgZ inside hpZ 2", "qgz", dict(zero_hpz_partition_size=GROUP,
                                                  zero_quantized_gradients=True), 1),
                ("pp=2 x dp=2", "pp2", {}, 2))
    bad = []
    nodes = [n for n, _, _ in c2x2.nodes]
    for what, tag, zopts, stages in programs:
        one = runs.train(tag, zopts, f"{tag}_one", stages=stages)
        crossed = {}
        for map_by in ("slot", "node"):
            name = f"{what}, --map-by {map_by}"
            before = c2x2.bytes_sent()
            got = runs.train(tag, zopts, f"{tag}_{map_by}",
                             lambda np_, cmd, m=map_by: c2x2.mpirun(np_, cmd, map_by=m),
                             stages=stages)
            crossed[map_by] = sum(b - before[n] for n, b in c2x2.bytes_sent().items())
            diff, _, said = check_run(runs, tag, map_by, name, got, one,
                                      crossed[map_by], nodes)
            bad += diff
            log(f"  {name}, 2 nodes x 2: {'bit-identical to' if not diff else 'DIFFERS from'} "
                f"one node (step {runs.steps} loss {got[0][-1]['loss']!r}); "
                f"the nodes' links sent {crossed[map_by]} B; {said}")
        if abs(crossed["node"] - crossed["slot"]) > 0.05 * crossed["slot"]:
            bad.append(f"{what}: the links sent {crossed['node']} B under --map-by node, "
                       f"{crossed['slot']} B under --map-by slot: more than 5% apart")
        if stages > 1:
            bad += pipeline_vs_wire(runs, tag, what, crossed, RANKS // stages)
    return bad


def pipeline_vs_wire(runs, tag, what, crossed, dp):
    """A pipeline whose stages each sit on one node sends across the nodes what
    its stages send each other, the activations and their gradients: zero-opt
    --report's per-step sends, times the replicas and the steps. The links carry
    that plus TCP/IP's headers and the few world collectives of a step (the
    clipping norm): within REPORT_TOLERANCE, never less."""
    per_step = runs.pipeline_sends(tag)
    if not per_step:
        return [f"{what}: zero-opt --report printed no per-stage sends"]
    want = per_step * dp * runs.steps
    bad = []
    for map_by, wire in crossed.items():
        ratio = wire / want
        ok = 1 <= ratio <= 1 + REPORT_TOLERANCE
        log(f"  {what}, --map-by {map_by}: the links sent {wire} B, the stages' sends "
            f"{per_step} B/step x {dp} replicas x {runs.steps} steps = {want} B "
            f"({ratio:.3f}x)")
        if not ok:
            bad.append(f"{what}, --map-by {map_by}: the links sent {wire} B, {ratio:.3f}x "
                       f"the activations' {want} B (1 to {1 + REPORT_TOLERANCE:.2f}x expected)")
    return bad


def case_uneven(runs, a):
    runs.program("hpz", dict(zero_hpz_partition_size=GROUP))
    with cluster.cluster(2, slots=(3, 1)) as c:
        cmd = c.mpirun(RANKS, runs.args("hpz", "hpz_uneven"), map_by="slot")
        log("  $ " + " ".join(map(str, cmd)))
        r = kit_tools.call(cmd, mpi.env(root=True, oversubscribe=True), timeout=a.timeout)
        nodes = [n for n, _, _ in c.nodes]
    out = (r.stdout + r.stderr).strip()
    log_path = runs.work / "log_hpz_uneven.json"
    if r.returncode == 0:
        return [f"hpZ {GROUP} on nodes of 3 + 1 slots ran (exit 0): the group {{2, 3}} spans "
                f"{nodes[0]} and {nodes[1]}; zero-run must refuse before step 1"]
    if not refusal(out, nodes) or (log_path.exists() and json.loads(log_path.read_text())):
        return [f"hpZ {GROUP} on nodes of 3 + 1 slots: exit {r.returncode}, but not the refusal "
                f"naming ranks 2 and 3, nodes {nodes[0]} and {nodes[1]} and the fix "
                f"before step 1:\n{out[-3000:]}"]
    log(f"  hpZ {GROUP}, nodes of 3 + 1 slots: refused before step 1 (exit {r.returncode}): "
        + next(line for line in out.splitlines() if refusal(line, nodes)))
    return []


def driver_arguments(doc, model, steps, cases, extra=()):
    """The multi-node drivers' command line (this one's and nodeloss.py's): the
    tools, the fixture MODEL, the STEPS, --case among CASES, --work, and EXTRA
    (name, keywords) options."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--zero-opt", required=True)
    p.add_argument("--zero-run", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--model", default=model)
    p.add_argument("--steps", type=int, default=steps[0], help=steps[1])
    p.add_argument("--case", action="append", choices=cases)
    for name, kw in extra:
        p.add_argument(name, **kw)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    a.bin_dir, a.np = None, None
    return a


def cluster_unsupported():
    """Prints UNSUPPORTED and its reason, and returns the exit status ctest counts
    as a skip, where no cluster can be made here; None where one can."""
    why = cluster.unsupported()
    if why:
        print(f"UNSUPPORTED: {why}")
        return cluster.UNSUPPORTED
    return None


def main():
    a = driver_arguments(__doc__, "gpt2", (10, None), CASES,
                         [("--timeout", dict(type=float, default=120,
                                             help="seconds the refused run may take (uneven)"))])
    cases = a.case or ["cluster", "zero3", "hpz", "groups"]
    skip = cluster_unsupported()
    if skip is not None:
        return skip
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    try:
        runs = Runs(a, Tools(a), work)
        log(f"== multinode {a.model}: stage 3 over {RANKS} ranks, {a.steps} steps, "
            f"cases {', '.join(cases)}")
        bad = case_cluster() if "cluster" in cases else []
        if {"zero3", "hpz", "groups"} & set(cases):
            with cluster.cluster(2, slots=2) as c2x2:
                if "zero3" in cases:
                    bad += case_zero3(runs, c2x2)
                if "hpz" in cases:
                    bad += case_hpz(runs, c2x2)
                if "groups" in cases:
                    bad += case_groups(runs, c2x2)
        if "uneven" in cases:
            bad += case_uneven(runs, a)
    except cluster.Unsupported as e:
        print(f"UNSUPPORTED: {e}")
        return cluster.UNSUPPORTED
    except Fail as e:
        bad = [str(e)]
    for b in bad:
        log(f"FAIL: {b}")
    log("PASS" if not bad else f"{len(bad)} failure(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
