#!/usr/bin/env bash
# Real launchers starting real Collie programs that check their results: collie-perf -c 1 (every
# element compared with the expected sum; "Out of bounds values : 0 OK") and the C example
# (each rank checks its sums and prints "ok"). On one host no launcher gets MASTER_ADDR or
# MASTER_PORT from the test: Collie finds rank 0 from what the launcher sets. Across hosts (the
# -hosts cases, on tests/netns/netns_hosts.sh hosts) each runs the README's command for it;
# mpirun and mpiexec reach the other host through ssh, to an sshd the test starts in each host
# with a key of its own (ssh_lib.sh).
#
#   launchers_test.sh BIN_DIR mpirun|mpiexec|srun|torchrun|torchrun-hosts|mpirun-hosts|
#                             mpiexec-hosts|srun-hosts
# Exit 77 (after a SKIP line) when the launcher is not installed or cannot run here.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
USAGE="usage: launchers_test.sh BIN_DIR mpirun|mpiexec|srun|torchrun|torchrun-hosts|mpirun-hosts|mpiexec-hosts|srun-hosts"
BIN=${1:?$USAGE}
CASE=${2:?$USAGE}
PERF="$BIN/collie-perf"
EXAMPLE="$BIN/collie-example-c"
PY=/usr/bin/python3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/launchers_test.XXXXXX")
CLEANUP=()
cleanup() {
  local c
  for c in "${CLEANUP[@]}"; do eval "$c" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
  echo "FAIL: $*"
  exit 1
}
skip() {
  echo "SKIP: $*"
  exit 77
}
need() {
  [ -x "$1" ] || skip "$1 is missing (make test installs ${2:-it})"
}
# Not one variable that would tell rank 0's address, nor a launcher's from an enclosing job.
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE COLLIE_SECRET
unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE PMI_RANK PMI_SIZE PMIX_RANK SLURM_PROCID
export COLLIE_CONNECT_TIMEOUT_MS=30000

PERF_ARGS=(-b 8 -e 1M -f 32 -c 1 -n 2 -w 1 -d float)
# Runs a launcher command whose program is collie-perf; checks its table.
check_perf() {
  local what=$1
  shift
  echo "== $what: $*"
  timeout 120 "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  grep -v 'collie-perf: sweep' "$WORK/out" | tail -n 12
  [ $rc -eq 0 ] || { tail -n 30 "$WORK/err"; fail "$what: exit status $rc"; }
  grep -q "Out of bounds values : 0 OK" "$WORK/out" || fail "$what: collie-perf found wrong values"
  [ "$(grep -c '^\(\[[a-z0-9]*\]:\)\? *[0-9]\+ \+[0-9]\+ \+float' "$WORK/out")" -eq 4 ] ||
    fail "$what: expected 4 rows of results"
}
# Runs a launcher command whose program is the C example with N ranks; each must say ok.
check_example() {
  local what=$1 n=$2
  shift 2
  echo "== $what: $*"
  timeout 120 "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  cat "$WORK/out"
  [ $rc -eq 0 ] || { tail -n 30 "$WORK/err"; fail "$what: exit status $rc"; }
  local r
  for ((r = 0; r < n; r++)); do
    grep -q "rank $r of $n: AllReduce sum of 4096 floats ok" "$WORK/out" ||
      fail "$what: rank $r did not report correct sums"
  done
}

# Two ranks on each of the named hosts host0 and host1 (netns_hosts.sh -u), as collie-perf's
# table lists them ("#  Rank  2 Group  0 Pid  1234 on      host1 device host").
two_per_host() {
  [ "$(grep -c '#  Rank  [0-3] .* on *host0 ' "$1")" -eq 2 ] &&
    [ "$(grep -c '#  Rank  [0-3] .* on *host1 ' "$1")" -eq 2 ]
}

# torchrun as Debian 12 ships it (torch 1.13 on Python 3.11): --redirects and --tee other than
# 0 and 3, or it fails parsing its own default.
TORCHRUN=("$PY" -m torch.distributed.run --redirects 1 --tee 1)
need_torchrun() {
  if ! [ -x "$PY" ] || ! "$PY" -c 'import torch.distributed.run' 2>/dev/null; then
    skip "$PY cannot import torch.distributed.run (make test installs python3-torch)"
  fi
}

# srun, mpirun and mpiexec across hosts: the case runs again in host 0 of two named network-
# namespace hosts, and netns_hosts.sh ends all that is left there on exit. That run keeps its
# files in this one's folder, which is removed even where the run itself is killed.
in_host0() {
  TMPDIR=$WORK timeout 200 bash "$HERE/../netns/netns_hosts.sh" -k 2 -u -1 -t 180 -- \
    bash "$0" "$BIN" "$CASE" in-host0
  local rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || fail "$1: exit status $rc"
  exit $rc
}

# An sshd in each host for mpirun and mpiexec, which reach host 1 through ssh as on a cluster.
# sshd gives a remote rank a clean environment, so what the ranks need goes by name, as a
# user's would: the COLLIE_* variables and LD_LIBRARY_PATH set here.
ssh_hosts() {
  # shellcheck source=ssh_lib.sh
  source "$HERE/ssh_lib.sh"
  CLEANUP+=("ssh_stop")
  ssh_start_hosts "$WORK/ssh" 2 || exit $?
  mapfile -t FORWARD < <(compgen -e | grep -E '^(COLLIE_[A-Z0-9_]*|LD_LIBRARY_PATH)$')
}

case $CASE in
  mpirun-hosts)
    MPIRUN=/usr/bin/mpirun.openmpi
    need $MPIRUN openmpi-bin
    need /usr/sbin/sshd openssh-server
    [ "${3:-}" = in-host0 ] || in_host0 "mpirun on two hosts"
    ssh_hosts
    # Called by its absolute path, mpirun puts its own bin folder, orted's, first on the remote
    # PATH (as --prefix would).
    MPI_FLAGS=(--allow-run-as-root --oversubscribe --mca plm_rsh_agent "ssh -F $WORK/ssh/ssh_config"
      --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 -np 4
      -H "10.77.0.1:2,10.77.0.2:2" -x MASTER_ADDR=10.77.0.1 -x MASTER_PORT=29500)
    for v in "${FORWARD[@]}"; do MPI_FLAGS+=(-x "$v"); done
    check_perf "mpirun on 2 hosts" $MPIRUN "${MPI_FLAGS[@]}" "$PERF" "${PERF_ARGS[@]}"
    two_per_host "$WORK/out" || fail "mpirun on two hosts: not two ranks on each host"
    check_example "mpirun on 2 hosts" 4 $MPIRUN "${MPI_FLAGS[@]}" "$EXAMPLE"
    ;;
  mpiexec-hosts)
    MPIEXEC=/usr/bin/mpiexec.hydra
    need $MPIEXEC mpich
    need /usr/sbin/sshd openssh-server
    [ "${3:-}" = in-host0 ] || in_host0 "mpiexec on two hosts"
    ssh_hosts
    # Hydra adds HYDRA_LAUNCHER_EXTRA_ARGS to ssh's own and starts its proxy by an absolute path.
    # -genvlist replaces the default of passing everything.
    MPI_FLAGS=(-launcher ssh -iface eth0 -n 4 -hosts "10.77.0.1:2,10.77.0.2:2"
      -genv MASTER_ADDR 10.77.0.1 -genv MASTER_PORT 29500
      -genvlist "$(IFS=, && echo "${FORWARD[*]}")")
    HYDRA=(env "HYDRA_LAUNCHER_EXTRA_ARGS=-F $WORK/ssh/ssh_config" "$MPIEXEC" "${MPI_FLAGS[@]}")
    check_perf "mpiexec on 2 hosts" "${HYDRA[@]}" "$PERF" "${PERF_ARGS[@]}"
    two_per_host "$WORK/out" || fail "mpiexec on two hosts: not two ranks on each host"
    check_example "mpiexec on 2 hosts" 4 "${HYDRA[@]}" "$EXAMPLE"
    ;;
  mpirun)
    MPIRUN=/usr/bin/mpirun.openmpi
    need $MPIRUN openmpi-bin
    MPI_FLAGS=(--oversubscribe)
    [ "$(id -u)" -eq 0 ] && MPI_FLAGS+=(--allow-run-as-root)
    check_perf "mpirun" $MPIRUN "${MPI_FLAGS[@]}" -np 3 "$PERF" "${PERF_ARGS[@]}"
    check_example "mpirun" 3 $MPIRUN "${MPI_FLAGS[@]}" -np 3 "$EXAMPLE"
    ;;
  mpiexec)
    MPIEXEC=/usr/bin/mpiexec.hydra
    need $MPIEXEC mpich
    check_perf "mpiexec" $MPIEXEC -n 3 "$PERF" "${PERF_ARGS[@]}"
    check_example "mpiexec" 3 $MPIEXEC -n 3 "$EXAMPLE"
    # Two jobs at once on one host: each finds its own rank 0.
    $MPIEXEC -n 2 "$EXAMPLE" >"$WORK/a" 2>&1 &
    a=$!
    $MPIEXEC -n 2 "$EXAMPLE" >"$WORK/b" 2>&1 || fail "the second of two concurrent jobs: $(cat "$WORK/b")"
    wait $a || fail "the first of two concurrent jobs: $(cat "$WORK/a")"
    [ "$(cat "$WORK/a" "$WORK/b" | grep -c 'of 2: AllReduce sum of 4096 floats ok')" -eq 4 ] ||
      fail "two concurrent jobs: $(cat "$WORK/a" "$WORK/b")"
    ;;
  srun)
    # shellcheck source=slurm_lib.sh
    source "$HERE/slurm_lib.sh"
    CLEANUP+=("slurm_stop")
    slurm_start "$WORK/slurm" || exit $?
    # No MASTER_*: srun on one node says enough. Two steps at once must not meet.
    check_perf "srun" srun -n 3 -O "$PERF" "${PERF_ARGS[@]}"
    check_example "srun" 3 srun -n 3 -O "$EXAMPLE"
    srun -n 2 -O "$EXAMPLE" >"$WORK/a" 2>&1 &
    a=$!
    srun -n 2 -O "$EXAMPLE" >"$WORK/b" 2>&1 || fail "the second of two concurrent steps: $(cat "$WORK/b")"
    wait $a || fail "the first of two concurrent steps: $(cat "$WORK/a")"
    ;;
  srun-hosts)
    # Two Slurm nodes, each slurmd in its own network-namespace host under its own name, and the
    # job as the README says: MASTER_ADDR from the allocation's first node, then srun -N 2 -n 4.
    [ "${3:-}" = in-host0 ] || in_host0 "srun on two nodes"
    # shellcheck source=slurm_lib.sh
    source "$HERE/slurm_lib.sh"
    CLEANUP+=("slurm_stop")
    slurm_start_hosts "$WORK/slurm" 2 || exit $?
    # shellcheck disable=SC2016 # expanded in the allocation
    JOB='export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1) MASTER_PORT=29500
srun -N 2 -n 4 "$@"'
    check_perf "srun on 2 nodes" salloc -N 2 -n 4 bash -c "$JOB" job "$PERF" "${PERF_ARGS[@]}"
    two_per_host "$WORK/out" || fail "srun on two nodes: not two ranks on each node"
    check_example "srun on 2 nodes" 4 salloc -N 2 -n 4 bash -c "$JOB" job "$EXAMPLE"
    ;;
  torchrun)
    need_torchrun
    check_perf "torchrun static" "${TORCHRUN[@]}" --nproc_per_node 3 --no_python \
      "$PERF" "${PERF_ARGS[@]}"
    check_example "torchrun static" 3 "${TORCHRUN[@]}" --nproc_per_node 3 --no_python "$EXAMPLE"
    check_perf "torchrun c10d" "${TORCHRUN[@]}" --nnodes 1 --nproc_per_node 3 --rdzv_backend c10d \
      --rdzv_endpoint 127.0.0.1:0 --no_python "$PERF" "${PERF_ARGS[@]}"
    check_example "torchrun c10d" 3 "${TORCHRUN[@]}" --nnodes 1 --nproc_per_node 3 \
      --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:0 --no_python "$EXAMPLE"
    ;;
  torchrun-hosts)
    # Two network-namespace hosts, one torchrun agent on each, two ranks per host, exactly as
    # the README gives the commands for two machines: the static rendezvous, then c10d. Under
    # c10d the agents advertise their host's name, so there each host has its own (-u).
    need_torchrun
    cat >"$WORK/node.sh" <<EOF
#!/usr/bin/env bash
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
addr=\$MASTER_ADDR
unset MASTER_ADDR MASTER_PORT
if [ "\$1" = static ]; then
  shift
  exec ${TORCHRUN[*]} --nnodes 2 --node_rank \$NETNS_HOST --master_addr \$addr \\
    --master_port 29500 --nproc_per_node 2 --no_python "\$@"
fi
shift
exec ${TORCHRUN[*]} --nnodes 2 --nproc_per_node 2 --rdzv_backend c10d \\
  --rdzv_endpoint \$addr:29400 --rdzv_id collietest --no_python "\$@"
EOF
    # on_hosts static|c10d PROGRAM...; netns_hosts.sh -a prints both hosts' output.
    on_hosts() {
      local mode=$1 names=()
      [ "$mode" = c10d ] && names=(-u)
      echo "== torchrun $mode on 2 hosts x 2 ranks: $*"
      out=$(timeout 150 bash "$HERE/../netns/netns_hosts.sh" -k 2 -m 1 "${names[@]}" -a -t 120 -- \
        bash "$WORK/node.sh" "$@" 2>"$WORK/err")
      rc=$?
      [ $rc -eq 77 ] && skip "torchrun $mode on two hosts: $(echo "$out" | sed -n 's/^SKIP: //p')"
      echo "$out" | grep -v 'collie-perf: sweep' | tail -n 12
      [ $rc -eq 0 ] || { tail -n 30 "$WORK/err"; fail "torchrun $mode on two hosts: status $rc"; }
    }
    for mode in static c10d; do
      on_hosts $mode "$PERF" "${PERF_ARGS[@]}"
      echo "$out" | grep -q "Out of bounds values : 0 OK" ||
        fail "torchrun $mode on two hosts: wrong values"
      echo "$out" | grep -q "#  Rank  3 " ||
        fail "torchrun $mode on two hosts: rank 3 is not in the table"
      echo "$out" >"$WORK/out"
      [ $mode = static ] || two_per_host "$WORK/out" ||
        fail "torchrun $mode on two hosts: not two ranks on each host"
      on_hosts $mode "$EXAMPLE"
      for r in 0 1 2 3; do
        echo "$out" | grep -q "rank $r of 4: AllReduce sum of 4096 floats ok" ||
          fail "torchrun $mode on two hosts: rank $r of 4 did not report correct sums"
      done
    done
    ;;
  *)
    echo "launchers_test: unknown case $CASE" >&2
    exit 2
    ;;
esac
echo "PASS: $CASE"
