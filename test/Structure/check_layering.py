"""Checks the compiler's layering rules on its sources (see docs/architecture.md).

- A pass folder (lib/Transforms/{ZeRO,Training,PipelineParallel,Lowering}) uses
  the analyses, the dialects and its own headers, never another pass folder
  nor the pipelines; lib/Transforms/Analysis uses no pass folder.
- Import, the dialects and Target use no pass and no pipeline.
- Each pass folder's library links no other pass folder's library.
- Every zero.* attribute name is spelled once, in ZeroAttributes.h.

Prints one line per broken rule (file:line: what) and exits 1 if any.
Usage: check_layering.py SOURCE_ROOT
"""
import os
import re
import sys

root = sys.argv[1]
PASS_FOLDERS = ["ZeRO", "Training", "PipelineParallel", "Lowering"]
LIBRARIES = {"ZeRO": "ZeroZeROTransforms", "Training": "ZeroTrainingTransforms",
             "PipelineParallel": "ZeroPipelineParallelTransforms",
             "Lowering": "ZeroLoweringTransforms"}
include_re = re.compile(r'#include "([^"]+)"')
attribute_re = re.compile(r'"zero\.[a-z_]+"')
problems = []


def sources(folder):
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        for name in sorted(files):
            if name.endswith((".cpp", ".h")):
                yield os.path.join(dirpath, name)


def check_includes(folder, forbidden):
    """No include in `folder` may start with a prefix in `forbidden`."""
    for path in sources(folder):
        for number, line in enumerate(open(path, encoding="utf-8"), 1):
            m = include_re.match(line.strip())
            if m and any(m.group(1).startswith(f) for f in forbidden):
                problems.append(f"{os.path.relpath(path, root)}:{number}: includes "
                                f"{m.group(1)}, which {folder} may not use")


for folder in PASS_FOLDERS:
    # A pass folder's own headers are included by file name; another folder's
    # would need a path into it.
    others = [f"../{o}/" for o in PASS_FOLDERS if o != folder]
    check_includes(f"lib/Transforms/{folder}", others + ["zero/Pipelines/"])
    cmake = os.path.join(root, "lib/Transforms", folder, "CMakeLists.txt")
    text = open(cmake, encoding="utf-8").read()
    for other, library in LIBRARIES.items():
        if other != folder and re.search(rf"\b{library}\b", text):
            problems.append(f"lib/Transforms/{folder}/CMakeLists.txt: links {library}; "
                            "pass folders share only Analysis")
check_includes("lib/Transforms/Analysis",
               [f"../{o}/" for o in PASS_FOLDERS] + ["zero/Pipelines/"])
for folder in ["lib/Import", "lib/Dialect", "lib/Target"]:
    check_includes(folder, ["zero/Transforms/", "zero/Pipelines/"])

for folder in ["lib", "tools", "include"]:
    for path in sources(folder):
        if path.endswith("ZeroAttributes.h"):
            continue
        for number, line in enumerate(open(path, encoding="utf-8"), 1):
            for name in attribute_re.findall(line):
                problems.append(f"{os.path.relpath(path, root)}:{number}: spells the "
                                f"attribute {name}; use its accessor in "
                                "zero/Dialect/Zero/ZeroAttributes.h")

for p in problems:
    print(p)
print(f"{len(problems)} layering problems")
sys.exit(1 if problems else 0)
