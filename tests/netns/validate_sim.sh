#!/usr/bin/env bash
# validate_sim.sh: collie-sim's predictions against collie-perf's measurements.
#
#   validate_sim.sh [BIN_DIR] [netns|tcp|shm ...]     (default: build/bin, all three)
#
# For each setting the link parameters come from 2-rank runs (calibration), fitted through
# the simulator itself so that they mean what the model means by them; the prediction is then
# checked on larger runs of both algorithms the simulator models:
#   alpha = the 2-rank ring's time at 8 bytes over its number of messages in a row
#   beta = the one that fits the simulated 2-rank ring best to the measured one at 1-16 MiB
#            with that alpha (least squares of the relative error)
#   reduce = the one that fits the simulated 2-rank recursive doubling best to the measured one
#            at 1-16 MiB with that alpha and beta (its one reduction is not overlapped); free
#            when the transfer explains it
#   cache, memory slowdown, last-level cache slowdown (one host only) = the three, from a
#            grid, whose alpha, beta and reduce leave the smallest error over both 2-rank
#            algorithms; the last-level cache's size is this machine's (lscpu), and over shm a
#            local connection buffers a ring of COLLIE_SHM_RING_BYTES (default 1M)
#   cores per local flow, switching loss (one host only) = the pair, from a grid, that fits
#            the 3-rank ring best: the first run with more ranks than this machine's 2 cores
# Every (setting, ranks, algorithm) is measured in $ROUNDS launches (default 3), one per round
# over the whole set, each collie-perf -z 3 -a 3 --repeat $REPEATS (default 2); at each size the
# fastest sweep of them all counts (the model predicts a machine nothing else disturbs), each
# rank's slowest (-a 3). -z 3: a barrier between iterations, timed without it, since the
# simulator predicts one collective from a common start (back to back, recursive doubling's iterations overlap and collide on the links).
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
# MEASURED=DIR keeps each collie-perf output in DIR and reuses the ones already there, so the
# model can be fitted and checked again without measuring again, or a run topped up with more
# rounds. Each launch first waits (up to $SETTLE seconds) for the cores to be near each other.
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
REPEATS=${REPEATS:-2}
ROUNDS=${ROUNDS:-3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/validate_sim.XXXXXX")
DATA=${MEASURED:-$WORK}
mkdir -p "$DATA" || exit 2
trap 'rm -rf "$WORK"' EXIT
for tool in collie-perf collie-sim collie-run; do
  [ -x "$BIN/$tool" ] || { echo "validate_sim: $BIN/$tool not built" >&2; exit 2; }
done

# The ranks each setting runs: 2 (and 3 on one host) calibrate, the rest validate.
ranksOf() {
  case $1 in
    netns) echo 2 "$NETNS_HOSTS" ;;
    *) echo 2 3 4 6 8 ;;
  esac
}

# The machine's last-level cache, shared by the ranks of one host (0: unknown, none modelled).
LLC=$(lscpu -C -B 2>/dev/null | awk '$1 == "L3" { print $2; exit }')
[ -n "$LLC" ] || LLC=$(getconf LEVEL3_CACHE_SIZE 2>/dev/null)
[ -n "$LLC" ] || LLC=0

# Where the cores are: on a VM the host moves the virtual CPUs, and while the first two are far
# apart (a cache line's trip between them about 4x its lowest) local transfers run 2-4x slower
# for seconds to minutes (perf/compare_lib/placement.py). Before each launch: wait up to
# $SETTLE seconds (default 30) for the trip to be within 3x of the lowest seen in this run.
SETTLE=${SETTLE:-30}
LOWEST_US=""
near_cores() {
  local limits="$BIN/collie-limits" end=$((SECONDS + SETTLE)) us
  [ -x "$limits" ] || return 0
  while :; do
    us=$("$limits" --core-latency 2>/dev/null | sed -n 's/.*us=//p')
    [ -n "$us" ] || return 0  # fewer than 2 CPUs: nothing to wait for
    LOWEST_US=$(awk -v a="$us" -v b="${LOWEST_US:-$us}" 'BEGIN { print (a < b ? a : b) }')
    awk -v a="$us" -v b="$LOWEST_US" 'BEGIN { exit !(a <= 3 * b) }' && return 0
    [ $SECONDS -ge $end ] && return 0
    sleep 0.5
  done
}

# run_perf SETTING NRANKS ALGO ROUND: one collie-perf launch into $DATA/perf.SETTING.N.ALGO.ROUND
# (kept when already there). Returns 77 when the setting cannot run here.
run_perf() {
  local out="$DATA/perf.$1.$2.$3.$4"
  [ -s "$out" ] && return 0
  near_cores
  local perf=(env COLLIE_ALGO="$3" "$BIN/collie-perf" -b 8 -e $MAXB -f 2 -n "$ITERS" -w 3 -c 0 -z 3 -a 3 --repeat "$REPEATS")
  case $1 in
    netns) timeout 900 bash "$HERE/netns_hosts.sh" -k "$2" -r "$RATE" -t 800 -- "${perf[@]}" ;;
    tcp) COLLIE_TRANSPORT=tcp timeout 900 "$BIN/collie-run" -n "$2" --timeout 800 "${perf[@]}" ;;
    shm) COLLIE_TRANSPORT=shm timeout 900 "$BIN/collie-run" -n "$2" --timeout 800 "${perf[@]}" ;;
  esac >"$out.part" 2>"$WORK/err"
  local rc=$?
  if [ $rc -eq 77 ]; then
    echo "SKIP: $1: $(grep -h SKIP "$out.part" "$WORK/err" | head -1)"
    rm -f "$out.part"
    return 77
  elif [ $rc -ne 0 ]; then
    echo "validate_sim: $1 n=$2 $3: collie-perf failed ($rc): $(tail -n 5 "$WORK/err")" >&2
    rm -f "$out.part"
    return 1
  fi
  mv "$out.part" "$out"
}

# measure SETTING NRANKS ALGO -> "size time_us" lines: at each size the fastest launch of all
# rounds, each launch's figure being its fastest sweep, the mean of out-of-place and in-place.
# The model predicts a machine that nothing else disturbs.
measure() {
  awk 'FNR == 1 { f[++nf] = FILENAME; on = 0 }
    /^# Over/ { on = 1 }
    on && /^# +[0-9]/ { t[FILENAME, $2] += $6 / 2; if (!($2 in seen)) { seen[$2] = 1; order[++k] = $2 } }
    END { for (i = 1; i <= k; ++i) { s = order[i]; b = -1
        for (j = 1; j <= nf; ++j) if ((f[j], s) in t && (b < 0 || t[f[j], s] < b)) b = t[f[j], s]
        printf "%s %.3f\n", s, b } }' "$DATA/perf.$1.$2.$3".*
}

at() { awk -v s="$2" '$1 == s { print $2 }' "$1"; }

# Every launch first, in $ROUNDS rounds over the whole set: the machine's slow spells (on a VM,
# the host moving the virtual CPUs apart: see perf/compare_lib/placement.py) last seconds to
# minutes, so a launch's sweeps, seconds apart, can all fall in one; across rounds they hardly
# do.
runnable=()
for setting in "${SETTINGS[@]}"; do
  run_perf "$setting" 2 ring 1
  rc=$?
  [ $rc -eq 77 ] && continue
  [ $rc -eq 0 ] || exit 1
  runnable+=("$setting")
done
for round in $(seq 1 "$ROUNDS"); do
  for setting in "${runnable[@]}"; do
    for n in $(ranksOf "$setting"); do
      for algo in recursive_doubling ring; do
        run_perf "$setting" "$n" "$algo" "$round" || exit 1
      done
    done
  done
done

printf "%-6s %5s %-19s %10s %12s %12s %7s\n" setting ranks algorithm size measured_us predicted_us pred/meas
fails=0
for setting in "${runnable[@]}"; do
  # Calibration on 2 ranks.
  measure "$setting" 2 recursive_doubling >"$WORK/rd2"
  measure "$setting" 2 ring >"$WORK/ring2"
  cores=$(nproc)
  case $setting in
    netns) sizes=($NETNS_HOSTS) tier=(--shm-gbps 0) ;;
    *) sizes=(3 4 6 8) tier=(--shm-gbps 0 --cores "$cores") ;;
  esac
  # One host: its shared cache, and what a local connection buffers (a shared-memory ring;
  # loopback sockets take a message whole).
  host=(--shared-cache "$LLC")
  [ "$setting" = shm ] && host+=(--local-buffer "${COLLIE_SHM_RING_BYTES:-1M}")
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
  # Latency from the 2-rank ring at 8 bytes, where the transfer costs nothing: its time over
  # the model's time at alpha 1 without a bandwidth term. Bandwidth fitted to the 2-rank ring
  # at every size from 1 MiB (least squares of the relative error): there the model's time is
  # a * alpha + b / beta, with a from that run and b from one at alpha 0 and 1 GB/s. (Fitting
  # alpha there too lets it soak up what caches do to the bandwidth, and ranks with more steps
  # pay it many times over.) Prints alpha, beta and the sum of squared relative errors.
  fit() {
    alpha=$(awk -v t="$(at "$WORK/ring2" 8)" -v a="$(alpha=1 SHM_GBPS=1e9 simt ring 2 8 --net-gbps 1e9)" \
      'BEGIN { printf "%.3f", t / a }')
    for size in $VSIZES; do
      a=$(alpha=1 SHM_GBPS=1e9 simt ring 2 "$size" --net-gbps 1e9)
      b=$(alpha=0 SHM_GBPS=1 simt ring 2 "$size" --net-gbps 1)
      echo "$a $b $(at "$WORK/ring2" "$size")"
    done >"$WORK/fit"
    awk -v al="$alpha" '{ a[NR] = $1; b[NR] = $2; t[NR] = $3
        num += ($2 / $3) * (1 - al * $1 / $3); den += ($2 / $3) ^ 2 }
      END { x = num / den
        for (i = 1; i <= NR; ++i) { e = (al * a[i] + x * b[i]) / t[i] - 1; err += e * e }
        printf "%.3f %.6f %.6f\n", al, 1 / x, err }' "$WORK/fit"
  }
  # The reduction speed, fitted to the 2-rank recursive doubling at every size from 1 MiB
  # (least squares of the relative error) with the alpha and beta fitted: its one reduction is
  # not overlapped, so there the model's time is r0 + k / reduce, with r0 from a run of the
  # model with free reductions and k from one at 1 GB/s. Prints the reduction speed (0: free)
  # and the sum of the ring's and recursive doubling's squared relative errors.
  fitreduce() {
    setbeta "$bfit"
    for size in $VSIZES; do
      r0=$(simt recursive_doubling 2 "$size" --net-gbps "$beta")
      r1=$(simt recursive_doubling 2 "$size" --net-gbps "$beta" --reduce-gbps 1)
      echo "$r0 $r1 $(at "$WORK/rd2" "$size")"
    done | awk -v ringerr="$ringerr" '{ r0[NR] = $1; k[NR] = $2 - $1; m[NR] = $3;
        num += (k[NR] / $3) * (1 - $1 / $3); den += (k[NR] / $3) ^ 2 }
      END { x = den > 0 ? num / den : 0; if (x < 0) x = 0
        for (i = 1; i <= NR; ++i) { e = (r0[i] + k[i] * x) / m[i] - 1; err += e * e }
        printf "%.6f %.6f\n", (x > 0 ? 1 / x : 0), ringerr + err }'
  }
  # On one host the memory tier is fitted with them: the cache and the slowdown from memory
  # (from a grid) whose fits leave the smallest error over both 2-rank algorithms.
  if [ "$setting" = netns ]; then
    read -r alpha bfit ringerr < <(fit)
    read -r reduce _ < <(fitreduce)
    cache=0 slow=1
  else
    best=""
    for cache in 512K 1M 2M 4M 8M 16M; do
      for slow in 1 1.25 1.5 1.75 2 2.5 3 4; do
        for shared in 1 1.25 1.5 2 3; do
          awk -v a="$shared" -v b="$slow" 'BEGIN { exit !(a <= b) }' || continue
          mem=(--cache "$cache" --mem-slowdown "$slow" --shared-slowdown "$shared" "${host[@]}")
          read -r alpha bfit ringerr < <(fit)
          read -r reduce err < <(fitreduce)
          best=$(printf '%s\n%s %s %s %s %s %s %s\n' "$best" "$err" "$alpha" "$bfit" "$reduce" \
            "$cache" "$slow" "$shared" | awk 'NF == 7' | sort -g -k1 | head -1)
        done
      done
    done
    read -r _ alpha bfit reduce cache slow shared <<<"$best"
  fi
  mem=()
  [ "$setting" = netns ] ||
    mem=(--cache "$cache" --mem-slowdown "$slow" --shared-slowdown "$shared" "${host[@]}")
  setbeta "$bfit"
  # One host: what a local flow costs the shared cores, and what a host with more ranks than
  # cores loses to switching between them, from the 3-rank ring, the first run with more ranks
  # than cores on this machine (least squares of the relative error over a grid); more ranks
  # than that are the validation.
  calib3=""
  if [ "$setting" != netns ]; then
    measure "$setting" 3 ring >"$WORK/ring3"
    calib3=ring
    read -r fc loss < <(for w in 1 1.25 1.5 1.75 2; do
      for l in 0 0.1 0.2 0.3 0.4 0.5 0.6; do
        err=$(for size in $VSIZES; do
          echo "$(simt ring 3 "$size" --net-gbps "$beta" --reduce-gbps "$reduce" --flow-cores "$w" \
            --switch-loss "$l") $(at "$WORK/ring3" "$size")"
        done | awk '{ e = $1 / $2 - 1; s += e * e } END { printf "%.6f", s }')
        echo "$err $w $l"
      done
    done | sort -g | head -1 | awk '{ print $2, $3 }')
    mem+=(--flow-cores "$fc" --switch-loss "$loss")
  fi
  linkargs=(--net-gbps "$beta" --reduce-gbps "$reduce")
  bw=$([ "$setting" = shm ] && echo "$SHM_GBPS" || echo "$beta")
  echo "# $setting: alpha ${alpha} us, beta ${bw} GB/s, reduce ${reduce} GB/s" \
    "(0: free)$([ "$setting" = netns ] ||
      echo ", $cores cores, $fc per local flow, $loss lost to switching, cache $cache," \
        "memory ${slow}x slower, last-level cache $LLC B ${shared}x slower")"
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
        measure "$setting" "$n" "$algo" >"$WORK/meas"
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
