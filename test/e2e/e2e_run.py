"""Running the tools from the e2e test drivers (train_tokens.py, offload_optimizer.py).

env(): the environment for a tool run, Open MPI allowed as root and given a session
directory of its own (concurrent mpiruns sharing one TMPDIR race).
run(cmd, ok=True): runs cmd; exits with FAIL and its output when it fails (ok) or
succeeds (not ok); returns the CompletedProcess.
"""
import os
import subprocess
import sys
import tempfile


def env():
    e = dict(os.environ)
    e.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    e.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    e["OMPI_MCA_orte_tmpdir_base"] = tempfile.mkdtemp(prefix="ompi-")
    return e


def run(cmd, ok=True):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env())
    if ok and r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    if not ok and r.returncode == 0:
        sys.exit(f"FAIL: expected an error from {' '.join(cmd)}")
    return r
