#!/bin/bash
# Compares two zero-run builds' --simulate results: every PROGRAM.zrt on every
# machine description in MACHINES_DIR, without --nodes and with --nodes 1, 2,
# 4, 8 and 16, both binaries writing --report-json and --trace; the outputs,
# exit codes and files must be equal byte for byte. For a change to the
# simulator that must not change its results (run/Simulation.cpp).
#
#   scripts/compare-simulations.sh OLD_ZERO_RUN NEW_ZERO_RUN MACHINES_DIR \
#       PROGRAM.zrt...
#
# Prints each difference and "compared N runs, D differ"; exits 1 if any
# differ.
set -u
if [ $# -lt 4 ]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
old=$1 new=$2 machines=$3
shift 3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
runs=0 differ=0
for program in "$@"; do
  for machine in "$machines"/*.json; do
    for nodes in 0 1 2 4 8 16; do
      args=()
      [ "$nodes" -gt 0 ] && args=(--nodes "$nodes")
      for side in old new; do
        bin=$old
        [ $side = new ] && bin=$new
        # The same file names for both: messages may name them.
        "$bin" "$program" --simulate "$machine" "${args[@]}" \
          --report-json "$out/run.json" --trace "$out/run.trace" \
          >"$out/$side.out" 2>&1
        echo $? >"$out/$side.rc"
        for f in json trace; do
          [ -e "$out/run.$f" ] && mv "$out/run.$f" "$out/$side.$f"
        done
      done
      runs=$((runs + 1))
      what="$(basename "$program") on $(basename "$machine") --nodes $nodes"
      for f in rc out json trace; do
        if [ -e "$out/old.$f" ] || [ -e "$out/new.$f" ]; then
          if ! cmp -s "$out/old.$f" "$out/new.$f"; then
            echo "differ: $what ($f)"
            differ=$((differ + 1))
            break
          fi
        fi
      done
      rm -f "$out"/old.* "$out"/new.*
    done
  done
done
echo "compared $runs runs, $differ differ"
[ "$differ" -eq 0 ]
