#!/bin/bash
# Collie's UCX path against its ceiling and against Collie's own transports, in one run, each
# measurement beside the one it is compared with (2 ranks of this host):
#   1. ucx_perftest tag_bw (1 MiB) and tag_lat (8 B) over UCX_TLS=tcp and posix,cma
#      (Debian's ucx-utils; skipped where it is missing);
#   2. collie-ucx-bench: raw ucp against Collie's UCX connection, 1 MiB streaming and 8 B
#      ping-pong, on the same lanes;
#   3. collie-perf all_reduce busbw, 1 MiB..256 MiB, Collie's tcp beside UCX_TLS=tcp and its
#      shm beside UCX_TLS=posix and posix,cma (ring forced on both sides), and the 8 B time.
# With a second build's bin folder (BASE=old/build/bin), each Collie line runs there too, next
# to this build's, so that a change is judged within one run.
#
#   perf/ucx_bench.sh [ROUNDS]          (BIN=build/bin, BASE unset, ROUNDS 1)
set -u
BIN=${BIN:-$(dirname "$0")/../build/bin}
BASE=${BASE:-}
ROUNDS=${1:-1}
builds=("$BIN")
[ -n "$BASE" ] && builds=("$BASE" "$BIN")

perftest() {  # TLS TEST SIZE ITERS: the client's last line (typical lat, avg lat, ..., MB/s)
  local port=$((20000 + RANDOM % 20000))
  UCX_TLS=$1 ucx_perftest -t "$2" -s "$3" -n "$4" -p $port >/dev/null 2>&1 &
  local server=$!
  sleep 1.5  # the server listens before the client connects
  UCX_TLS=$1 ucx_perftest localhost -t "$2" -s "$3" -n "$4" -p $port 2>/dev/null | grep Final
  wait $server
}

busbw() {  # BIN ENV...: "size:busbw" for 1M..256M (out of place)
  local b=$1
  shift
  env "$@" "$b/collie-run" -n 2 "$b/collie-perf" all_reduce -b 1M -e 256M -f 4 -n 10 -w 2 -c 0 \
    2>&1 | awk '/^ +[0-9]/ {printf "%s:%s ", $1 / 1048576 "M", $8}'
}

small() {  # BIN ENV...: the 8 B AllReduce time, us
  local b=$1
  shift
  env "$@" "$b/collie-run" -n 2 "$b/collie-perf" all_reduce -b 8 -e 8 -n 2000 -w 100 -c 0 \
    2>&1 | awk '/^ +8 / {print $6 " us"}'
}

for round in $(seq "$ROUNDS"); do
  echo "## round $round"
  if command -v ucx_perftest >/dev/null; then
    for tls in tcp posix,cma; do
      echo "ucx_perftest UCX_TLS=$tls tag_bw 1 MiB:  $(perftest $tls tag_bw 1048576 1000)"
      echo "ucx_perftest UCX_TLS=$tls tag_lat 8 B:   $(perftest $tls tag_lat 8 10000)"
    done
  fi
  for b in "${builds[@]}"; do
    for tls in tcp posix,cma; do
      echo "$b UCX_TLS=$tls: $(UCX_TLS=$tls "$b/collie-ucx-bench" --repeat 1 2>/dev/null | tail -1)"
    done
  done
  for pair in "tcp|UCX_TLS=tcp" "shm|UCX_TLS=posix" "shm|UCX_TLS=posix,cma"; do
    own=${pair%|*}
    lane=${pair#*|}
    for b in "${builds[@]}"; do
      echo "$b $own ring:        $(busbw "$b" COLLIE_TRANSPORT=$own COLLIE_ALGO=ring)"
      echo "$b ucx $lane ring:  $(busbw "$b" COLLIE_TRANSPORT=ucx COLLIE_ALGO=ring $lane)"
      echo "$b $own 8 B:         $(small "$b" COLLIE_TRANSPORT=$own)"
      echo "$b ucx $lane 8 B:   $(small "$b" COLLIE_TRANSPORT=ucx $lane)"
    done
  done
done
