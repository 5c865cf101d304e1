#!/usr/bin/env bash
# Every code block of README.md, run as printed (see readme_blocks.py for the fence marks), in a
# copy of the tree's layout the README assumes after `make run`: include/, examples/ and build/.
# HOME is a temporary folder, so that an install into $HOME/.local stays in the test.
# Usage: readme_test.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/lib.sh"
build=$1 src=$2
need cc c++ cmake pkg-config python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tree=$tmp/tree
mkdir -p "$tree" "$tmp/home"
ln -s "$src/include" "$tree/include"
ln -s "$build" "$tree/build"
cp -r "$src/examples" "$tree/examples"

python3 "$src/tests/install/readme_blocks.py" "$src/README.md" "$tree"
grep -q 'file=app.c\b' "$src/README.md" || fail "README's C example is not tested"
grep -q 'file=app.cpp\b' "$src/README.md" || fail "README's C++ example is not tested"
(cd "$tree" && env -u PKG_CONFIG_PATH HOME="$tmp/home" bash readme.sh) ||
  fail "a README command failed as printed"
echo "PASS: README blocks"
