#!/usr/bin/env bash
# Prints the tuner's link figures of this machine, in COLLIE_TUNER_LINKS form, from 2-rank ring
# AllReduces over each transport: at n = 2 the ring is two messages of S/2, so the 8 B time is
# 2 alpha and the large-message time is 2 alpha + S / beta. Run it on an idle machine; the
# table in src/core/tuning/tuner.h holds the figures it printed on the reference machine.
#   usage: tools/calibrate_links.sh [build-dir]
set -euo pipefail
build=${1:-build}
run() {  # transport size -> out-of-place time in us (median of the tool's iterations)
  COLLIE_ALGO=ring COLLIE_TRANSPORT=$1 timeout 300 "$build/bin/collie-run" -n 2 \
    "$build/bin/collie-perf" -b "$2" -e "$2" -n "$3" -w 5 -c 0 |
    awk '!/^#/ && NF >= 8 { print $6; exit }'
}
big=$((64 << 20))
out=""
for t in shm tcp; do
  small=$(run "$t" 8 2000)
  large=$(run "$t" "$big" 10)
  spec=$(awk -v s="$small" -v l="$large" -v b="$big" -v t="$t" 'BEGIN {
    a = s / 2; beta = b / ((l - 2 * a) * 1e3);
    printf "%s=%.2f:%.2f", t, a, beta }')
  echo "# $t: 8 B in $small us, 64 MiB in $large us -> $spec" >&2
  out="${out:+$out,}$spec"
done
echo "COLLIE_TUNER_LINKS=$out"
