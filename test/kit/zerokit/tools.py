"""Running zero-opt, zero-run and mpirun from a driver.

call(cmd, env=None, *, session=True, **kw): runs cmd (its items str()'d), output
    captured as text, in env (os.environ when None) with, when session, an Open
    MPI session directory of its own, removed afterwards (zerokit.mpi.session);
    other keywords go to subprocess.run (timeout=...). Returns the
    CompletedProcess, whatever its exit status.
run(cmd, ok=True, env=None): call(cmd, env), env being mpi.env(root=True) of the
    environment at the time of the call when None; exits the driver with
    "FAIL: CMD" and its output when cmd fails (ok) or succeeds (not ok). Returns
    the CompletedProcess.
zero_opt(binary, model, shapes, args, zrt, weights): zero-opt's command line
    compiling MODEL to a program and its initial weights:
    BINARY MODEL --input-shape=NAME=AxB... ARGS... --emit=zrt -o ZRT --weights-out WEIGHTS
    shapes maps each input's name to its dimensions (a sequence, or "AxB").
"""
import subprocess
import sys

from . import mpi


def call(cmd, env=None, *, session=True, **kw):
    cmd = [str(c) for c in cmd]
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    if not session:
        return subprocess.run(cmd, env=env, **kw)
    with mpi.session(mpi.env(env)) as e:
        return subprocess.run(cmd, env=e, **kw)


def run(cmd, ok=True, env=None):
    r = call(cmd, mpi.env(root=True) if env is None else env)
    if ok and r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(map(str, cmd))}\n{r.stdout}{r.stderr}")
    if not ok and r.returncode == 0:
        sys.exit(f"FAIL: expected an error from {' '.join(map(str, cmd))}")
    return r


def zero_opt(binary, model, shapes, args, zrt, weights):
    dims = {k: v if isinstance(v, str) else "x".join(map(str, v)) for k, v in shapes.items()}
    return [binary, model, *[f"--input-shape={k}={v}" for k, v in dims.items()], *args,
            "--emit=zrt", "-o", zrt, "--weights-out", weights]
