#!/usr/bin/env bash
# clang-format (.clang-format: LLVM style) on the C, C++ and CUDA lines changed
# since the commit that .clang-format-baseline names: new and edited lines
# follow the style, the lines before it stay as they are (reformatting the
# whole tree at once would bury its history). Run by test/Structure/format.test.
# Usage: scripts/check-format.sh [REPO]   exits 1, printing the diff to apply
# (or run `git clang-format BASELINE`), when a changed line is off-style.
set -euo pipefail
REPO="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
base="$(tr -d '[:space:]' < "$REPO/.clang-format-baseline")"
out="$(cd "$REPO" && git clang-format --binary clang-format --diff \
         --extensions c,h,cc,cpp,cu,cuh "$base" -- . 2>&1)" || { echo "$out" >&2; exit 1; }
case "$out" in
  diff*)
    echo "$out"
    echo "check-format: lines changed since ${base:0:12} do not follow .clang-format;" \
         "apply the diff above (git clang-format $base)" >&2
    exit 1 ;;
esac
echo "check-format: the lines changed since ${base:0:12} follow .clang-format"
