#!/usr/bin/env bash
# Builds the GPU run kit into DIR (docs/gpu-kit.md): a self-contained folder that
# checks the CUDA backend on any machine with an NVIDIA GPU, one command:
#   DIR/run.sh OUT     -> OUT/gpu-check.json, OUT/gpu-check.log
# It holds the CUDA zero-run with the shared libraries a GPU machine may lack
# (Open MPI, OpenBLAS, gfortran, libstdc++: packed in zero-run-cuda.tar.gz, as
# the binary and OpenBLAS are 37 MB each; CUDA's own libraries are not bundled,
# run.sh finds them there), every fixture's program, inputs and CPU outputs, a
# 3-step training run of the GPT-2 and Llama loss fixtures, and, where
# build/bench/gpt2_small.onnx exists (bench/make_gpt2_small.sh), GPT-2-small's
# training step and forward without weights for the headline figure.
# Run after scripts/build.sh, which builds the CUDA zero-run where nvcc is.
# Usage: scripts/gpu-kit.sh DIR [--no-headline] [--only CASE,CASE]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${ZERO_BUILD_DIR:-$ROOT/build}"
PY="${ZERO_PYENV:-$BUILD/pyenv}/bin/python"
KIT="" HEADLINE=1 ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-headline) HEADLINE=0 ;;
    --only) ONLY="$2"; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-kit.sh: unknown option $1" >&2; exit 2 ;;
    *) [ -z "$KIT" ] || { echo "gpu-kit.sh: one DIR only" >&2; exit 2; }; KIT="$1" ;;
  esac
  shift
done
[ -n "$KIT" ] || { echo "usage: scripts/gpu-kit.sh DIR [--no-headline] [--only CASE,...]" >&2; exit 2; }
CUDA_RUN="$BUILD/runtime-cuda/tools/zero-run/zero-run"
for f in "$CUDA_RUN" "$BUILD/bin/zero-opt" "$BUILD/bin/zero-run" "$PY"; do
  if [ ! -x "$f" ]; then
    echo "gpu-kit.sh: missing $f (run scripts/build.sh, which builds the CUDA zero-run where" \
         "/usr/local/cuda/bin/nvcc is, and scripts/setup-pyenv.sh test)" >&2
    exit 1
  fi
done
# The kit is written whole into a fresh folder, then renamed into place.
KIT="$(mkdir -p "$(dirname "$KIT")" && cd "$(dirname "$KIT")" && pwd)/$(basename "$KIT")"
STAGE="$(mktemp -d "$(dirname "$KIT")/.gpu-kit.XXXXXX")"
chmod 755 "$STAGE"
WORK="$(mktemp -d)"
trap 'rm -rf "$STAGE" "$WORK"' EXIT
t0=$SECONDS

# 1. zero-run (CUDA build) and the shared libraries it needs, but glibc's own
# (every Linux has them) and CUDA's (the GPU machine has them, in its toolkit or
# in the nvidia-* Python wheels; ~600 MB): Open MPI (zero-run never starts MPI
# without a launcher: only its libraries must load), OpenBLAS (the CPU backend's
# fallback products), libstdc++ (an older distribution may have an older one).
mkdir -p "$WORK/pack/bin" "$WORK/pack/lib"
if command -v strip >/dev/null; then
  strip --strip-unneeded -o "$WORK/pack/bin/zero-run" "$CUDA_RUN"
else
  cp "$CUDA_RUN" "$WORK/pack/bin/zero-run"
fi
SYSTEM_LIBS='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libutil|libresolv)\.so'
CUDA_LIBS='^(libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia-.*)\.so'
ldd "$CUDA_RUN" > "$WORK/ldd.txt"
if grep -q 'not found' "$WORK/ldd.txt"; then
  echo "gpu-kit.sh: $CUDA_RUN has unresolved libraries:" >&2; cat "$WORK/ldd.txt" >&2; exit 1
fi
bundled=()
while read -r soname _ path _; do
  [ -n "${path:-}" ] && [ -f "$path" ] || continue
  if [[ $soname =~ $SYSTEM_LIBS || $soname =~ $CUDA_LIBS ]]; then continue; fi
  cp -L "$path" "$WORK/pack/lib/$soname"
  bundled+=("$soname")
done < <(grep '=>' "$WORK/ldd.txt")
chmod 644 "$WORK/pack/lib/"*
strip --strip-unneeded "$WORK/pack/lib/"* 2>/dev/null || true
# The newest glibc symbol version anything packed needs (the GPU machine's glibc
# must be at least that; run.sh says so when it is not).
GLIBC_NEEDED=$(objdump -T "$WORK/pack/bin/zero-run" "$WORK/pack/lib/"* 2>/dev/null \
  | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
# Packed: the binary and OpenBLAS are 37 MB each and compress 4x.
tar -C "$WORK/pack" -czf "$STAGE/zero-run-cuda.tar.gz" bin lib

# 2. The cases, their CPU references, the headline programs.
GPT2_SMALL=""
if [ "$HEADLINE" = 1 ]; then
  if [ -s "$BUILD/bench/gpt2_small.onnx" ]; then
    GPT2_SMALL="$BUILD/bench/gpt2_small.onnx"
  else
    echo "gpu-kit.sh: no $BUILD/bench/gpt2_small.onnx (bench/make_gpt2_small.sh makes it;" \
         "it needs torch): the kit has no headline figure" >&2
  fi
fi
"$PY" "$ROOT/scripts/gpu-kit/make_kit.py" --zero-opt "$BUILD/bin/zero-opt" \
  --zero-run "$BUILD/bin/zero-run" --models "$ROOT/test/models" --kit "$STAGE" \
  --gpt2-small "$GPT2_SMALL" --work "$WORK" --only "$ONLY"

# 3. The scripts that run on the GPU machine, and what this kit was built from.
cp "$ROOT/scripts/gpu-kit/run.sh" "$ROOT/scripts/gpu-kit/kit.py" \
   "$ROOT/scripts/gpu-kit/torch_gpt2.py" "$STAGE/"
chmod +x "$STAGE/run.sh"
COMMIT="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
DIRTY="$(git -C "$ROOT" status --porcelain 2>/dev/null | grep -qv '^??' && echo true || echo false)"
"$PY" - "$STAGE/kit.json" "$COMMIT" "$DIRTY" "$GLIBC_NEEDED" "${bundled[@]}" <<'EOF'
import hashlib, json, platform, sys, time
path, commit, dirty, glibc, *libs = sys.argv[1:]
json.dump({"commit": commit, "uncommitted_changes": dirty == "true",
           "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "built_on": platform.platform(), "glibc_needed": glibc,
           "bundled_libs": libs,
           "not_bundled": "glibc; CUDA's libcudart.so.13, libcublas.so.13, libcublasLt.so.13 "
                          "(and libnccl.so.2, dlopened only for several ranks): run.sh finds "
                          "them in python3's nvidia/* wheels or a CUDA toolkit"},
          open(path, "w"), indent=1)
EOF
rm -rf "$KIT"
mv "$STAGE" "$KIT"
size=$(du -sk "$KIT" | cut -f1)
echo "gpu-kit.sh: wrote $KIT ($((size / 1024)) MiB, $((SECONDS - t0)) s; glibc >= $GLIBC_NEEDED;" \
     "bundled: ${bundled[*]})"
if [ "$size" -gt $((48 * 1024)) ]; then
  echo "gpu-kit.sh: the kit is over 48 MiB" >&2
  exit 1
fi
echo "run it on a GPU machine: $KIT/run.sh OUT   (dry run here: ZRT_KIT_BACKEND=cpu $KIT/run.sh OUT)"
