#!/usr/bin/env bash
# netns_hosts.sh: K test "hosts" on one machine, each a network namespace with its own address,
# joined by a bridge that lives in a namespace of its own (so nothing in the root namespace's
# links or routes changes). Starts M ranks per host with the torchrun-style environment and
# COLLIE_HOSTID, runs the given command in each, and tears everything down on any exit.
#
#   netns_hosts.sh [-k HOSTS] [-m RANKS_PER_HOST] [-r RATE [-l QUEUE]] [-d DROP_PERCENT]
#                  [-c CONGESTION] [-t SECONDS] [-p PORT] [-o LOGDIR] [-f SECONDS:SCRIPT] [-a] [-n]
#                  [-u] [-1] -- COMMAND [ARGS...]
#
#   -k  hosts (namespaces), default 4          -m  ranks per host, default 1
#   -r  tbf rate of each host's link in both directions (tc syntax: 1gbit, 500mbit)
#   -l  tbf queue as the longest a packet may wait in it (tc's latency; default 100ms)
#   -d  percentage of frames the bridge drops at random (nftables numgen), e.g. 0.5
#   -c  TCP congestion control of every host (net.ipv4.tcp_congestion_control), e.g. reno
#   -t  deadline of the whole run, seconds (default 120); ranks still running are killed
#   -p  MASTER_PORT (default 29500)             -o  keep rank logs here (default: a temp dir)
#   -f  a fault: SECONDS after the ranks start, run SCRIPT (bash) with NETNS_TAG, NETNS_BR and
#       NETNS_LOGDIR set: host h is namespace $NETNS_TAG-h$h (link eth0), its bridge port h$h
#       in $NETNS_BR, rank r's output in $NETNS_LOGDIR/rank$r.out
#   -a  print every rank's stdout, not only rank 0's
#   -n  setup self-check: print the layout and exit once the hosts can reach each other
#   -u  each host has a name of its own, host$h (a UTS namespace), and an /etc/hosts that maps
#       every host's name to its address (a mount namespace): for software that advertises
#       the host's name, which the namespaces would otherwise share with the machine
#   -1  run COMMAND once, in host 0, with NETNS_TAG set and no rank environment (for a launcher
#       that starts the ranks itself: host h is namespace $NETNS_TAG-h$h at 10.77.0.(h+1));
#       its output passes through and its status is the exit status (124 on the deadline).
#       NETNS_ON names a script: `$NETNS_ON H COMMAND...` runs COMMAND in host H (with -u, under
#       its name and /etc/hosts too)
#
# Each rank sees RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR (host 0's address),
# MASTER_PORT, COLLIE_HOSTID, COLLIE_SOCKET_IFNAME=eth0 and NETNS_HOST (its host index).
# Exit status: 0 when every rank exited 0, the first failing rank's status otherwise, 124 on
# the deadline, 77 (after a "SKIP:" line) when this machine cannot run it (not root, no
# iproute2, tc or nft, or namespaces refused), 2 on bad usage.
set -uo pipefail

HOSTS=4 PER_HOST=1 RATE="" QUEUE=100ms DROP="" CONGESTION="" DEADLINE=120 PORT=29500 LOGDIR="" ALL_OUT=0 CHECK_ONLY=0 ONCE=0
NAMES=0
FAULT=""
SUBNET=10.77.0
GRACE=10  # seconds the other ranks get to notice a failed peer before they are killed

usage() {
  sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
skip() {
  echo "SKIP: $*"
  exit 77
}

while getopts ":k:m:r:l:d:c:t:p:o:f:anu1h" opt; do
  case $opt in
    k) HOSTS=$OPTARG ;;
    m) PER_HOST=$OPTARG ;;
    r) RATE=$OPTARG ;;
    l) QUEUE=$OPTARG ;;
    d) DROP=$OPTARG ;;
    c) CONGESTION=$OPTARG ;;
    t) DEADLINE=$OPTARG ;;
    p) PORT=$OPTARG ;;
    o) LOGDIR=$OPTARG ;;
    f) FAULT=$OPTARG ;;
    a) ALL_OUT=1 ;;
    n) CHECK_ONLY=1 ;;
    u) NAMES=1 ;;
    1) ONCE=1 ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
[[ $HOSTS =~ ^[0-9]+$ && $HOSTS -ge 1 && $HOSTS -le 200 ]] || { echo "netns_hosts: -k $HOSTS: 1..200" >&2; exit 2; }
[[ $PER_HOST =~ ^[0-9]+$ && $PER_HOST -ge 1 ]] || { echo "netns_hosts: -m $PER_HOST: >= 1" >&2; exit 2; }
[[ $DEADLINE =~ ^[0-9]+$ ]] || { echo "netns_hosts: -t $DEADLINE: seconds" >&2; exit 2; }
[ -n "$DROP" ] && ! [[ $DROP =~ ^[0-9]*\.?[0-9]+$ ]] && { echo "netns_hosts: -d $DROP: a percentage" >&2; exit 2; }
[ -n "$FAULT" ] && ! [[ $FAULT =~ ^[0-9]*\.?[0-9]+:.+ ]] && { echo "netns_hosts: -f $FAULT: SECONDS:SCRIPT" >&2; exit 2; }
[ $CHECK_ONLY -eq 1 ] || [ $# -ge 1 ] || usage

[ "$(id -u)" -eq 0 ] || skip "network namespaces need root (uid $(id -u))"
for tool in ip timeout; do
  command -v $tool >/dev/null || skip "$tool not found (install iproute2 and coreutils)"
done
[ -z "$RATE" ] || command -v tc >/dev/null || skip "tc not found (install iproute2)"
[ -z "$DROP" ] || command -v nft >/dev/null || skip "nft not found (install nftables)"
if [ $NAMES -eq 1 ]; then
  command -v unshare >/dev/null || skip "unshare not found (install util-linux)"
  unshare --uts --mount true 2>/dev/null || skip "unshare --uts --mount refused here"
fi

# Unique per run, so parallel runs never share a namespace; short, as interface names are.
TAG="cn$$r$RANDOM"
BRNS="$TAG-br"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/netns_hosts.XXXXXX")
[ -n "$LOGDIR" ] && mkdir -p "$LOGDIR" || LOGDIR=$WORK
CREATED=()
PIDS=()

cleanup() {
  local ns pid
  # A second signal must not cut the teardown short: timeout sends its TERM twice.
  trap - EXIT
  trap '' INT TERM
  # Teardown reports nothing: the shell would otherwise announce each rank it killed.
  exec 2>/dev/null
  for pid in "${PIDS[@]}"; do kill -KILL "$pid"; done
  # Anything a rank left behind lives in one of this run's namespaces: kill it by namespace.
  for ns in "${CREATED[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  done
  for pid in "${PIDS[@]}"; do wait "$pid"; done
  for ns in "${CREATED[@]}"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs a setup step; a failure is fatal (and tears down what exists so far).
must() {
  if ! "$@" 2>"$WORK/err"; then
    echo "netns_hosts: setup failed: $*: $(cat "$WORK/err")" >&2
    exit 1
  fi
}

hostns() { echo "$TAG-h$1"; }
addr() { echo "$SUBNET.$(($1 + 1))"; }

# on_host.sh H COMMAND...: COMMAND in host H. With -u the name and /etc/hosts are set in
# namespaces of the command's own, which end with it: nothing of the machine's changes.
{
  echo "127.0.0.1 localhost"
  echo "::1 localhost ip6-localhost ip6-loopback"
  for ((h = 0; h < HOSTS; h++)); do echo "$(addr $h) host$h"; done
} >"$WORK/hosts"
if [ $NAMES -eq 1 ]; then
  cat >"$WORK/on_host.sh" <<EOF
#!/bin/sh
h=\$1
shift
exec ip netns exec "$TAG-h\$h" unshare --uts --mount sh -c \\
  'mount --bind "\$0" /etc/hosts && hostname "\$1" && shift && exec "\$@"' \\
  "$WORK/hosts" "host\$h" "\$@"
EOF
else
  printf '#!/bin/sh\nh=$1\nshift\nexec ip netns exec "%s-h$h" "$@"\n' "$TAG" >"$WORK/on_host.sh"
fi
chmod +x "$WORK/on_host.sh"

ip netns add "$BRNS" 2>"$WORK/err" || skip "cannot create a network namespace: $(cat "$WORK/err")"
CREATED+=("$BRNS")
must ip -n "$BRNS" link add br0 type bridge
must ip -n "$BRNS" link set br0 up
for ((h = 0; h < HOSTS; h++)); do
  ns=$(hostns $h)
  must ip netns add "$ns"
  CREATED+=("$ns")
  # The pair is made inside the bridge namespace with its far end placed straight into the
  # host's, so its names never exist in the root namespace.
  must ip -n "$BRNS" link add "h$h" type veth peer name eth0 netns "$ns"
  must ip -n "$BRNS" link set "h$h" master br0 up
  must ip -n "$ns" addr add "$(addr $h)/24" dev eth0
  must ip -n "$ns" link set eth0 up
  must ip -n "$ns" link set lo up
  [ -z "$CONGESTION" ] || must ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$CONGESTION"
  if [ -n "$RATE" ]; then
    # Both directions: the host's egress, and the bridge port's egress toward the host.
    must tc -n "$ns" qdisc add dev eth0 root tbf rate "$RATE" burst 256kb latency "$QUEUE"
    must tc -n "$BRNS" qdisc add dev "h$h" root tbf rate "$RATE" burst 256kb latency "$QUEUE"
  fi
done
if [ -n "$DROP" ]; then
  per10k=$(awk -v p="$DROP" 'BEGIN { printf "%d", p * 100 + 0.5 }')
  cat >"$WORK/drop.nft" <<EOF
table bridge collie_drop {
  chain forward {
    type filter hook forward priority 0; policy accept;
    numgen random mod 10000 < $per10k counter drop
  }
}
EOF
  ip netns exec "$BRNS" nft -f "$WORK/drop.nft" 2>"$WORK/err" ||
    skip "nftables bridge filtering unavailable: $(cat "$WORK/err")"
fi

# The bridge learns addresses as the first frames cross it; wait until every host answers.
for ((h = 1; h < HOSTS; h++)); do
  ok=0
  for _ in $(seq 50); do
    if timeout 2 ip netns exec "$(hostns 0)" bash -c "exec 3<>/dev/tcp/$(addr $h)/9" 2>/dev/null ||
      ip -n "$(hostns 0)" neigh show "$(addr $h)" | grep -q lladdr; then
      ok=1
      break
    fi
    sleep 0.1
  done
  [ $ok -eq 1 ] || { echo "netns_hosts: host $h ($(addr $h)) unreachable from host 0" >&2; exit 1; }
done

if [ $CHECK_ONLY -eq 1 ]; then
  echo "netns_hosts: $HOSTS hosts ($TAG-h0..h$((HOSTS - 1))) on $SUBNET.0/24 rate=${RATE:-none} drop=${DROP:-0}%"
  exit 0
fi

if [ $ONCE -eq 1 ]; then
  # In the background so the EXIT trap (which kills by namespace) still runs on a signal.
  export NETNS_TAG=$TAG NETNS_ON=$WORK/on_host.sh
  timeout -k 5 "$DEADLINE" "$NETNS_ON" 0 "$@" </dev/null &
  PIDS+=($!)
  wait $!
  exit $?
fi

WORLD=$((HOSTS * PER_HOST))
for ((h = 0; h < HOSTS; h++)); do
  for ((l = 0; l < PER_HOST; l++)); do
    r=$((h * PER_HOST + l))
    "$WORK/on_host.sh" $h env RANK=$r WORLD_SIZE=$WORLD LOCAL_RANK=$l \
      LOCAL_WORLD_SIZE=$PER_HOST MASTER_ADDR="$(addr 0)" MASTER_PORT="$PORT" \
      COLLIE_HOSTID="$TAG-host$h" COLLIE_SOCKET_IFNAME=eth0 NETNS_HOST=$h \
      "$@" >"$LOGDIR/rank$r.out" 2>"$LOGDIR/rank$r.err" </dev/null &
    PIDS[r]=$!
  done
done

if [ -n "$FAULT" ]; then
  (sleep "${FAULT%%:*}" && NETNS_TAG=$TAG NETNS_BR=$BRNS NETNS_LOGDIR=$LOGDIR bash -c "${FAULT#*:}" >"$LOGDIR/fault.log" 2>&1) &
  PIDS+=($!)
fi

# Poll rather than wait: a plain wait has no deadline.
STATUS=()
first_fail=""
fail_at=0
start=$SECONDS
left=$WORLD
while [ $left -gt 0 ]; do
  for ((r = 0; r < WORLD; r++)); do
    [ -n "${STATUS[r]:-}" ] && continue
    kill -0 "${PIDS[r]}" 2>/dev/null && continue
    wait "${PIDS[r]}"
    STATUS[r]=$?
    left=$((left - 1))
    if [ "${STATUS[r]}" -ne 0 ] && [ -z "$first_fail" ]; then
      first_fail=$r
      fail_at=$SECONDS
    fi
  done
  [ $left -eq 0 ] && break
  if [ $((SECONDS - start)) -ge "$DEADLINE" ]; then
    echo "netns_hosts: deadline of ${DEADLINE}s passed with $left rank(s) still running" >&2
    break
  fi
  if [ -n "$first_fail" ] && [ $((SECONDS - fail_at)) -ge $GRACE ]; then
    echo "netns_hosts: rank $first_fail failed; killing $left rank(s) still running" >&2
    break
  fi
  sleep 0.1
done

if [ -n "$DROP" ]; then
  dropped=$(ip netns exec "$BRNS" nft list chain bridge collie_drop forward 2>/dev/null |
    sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
  echo "netns_hosts: the bridge dropped ${dropped:-?} frames" >&2
fi
rc=0
for ((r = 0; r < WORLD; r++)); do
  st=${STATUS[r]:-running}
  if [ $r -eq 0 ] || [ $ALL_OUT -eq 1 ]; then
    [ $ALL_OUT -eq 1 ] && sed "s/^/[$r] /" "$LOGDIR/rank$r.out" || cat "$LOGDIR/rank$r.out"
  fi
  [ -s "$LOGDIR/rank$r.err" ] && tail -n 20 "$LOGDIR/rank$r.err" | sed "s/^/[$r err] /" >&2
  if [ "$st" = running ]; then
    [ $rc -eq 0 ] && rc=124
  elif [ "$st" -ne 0 ]; then
    echo "netns_hosts: rank $r (host $((r / PER_HOST))) exited with status $st" >&2
    rc=$st
  fi
done
# The first rank to fail explains the run better than the ones that followed it down.
[ -n "$first_fail" ] && rc=${STATUS[first_fail]}
exit $rc
