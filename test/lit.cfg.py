# lit configuration for the zero compiler tests.
import os
import sys

import lit.formats
from lit.llvm import llvm_config

# Open MPI's environment comes from the test kit (test/kit/zerokit/mpi.py), as
# for every driver: test/Structure/mpi-env.test checks that nothing else sets it.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "kit"))
from zerokit import mpi  # noqa: E402

config.name = "zero"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtext", ".test"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "Inputs", "models"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.zero_obj_root, "test")

config.substitutions.append(("%models", os.path.join(config.zero_src_root, "test", "models")))
config.substitutions.append(("%src", config.zero_src_root))
config.substitutions.append(("%zero_build", config.zero_obj_root))
python = os.path.join(config.zero_obj_root, "pyenv", "bin", "python")
zero_opt = os.path.join(config.zero_tools_dir, "zero-opt")
zero_run = config.zero_run
config.substitutions.append(("%python", python))
config.substitutions.append(("%zero_run", zero_run))
# %mpirun -np N CMD: CMD over N ranks, oversubscribing the cores, allowed as root,
# yielding when idle (the kit's launcher).
config.substitutions.append(("%mpirun", " ".join(mpi.launcher(root=True, yield_when_idle=True))))
config.substitutions.append((
    "%e2e", f"{python} {config.zero_src_root}/test/e2e/fixture_e2e.py --zero-opt {zero_opt} "
    f"--zero-run {zero_run} --models {os.path.join(config.zero_src_root, 'test', 'models')}"))
# End-to-end tests need the runtime and the test virtualenv (scripts/test.sh
# makes both); without them they are reported UNSUPPORTED, not silently passed.
if os.path.exists(zero_run) and os.path.exists(python):
    config.available_features.add("runtime")
# Tests of the PyTorch-side helpers (scripts/export_hf.py) need torch and
# transformers in that virtualenv (scripts/setup-pyenv.sh full); CI's has none.
if os.path.exists(python):
    import subprocess
    if subprocess.run([python, "-c", "import torch, transformers"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
        config.available_features.add("torch")

# A 64 KiB tmpfs mounted in a mount namespace of one process (unshare -rm), as
# offload-optimizer.test does to fill an nvme_path: where that is refused (a
# container without user namespaces) that test accepts the driver's
# "full: UNSUPPORTED" line, and only there.
def _can_mount_tmpfs():
    import shutil
    import subprocess
    import tempfile
    if not shutil.which("unshare"):
        return False
    d = tempfile.mkdtemp(prefix="zero-lit-mount-")
    try:
        return subprocess.run(["unshare", "-rm", "sh", "-c",
                               f"mount -t tmpfs -o size=64k none '{d}'"],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0
    finally:
        os.rmdir(d)


if _can_mount_tmpfs():
    config.available_features.add("mount-namespace")

# ZRT_CPU_ISA: scripts/test.sh runs the layout tests again at each lower ISA.
llvm_config.with_system_environment(["HOME", "PATH", *mpi.env({}, root=True),
                                     "ZRT_CPU_ISA"])
llvm_config.use_default_substitutions()
tool_dirs = [config.zero_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["zero-opt"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.zero_tools_dir, append_path=True)

# Open MPI refuses to start as root unless told; CI machines run as root.
if mpi.is_root():
    config.environment.update(mpi.env({}, root=True))

# format.test checks the lines changed since .clang-format-baseline; a clone
# without that commit (a shallow one) or without git has nothing to compare.
def _has_format_baseline():
    import subprocess
    path = os.path.join(config.zero_src_root, ".clang-format-baseline")
    if not os.path.exists(path):
        return False
    base = open(path).read().strip()
    try:
        return subprocess.run(["git", "-C", config.zero_src_root, "cat-file", "-e",
                               base + "^{commit}"], capture_output=True).returncode == 0
    except OSError:
        return False


if _has_format_baseline():
    config.available_features.add("format-baseline")
