# shellcheck shell=bash
# A private Slurm cluster in a directory, for tests: its own munge key and socket, slurm.conf,
# state and logs, and daemons on ports of their own, so nothing of the machine's Slurm (if any)
# is read or changed. Sourced; slurm_start DIR (one node: this host) and slurm_start_hosts DIR N
# (N nodes on netns_hosts.sh hosts) return 77 (after a SKIP line) where Slurm or munge is
# missing, 1 where the daemons do not come up, and export SLURM_CONF for srun. slurm_stop ends
# the daemons they started, by their process ids.
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

# slurm_conf DIR CONTROLLER(ADDR) CPUS CTLD_PORT SLURMD_PORT NODE=ADDR...
slurm_conf() {
  local dir=$1 ctld=$2 cpus=$3 ctld_port=$4 slurmd_port=$5 n names=()
  shift 5
  # %n: each node's slurmd keeps its spool, pid and log apart where several share a machine.
  cat <<EOF
ClusterName=collietest
SlurmctldHost=$ctld
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
SlurmdParameters=config_overrides
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
EOF
  for n in "$@"; do
    echo "NodeName=${n%%=*} NodeAddr=${n#*=} CPUs=$cpus State=UNKNOWN"
    names+=("${n%%=*}")
  done
  local IFS=,
  echo "PartitionName=test Nodes=${names[*]} Default=YES MaxTime=INFINITE State=UP" \
    "OverSubscribe=FORCE"
}

# The daemons every cluster needs, and its configuration; returns as slurm_start does.
slurm_common() {
  local dir=$1 ctld=$2 cpus=$3 t n
  shift 3
  SLURM_DIR=$dir
  for t in /usr/sbin/{munged,slurmctld,slurmd} /usr/bin/{srun,salloc,sinfo,scontrol}; do
    [ -x $t ] || { slurm_skip "$t is missing (make test installs munge slurmctld slurmd slurm-client)"; return; }
  done
  [ "$(id -u)" -eq 0 ] || { slurm_skip "a private Slurm needs root here (uid $(id -u))"; return; }
  mkdir -p "$dir/state" && chmod 700 "$dir"
  for n in "$@"; do mkdir -p "$dir/spool-${n%%=*}"; done
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
  slurm_conf "$dir" "$ctld" "$cpus" "$ctld_port" "$slurmd_port" "$@" >"$dir/slurm.conf"
  export SLURM_CONF=$dir/slurm.conf
  /usr/sbin/slurmctld -D -i -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 &
  SLURM_PIDS+=($!)
}

# Up when all N nodes are idle (each registers within a few seconds).
slurm_wait_idle() {
  local n=$1
  for _ in $(seq 150); do
    [ "$(sinfo -h -N -o %t 2>/dev/null | grep -c '^idle')" -eq "$n" ] && return 0
    sleep 0.2
  done
  echo "slurm: $n node(s) never became idle; sinfo, slurmctld and slurmd say:" >&2
  sinfo -N >&2
  tail -n 15 "$SLURM_DIR"/*.log "$SLURM_DIR"/*.out >&2
  return 1
}

# One node: this host, under its own name.
slurm_start() {
  local dir=$1 node
  node=$(hostname -s)
  slurm_common "$dir" "$node(127.0.0.1)" "$(nproc)" "$node=127.0.0.1" || return
  /usr/sbin/slurmd -D -f "$SLURM_CONF" -N "$node" >"$dir/slurmd.out" 2>&1 &
  SLURM_PIDS+=($!)
  slurm_wait_idle 1
}

# Nodes host0..host(N-1) of netns_hosts.sh -u, run from its -1 command (in host 0): slurmctld
# here, each node's slurmd in its own host through $NETNS_ON, all sharing one munged (its
# socket is a file). Each node offers 2 CPUs, whatever the machine has.
slurm_start_hosts() {
  local dir=$1 n=$2 h nodes=()
  [ -n "${NETNS_ON:-}" ] || { echo "slurm_start_hosts: needs netns_hosts.sh -u -1" >&2; return 1; }
  for ((h = 0; h < n; h++)); do nodes+=("host$h=10.77.0.$((h + 1))"); done
  slurm_common "$dir" "$(hostname -s)(10.77.0.1)" 2 "${nodes[@]}" || return
  # A namespace host's /sys (ip netns exec mounts one of its own) has no cgroup file system,
  # where slurmd would look for one to pick its cgroup plugin; none of the plugins used needs it.
  echo "CgroupPlugin=cgroup/v1" >"$dir/cgroup.conf"
  for ((h = 0; h < n; h++)); do
    "$NETNS_ON" $h /usr/sbin/slurmd -D -f "$SLURM_CONF" -N "host$h" >"$dir/slurmd-host$h.out" 2>&1 &
    SLURM_PIDS+=($!)
  done
  slurm_wait_idle "$n"
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
