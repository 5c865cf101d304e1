#!/usr/bin/env bash
# Runs a command as root in a pristine Debian root: an overlay of / in private mount and PID
# namespaces, where every Debian package that the machine image did not hold when new
# (tools/pristine/base-packages.txt) is purged first. Nothing it does reaches the machine: its
# writes land in a scratch folder that is removed afterwards, and its processes die with it.
#
#   pristine_root.sh [-b HOST_DIR:ROOT_DIR[:ro]]... [-k] -- COMMAND [ARG]...
#
#   -b  binds a folder of the machine into the root (read-only with :ro)
#   -k  keeps the scratch folder (its path is printed) to look at afterwards
#
# Downloaded .debs and pip's downloads are cached across runs in $COLLIE_PRISTINE_CACHE
# (default /var/cache/collie/pristine), so a second run spends its time building and testing.
# The developer's folders under /work and Collie's own caches are hidden inside the root.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${COLLIE_PRISTINE_CACHE:-/var/cache/collie/pristine}
BASE_LIST="$HERE/pristine/base-packages.txt"

usage() {
  echo "usage: pristine_root.sh [-b HOST_DIR:ROOT_DIR[:ro]]... [-k] -- COMMAND [ARG]..." >&2
  exit 2
}

# The part that runs inside the new namespaces (PID 1 there): builds the root, enters it.
inner() {
  local scratch=$1
  shift
  local merged=$scratch/root
  mount -t overlay overlay -o "lowerdir=/,upperdir=$scratch/upper,workdir=$scratch/work" "$merged"
  mount -t proc proc "$merged/proc"
  mount --rbind /sys "$merged/sys"
  mount --rbind /dev "$merged/dev"
  # A /dev/shm and /tmp of its own, as large as the machine's.
  mount -t tmpfs -o "size=$(df -k --output=size /dev/shm | tail -n 1 | tr -d " ")k,mode=1777" tmpfs \
    "$merged/dev/shm"
  mount -t tmpfs -o mode=1777 tmpfs "$merged/tmp"
  mount -t tmpfs -o mode=755 tmpfs "$merged/run"
  mkdir -p "$merged/run/lock"
  # A new machine has no developer checkout and no Collie cache.
  [ -d "$merged/work" ] && mount -t tmpfs tmpfs "$merged/work"
  mkdir -p "$merged/var/cache/collie"
  mount -t tmpfs tmpfs "$merged/var/cache/collie"
  mkdir -p "$CACHE/apt-archives/partial" "$CACHE/pip" "$merged/root/.cache/pip"
  mount --bind "$CACHE/apt-archives" "$merged/var/cache/apt/archives"
  mount --bind "$CACHE/pip" "$merged/root/.cache/pip"
  mkdir -p "$merged/mnt/pristine"
  mount --bind -o ro "$HERE/pristine" "$merged/mnt/pristine"
  local b host dir mode
  for b in "${BINDS[@]}"; do
    [ -n "$b" ] || continue
    IFS=: read -r host dir mode <<<"$b"
    mkdir -p "$merged$dir"
    mount --bind "$host" "$merged$dir"
    [ "$mode" = ro ] && mount -o remount,bind,ro "$merged$dir"
  done
  chroot "$merged" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
    PATH="$PATH" CI="${CI:-}" /bin/bash -c 'set -e; cd /root
      bash /mnt/pristine/purge_extra.sh /mnt/pristine/base-packages.txt
      exec "$@"' pristine "$@"
}

if [ "${1:-}" = --inner ]; then
  shift
  IFS=$'\n' read -r -d '' -a BINDS <<<"${PRISTINE_BINDS:-}" || true
  inner "$@"
  exit
fi

BINDS=()
KEEP=0
while [ $# -gt 0 ]; do
  case $1 in
  -b) BINDS+=("${2:?-b needs HOST_DIR:ROOT_DIR}"); shift 2 ;;
  -k) KEEP=1; shift ;;
  --) shift; break ;;
  *) usage ;;
  esac
done
[ $# -gt 0 ] || usage
[ "$(id -u)" -eq 0 ] || { echo "pristine_root.sh: needs root (mounts and namespaces)" >&2; exit 1; }
[ -f "$BASE_LIST" ] || { echo "pristine_root.sh: $BASE_LIST is missing" >&2; exit 1; }
for b in "${BINDS[@]}"; do
  host=${b%%:*}
  [ -d "$host" ] || { echo "pristine_root.sh: -b $b: no folder $host" >&2; exit 2; }
done

mkdir -p "$CACHE"
# One pristine root at a time: they share apt's download cache and its lock.
exec 9>"$CACHE/lock"
flock -w 7200 9 || { echo "pristine_root.sh: another pristine root ran for 2 h" >&2; exit 1; }
SCRATCH=$(mktemp -d "$CACHE/root.XXXXXX")
mkdir "$SCRATCH/upper" "$SCRATCH/work" "$SCRATCH/root"
cleanup() {
  if [ $KEEP -eq 1 ]; then
    echo "pristine_root.sh: kept $SCRATCH/upper" >&2
  else
    rm -rf "$SCRATCH"
  fi
}
trap cleanup EXIT
# PID 1 of the new PID namespace is the inner shell: when it ends, every process left in the
# root (daemons the command started included) is killed, and the mounts go with the namespace.
rc=0
PRISTINE_BINDS=$(printf '%s\n' "${BINDS[@]}") \
  unshare --mount --pid --fork --propagation private bash "$0" --inner "$SCRATCH" "$@" || rc=$?
exit $rc
