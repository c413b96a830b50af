#!/usr/bin/env bash
# The checksums' share of a checkpoint's write time on GPT-2-small (124M
# parameters: a 1-rank checkpoint of 1.49 GB, model + Adam moments), with and
# without them, alternating, in one invocation (bench/ckpt_bench.cpp).
# Usage: bench/ckpt_bench.sh [REPS]   (needs torch once, for the export)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/build/bench"
"$ROOT/bench/make_gpt2_small.sh" "$OUT" >/dev/null
if [ ! -s "$OUT/gpt2_small.safetensors" ]; then
  "$ROOT/build/bin/zero-opt" "$OUT/gpt2_small.onnx" --input-shape input_ids=1x128 \
    -o /dev/null --weights-out "$OUT/gpt2_small.safetensors"
fi
ninja -C "$ROOT/build" zrt-ckpt-bench >/dev/null
"$ROOT/build/bench/zrt-ckpt-bench" "$OUT/gpt2_small.safetensors" "$OUT/ckpt-bench" "${1:-5}"
