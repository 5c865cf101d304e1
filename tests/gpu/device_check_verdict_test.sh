#!/usr/bin/env bash
# The device check's verdict, on a CPU: device_check.sh runs against stand-in executables
# (SKIP_BUILD=1) and a GPU count it is told (GPU_COUNT). It must pass only when every step ran
# and passed; a step over its time budget, a GPU test that skipped or a build without NCCL fails
# it, as does a perf run that printed no result; a MultiGpu test skipped on one GPU does not; no
# GPU at all ends "result skipped" (exit 0).
set -u
CHECK="$(cd "$(dirname "$0")" && pwd)/device_check.sh"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
BAD=0

# Stand-ins: gtest binaries print a summary (and FAKE_SKIP's test as skipped); collie-run
# prints a collie-perf result row (none with FAKE_NO_ROWS) and NCCL's same-GPU refusal; the
# rest succeed.
make_build() {
  local dir=$1 nccl=$2
  mkdir -p "$dir/bin"
  for t in collie-gpu-tests collie-gpu-multiproc-tests; do
    cat >"$dir/bin/$t" <<'FAKE'
#!/usr/bin/env bash
[ -n "${FAKE_SKIP:-}" ] && echo "[  SKIPPED ] $FAKE_SKIP (0 ms)"
echo "[  PASSED  ] 3 tests."
FAKE
  done
  cat >"$dir/bin/collie-run" <<'FAKE'
#!/usr/bin/env bash
[ -n "${FAKE_NO_ROWS:-}" ] || echo "1048576 262144 float sum -1 9.1 115.2 172.8 0 9.0 116.5 174.7 0"
echo "ranks 0 and 1 use the same GPU"
FAKE
  printf '#!/usr/bin/env bash\nexit 0\n' >"$dir/bin/collie-kernel-bench"
  printf '#!/usr/bin/env bash\nexit 0\n' >"$dir/bin/collie-perf"
  chmod +x "$dir/bin/"*
  if [ "$nccl" = 1 ]; then
    echo "COLLIE_NCCL_LIBRARY:FILEPATH=/opt/nccl/lib/libnccl.so" >"$dir/CMakeCache.txt"
  else
    : >"$dir/CMakeCache.txt"
  fi
}

# expect NAME WANT_RC WANT_RESULT NCCL ENV...: runs the check, compares exit code and verdict.
expect() {
  local name=$1 want_rc=$2 want=$3 nccl=$4
  shift 4
  local dir=$WORK/$name
  make_build "$dir" "$nccl"
  env BUILD_DIR="$dir" SKIP_BUILD=1 "$@" bash "$CHECK" "$dir/summary.txt" >"$dir/out.log" 2>&1
  local rc=$?
  local got
  got=$(sed -n 's/^result //p' "$dir/summary.txt" | tail -1)
  if [ "$rc" != "$want_rc" ] || [ "$got" != "$want" ]; then
    echo "FAIL $name: exit $rc result '$got', expected exit $want_rc result '$want'"
    sed 's/^/    /' "$dir/out.log"
    BAD=1
  else
    echo "ok   $name: exit $rc, result $got"
  fi
}

expect no_gpu 0 skipped 1 GPU_COUNT=0
expect all_steps_ran 0 passed 1 GPU_COUNT=1
expect over_budget 1 failed 1 GPU_COUNT=1 BUDGET_S=0
expect gpu_test_skipped 1 failed 1 GPU_COUNT=1 FAKE_SKIP=DeviceWorld.EveryCollectiveTwoRanksOneGpu
expect multi_gpu_test_on_one_gpu 0 passed 1 GPU_COUNT=1 FAKE_SKIP=DeviceWorld.MultiGpuX
expect multi_gpu_test_on_two_gpus 1 failed 1 GPU_COUNT=2 FAKE_SKIP=DeviceWorld.MultiGpuX
expect no_nccl_in_build 1 failed 0 GPU_COUNT=1
expect perf_measured_nothing 1 failed 1 GPU_COUNT=1 FAKE_NO_ROWS=1
exit "$BAD"
