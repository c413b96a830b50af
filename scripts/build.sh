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
