#!/usr/bin/env bash
# A repository of one C++ file under the project's .clang-format, its
# baseline the first commit, then a line added off-style; runs
# scripts/check-format.sh on it. Usage: format_broken_copy.sh SRC WORK
set -eu
src="$1"; work="$2"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
git init -q
cp "$src/.clang-format" .
printf 'int f(int x) {\n  return x;\n}\n' > a.cpp
git add -A
git -c user.email=test@localhost -c user.name=test commit -qm base
git rev-parse HEAD > .clang-format-baseline
printf 'int   g( int y ){return y;}\n' >> a.cpp
exec bash "$src/scripts/check-format.sh" "$work"
