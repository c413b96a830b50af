"""Checks that Open MPI's environment is set up in one place: the test kit.

Every driver, property test, fixture probe, benchmark, lit test and shell
script under test/, bench/ and scripts/ that runs mpirun or zero-run takes its Open MPI
variables (allowed as root, oversubscription, yielding when idle, a session
directory of its own) and mpirun's --oversubscribe from test/kit/zerokit/mpi.py:
Python files import it, lit RUN lines use %mpirun (test/lit.cfg.py builds it
with the kit), CMake test registrations leave the environment to the drivers.
A problem, in a Python file (.py), a lit test (.test, .mlir, .onnxtext), a
shell script (.sh) or a CMake file (CMakeLists.txt, .cmake) outside the kit:
  * naming an Open MPI variable (OMPI and an underscore, not a shell's $ read
    of one, as a script reading its rank does);
  * passing mpirun's oversubscribe flag (in Python, a string of it);
  * a RUN line calling mpirun itself instead of %mpirun.

Prints one line per problem (file:line: what) and exits 1 if any.
Usage: check_mpi_env.py SOURCE_ROOT
"""
import os
import re
import sys

root = sys.argv[1]
KIT = os.path.join("test", "kit")
# The kit itself; and the GPU kit, which runs alone on a device machine without
# the test kit and strips Open MPI's variables from zero-run's environment
# (never sets them).
SKIP = (KIT, os.path.join("scripts", "gpu-kit"))
LIT = (".test", ".mlir", ".onnxtext")
SUFFIXES = (".py", ".sh", ".cmake") + LIT
# The prefix and the flag are spelled with a class ([_], [s]) so that this file
# names neither itself.
var_re = re.compile(r"(?<![\w$}{])OMPI[_]\w*")
flag_re = re.compile(r"--over[s]ubscribe\b")
flag_literal_re = re.compile(r"[\"']--over[s]ubscribe[\"']")  # in Python, as a string
run_line_re = re.compile(r"\bRUN:")
mpirun_re = re.compile(r"(?<![%\w-])mpirun\b")


def problems_in(rel, lines):
    lit = rel.endswith(LIT)
    fix = "use %mpirun" if lit else "use zerokit.mpi"
    for n, line in enumerate(lines, 1):
        for m in var_re.finditer(line):
            yield f"{rel}:{n}: sets {m.group(0)} outside the kit: {fix}"
        if (flag_literal_re if rel.endswith(".py") else flag_re).search(line):
            yield f"{rel}:{n}: passes mpirun's oversubscribe flag outside the kit: {fix}"
        if lit and run_line_re.search(line) and mpirun_re.search(line.split("RUN:", 1)[1]):
            yield f"{rel}:{n}: runs mpirun itself: use %mpirun"


if not os.path.exists(os.path.join(root, KIT, "zerokit", "mpi.py")):
    sys.exit(f"{root}: no {KIT}/zerokit/mpi.py")
problems = []
for folder in ("bench", "scripts", "test"):
    for d, dirs, files in os.walk(os.path.join(root, folder)):
        rel_dir = os.path.relpath(d, root)
        dirs[:] = sorted(x for x in dirs if os.path.join(rel_dir, x) not in SKIP
                         and x not in ("__pycache__", "Output"))
        for f in sorted(files):
            if not (f.endswith(SUFFIXES) or f == "CMakeLists.txt"):
                continue
            rel = os.path.join(rel_dir, f)
            with open(os.path.join(d, f), errors="replace") as fh:
                problems += problems_in(rel, fh)
for p in problems:
    print(p)
print(f"{len(problems)} Open MPI settings outside the kit")
sys.exit(1 if problems else 0)
