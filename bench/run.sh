#!/usr/bin/env bash
# Runs every benchmark; each prints its figures as ratios against a baseline
# measured in the same invocation. Not part of the tests (no timed assertions).
#   import   zero-opt on GPT-2-small: wall time, peak RSS / weight bytes
#   latency  zero-run vs onnxruntime forward time; memory plan vs bounds
#   matmul   MatMul/Gemm kernels vs OpenBLAS sgemm at GPT-2-small shapes
#   vecmath  f32 exp/log/tanh/erf/sigmoid (math/VecMath.h) vs scalar libm
#   zero     GPT-2-small at N = 1, 2, 4 ranks: memory, prefetch, traffic
#   peers    GPT-2-small forward: zero-run vs PyTorch eager, onnxruntime and
#            FSDP2 at 2 and 4 ranks (bench/peers.py; ~10-15 min, so only when named)
# Usage: bench/run.sh [import|latency|matmul|vecmath|zero|peers ...]
#        (default: import latency matmul vecmath zero)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${ZERO_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/build.sh" >/dev/null
VENV="$("$ROOT/scripts/setup-pyenv.sh" full | tail -n 1)"
"$ROOT/bench/make_gpt2_small.sh" "$BUILD/bench" >/dev/null
THREADS="${THREADS:-2}"
for what in "${@:-import latency matmul vecmath zero}"; do
  for w in $what; do
    echo "== $w"
    case "$w" in
      import) "$ROOT/bench/import_bench.sh" ;;
      latency) "$VENV/bin/python" "$ROOT/bench/runtime_bench.py" latency --build "$BUILD" --threads "$THREADS" ;;
      matmul) "$BUILD/bench/zrt-matmul-bench" "$THREADS" 9 ;;
      vecmath) "$BUILD/bench/zrt-vecmath-bench" ;;
      zero) "$VENV/bin/python" "$ROOT/bench/runtime_bench.py" zero --build "$BUILD" --runs 3 ;;
      peers) "$VENV/bin/python" "$ROOT/bench/peers.py" --build "$BUILD" --threads "$THREADS" ;;
      *) echo "unknown benchmark $w" >&2; exit 2 ;;
    esac
  done
done
