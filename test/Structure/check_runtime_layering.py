"""Checks the runtime's layering (docs/architecture.md, "The runtime's layers").

Each folder of runtime/src is one library (runtime/src/<folder>/CMakeLists.txt)
and each public header of runtime/include/zrt belongs to one. A library may
include the headers of the libraries below it, never those above:

  base      <- program <- comm <- comm_mpi
  base      <- io
  program   <- kernels <- cpu (+ io) <- cuda (+ comm)
  program, comm, io <- executor <- run

- No source of a library includes a header of a library it may not use.
- Each library's CMakeLists.txt links only libraries it may use.
- <mpi.h> is included only by comm_mpi, CUDA's headers only by cuda.
- Every source and public header belongs to a library.

Prints one line per broken rule (file:line: what) and exits 1 if any.
Usage: check_runtime_layering.py SOURCE_ROOT
"""
import os
import re
import sys

root = sys.argv[1]
RUNTIME = os.path.join(root, "runtime")

# library: (folders under runtime/src, public headers, libraries it uses directly)
LIBRARIES = {
    "base": (["base", "math"], ["Status.h", "Tensor.h"], []),
    "program": (["program"], ["Kernel.h", "Program.h", "Backend.h"], ["base"]),
    "io": (["io"], ["TensorFile.h", "Checksum.h", "OutputFile.h", "Checkpoint.h"], ["base"]),
    "comm": (["comm"], ["Communicator.h", "Agreement.h", "Placement.h"], ["program"]),
    "comm_mpi": (["comm/mpi"], ["MpiCommunicator.h"], ["comm"]),
    "kernels": (["kernels"], [], ["program"]),
    "cpu": (["cpu"], ["CpuBackend.h"], ["kernels", "io"]),
    "cuda": (["cuda"], ["CudaBackend.h"], ["cpu", "kernels", "comm"]),
    "executor": (["executor"], ["Executor.h", "Watchdog.h", "Bindings.h", "TrainingData.h",
                               "TokenData.h", "TrainingCheckpoint.h"], ["program", "comm", "io"]),
    "run": (["run"], ["RunControl.h", "ForwardRun.h", "TrainingRun.h"], ["executor"]),
}
GENERATED = {"zrt_generated.h": "program"}
SYSTEM_OWNERS = {"mpi.h": "comm_mpi", "cuda_runtime.h": "cuda", "cuda.h": "cuda",
                 "cublas_v2.h": "cuda", "cuda_fp16.h": "cuda", "cuda_bf16.h": "cuda"}


def closure(name, seen=None):
    seen = set() if seen is None else seen
    for used in LIBRARIES[name][2]:
        if used not in seen:
            seen.add(used)
            closure(used, seen)
    return seen


ALLOWED = {name: closure(name) | {name} for name in LIBRARIES}
HEADER_OWNER = {h: name for name, (_, headers, _) in LIBRARIES.items() for h in headers}
# Longest folder first, so comm/mpi wins over comm.
FOLDERS = sorted(((f, name) for name, (folders, _, _) in LIBRARIES.items() for f in folders),
                 key=lambda fn: -len(fn[0]))
problems = []


def rel(path):
    return os.path.relpath(path, root)


def library_of_source(path):
    sub = os.path.relpath(path, os.path.join(RUNTIME, "src")).replace(os.sep, "/")
    for folder, name in FOLDERS:
        if sub.startswith(folder + "/"):
            return name
    return None


def library_of_include(spelled, including_dir):
    if spelled.startswith("zrt/"):
        return HEADER_OWNER.get(spelled[4:], "?")
    if spelled in GENERATED:
        return GENERATED[spelled]
    local = os.path.join(including_dir, spelled)
    if os.path.exists(local):
        return library_of_source(local) if "/runtime/src/" in local.replace(os.sep, "/") \
            else HEADER_OWNER.get(os.path.basename(local), "?")
    path = os.path.join(RUNTIME, "src", spelled)
    if os.path.exists(path):
        return library_of_source(path)
    return "?"


include_re = re.compile(r'\s*#\s*include\s+([<"])([^>"]+)[>"]')


def check_file(path, owner):
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        m = include_re.match(line)
        if not m:
            continue
        kind, spelled = m.groups()
        if kind == "<":
            lib = SYSTEM_OWNERS.get(spelled)
            if lib and lib != owner:
                problems.append(f"{rel(path)}:{number}: includes <{spelled}>, which only "
                                f"{lib} may include")
            continue
        lib = library_of_include(spelled, os.path.dirname(path))
        if lib == "?":
            problems.append(f"{rel(path)}:{number}: includes {spelled}, which belongs to no "
                            "runtime library")
        elif lib not in ALLOWED[owner]:
            problems.append(f"{rel(path)}:{number}: includes {spelled} (library {lib}), which "
                            f"{owner} may not use")


for dirpath, _, files in os.walk(os.path.join(RUNTIME, "src")):
    for name in sorted(files):
        path = os.path.join(dirpath, name)
        if not name.endswith((".cpp", ".h", ".cu", ".cuh")):
            continue
        owner = library_of_source(path)
        if owner is None:
            problems.append(f"{rel(path)}: in no library's folder; give it one in "
                            "test/Structure/check_runtime_layering.py")
            continue
        check_file(path, owner)

include_dir = os.path.join(RUNTIME, "include", "zrt")
for name in sorted(os.listdir(include_dir)):
    owner = HEADER_OWNER.get(name)
    if owner is None:
        problems.append(f"runtime/include/zrt/{name}: a public header of no library; give "
                        "it one in test/Structure/check_runtime_layering.py")
        continue
    check_file(os.path.join(include_dir, name), owner)

library_re = re.compile(r"\bzrt_([a-z_]+)\b")
for name, (folders, _, _) in LIBRARIES.items():
    cmake = os.path.join(RUNTIME, "src", folders[0], "CMakeLists.txt")
    if not os.path.exists(cmake):
        problems.append(f"{rel(cmake)}: missing (library zrt_{name})")
        continue
    text = re.sub(r"#.*", "", open(cmake, encoding="utf-8").read())
    for m in library_re.finditer(text):
        used = m.group(1)
        if used in LIBRARIES and used not in ALLOWED[name]:
            number = text.count("\n", 0, m.start()) + 1
            problems.append(f"{rel(cmake)}:{number}: zrt_{name} links zrt_{used}, which it "
                            "may not use")

for p in problems:
    print(p)
print(f"{len(problems)} runtime layering problems")
sys.exit(1 if problems else 0)
