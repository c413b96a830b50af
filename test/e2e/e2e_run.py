"""Running the tools from the e2e test drivers (train_tokens.py, offload_optimizer.py).

env(): the environment for a tool run, Open MPI allowed as root and given a session
directory of its own (concurrent mpiruns sharing one TMPDIR race).
run(cmd, ok=True): runs cmd; exits with FAIL and its output when it fails (ok) or
succeeds (not ok); returns the CompletedProcess.
gpl3_split(work): the GNU GPL v3 as Debian ships it as byte tokens (uint16), every
tenth 2 KiB chunk held out: writes WORK/train.bin and WORK/held.bin and returns
(train tokens, held tokens, train path, held path), or None when the text is missing.
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


GPL3 = "/usr/share/common-licenses/GPL-3"


def gpl3_split(work):
    if not os.path.exists(GPL3):
        return None
    import numpy as np
    text = np.frombuffer(open(GPL3, "rb").read(), np.uint8).astype(np.uint16)
    held = np.arange(len(text)) // 2048 % 10 == 9
    paths = os.path.join(work, "train.bin"), os.path.join(work, "held.bin")
    text[~held].tofile(paths[0])
    text[held].tofile(paths[1])
    return text[~held], text[held], paths[0], paths[1]
