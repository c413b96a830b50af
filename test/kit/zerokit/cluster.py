"""A cluster of nodes on this machine for the multi-node drivers and benchmarks:
scripts/cluster.sh's network namespaces, brought up and always down again.

unsupported(): why no cluster can be made here (not root, no `ip netns`, ...),
    None where one can (scripts/cluster.sh check).
cluster(nodes, slots=1, *, rate=None, delay=None): a context manager bringing up
    NODES nodes (slots: one count for all, or a sequence of one per node; rate and
    delay: tc's spellings, e.g. "1gbit", "1ms", shaping what every node sends) and
    yielding a Cluster; down on exit, on an exception and on SIGTERM (ctest's
    timeout). Raises Unsupported (its reason) where unsupported() says why.
Cluster:
    nodes            [(hostname, address, slots)] in the hostfile's order
    flags            mpirun's words that run on it (hostfile, rsh agent, transports)
    mpirun(np, cmd, map_by=None)   mpi.mpirun's command line with the flags (and
                     --map-by MAP_BY): run it in mpi.env(root=True, ...) as usual
    bytes_sent()     {hostname: bytes its interface has sent} (the link counters)

The Open MPI environment stays zerokit.mpi's: the flags are command-line MCA
parameters, and the rsh agent hands the daemons mpirun's environment.
"""
import contextlib
import os
import shlex
import signal
import subprocess
import tempfile
from pathlib import Path

from . import mpi

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "cluster.sh"
UNSUPPORTED = 77


class Unsupported(Exception):
    pass


def unsupported():
    r = subprocess.run(["bash", str(SCRIPT), "check"], capture_output=True, text=True)
    if r.returncode == 0:
        return None
    out = (r.stdout + r.stderr).strip()
    return out.removeprefix("UNSUPPORTED: ") if r.returncode == UNSUPPORTED else \
        f"{SCRIPT} check failed (exit {r.returncode}): {out}"


class Cluster:
    def __init__(self, state):
        self.state = Path(state)
        self.nodes = []
        for line in (self.state / "nodes").read_text().splitlines():
            name, addr, slots = line.split()
            self.nodes.append((name, addr, int(slots)))
        self.flags = shlex.split(_script("flags", str(self.state)).stdout)

    def mpirun(self, np, cmd, map_by=None):
        place = ["--map-by", map_by] if map_by else []
        return mpi.mpirun(np, [*self.flags, *place, *cmd])

    def bytes_sent(self):
        return {name: int(subprocess.run(
            ["ip", "netns", "exec", name, "cat", "/sys/class/net/eth0/statistics/tx_bytes"],
            capture_output=True, text=True, check=True).stdout) for name, _, _ in self.nodes}


def _script(*args):
    r = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True)
    if r.returncode == UNSUPPORTED:
        raise Unsupported((r.stdout + r.stderr).strip().removeprefix("UNSUPPORTED: "))
    if r.returncode != 0:
        raise RuntimeError(f"{SCRIPT} {' '.join(args)} failed (exit {r.returncode}):\n"
                           f"{r.stdout}{r.stderr}")
    return r


@contextlib.contextmanager
def _terminate_as_exit():
    """SIGTERM (ctest's timeout) raises SystemExit in the main thread while the
    cluster is in use, so that it is brought down; yields a function that makes
    the rest (bringing it down) deaf to SIGTERM."""
    def on_term(signum, frame):
        raise SystemExit(128 + signum)
    try:
        old = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread: leave signals alone
        yield lambda: None
        return
    try:
        yield lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN)
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def cluster(nodes, slots=1, *, rate=None, delay=None):
    why = unsupported()
    if why:
        raise Unsupported(why)
    spec = ",".join(map(str, slots)) if isinstance(slots, (list, tuple)) else str(slots)
    args = ["up", str(nodes), "--slots", spec]
    if rate:
        args += ["--rate", rate]
    if delay:
        args += ["--delay", delay]
    with _terminate_as_exit() as deaf:
        state = tempfile.mkdtemp(prefix="zero-cluster-")
        try:
            _script(*args, "--state", state)
            yield Cluster(state)
        finally:
            deaf()
            _script("down", state)
            if os.path.isdir(state):
                os.rmdir(state)
