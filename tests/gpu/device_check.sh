#!/usr/bin/env bash
# The device check: on a machine with a CUDA GPU, builds Collie with CUDA, runs the GPU unit
# tests and the multi-process GPU tests, measures the reduction kernels against cudaMemcpy
# device-to-device, and runs collie-perf on device buffers for 1, 2 and 4 ranks sharing GPU 0,
# with Collie's backend and with NCCL's where NCCL accepts the launch; with several GPUs also one
# rank per GPU (peer access) and NCCL on 2 and 4 ranks. Writes one summary file and prints it.
# Verdict: "result passed" only when every step ran and passed. A step skipped (over the time
# budget, a GPU test that skipped, a missing NCCL) fails the check; only a machine with no GPU
# at all ends "result skipped" (exit 0). Steps this hardware cannot run (NCCL on more ranks than
# GPUs, multi-GPU steps on one GPU) are listed as not applicable and do not fail it.
#
# usage: tests/gpu/device_check.sh [SUMMARY_FILE]   (default: build-gpu/device_check_summary.txt)
# env:   BUILD_DIR (build-gpu), JOBS (all cores), BUDGET_S (600: later steps are skipped past it,
#        which fails the check), CUDA_ROOT (/usr/local/cuda), MAX_BYTES (1G: largest collie-perf
#        size), GPU_COUNT (overrides the detection), SKIP_BUILD (1: use BUILD_DIR as built);
#        the last two also let tests/gpu/device_check_verdict_test.sh run the script on a CPU
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-gpu}
SUMMARY=${1:-$BUILD_DIR/device_check_summary.txt}
JOBS=${JOBS:-$(nproc)}
BUDGET_S=${BUDGET_S:-600}
CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
MAX_BYTES=${MAX_BYTES:-1G}
START=$(date +%s)
mkdir -p "$BUILD_DIR" "$(dirname "$SUMMARY")"
LOGS=$BUILD_DIR/device_check_logs
mkdir -p "$LOGS"
: >"$SUMMARY"
SKIPPED=()
NA=()
FAILED=0

say() { echo "$*" | tee -a "$SUMMARY"; }
skip() { SKIPPED+=("$1"); say "skipped: $1"; }
na() { NA+=("$1"); say "not applicable: $1"; }
elapsed() { echo $(($(date +%s) - START)); }
in_budget() { [ "$(elapsed)" -lt "$BUDGET_S" ]; }

# The verdict, once: every step ran and passed, or failed (a skip counts as a failure).
verdict() {
  if [ "$FAILED" = 0 ] && [ "${#SKIPPED[@]}" = 0 ]; then
    say "result passed"
  else
    [ "${#SKIPPED[@]}" != 0 ] && say "failed: ${#SKIPPED[@]} step(s) skipped on a machine with a GPU"
    FAILED=1
    say "result failed"
  fi
}

finish() {
  say "elapsed_s $(elapsed)"
  say "skipped_count ${#SKIPPED[@]}"
  say "not_applicable_count ${#NA[@]}"
  for s in "${SKIPPED[@]}"; do echo "  skipped: $s"; done
  echo "summary written to $SUMMARY"
  exit "$FAILED"
}

say "# Collie device check, $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname)"

# 1. Is there a GPU? nvidia-smi when present, else the driver's device list.
GPUS=0
if command -v nvidia-smi >/dev/null 2>&1; then
  GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  [ "$GPUS" -gt 0 ] && say "gpus $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | sed 's/^ *//' | tr '\n' ';')"
elif [ -d /proc/driver/nvidia/gpus ]; then
  GPUS=$(ls /proc/driver/nvidia/gpus | wc -l)
fi
GPUS=${GPU_COUNT:-$GPUS}
say "gpu_count $GPUS"
if [ "$GPUS" -eq 0 ]; then
  skip "everything: no CUDA GPU on this machine (none from nvidia-smi or /proc/driver/nvidia)"
  say "result skipped"
  finish
fi

# 2. Build with CUDA (and NCCL when found).
if [ "${SKIP_BUILD:-0}" != 1 ] && [ ! -x "$CUDA_ROOT/bin/nvcc" ]; then
  skip "everything: no nvcc under $CUDA_ROOT (set CUDA_ROOT)"
  verdict
  finish
fi
say "step build"
if [ "${SKIP_BUILD:-0}" = 1 ]; then
  say "build skipped (SKIP_BUILD=1: $BUILD_DIR as built)"
elif ! cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOLLIE_WITH_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$CUDA_ROOT/bin/nvcc" -DCOLLIE_CUDA_ROOT="$CUDA_ROOT" \
    >"$LOGS/cmake.log" 2>&1 ||
  ! cmake --build "$BUILD_DIR" -j "$JOBS" --target collie-gpu-tests collie-gpu-multiproc-tests \
    collie-perf collie-run collie-kernel-bench >"$LOGS/build.log" 2>&1; then
  say "build FAILED (see $LOGS/build.log)"
  tail -20 "$LOGS/build.log"
  FAILED=1
  verdict
  finish
fi
HAVE_NCCL=$(grep -q 'COLLIE_NCCL_LIBRARY:FILEPATH=.*nccl' "$BUILD_DIR/CMakeCache.txt" && echo 1 || echo 0)
say "build ok (nccl in build: $HAVE_NCCL) after $(elapsed) s"
BIN=$BUILD_DIR/bin
export COLLIE_SOCKET_IFNAME=lo NCCL_SOCKET_IFNAME=lo
export LD_LIBRARY_PATH="$CUDA_ROOT/lib:$CUDA_ROOT/lib64:${LD_LIBRARY_PATH:-}"

# 3. GPU unit tests (ranks as threads), then the multi-process GPU tests (ranks as processes).
# A GPU test that skips on a GPU machine fails the check, except a MultiGpu one on one GPU and
# the peer half of a two-process test (it runs only as the child).
gtest_step() {
  local tag=$1 secs=$2 bin=$3 log=$LOGS/$1.log
  if ! in_budget; then
    skip "$tag: over the time budget (${BUDGET_S} s)"
    return
  fi
  if timeout "$secs" "$bin" >"$log" 2>&1; then
    passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log")
    say "$tag PASSED (${passed:-0} passed)"
  else
    say "$tag FAILED (see $log)"
    grep -E 'FAILED|Failure' "$log" | head -10 | tee -a "$SUMMARY"
    FAILED=1
  fi
  for t in $(sed -n 's/^\[  SKIPPED \] \([A-Za-z0-9_.\/]*\).*$/\1/p' "$log" | sort -u | grep -v PeerProcessPart); do
    if [ "$GPUS" -lt 2 ] && [[ $t == *MultiGpu* ]]; then
      na "gpu test $t: needs several GPUs"
    else
      skip "gpu test $t"
    fi
  done
}
say "step gpu_unit_tests"
gtest_step gpu_unit_tests 180 "$BIN/collie-gpu-tests"
say "step gpu_multiproc_tests"
gtest_step gpu_multiproc_tests 420 "$BIN/collie-gpu-multiproc-tests"

# 4. Kernel bandwidth against cudaMemcpy device-to-device.
say "step kernel_bench"
if ! in_budget; then
  skip "kernel_bench: over the time budget (${BUDGET_S} s)"
elif timeout 120 "$BIN/collie-kernel-bench" 1G 20 >"$LOGS/kernel_bench.log" 2>&1; then
  sed 's/^/kernel /' "$LOGS/kernel_bench.log" | tee -a "$SUMMARY"
else
  say "kernel_bench FAILED (see $LOGS/kernel_bench.log)"
  FAILED=1
fi

# busbw (out-of-place, in-place) of the largest size in a collie-perf log.
busbw_at_max() {
  awk '$1 ~ /^[0-9]+$/ && NF >= 13 { last = $1 " oop " $8 " ip " $12 " wrong " $9 "+" $13 } END { print last }' "$1"
}

# One collie-perf step: perf_step TAG SECONDS REPORT CMD...; REPORT is "busbw" (the largest
# size's busbw) or "times" (out-of-place time per size). Skipped past the budget.
perf_step() {
  local tag=$1 secs=$2 report=$3
  shift 3
  if ! in_budget; then
    skip "$tag: over the time budget (${BUDGET_S} s)"
    return
  fi
  local log=$LOGS/$tag.log rc=0
  timeout "$secs" "$@" >"$log" 2>&1 || rc=$?
  # A run that measured nothing has not passed.
  if [ "$rc" = 0 ] && [ -z "$(busbw_at_max "$log")" ]; then
    say "$tag FAILED (no result rows, see $log)"
    FAILED=1
  elif [ "$rc" = 0 ] && [ "$report" = times ]; then
    say "$tag ok (time us out-of-place per size):" \
      "$(awk '$1 ~ /^[0-9]+$/ && NF >= 13 { printf "%s=%s ", $1, $6 }' "$log")"
  elif [ "$rc" = 0 ]; then
    say "$tag ok: size $(busbw_at_max "$log") (busbw GB/s)"
  else
    say "$tag FAILED (rc $rc, see $log)"
    tail -5 "$log" | tee -a "$SUMMARY"
    FAILED=1
  fi
}

# 5. collie-perf on device buffers: 1, 2, 4 ranks sharing GPU 0 (CUDA_VISIBLE_DEVICES), each
# backend: Collie's device ring over cuda_ipc (COLLIE_CUDA_PATH=ipc), Collie staging through
# pinned host memory (staged), and NCCL. NCCL refuses two ranks on one GPU; Collie's init says
# so, which is checked once.
for n in 1 2 4; do
  for variant in collie:ipc collie:staged nccl:auto; do
    backend=${variant%%:*}
    path=${variant#*:}
    if [ "$n" = 1 ] && [ "$path" = staged ]; then continue; fi  # one rank exchanges nothing
    tag="perf_${backend}_n${n}"
    [ "$backend" = collie ] && [ "$n" -gt 1 ] && tag="perf_collie_${path}_n${n}"
    if [ "$backend" = nccl ] && [ "$HAVE_NCCL" != 1 ]; then
      skip "$tag: this build has no NCCL"
      continue
    fi
    visible=0
    if [ "$backend" = nccl ] && [ "$n" -gt 1 ]; then
      if [ "$GPUS" -ge "$n" ]; then
        visible=$(seq -s, 0 $((n - 1)))  # one GPU per rank: what NCCL accepts
      else
        if [ "$n" = 2 ] && ! in_budget; then
          skip "nccl_two_ranks_one_gpu: over the time budget (${BUDGET_S} s)"
        elif [ "$n" = 2 ]; then
          # The launch NCCL refuses: Collie must say so at init, clearly.
          CUDA_VISIBLE_DEVICES=0 timeout 60 "$BIN/collie-run" -n 2 "$BIN/collie-perf" --device \
            --backend nccl -b 1M -e 1M -n 1 >"$LOGS/nccl_same_gpu.log" 2>&1
          if grep -q "use the same GPU" "$LOGS/nccl_same_gpu.log"; then
            say "nccl_two_ranks_one_gpu refused at init with the fix (ok)"
          else
            say "nccl_two_ranks_one_gpu: expected a clear refusal, see $LOGS/nccl_same_gpu.log"
            FAILED=1
          fi
        fi
        na "$tag: NCCL allows one rank per GPU and $GPUS GPU(s) are visible"
        continue
      fi
    fi
    perf_step "$tag" 150 busbw env CUDA_VISIBLE_DEVICES="$visible" COLLIE_CUDA_PATH="$path" \
      "$BIN/collie-run" -n "$n" "$BIN/collie-perf" \
      --device --backend "$backend" -b 1M -e "$MAX_BYTES" -f 4 -n 10 -w 2 -c 1
  done
done

# 5b. Several GPUs: one rank per GPU, Collie's device ring over peer access (or staged where the
# GPUs have none: the ranks vote, and the log says which).
for n in 2 4; do
  if [ "$GPUS" -lt "$n" ]; then
    na "perf_collie_gpu_per_rank_n$n: $GPUS GPU(s) visible"
    continue
  fi
  perf_step "perf_collie_gpu_per_rank_n$n" 150 busbw env CUDA_VISIBLE_DEVICES="$(seq -s, 0 $((n - 1)))" \
    "$BIN/collie-run" -n "$n" "$BIN/collie-perf" --device -b 1M -e "$MAX_BYTES" -f 4 -n 10 -w 2 -c 1
done

# 6. The device ring against the device tree, forced, 4 ranks, small to medium sizes: where
# they cross is what the choice between them (kDeviceHopUs, kDeviceGBps in src/core/device/cuda_path.h)
# should say.
for algo in ring tree; do
  perf_step "perf_collie_ipc_${algo}_n4" 90 times env CUDA_VISIBLE_DEVICES=0 COLLIE_CUDA_PATH=ipc \
    COLLIE_ALGO="$algo" "$BIN/collie-run" -n 4 "$BIN/collie-perf" --device -b 8 -e 64M -f 8 \
    -n 20 -w 3 -c 1
done

# 7. The other collectives on device buffers, 2 ranks sharing GPU 0, checked (-c 1): the
# staged path cuts each one into strided pinned chunks.
for coll in reduce_scatter all_gather broadcast reduce; do
  perf_step "perf_collie_${coll}_n2" 90 busbw env CUDA_VISIBLE_DEVICES=0 "$BIN/collie-run" -n 2 \
    "$BIN/collie-perf" "$coll" --device -b 1M -e 256M -f 16 -n 5 -w 1 -c 1
done

verdict
finish
