#!/usr/bin/env bash
# Builds everything and runs every test: lit (IR and end-to-end), the runtime's
# unit tests and the multi-rank MPI tests, the importer mutation driver and
# the conformance cases, all driven by ctest; then the runtime under
# sanitizers and its readers under libFuzzer (scripts/sanitize.sh).
# Works on a fresh machine: installs Debian packages and a small Python
# virtualenv (build/pyenv: numpy, onnx, safetensors) for the test drivers.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${ZERO_BUILD_DIR:-$ROOT/build}"
export ZERO_PYENV="$BUILD/pyenv"
"$ROOT/scripts/build.sh"
"$ROOT/scripts/setup-pyenv.sh" test >/dev/null
# Open MPI's settings for the runtime's MPI tests (allowed as root, more ranks
# than cores), from the test kit, which every driver takes them from too.
eval "$(PYTHONPATH="$ROOT/test/kit" "$ZERO_PYENV/bin/python" -m zerokit.mpi root oversubscribe)"
cd "$BUILD"
ctest --output-on-failure -j "${ZERO_TEST_JOBS:-2}" "$@"
# The layout tests again at each instruction set below this CPU's best
# (ZRT_CPU_ISA lowers the one the CPU kernels' products run): outputs and
# trained weights bit-identical across threads, ranks, micro-batches, ZeRO
# stages and pipeline layouts, within each ISA. So CI on an AVX-512 machine
# proves AVX2 and generic too. ZERO_SKIP_LOWER_ISAS=1 leaves it out.
lower_isas() {
  local flags
  flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
  if [[ $flags == *" fma "* && $flags == *" avx512f "* && $flags == *" avx512_bf16 "* ]]; then
    echo avx512 avx2 generic
  elif [[ $flags == *" fma "* && $flags == *" avx512f "* ]]; then
    echo avx2 generic
  elif [[ $flags == *" fma "* && $flags == *" avx2 "* ]]; then
    echo generic
  fi
}
if [ "${ZERO_SKIP_LOWER_ISAS:-0}" != 1 ] && [ $# -eq 0 ]; then
  for isa in $(lower_isas); do
    echo "test.sh: the layout tests at ZRT_CPU_ISA=$isa"
    ZRT_CPU_ISA=$isa ctest --output-on-failure -j "${ZERO_TEST_JOBS:-2}" -L kernels
    ZRT_CPU_ISA=$isa ctest --output-on-failure -j "${ZERO_TEST_JOBS:-2}" -R '^train-(dp|pp)-'
    ZRT_CPU_ISA=$isa /usr/lib/llvm-22/bin/lit -sv "$BUILD/test" --filter 'e2e/|property/'
  done
fi
# The CUDA backend (compiled, not run: no GPU here) has every CPU kernel.
if [ -x "$BUILD/runtime-cuda/zrt-kernel-tables" ]; then
  "$BUILD/runtime-cuda/zrt-kernel-tables"
fi
# The runtime again under ASan + UBSan (its own tests), then its file readers
# under libFuzzer for a short fixed budget each (scripts/sanitize.sh; set
# ZERO_SKIP_SANITIZE=1 to leave it out of a local run).
if [ "${ZERO_SKIP_SANITIZE:-0}" != 1 ]; then
  "$ROOT/scripts/sanitize.sh" "${ZERO_FUZZ_SECONDS:-10}"
fi
# Nothing in the suite may have replaced the machine's /dev/null.
if [ ! -c /dev/null ]; then
  echo "test.sh: /dev/null is no longer a character device: a test or tool replaced it" >&2
  exit 1
fi
