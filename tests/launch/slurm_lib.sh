# shellcheck shell=bash
# A one-node Slurm cluster in a directory, for tests: its own munge key and socket, slurm.conf,
# state and logs, and daemons on ports of their own, so nothing of the machine's Slurm (if any)
# is read or changed. Sourced; slurm_start DIR returns 77 (after a SKIP line) where Slurm or
# munge is missing, 1 where its daemons do not come up, and exports SLURM_CONF for srun. slurm_stop ends the daemons
# it started, by their process ids.
SLURM_PIDS=()

slurm_skip() {
  echo "SKIP: $*"
  return 77
}

# A port below the ephemeral range (ip_local_port_range), where no outgoing connection of the
# machine's other work can hold it, and nothing listens.
slurm_free_port() {
  local p low
  low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
  [ "${low:-0}" -gt 12000 ] || low=32768
  for _ in $(seq 50); do
    p=$((10000 + RANDOM % (low - 10000)))
    (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo $p; return 0; }
  done
  return 1
}

slurm_conf() {
  local dir=$1 node=$2 cpus=$3 ctld_port=$4 slurmd_port=$5
  cat <<EOF
ClusterName=collietest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
}

slurm_start() {
  local dir=$1 t
  SLURM_DIR=$dir
  for t in /usr/sbin/munged /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/srun /usr/bin/sinfo; do
    [ -x $t ] || { slurm_skip "$t is missing (make test installs munge slurmctld slurmd slurm-client)"; return; }
  done
  [ "$(id -u)" -eq 0 ] || { slurm_skip "a private Slurm needs root here (uid $(id -u))"; return; }
  mkdir -p "$dir/state" "$dir/spool" && chmod 700 "$dir"
  local node
  node=$(hostname -s)
  dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none && chmod 400 "$dir/munge.key"
  /usr/sbin/munged --force --key-file="$dir/munge.key" --socket="$dir/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munged.seed" ||
    { slurm_skip "munged does not start: $(tail -n 3 "$dir/munged.log" 2>/dev/null)"; return; }
  SLURM_PIDS+=("$(cat "$dir/munged.pid")")
  local ctld_port slurmd_port
  if ! ctld_port=$(slurm_free_port) || ! slurmd_port=$(slurm_free_port); then
    slurm_skip "no free port for slurmctld"
    return
  fi
  slurm_conf "$dir" "$node" "$(nproc)" "$ctld_port" "$slurmd_port" >"$dir/slurm.conf"
  export SLURM_CONF=$dir/slurm.conf
  /usr/sbin/slurmctld -D -i -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 &
  SLURM_PIDS+=($!)
  /usr/sbin/slurmd -D -f "$SLURM_CONF" -N "$node" >"$dir/slurmd.out" 2>&1 &
  SLURM_PIDS+=($!)
  # Up when the node is idle (it registers within a few seconds).
  for _ in $(seq 100); do
    sinfo -h -o %t 2>/dev/null | grep -q '^idle' && return 0
    sleep 0.2
  done
  echo "slurm: the node never became idle; slurmctld and slurmd say:" >&2
  tail -n 15 "$dir/slurmctld.log" "$dir/slurmd.log" "$dir/slurmctld.out" "$dir/slurmd.out" >&2
  return 1
}

# Processes that hold a file of this cluster's directory open: its daemons and the step daemons
# (slurmstepd) that slurmd started, which outlive it.
slurm_dir_pids() {
  local p f
  for p in /proc/[0-9]*; do
    for f in "$p"/fd/*; do
      if [[ $(readlink "$f" 2>/dev/null) == "$SLURM_DIR"/* ]]; then
        echo "${p#/proc/}"
        break
      fi
    done
  done
}

slurm_stop() {
  local pid pids
  [ -n "${SLURM_DIR:-}" ] || return 0
  # Steps finish their bookkeeping with slurmd first; then nothing of the cluster is left.
  for _ in $(seq 50); do
    [ -z "$(squeue -h 2>/dev/null)" ] && break
    sleep 0.1
  done
  pids="${SLURM_PIDS[*]} $(slurm_dir_pids)"
  for pid in $pids; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 50); do
    local alive=0
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && return 0
    sleep 0.1
  done
  for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
}
