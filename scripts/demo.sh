#!/usr/bin/env bash
# The main job on the bundled default model (GPT-2 fixture): build, import the
# ONNX export with static shapes, and print what was imported.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${ZERO_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/build.sh" >/dev/null
OUT="$BUILD/demo"
mkdir -p "$OUT"
MODEL="$ROOT/test/models/gpt2.onnx"
echo "zero-opt $MODEL --input-shape input_ids=2x8 -o $OUT/gpt2.mlir"
"$BUILD/bin/zero-opt" "$MODEL" --input-shape input_ids=2x8 \
  -o "$OUT/gpt2.mlir" --weights-out "$OUT/gpt2.safetensors" --summary
