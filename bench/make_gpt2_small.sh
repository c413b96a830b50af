#!/usr/bin/env bash
# Exports a GPT-2-small-size model (GPT2LMHeadModel default config: 12 layers,
# 768 hidden, 12 heads, 50257 vocab, ~124M parameters; random init, no download)
# to build/bench/gpt2_small.onnx with the dynamo ONNX exporter (logits only,
# input input_ids int64[batch,seq]). ~500 MB; never committed.
# Usage: bench/make_gpt2_small.sh [OUT_DIR]   (default: build/bench)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$ROOT/build/bench}"
if [ -s "$OUT/gpt2_small.onnx" ]; then
  echo "$OUT/gpt2_small.onnx exists; skipping (delete it to regenerate)"
  exit 0
fi
VENV="$("$ROOT/scripts/setup-pyenv.sh" full | tail -n 1)"
mkdir -p "$OUT"
"$VENV/bin/python" "$ROOT/test/models/export.py" --gpt2-small "$OUT"
echo "wrote $OUT/gpt2_small.onnx"
