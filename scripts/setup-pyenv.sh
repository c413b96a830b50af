#!/usr/bin/env bash
# Creates the Python virtualenv used only by fixture export and benchmark scripts
# (never by zero-opt or zero-run). It lives in the build tree: build/pyenv.
# Usage: scripts/setup-pyenv.sh [full|test|deepspeed]
#   test: numpy + onnx + onnxruntime + safetensors + onnxconverter-common (what test
#         drivers need; the last converts fixtures to fp16 for the 16-bit tests)
#   full: also torch + transformers (what test/models/export.py needs)
#   deepspeed: full, and DeepSpeed 0.19.8 (ops built on first use, none at install)
#         with accelerate (the Trainer's "auto" filling): the oracle of
#         test/e2e/deepspeed_oracle.py and the tests' --live checks
# Either way test/kit (the drivers' zerokit package) goes on its path.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${ZERO_PYENV:-$ROOT/build/pyenv}"
MODE="${1:-test}"
PY="${PYTHON:-python3}"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# PACKAGE[:MODULE] when the module's name differs from the package's.
want=(numpy onnx onnxruntime safetensors onnxconverter-common:onnxconverter_common matplotlib)
[ "$MODE" = full ] || [ "$MODE" = deepspeed ] && want+=(torch transformers onnxscript)
[ "$MODE" = deepspeed ] && want+=(accelerate deepspeed==0.19.8:deepspeed)
need=()
for p in "${want[@]}"; do
  m="${p#*:}"; p="${p%%:*}"
  "$VENV/bin/python" -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('$m') is None)" 2>/dev/null || need+=("$p")
done
if ((${#need[@]})); then
  DS_BUILD_OPS=0 "$VENV/bin/pip" install -q --disable-pip-version-check "${need[@]}"
fi
# The test kit (test/kit/zerokit: Open MPI's environment, running the tools),
# importable by every driver and benchmark run with this Python: a .pth file
# naming test/kit, written each time (it follows the checkout).
site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$ROOT/test/kit" > "$site/zerokit.pth"
echo "$VENV"
