#!/usr/bin/env bash
# The README's quick start on a new machine: its commands exactly as printed (make run, make
# test), then the first again, in a fresh clone of SOURCE_DIR's HEAD inside a pristine Debian
# root (tools/pristine_root.sh). Prints each command's time; fails on any error, on a skipped
# test other than a GPU one, and if the machine's own packages changed meanwhile.
#
#   fresh_machine_test.sh SOURCE_DIR LOG_DIR
set -uo pipefail
SRC=$(cd "${1:?usage: fresh_machine_test.sh SOURCE_DIR LOG_DIR}" && pwd)
LOG=${2:?usage: fresh_machine_test.sh SOURCE_DIR LOG_DIR}
fail() {
  echo "FAIL: $*"
  exit 1
}
mkdir -p "$LOG"
LOG=$(cd "$LOG" && pwd)
rm -f "$LOG"/*.log "$LOG"/times

# The quick start's commands: the lines of the first code block under "## Quick start".
mapfile -t COMMANDS < <(awk '/^## Quick start/ {q = 1; next} q && /^```/ {if (b) exit; b = 1; next}
  q && b {sub(/ *#.*/, ""); if ($0 != "") print}' "$SRC/README.md")
[ ${#COMMANDS[@]} -ge 2 ] || fail "README.md's quick start has fewer than two commands"
COMMANDS+=("${COMMANDS[0]}")
HEAD=$(git -C "$SRC" rev-parse --short HEAD) || fail "$SRC is not a git checkout"
[ -z "$(git -C "$SRC" status --porcelain --untracked-files=no)" ] ||
  echo "note: $SRC has uncommitted changes; the clone holds HEAD ($HEAD) only"
echo "fresh clone of $HEAD; quick start: $(printf '%s; ' "${COMMANDS[@]}")"

before=$(dpkg-query -W -f='${Package} ${Version}\n' | sort)
# Inside the root: clone, then each command with its time and its own log.
# shellcheck disable=SC2016
inner='set -uo pipefail
git clone -q /mnt/collie-src /root/collie || exit 1
cd /root/collie
i=0
for cmd in "$@"; do
  i=$((i + 1))
  start=$(date +%s)
  bash -c "$cmd" >"/mnt/log/$i.log" 2>&1
  rc=$?
  echo "$i $cmd: rc $rc, $(( $(date +%s) - start )) s" | tee -a /mnt/log/times
  [ $rc -eq 0 ] || exit $rc
done'
bash "$SRC/tools/pristine_root.sh" -b "$SRC:/mnt/collie-src:ro" -b "$LOG:/mnt/log" -- \
  bash -c "$inner" quick-start "${COMMANDS[@]}"
rc=$?
after=$(dpkg-query -W -f='${Package} ${Version}\n' | sort)
[ "$before" = "$after" ] || fail "the machine's packages changed: $(diff <(echo "$before") <(echo "$after") | head -n 5)"
if [ $rc -ne 0 ]; then
  last=$(ls -1 "$LOG"/*.log 2>/dev/null | sort -V | tail -n 1)
  [ -n "$last" ] && tail -n 40 "$last"
  fail "the quick start failed in the pristine root (logs in $LOG)"
fi
# make test's last lines list what skipped; only GPU tests may have.
grep -h "^skipped (allowed here)\|^no test skipped\|^SKIPPED:" "$LOG"/*.log | sort -u
echo "PASS: the quick start passed on a pristine root; logs in $LOG"
