"""Checks that Open MPI's environment is set up in one place: the test kit.

Every Python file under test/ and bench/ that runs mpirun or zero-run takes
its Open MPI variables (allowed as root, oversubscription, yielding when idle,
a session directory of its own) from test/kit/zerokit/mpi.py. A file outside
the kit that names an Open MPI variable (OMPI and an underscore, not a shell's
$ read of one) is a problem. test/lit.cfg.py is left out: it sets lit's own
environment for the RUN lines, which call mpirun themselves.

Prints one line per mention (file:line: the variable) and exits 1 if any.
Usage: check_mpi_env.py SOURCE_ROOT
"""
import os
import re
import sys

root = sys.argv[1]
KIT = os.path.join("test", "kit")
EXEMPT = {os.path.join("test", "lit.cfg.py")}
# The prefix is spelled OMPI[_] so that this file names no variable itself.
var_re = re.compile(r"(?<![\w$}{])OMPI[_]\w*")
problems = []

if not os.path.exists(os.path.join(root, KIT, "zerokit", "mpi.py")):
    sys.exit(f"{root}: no {KIT}/zerokit/mpi.py")
for folder in ("bench", "test"):
    for d, dirs, files in os.walk(os.path.join(root, folder)):
        rel_dir = os.path.relpath(d, root)
        dirs[:] = sorted(x for x in dirs if os.path.join(rel_dir, x) != KIT
                         and x not in ("__pycache__", "Output"))
        for f in sorted(files):
            rel = os.path.join(rel_dir, f)
            if not f.endswith(".py") or rel in EXEMPT:
                continue
            with open(os.path.join(d, f), errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    for m in var_re.finditer(line):
                        problems.append(f"{rel}:{n}: sets {m.group(0)} outside the kit: use "
                                        "zerokit.mpi")
for p in problems:
    print(p)
print(f"{len(problems)} Open MPI variables outside the kit")
sys.exit(1 if problems else 0)
