#!/usr/bin/env bash
# The runtime under AddressSanitizer + UndefinedBehaviorSanitizer, and its
# file readers under libFuzzer. Builds runtime/ with clang into
# build/sanitize (every report fatal), runs the runtime's own tests there
# (unit, kernel, loader, executor, communicator and zero-run tests: the
# documented sanitizer subset of the suite; the compiler links the
# uninstrumented LLVM/MLIR libraries and is covered by the mutation driver in
# test/fuzz instead), then fuzzes the .zrt loader, the safetensors reader and
# the .npy reader for SECONDS each from seeds made here and the committed
# regression inputs in runtime/fuzz/regressions/.
# Usage: scripts/sanitize.sh [SECONDS]     (default 20; CI runs it short)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${ZERO_BUILD_DIR:-$ROOT/build}"
SAN="$BUILD/sanitize"
SECONDS_EACH="${1:-20}"
"$ROOT/scripts/install-deps.sh"
if [ ! -f "$SAN/build.ninja" ]; then
  cmake -S "$ROOT/runtime" -B "$SAN" -G Ninja \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZRT_ENABLE_CUDA=OFF \
    -DZRT_SANITIZE=address,undefined -DZRT_BUILD_FUZZERS=ON
fi
ninja -C "$SAN" -j "${ZERO_JOBS:-2}"

# Open MPI's own allocations are not ours to report; everything else is fatal.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
eval "$(PYTHONPATH="$ROOT/test/kit" python3 -m zerokit.mpi root oversubscribe yield_when_idle)"
(cd "$SAN" && ctest --output-on-failure -j "${ZERO_TEST_JOBS:-2}")

# Seeds: a real program and its weights from zero-opt, and .npy arrays.
CORPUS="$SAN/corpus"
mkdir -p "$CORPUS/program" "$CORPUS/safetensors" "$CORPUS/npy" "$SAN/artifacts"
if [ -x "$BUILD/bin/zero-opt" ]; then
  "$BUILD/bin/zero-opt" "$ROOT/test/models/mlp.onnx" --input-shape x=2x16 \
    --zero-pipeline="stage=3 dp=2 prefetch=1 bucket-bytes=4096" --emit=zrt \
    -o "$CORPUS/program/mlp.zrt" --weights-out "$CORPUS/safetensors/mlp.safetensors"
fi
PY="${ZERO_PYENV:-$BUILD/pyenv}/bin/python"
if [ -x "$PY" ]; then
  "$PY" - "$CORPUS/npy" <<'PYEOF'
import sys, numpy as np
d = sys.argv[1]
np.save(f"{d}/f32.npy", np.arange(12, dtype=np.float32).reshape(3, 4))
np.save(f"{d}/i64.npy", np.arange(5, dtype=np.int64))
np.save(f"{d}/bool.npy", np.array([True, False]))
PYEOF
fi
status=0
for target in program safetensors npy; do
  echo "sanitize: fuzzing the $target reader for ${SECONDS_EACH}s"
  if ! "$SAN/fuzz/zrt-fuzz-$target" -max_total_time="$SECONDS_EACH" -timeout=10 \
      -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$SAN/artifacts/$target-" \
      "$CORPUS/$target" "$ROOT/runtime/fuzz/regressions/$target" \
      > "$SAN/fuzz-$target.log" 2>&1; then
    tail -40 "$SAN/fuzz-$target.log"
    echo "sanitize: the $target fuzzer found a failure; the input is in $SAN/artifacts/" \
         "(add it to runtime/fuzz/regressions/$target/ with the fix)"
    status=1
  fi
done
exit $status
