#!/usr/bin/env bash
# Installs the Debian packages the compiler, the runtime and the tests need.
# Idempotent: packages already present are skipped, so a second run is quick.
set -euo pipefail
PKGS=(
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libonnx-dev libprotobuf-dev protobuf-compiler
  libopenmpi-dev openmpi-bin libopenblas-dev
  libflatbuffers-dev flatbuffers-compiler nlohmann-json3-dev libxxhash-dev
  libgtest-dev cmake ninja-build python3 clang clang-format libclang-rt-14-dev
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
