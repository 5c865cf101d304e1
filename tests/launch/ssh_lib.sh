# shellcheck shell=bash
# Private sshd daemons on netns_hosts.sh hosts, for tests: each host's sshd has its own config
# and host key in a directory, listens on port 22 of that host's address, and lets root in by
# the directory's key only, so nothing of the machine's ssh (/etc/ssh, ~/.ssh) is read or
# changed. Sourced; ssh_start_hosts DIR N (from netns_hosts.sh's -1 command, in host 0) returns
# 77 (after a SKIP line) where OpenSSH is missing and 1 where an sshd does not answer; then
# `ssh -F DIR/ssh_config 10.77.0.(h+1)` reaches host h. ssh_stop ends the daemons by process id.
SSH_PIDS=()

# sshd_config for host H at ADDR: root by the test's key, nothing else. StrictModes would
# refuse that key, which lies under the world-writable temp folder.
ssh_sshd_conf() {
  local dir=$1 h=$2 addr=$3
  cat <<EOF
ListenAddress $addr:22
HostKey $dir/h$h/host_key
PidFile none
UsePAM no
AllowUsers root
PermitRootLogin prohibit-password
AuthenticationMethods publickey
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile $dir/authorized_keys
StrictModes no
EOF
}

# Up when host H's sshd lets the test's key run a command, within 10 s.
ssh_wait() {
  local dir=$1 h=$2 pid=$3 end=$((SECONDS + 10))
  while [ $SECONDS -lt $end ] && kill -0 "$pid" 2>/dev/null; do
    timeout 10 ssh -F "$dir/ssh_config" "10.77.0.$((h + 1))" true 2>/dev/null && return 0
    sleep 0.1
  done
  echo "ssh: host $h's sshd does not answer; it says:" >&2
  tail -n 15 "$dir/h$h/sshd.log" >&2
  return 1
}

ssh_start_hosts() {
  local dir=$1 n=$2 h t addr
  [ -n "${NETNS_ON:-}" ] || { echo "ssh_start_hosts: needs netns_hosts.sh -1" >&2; return 1; }
  for t in /usr/sbin/sshd /usr/bin/ssh /usr/bin/ssh-keygen; do
    [ -x $t ] || { echo "SKIP: $t is missing (make test installs openssh-server)"; return 77; }
  done
  mkdir -p "$dir" && chmod 700 "$dir" || return 1
  ssh-keygen -q -t ed25519 -N '' -C collie-test -f "$dir/id_ed25519" || return 1
  cp "$dir/id_ed25519.pub" "$dir/authorized_keys" || return 1
  : >"$dir/known_hosts"
  for ((h = 0; h < n; h++)); do
    addr=10.77.0.$((h + 1))
    mkdir -p "$dir/h$h/run" || return 1
    ssh-keygen -q -t ed25519 -N '' -C "host$h" -f "$dir/h$h/host_key" || return 1
    echo "$addr $(cut -d ' ' -f 1,2 "$dir/h$h/host_key.pub")" >>"$dir/known_hosts"
    ssh_sshd_conf "$dir" $h "$addr" >"$dir/h$h/sshd_config"
    # sshd needs /run/sshd, a path fixed when it was built. An overlay on /run in this host's
    # own mount namespace (ip netns exec makes one) adds it and leaves the machine's as it is.
    # shellcheck disable=SC2016 # expanded by that shell
    "$NETNS_ON" $h sh -c 'mount -t tmpfs -o size=1m tmpfs "$1" && mkdir "$1/up" "$1/work" &&
      mount -t overlay overlay -o "lowerdir=/run,upperdir=$1/up,workdir=$1/work" /run &&
      mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e -f "$2"' \
      sh "$dir/h$h/run" "$dir/h$h/sshd_config" >"$dir/h$h/sshd.log" 2>&1 </dev/null &
    SSH_PIDS+=($!)
  done
  # The client's side: the test's key, and each host's key known in advance, as on a cluster.
  cat >"$dir/ssh_config" <<EOF
Host *
  User root
  IdentityFile $dir/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $dir/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  UpdateHostKeys no
  BatchMode yes
  ConnectTimeout 10
  LogLevel ERROR
EOF
  for ((h = 0; h < n; h++)); do ssh_wait "$dir" $h "${SSH_PIDS[h]}" || return 1; done
}

ssh_stop() {
  [ ${#SSH_PIDS[@]} -eq 0 ] || kill "${SSH_PIDS[@]}" 2>/dev/null
  SSH_PIDS=()
}
