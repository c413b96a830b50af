#!/usr/bin/env bash
# The GPU run kit's one command (built by scripts/gpu-kit.sh; docs/gpu-kit.md).
#   run.sh OUT   runs every case with zero-run --backend cuda, compares it with the
#                CPU backend's outputs in the kit (rtol 1e-4, atol 1e-5), measures
#                GPT-2-small's training step and forward against PyTorch on the same
#                GPU, and writes OUT/gpu-check.json and OUT/gpu-check.log.
# Exit status 0 when every case is ok, 1 otherwise (the JSON says which and why).
# Needs python3 (numpy for the headline; torch for its PyTorch side), an NVIDIA
# driver, and CUDA 13's libcudart / libcublas / libcublasLt: found in python3's
# nvidia-* wheels (site-packages/nvidia/*/lib) or under /usr/local/cuda*.
# Environment:
#   ZRT_KIT_BACKEND=cpu     the same cases on the CPU backend (a dry run, no GPU);
#                           the headline is then skipped unless ZRT_KIT_HEADLINE=1
#   ZRT_KIT_HEADLINE=0|1    leave out / run the headline (default: 1 on cuda)
#   ZRT_KIT_CASES=a,b       only these cases
#   ZRT_KIT_TIMEOUT=S       seconds per case (default 60)
#   ZRT_KIT_BUDGET=S        seconds for the whole run (default 420: 60% for the cases)
#   ZRT_KIT_PYTHON=PATH     the python to use (default python3)
#   ZRT_KIT_CUDA_LIBS=DIRS  colon-separated folders searched first for CUDA's libraries
set -uo pipefail
KIT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -ne 1 ]; then
  echo "usage: $0 OUT   (writes OUT/gpu-check.json and OUT/gpu-check.log)" >&2
  exit 2
fi
mkdir -p "$1" || exit 2
OUT="$(cd "$1" && pwd)"
PY="${ZRT_KIT_PYTHON:-python3}"
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "run.sh: no $PY (set ZRT_KIT_PYTHON)" >&2
  printf '{"cases": [], "device": "unknown", "driver": "unknown", "error": "no python3 on this machine"}\n' \
    > "$OUT/gpu-check.json"
  exit 1
fi
export PYTHONUNBUFFERED=1
exec "$PY" "$KIT/kit.py" --kit "$KIT" --out "$OUT"
