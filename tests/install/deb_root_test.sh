#!/usr/bin/env bash
# The .debs of BUILD_DIR (cpack, as make deb makes them) in a pristine Debian root
# (tools/pristine_root.sh): deb_in_root.sh installs them with apt, builds and runs the examples
# and purges them there, so the machine's own packages stay as they are.
# Usage (as root): deb_root_test.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/lib.sh"
build=$1 src=$2
need cpack dpkg-deb unshare
[ "$(id -u)" -eq 0 ] || { echo "SKIP: the pristine root needs root"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && cpack --config "$build/CPackConfig.cmake" -B "$tmp") >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log"; fail "cpack"; }
in=/mnt/collie
bash "$src/tools/pristine_root.sh" -b "$tmp/deb:$in/debs:ro" -b "$src/examples:$in/examples:ro" \
  -b "$src/tests/install:$in/install:ro" -- bash "$in/install/deb_in_root.sh" "$in/debs" \
  "$in/examples"
