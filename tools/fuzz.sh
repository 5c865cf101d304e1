#!/usr/bin/env bash
# Runs every libFuzzer target of a COLLIE_FUZZ build for a while each, from its checked-in corpus
# (tests/fuzz/corpus/<target>) into a scratch copy, and prints per target the executions and the
# coverage libFuzzer ends with. Fails on any crash, hang, leak or sanitizer report; the input
# that caused it is left in <build>/fuzz/artifacts/.
# Usage: tools/fuzz.sh <fuzz build dir> <seconds per target> [target...]
# Also: tools/fuzz.sh <fuzz build dir> seeds  (rewrites the seed inputs of the corpora)
set -uo pipefail
build=${1:?fuzz build dir}
seconds=${2:?seconds per target}
shift 2
src=$(cd "$(dirname "$0")/.." && pwd)
corpora=$src/tests/fuzz/corpus
if [ "$seconds" = seeds ]; then
  exec "$build/bin/collie-fuzz-seeds" "$corpora"
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for exe in "$build"/bin/collie-fuzz-*; do
    name=${exe##*/collie-fuzz-}
    [ "$name" = seeds ] || targets+=("$name")
  done
fi
work=$build/fuzz
mkdir -p "$work/artifacts"
export COLLIE_DEBUG=NONE
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=()
printf '%-14s %12s %10s %8s %8s  %s\n' target executions exec/s cov ft result
for t in "${targets[@]}"; do
  scratch=$work/corpus-$t
  rm -rf "$scratch" && mkdir -p "$scratch"
  cp "$corpora/$t"/* "$scratch"/ 2>/dev/null
  log=$work/$t.log
  "$build/bin/collie-fuzz-$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=20 \
    -rss_limit_mb=4096 -max_len=4096 -artifact_prefix="$work/artifacts/$t-" "$scratch" \
    >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  result=ok
  if [ $rc -ne 0 ] || grep -q 'ERROR: \(Address\|Leak\|libFuzzer\)\|runtime error:' "$log"; then
    result="FAILED (rc $rc, see $log)"
    failed+=("$t")
  fi
  printf '%-14s %12s %10s %8s %8s  %s\n' "$t" "${execs:-?}" "${speed:-?}" "${cov:-?}" "${ft:-?}" \
    "$result"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in: ${failed[*]} (inputs in $work/artifacts/)" >&2
  exit 1
fi
