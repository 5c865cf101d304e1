#!/usr/bin/env bash
# Tests on netns_hosts.sh hosts: the script itself (environment, exit status, deadline,
# teardown), and AllReduce correctness across namespaces checked by collie-perf -c 1, which
# compares every element with the expected value and exits 1 on any mismatch.
#
#   netns_hosts_test.sh BIN_DIR self|tcp|mixed|hierarchical|probe|drops|collie_run
# Exit 77 (after a SKIP line) when namespaces cannot be made here.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
HOSTS_SH="$HERE/netns_hosts.sh"
USAGE="usage: netns_hosts_test.sh BIN_DIR self|tcp|mixed|hierarchical|probe|drops|collie_run"
BIN=${1:?$USAGE}
CASE=${2:?$USAGE}
PERF="$BIN/collie-perf"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/netns_test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

fail() {
  echo "FAIL: $*"
  exit 1
}
exec 3>&1  # the test's own stdout, for a skip seen inside a redirected call
# Runs netns_hosts.sh; a skip ends the test (its SKIP line on the test's stdout).
hosts() {
  timeout 300 bash "$HOSTS_SH" "$@" >"$WORK/hosts.out"
  local rc=$?
  cat "$WORK/hosts.out"
  if [ $rc -eq 77 ]; then
    grep '^SKIP' "$WORK/hosts.out" >&3
    exit 77
  fi
  return $rc
}
expect_rc() {
  local want=$1 got=$2 what=$3
  [ "$got" -eq "$want" ] || fail "$what: exit status $got, expected $want"
}
# The namespaces of a finished run (tag from COLLIE_HOSTID) must be gone.
expect_torn_down() {
  local tag=$1
  [ -n "$tag" ] || fail "no tag recorded"
  if ip netns list | grep -q "^$tag-"; then fail "namespaces of $tag left behind"; fi
}
# Sizes from 8 B to 2 MiB: the small sizes take recursive doubling, the large ones the ring.
# Arguments: those of netns_hosts.sh; PERF_ENV: assignments put before collie-perf.
PERF_ENV=()
perf_check() {
  hosts "$@" -- env "${PERF_ENV[@]}" "$PERF" -b 8 -e 2M -f 8 -c 1 -n 2 -w 1 -d float \
    >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  cat "$WORK/out"
  [ $rc -eq 0 ] || { tail -n 40 "$WORK/err"; fail "collie-perf exited with $rc"; }
  grep -q "Out of bounds values : 0 OK" "$WORK/out" || fail "collie-perf reported wrong values"
  [ "$(grep -c '^ *[0-9]' "$WORK/out")" -eq 7 ] || fail "expected 7 rows of results"
}

case $CASE in
  self)
    # 3 hosts x 2 ranks: environment and addresses.
    hosts -k 3 -m 2 -a -- sh -c 'echo "$RANK $WORLD_SIZE $LOCAL_RANK $NETNS_HOST $MASTER_ADDR \
$(ip -4 -o addr show eth0 | awk "{print \$4}") $COLLIE_HOSTID"' >"$WORK/env"
    expect_rc 0 $? "env run"
    [ "$(wc -l <"$WORK/env")" -eq 6 ] || fail "expected 6 rank lines: $(cat "$WORK/env")"
    for r in 0 1 2 3 4 5; do
      h=$((r / 2))
      grep -Eq "^\[$r\] $r 6 $((r % 2)) $h 10\.77\.0\.1 10\.77\.0\.$((h + 1))/24 cn[0-9r]+-host$h\$" \
        "$WORK/env" || fail "rank $r: wrong environment: $(cat "$WORK/env")"
    done
    tag=$(sed -n 's/.* \(cn[0-9r]*\)-host0$/\1/p' "$WORK/env" | head -1)
    expect_torn_down "$tag"
    # Hosts reach each other, and only their own subnet (no route out of the namespace).
    hosts -k 2 -- sh -c 'ip route get 10.77.0.2 >/dev/null && ! ip route get 1.1.1.1 2>/dev/null'
    expect_rc 0 $? "routing"
    # -c sets every host's congestion control; an unknown one fails the setup.
    cc=$(sysctl -n net.ipv4.tcp_available_congestion_control | tr ' ' '\n' | grep -vx "$(sysctl -n \
net.ipv4.tcp_congestion_control)" | head -1)
    if [ -n "$cc" ]; then
      hosts -k 2 -a -c "$cc" -- sysctl -n net.ipv4.tcp_congestion_control >"$WORK/cc"
      expect_rc 0 $? "-c $cc"
      [ "$(grep -c "^\[[01]\] $cc\$" "$WORK/cc")" -eq 2 ] || fail "-c $cc not applied: $(cat "$WORK/cc")"
    fi
    hosts -k 2 -c no_such_cc -- true >/dev/null 2>&1
    expect_rc 1 $? "-c no_such_cc"
    # The first failing rank's status comes back; the others are killed after a grace period.
    hosts -k 2 -- sh -c 'echo $COLLIE_HOSTID; if [ $RANK = 1 ]; then exit 3; fi; sleep 60' \
      >"$WORK/fail" 2>/dev/null
    expect_rc 3 $? "failing rank"
    expect_torn_down "$(sed -n 's/-host0$//p' "$WORK/fail")"
    # The deadline.
    start=$SECONDS
    hosts -k 2 -t 2 -- sh -c 'echo $COLLIE_HOSTID; sleep 60' >"$WORK/slow" 2>/dev/null
    expect_rc 124 $? "deadline"
    [ $((SECONDS - start)) -lt 20 ] || fail "deadline took $((SECONDS - start)) s"
    expect_torn_down "$(sed -n 's/-host0$//p' "$WORK/slow")"
    # Rate limit and drops are set up (qdisc and rule visible inside the hosts).
    hosts -k 2 -r 100mbit -d 0.5 -- sh -c 'tc qdisc show dev eth0 | grep -q "tbf.*rate 100Mbit"'
    expect_rc 0 $? "rate limit"
    echo "PASS: self"
    ;;
  tcp)
    perf_check -k 4 -m 1 -t 240
    echo "PASS: 4 hosts x 1 rank over tcp"
    ;;
  mixed)
    PERF_ENV=(COLLIE_DEBUG=INFO COLLIE_DEBUG_SUBSYS=INIT)
    mkdir -p "$WORK/logs"
    perf_check -k 4 -m 2 -t 240 -o "$WORK/logs"
    grep -q "rank 0 -> peer rank 1 via shm" "$WORK/logs/rank0.err" || fail "ranks 0, 1: not shm"
    grep -q "rank 0 -> peer rank 2 via tcp" "$WORK/logs/rank0.err" || fail "ranks 0, 2: not tcp"
    grep -q "rank 7 -> peer rank 6 via shm" "$WORK/logs/rank7.err" || fail "ranks 7, 6: not shm"
    echo "PASS: 4 hosts x 2 ranks, shm inside a host, tcp across"
    ;;
  hierarchical)
    # 4 hosts x 2 ranks, the two-level AllReduce forced: results checked, and it must have run.
    PERF_ENV=(COLLIE_ALGO=hierarchical)
    perf_check -k 4 -m 2 -t 240
    echo "PASS: 4 hosts x 2 ranks, hierarchical AllReduce correct"
    ;;
  probe)
    # The tuner measures the network when the communicator starts. On links shaped to 1 Gbit/s
    # every rank must report the same figures (they are agreed), with a link rate the shaper
    # allows, far from the 1.5 GB/s of the loopback table; COLLIE_TUNER_PROBE=0 keeps the table.
    PERF_ENV=(COLLIE_DEBUG=INFO COLLIE_DEBUG_SUBSYS=INIT)
    mkdir -p "$WORK/logs"
    perf_check -k 4 -m 1 -r 1gbit -t 240 -o "$WORK/logs"
    sed -n 's/.*\(network measured at init: .*\)/\1/p' "$WORK"/logs/rank*.err >"$WORK/probe"
    cat "$WORK/probe"
    [ "$(wc -l <"$WORK/probe")" -eq 4 ] || fail "expected the measured figures on 4 ranks"
    [ "$(sort -u "$WORK/probe" | wc -l)" -eq 1 ] || fail "the ranks measured different figures"
    awk '{ if (!($(NF-3) > 0.01 && $(NF-3) < 0.2)) exit 1 }' "$WORK/probe" ||
      fail "a link rate outside (0.01, 0.2) GB/s on 1 Gbit/s links"
    PERF_ENV=(COLLIE_DEBUG=INFO COLLIE_DEBUG_SUBSYS=INIT COLLIE_TUNER_PROBE=0)
    rm -f "$WORK"/logs/*
    perf_check -k 4 -m 1 -r 1gbit -t 240 -o "$WORK/logs"
    if grep -q "network measured" "$WORK"/logs/rank*.err; then fail "COLLIE_TUNER_PROBE=0 probed"; fi
    echo "PASS: the tuner measures 1 Gbit/s links at init, the same on every rank"
    ;;
  drops)
    perf_check -k 4 -m 1 -d 1 -t 600
    n=$(sed -n 's/^netns_hosts: the bridge dropped \([0-9]*\) frames$/\1/p' "$WORK/err")
    [ "${n:-0}" -gt 0 ] || fail "no frame was dropped (counter: ${n:-none})"
    echo "dropped frames: $n"
    echo "PASS: 4 hosts x 1 rank with 1% of frames dropped"
    ;;
  collie_run)
    # One collie-run per host, torchrun style: 2 hosts x 2 ranks, results checked.
    RUN="$BIN/collie-run --nnodes 2 --nproc-per-node 2"
    node='--node-rank $NETNS_HOST --master-addr $MASTER_ADDR --master-port $MASTER_PORT'
    hosts -k 2 -m 1 -a -t 120 -- sh -c "exec $RUN $node -- $PERF -b 8 -e 1M -f 32 -c 1 -n 2 \
-w 1 -d float" >"$WORK/out" 2>"$WORK/err"
    rc=$?
    cat "$WORK/out"
    [ $rc -eq 0 ] || { tail -n 40 "$WORK/err"; fail "collie-run across hosts exited with $rc"; }
    grep -q "^\[0\] # Out of bounds values : 0 OK" "$WORK/out" || fail "wrong values or no table"
    [ "$(grep -c '^\[0\] *[0-9]' "$WORK/out")" -eq 4 ] || fail "expected 4 rows of results"
    # The ranks of a job: 4 of them, ranks 2 and 3 on host 1.
    grep -Eq "^\[0\] #  Rank  3 Group  0 Pid +[0-9]+ on" "$WORK/out" || fail "rank 3 missing"
    # Host 1's collie-run is SIGKILLed mid-run (its ranks die with it): host 0's ranks must fail
    # naming a peer of host 1, well within their operation deadline, and host 0's collie-run
    # exits with their status.
    export COLLIE_TIMEOUT_MS=15000
    mkdir -p "$WORK/logs"
    start=$SECONDS
    hosts -k 2 -m 1 -t 90 -o "$WORK/logs" -- sh -c "if [ \$NETNS_HOST = 1 ]; then
  $RUN $node -- $PERF -b 64K -e 64K -n 1000000 -w 1 -c 0 & pid=\$!
  sleep 6; kill -KILL \$pid; wait \$pid; exit 0
fi
exec $RUN $node -- $PERF -b 64K -e 64K -n 1000000 -w 1 -c 0" >"$WORK/kill.out" 2>"$WORK/kill.err"
    rc=$?
    took=$((SECONDS - start))
    cat "$WORK/logs/rank0.err"
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "host 0's collie-run exited with $rc, expected a failure"
    [ $took -lt 45 ] || fail "host 0 took $took s to fail (deadline 15 s after the kill at 6 s)"
    grep -Eq "rank [0-9]+ \(pid [0-9]+\) exited with status" "$WORK/logs/rank0.err" ||
      fail "host 0's collie-run did not report a failed rank"
    grep -Eiq "(peer|rank) [23]\b" "$WORK/logs/rank0.err" || fail "no peer of host 1 named"
    # Host 1 freezes (its ranks stopped, their sockets open, nothing closed): host 0's ranks
    # must fail by their deadline of 5 s, naming a peer of host 1, before host 1 is killed.
    export COLLIE_TIMEOUT_MS=5000
    rm -f "$WORK"/logs/*
    start=$SECONDS
    hosts -k 2 -m 1 -t 90 -o "$WORK/logs" -- sh -c "if [ \$NETNS_HOST = 1 ]; then
  $RUN $node -- $PERF -b 64K -e 64K -n 1000000 -w 1 -c 0 & pid=\$!
  sleep 6; kill -STOP \$(pgrep -P \$pid) \$pid; sleep 12; kill -KILL \$pid; wait \$pid; exit 0
fi
exec $RUN $node -- $PERF -b 64K -e 64K -n 1000000 -w 1 -c 0" >"$WORK/stop.out" 2>"$WORK/stop.err"
    rc=$?
    frozen=$((SECONDS - start))
    cat "$WORK/logs/rank0.err"
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "host 0's collie-run exited with $rc, expected a failure"
    grep -Eiq "(peer|rank) [23]\b" "$WORK/logs/rank0.err" || fail "no peer of host 1 named"
    if grep -q "connection closed" "$WORK/logs/rank0.err"; then
      fail "host 0 failed only when host 1 was killed, not by its deadline"
    fi
    echo "PASS: collie-run on 2 hosts x 2 ranks; a dead host fails the other in $took s," \
      "a frozen one by the deadline (run took $frozen s)"
    ;;
  *) fail "unknown case $CASE" ;;
esac
