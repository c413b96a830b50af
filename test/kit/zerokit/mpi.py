"""Open MPI's environment and command line for the tools, in one place.

env(base=None, *, root=False, oversubscribe=False, yield_when_idle=False,
    threads=None): a copy of base (os.environ when None) for zero-run and mpirun:
    root             OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
                     (Open MPI refuses to start as root otherwise);
    oversubscribe    OMPI_MCA_rmaps_base_oversubscribe=1 (more ranks than cores);
    yield_when_idle  OMPI_MCA_mpi_yield_when_idle=1 (ranks oversubscribing the
                     cores, each with a compute and a communication thread: the
                     progress loop yields instead of spinning);
    threads          OMP_NUM_THREADS=threads (benchmarks).
    A variable base already sets is kept, OMP_NUM_THREADS excepted.
with_session(e=None): e (env() when None) with an Open MPI session directory of
    its own, a fresh temporary directory left behind: concurrent mpiruns sharing
    one TMPDIR race to create Open MPI's there ("mkdir ... ompi.HOST.UID: File
    exists").
session(e=None): the same as a context manager that removes the directory on exit.
mpirun(np, cmd=(), *, oversubscribe=True, bind_to=None): the command line
    mpirun -np NP [--oversubscribe] [--bind-to BIND_TO] CMD...
is_mpirun(cmd): whether cmd is such a command line.
launcher(*, root=False, yield_when_idle=False): the words that start a shell
    line running mpirun with this environment, -np and the command to follow:
    env VAR=VALUE... mpirun --oversubscribe
    (test/lit.cfg.py's %mpirun for the RUN lines).
exports(*, root=False, oversubscribe=False, yield_when_idle=False): the shell
    lines `export NAME=VALUE` of those settings, for a script that runs ctest
    or mpirun several times:
    eval "$(PYTHONPATH=test/kit python3 -m zerokit.mpi root oversubscribe)"
    (scripts/test.sh, sanitize.sh, demo.sh; the words are the keywords).
SH_RANK: this process's rank under mpirun, in sh (0 outside it).
is_root(): whether this process runs as root.
"""
import contextlib
import os
import shlex
import shutil
import sys
import tempfile

SESSION_DIR = "OMPI_MCA_orte_tmpdir_base"
SH_RANK = "${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}"


def is_root():
    return hasattr(os, "geteuid") and os.geteuid() == 0


def env(base=None, *, root=False, oversubscribe=False, yield_when_idle=False, threads=None):
    e = dict(os.environ if base is None else base)
    if root:
        e.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        e.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    if oversubscribe:
        e.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    if yield_when_idle:
        e.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    if threads is not None:
        e["OMP_NUM_THREADS"] = str(threads)
    return e


def with_session(e=None):
    e = dict(env() if e is None else e)
    e[SESSION_DIR] = tempfile.mkdtemp(prefix="ompi-")
    return e


@contextlib.contextmanager
def session(e=None):
    e = with_session(e)
    try:
        yield e
    finally:
        shutil.rmtree(e[SESSION_DIR], ignore_errors=True)


def mpirun(np, cmd=(), *, oversubscribe=True, bind_to=None):
    line = ["mpirun", "-np", str(np)]
    if oversubscribe:
        line.append("--oversubscribe")
    if bind_to:
        line += ["--bind-to", bind_to]
    return line + list(cmd)


def launcher(*, root=False, yield_when_idle=False):
    e = env({}, root=root, yield_when_idle=yield_when_idle)
    return ["env", *[f"{k}={v}" for k, v in e.items()], "mpirun", "--oversubscribe"]


def is_mpirun(cmd):
    return bool(cmd) and os.path.basename(str(cmd[0])) == "mpirun"


def exports(*, root=False, oversubscribe=False, yield_when_idle=False):
    e = env({}, root=root, oversubscribe=oversubscribe, yield_when_idle=yield_when_idle)
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(e.items()))


def main(argv):
    words = ("root", "oversubscribe", "yield_when_idle")
    unknown = [a for a in argv if a not in words]
    if unknown:
        sys.exit(f"zerokit.mpi: unknown setting {unknown[0]}; the settings are "
                 + ", ".join(words))
    sys.stdout.write(exports(**{a: True for a in argv}))


if __name__ == "__main__":
    main(sys.argv[1:])
