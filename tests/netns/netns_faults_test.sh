#!/usr/bin/env bash
# Network faults between netns_hosts.sh hosts (2 hosts x 2 ranks), over Collie's tcp transport
# or UCX's tcp lane. The ranks run collie-chaos-rank: random collectives, send/receive rings and
# barriers, every result checked against the test harness's reference.
#   down       host 1's link goes down mid-run
#   partition  host 1's packets to host 0 are dropped mid-run (one way: host 0's still arrive)
#   loss1      1% of all frames dropped at random from the start
#   loss5      5% of all frames dropped at random from the start
#   ratecut    host 1's link cut to 1 Mbit/s mid-run
# Loss and the rate cut must give every rank the right answers (the calls fit the deadline);
# a down link or a partition must fail every rank, within the deadline and its grace, with an
# error naming a rank on the other side. Never a wrong answer, never a hang.
#
#   netns_faults_test.sh BIN_DIR down|partition|loss1|loss5|ratecut tcp|ucx
# Exit 77 (after a SKIP line) when namespaces cannot be made here.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
USAGE="usage: netns_faults_test.sh BIN_DIR down|partition|loss1|loss5|ratecut tcp|ucx"
BIN=${1:?$USAGE}
CASE=${2:?$USAGE}
TRANSPORT=${3:?$USAGE}
DEADLINE_MS=5000
FAULT_AT=1.5
WORK=$(mktemp -d "${TMPDIR:-/tmp}/netns_faults.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

fail() {
  echo "FAIL: $CASE over $TRANSPORT: $*"
  for f in "$WORK"/logs/rank*.err; do [ -s "$f" ] && sed "s|^|$(basename "$f"): |" "$f" | tail -n 5; done
  exit 1
}

ENV=(COLLIE_TIMEOUT_MS=$DEADLINE_MS COLLIE_TRANSPORT=$TRANSPORT)
case $TRANSPORT in
  tcp) ;;
  ucx) ENV+=(UCX_TLS=tcp UCX_NET_DEVICES=eth0) ;;
  *) echo "$USAGE" >&2; exit 2 ;;
esac

ARGS=(-k 2 -m 2 -t 120 -o "$WORK/logs")
OPS=120 MAX=262144 EXPECT=finish
case $CASE in
  down)
    ARGS+=(-f "$FAULT_AT:date +%s.%N; ip -n \$NETNS_BR link set h1 down")
    OPS=100000000 EXPECT=fail
    ;;
  partition)
    ARGS+=(-f "$FAULT_AT:date +%s.%N; ip netns exec \$NETNS_BR nft -f - <<'EOF'
table bridge collie_cut {
  chain forward {
    type filter hook forward priority 0; policy accept;
    ip saddr 10.77.0.2 ip daddr 10.77.0.1 drop
  }
}
EOF")
    OPS=100000000 EXPECT=fail
    ;;
  loss1) ARGS+=(-d 1) ;;
  loss5) ARGS+=(-d 5) OPS=60 ;;
  ratecut)
    # Once rank 0 has done 240 of its 400 calls: the rest run after the cut.
    ARGS+=(-f "0:until grep -q '^240 of' \$NETNS_LOGDIR/rank0.out; do sleep 0.002; done
date +%s.%N
tc -n \$NETNS_TAG-h1 qdisc replace dev eth0 root tbf rate 1mbit burst 32kb latency 400ms
tc -n \$NETNS_BR qdisc replace dev h1 root tbf rate 1mbit burst 32kb latency 400ms")
    OPS=400 MAX=65536
    ;;
  *) echo "$USAGE" >&2; exit 2 ;;
esac

timeout 300 bash "$HERE/netns_hosts.sh" "${ARGS[@]}" -- env "${ENV[@]}" "$BIN/collie-chaos-rank" \
  --seed 77 --ops $OPS --max-bytes $MAX --quiet >"$WORK/hosts.out" 2>"$WORK/hosts.err"
rc=$?
if [ $rc -eq 77 ]; then
  grep '^SKIP' "$WORK/hosts.out"
  exit 77
fi
[ -s "$WORK/logs/fault.log" ] && echo "fault at $(head -n 1 "$WORK/logs/fault.log"): $(tail -n +2 "$WORK/logs/fault.log" | tr "\n" " ")"

if [ $EXPECT = finish ]; then
  [ $rc -eq 0 ] || fail "exit status $rc, expected every rank to finish right"
  for r in 0 1 2 3; do
    grep -q "^finished $OPS" "$WORK/logs/rank$r.out" || fail "rank $r did not finish its $OPS calls"
  done
  grep "dropped" "$WORK/hosts.err"
  echo "PASS: $CASE over $TRANSPORT: $OPS calls right on 4 ranks"
  exit 0
fi

struck=$(head -n 1 "$WORK/logs/fault.log")
[ -n "$struck" ] || fail "the fault did not run"
# The deadline, the grace of listening (at most 3 s), and room for a busy machine.
limit=$(awk -v d=$DEADLINE_MS 'BEGIN { print d / 1000 + 3 + 3 }')
for r in 0 1 2 3; do
  err="$WORK/logs/rank$r.err"
  grep -q "wrong result" "$err" && fail "rank $r: a wrong result"
  grep -q " failed: " "$err" || fail "rank $r did not fail (status file: $(tail -n 1 "$WORK/logs/rank$r.out"))"
  # The other host's ranks: 2 and 3 for host 0's, 0 and 1 for host 1's.
  others="2|3"
  [ $r -ge 2 ] && others="0|1"
  grep -Eq "(rank|peer)s? ([0-9]+, )*($others)\b" "$err" ||
    fail "rank $r: the error names no rank of the other host: $(tail -c 400 "$err")"
  took=$(awk -v a="$struck" -v b="$(stat -c %.Y "$err")" 'BEGIN { printf "%.1f", b - a }')
  awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t <= l) }' ||
    fail "rank $r failed $took s after the fault (limit $limit s)"
  echo "rank $r failed $took s after the fault: $(grep -o 'on rank [0-9]*: .\{0,160\}' "$err" | head -1)"
done
echo "PASS: $CASE over $TRANSPORT: every rank failed in time naming the other host"
