#!/usr/bin/env bash
# validate_sim.sh: collie-sim's predictions against collie-perf's measurements.
#
#   validate_sim.sh [BIN_DIR] [netns|tcp|shm ...]     (default: build/bin, all three)
#
# For each setting the link parameters come from 2-rank runs (calibration), fitted through
# the simulator itself so that they mean what the model means by them; the prediction is then
# checked on larger runs of both algorithms the simulator models:
#   alpha, beta = the pair that fits the simulated 2-rank ring best to the measured one at
#            1-16 MiB (least squares of the relative error)
#   cache, memory slowdown (one host only) = the pair, from a grid, whose alpha and beta
#            leave the smallest error
#   reduce = the one that makes the simulated 2-rank recursive doubling take the measured time
#            at 16 MiB (its one reduction is not overlapped); free when the transfer explains it
#   cores per local flow (one host only) = the one, from a grid, that fits the 3-rank ring best:
#            the first run with more ranks than this machine's 2 cores
# Every run is collie-perf -z 3 -R $REPEATS (default 5), taking the fastest sweep at each size
# (the model predicts a machine nothing else disturbs): a barrier between iterations, timed
# without it, since the simulator predicts one collective from a common start (back to back,
# recursive doubling's iterations overlap and collide on the links).
# Settings:
#   netns  hosts of tests/netns/netns_hosts.sh, one rank each, links tbf-limited to $RATE
#          (default 1gbit); validated on $NETNS_HOSTS hosts (default 4; needs root,
#          skipped otherwise)
#   tcp    one host, COLLIE_TRANSPORT=tcp (loopback); validated on 3, 4, 6 and 8 ranks
#   shm    one host, COLLIE_TRANSPORT=shm, the stream algorithms (ring, recursive doubling)
#          over shared-memory rings; validated on 3, 4, 6 and 8 ranks
# Prints one table row per (setting, ranks, algorithm, size >= 1 MiB) with the measured and
# predicted times and their ratio; exits 1 if any prediction misses by more than $TOLERANCE
# (default 0.25) of the measurement.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${1:-build/bin}
shift || true
SETTINGS=("$@")
[ ${#SETTINGS[@]} -gt 0 ] || SETTINGS=(netns tcp shm)
RATE=${RATE:-1gbit}
NETNS_HOSTS=${NETNS_HOSTS:-4}
TOLERANCE=${TOLERANCE:-0.25}
MAXB=16M
MAXB_BYTES=16777216
VSIZES="1048576 2097152 4194304 8388608 16777216"
ITERS=${ITERS:-10}
REPEATS=${REPEATS:-5}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/validate_sim.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
for tool in collie-perf collie-sim collie-run; do
  [ -x "$BIN/$tool" ] || { echo "validate_sim: $BIN/$tool not built" >&2; exit 2; }
done

# measure SETTING NRANKS ALGO -> "size time_us" lines (mean of out-of-place and in-place).
measure() {
  local setting=$1 n=$2 algo=$3 out="$WORK/perf.$1.$2.$3"
  local perf=(env COLLIE_ALGO="$algo" "$BIN/collie-perf" -b 8 -e $MAXB -f 2 -n "$ITERS" -w 3 -c 0 -z 3 -R "$REPEATS")
  case $setting in
    netns) timeout 900 bash "$HERE/netns_hosts.sh" -k "$n" -r "$RATE" -t 800 -- "${perf[@]}" ;;
    tcp) COLLIE_TRANSPORT=tcp timeout 900 "$BIN/collie-run" -n "$n" --timeout 800 "${perf[@]}" ;;
    shm) COLLIE_TRANSPORT=shm timeout 900 "$BIN/collie-run" -n "$n" --timeout 800 "${perf[@]}" ;;
  esac >"$out" 2>"$WORK/err"
  local rc=$?
  if [ $rc -eq 77 ]; then
    return 77
  elif [ $rc -ne 0 ]; then
    echo "validate_sim: $setting n=$n $algo: collie-perf failed ($rc): $(tail -n 5 "$WORK/err")" >&2
    return 1
  fi
  fastest "$out"
}

# The fastest of the sweeps at each size, the mean of out-of-place and in-place: the model
# predicts a machine that nothing else disturbs.
fastest() {
  awk '/^# Over/ { on = 1 } on && /^# +[0-9]/ { t[$2] += $6 / 2; if (!($2 in seen)) { seen[$2] = 1;
      order[++k] = $2 } } END { for (i = 1; i <= k; ++i) printf "%s %.3f\n", order[i], t[order[i]] }' "$1"
}

at() { awk -v s="$2" '$1 == s { print $2 }' "$1"; }

printf "%-6s %5s %-19s %10s %12s %12s %7s\n" setting ranks algorithm size measured_us predicted_us pred/meas
fails=0
for setting in "${SETTINGS[@]}"; do
  # Calibration on 2 ranks.
  measure "$setting" 2 recursive_doubling >"$WORK/rd2"
  rc=$?
  if [ $rc -eq 77 ]; then
    echo "SKIP: $setting: $(grep -h SKIP "$WORK"/perf.$setting.* | head -1)"
    continue
  fi
  [ $rc -eq 0 ] || exit 1
  measure "$setting" 2 ring >"$WORK/ring2" || exit 1
  cores=$(nproc)
  case $setting in
    netns) sizes=($NETNS_HOSTS) tier=(--shm-gbps 0) ;;
    *) sizes=(3 4 6 8) tier=(--shm-gbps 0 --cores "$cores") ;;
  esac
  alpha=0
  mem=()
  # The model's time for ALGO on N ranks at SIZE with these link arguments.
  simt() {
    local algo=$1 n=$2 size=$3
    shift 3
    local h=1
    [ "$setting" = netns ] && h=$n
    if [ "$setting" = shm ]; then
      set -- "$@" --shm-us "$alpha" --shm-gbps "$SHM_GBPS" --cores "$cores"
    fi
    "$BIN/collie-sim" --ranks "$n" --hosts "$h" "${tier[@]}" "${mem[@]}" --net-us "$alpha" "$@" \
      -b "$size" -e "$size" -a "$algo" --csv "$WORK/simt.csv" >/dev/null || exit 1
    awk -F, 'NR == 2 { print $3 }' "$WORK/simt.csv"
  }
  # The 2-rank ring's bandwidth sets the link; shm carries it in the shm tier.
  setbeta() {
    SHM_GBPS=1e6
    beta=$1
    if [ "$setting" = shm ]; then
      SHM_GBPS=$1
      beta=1
    fi
  }
  # Latency and bandwidth fitted together to the 2-rank ring at every size from 1 MiB (least
  # squares of the relative error): there the model's time is a * alpha + b / beta, with a and b
  # from runs of the model at alpha 1 without a bandwidth term and at alpha 0 and 1 GB/s.
  # Prints alpha, beta and the sum of squared relative errors.
  fit() {
    for size in $VSIZES; do
      a=$(alpha=1 SHM_GBPS=1e9 simt ring 2 "$size" --net-gbps 1e9)
      b=$(alpha=0 SHM_GBPS=1 simt ring 2 "$size" --net-gbps 1)
      echo "$a $b $(at "$WORK/ring2" "$size")"
    done >"$WORK/fit"
    read -r alpha bfit ringerr < <(awk '{ w = 1 / ($3 * $3); aa += w * $1 * $1;
        ab += w * $1 * $2; bb += w * $2 * $2; at += w * $1 * $3; bt += w * $2 * $3; a[NR] = $1;
        b[NR] = $2; t[NR] = $3 }
      END { d = aa * bb - ab * ab; al = (at * bb - bt * ab) / d; x = (aa * bt - ab * at) / d;
        if (al < 0) { al = 0; x = bt / bb }
        for (i = 1; i <= NR; ++i) { e = (al * a[i] + x * b[i]) / t[i] - 1; err += e * e }
        printf "%.3f %.6f %.6f\n", al, 1 / x, err }' "$WORK/fit")
    printf "%s %s %s\n" "$alpha" "$bfit" "$ringerr"
  }
  # On one host the memory tier is fitted with them: the cache and the slowdown from memory
  # whose ring fit leaves the smallest error.
  if [ "$setting" = netns ]; then
    best="$(fit) 0 1"
  else
    best=""
    for cache in 2M 4M 8M 16M 32M; do
      for slow in 1 1.25 1.5 1.75 2 2.5 3; do
        mem=(--cache "$cache" --mem-slowdown "$slow")
        best=$(printf '%s\n%s %s %s\n' "$best" "$(fit)" "$cache" "$slow" |
          awk 'NF == 5' | sort -g -k3 | head -1)
      done
    done
  fi
  read -r alpha bfit _ cache slow <<<"$best"
  mem=()
  [ "$setting" = netns ] || mem=(--cache "$cache" --mem-slowdown "$slow")
  setbeta "$bfit"
  r0=$(simt recursive_doubling 2 $MAXB_BYTES --net-gbps "$beta")
  r1=$(simt recursive_doubling 2 $MAXB_BYTES --net-gbps "$beta" --reduce-gbps 1)
  reduce=$(awk -v m="$(at "$WORK/rd2" $MAXB_BYTES)" -v r0="$r0" -v r1="$r1" \
    'BEGIN { printf "%.6f", (m > r0 ? (r1 - r0) / (m - r0) : 0) }')
  # One host: what a local flow costs the shared cores, from the 3-rank ring, the first run
  # with more ranks than cores on this machine (least squares of the relative error over a
  # grid); more ranks than that are the validation.
  calib3=""
  if [ "$setting" != netns ]; then
    measure "$setting" 3 ring >"$WORK/ring3" || exit 1
    calib3=ring
    fc=$(for w in 1 1.25 1.5 1.75 2; do
      err=$(for size in $VSIZES; do
        echo "$(simt ring 3 "$size" --net-gbps "$beta" --reduce-gbps "$reduce" --flow-cores "$w") \
          $(at "$WORK/ring3" "$size")"
      done | awk '{ e = $1 / $2 - 1; s += e * e } END { printf "%.6f", s }')
      echo "$err $w"
    done | sort -g | head -1 | awk '{ print $2 }')
    mem+=(--flow-cores "$fc")
  fi
  linkargs=(--net-gbps "$beta" --reduce-gbps "$reduce")
  bw=$([ "$setting" = shm ] && echo "$SHM_GBPS" || echo "$beta")
  echo "# $setting: alpha ${alpha} us, beta ${bw} GB/s, reduce ${reduce} GB/s" \
    "(0: free)$([ "$setting" = netns ] ||
      echo ", $cores cores, $fc per local flow, cache $cache, memory ${slow}x slower")"
  for n in 2 "${sizes[@]}"; do
    hosts=$([ "$setting" = netns ] && echo "$n" || echo 1)
    extra=()
    [ "$setting" = shm ] && extra=(--shm-us "$alpha" --shm-gbps "$SHM_GBPS" --cores "$cores")
    "$BIN/collie-sim" --ranks "$n" --hosts "$hosts" "${tier[@]}" "${mem[@]}" --net-us "$alpha" \
      "${linkargs[@]}" "${extra[@]}" -b 1M -e $MAXB -f 2 -a recursive_doubling,ring \
      --csv "$WORK/sim.$n" >/dev/null || exit 1
    for algo in recursive_doubling ring; do
      calib=0
      if [ "$n" -eq 2 ]; then
        calib=1
        cp "$WORK/$([ $algo = ring ] && echo ring2 || echo rd2)" "$WORK/meas"
      elif [ "$n" -eq 3 ] && [ "$algo" = "$calib3" ]; then
        calib=1
        cp "$WORK/ring3" "$WORK/meas"
      else
        measure "$setting" "$n" "$algo" >"$WORK/meas" || exit 1
      fi
      for size in $VSIZES; do
        m=$(at "$WORK/meas" $size)
        p=$(awk -F, -v s=$size -v a=$algo '$1 == s && $2 == a { print $3 }' "$WORK/sim.$n")
        note=$([ $calib -eq 1 ] && echo "(calibration)" || echo "")
        read -r ratio bad < <(awk -v m="$m" -v p="$p" -v t="$TOLERANCE" 'BEGIN {
          r = p / m; printf "%.3f %d\n", r, (r > 1 + t || r < 1 - t) }')
        [ $calib -eq 0 ] && [ "$bad" -eq 1 ] && fails=$((fails + 1)) && note="MISS"
        printf "%-6s %5s %-19s %10s %12.1f %12.1f %7s %s\n" "$setting" "$n" "$algo" "$size" "$m" "$p" \
          "$ratio" "$note"
      done
    done
  done
done
echo "# $fails prediction(s) outside ${TOLERANCE} of the measurement"
[ $fails -eq 0 ]
