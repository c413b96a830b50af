#!/usr/bin/env bash
# Configures (once) and builds the compiler and the runtime into build/.
# Usage: scripts/build.sh [extra cmake -D options]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${ZERO_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/install-deps.sh"
if [ ! -f "$BUILD/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit "$@"
fi
ninja -C "$BUILD" -j "${ZERO_JOBS:-2}"
# The CUDA backend (CUDA streams/events, cuBLAS, NCCL by dlopen) is compiled and
# linked wherever the toolkit is, as its own zero-run, so the CPU build's
# zero-run stays free of CUDA libraries; zrt-kernel-tables (run by test.sh)
# checks that it has every CPU kernel.
if [ -x /usr/local/cuda/bin/nvcc ] && [ "${ZERO_SKIP_CUDA:-0}" != 1 ]; then
  if [ ! -f "$BUILD/runtime-cuda/build.ninja" ]; then
    cmake -S "$ROOT/runtime" -B "$BUILD/runtime-cuda" -G Ninja \
      -DCMAKE_BUILD_TYPE=Release -DZRT_ENABLE_CUDA=ON -DZRT_BUILD_TESTS=OFF
  fi
  ninja -C "$BUILD/runtime-cuda" -j "${ZERO_JOBS:-2}" zero-run zrt-kernel-tables
fi
