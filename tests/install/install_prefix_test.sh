#!/usr/bin/env bash
# cmake --install of the build tree into a temporary prefix: the files land where
# GNUInstallDirs says, and the examples build against it and run under its collie-run.
# Usage: install_prefix_test.sh BUILD_DIR SOURCE_DIR LIBDIR
source "$(dirname "$0")/lib.sh"
build=$1 src=$2 libdir_rel=$3
need cmake cc c++ pkg-config ldd
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
for f in "$libdir_rel/libcollie.so" "$libdir_rel/libcollie.so.0" "$libdir_rel/libcollie.a" \
  include/collie/collie.h include/collie/collie.hpp bin/collie-run bin/collie-perf \
  bin/collie-sim "$libdir_rel/cmake/collie/collieConfig.cmake" \
  "$libdir_rel/cmake/collie/collieConfigVersion.cmake" \
  "$libdir_rel/cmake/collie/collieTargets.cmake" "$libdir_rel/pkgconfig/collie.pc"; do
  [ -e "$prefix/$f" ] || fail "$f is not installed"
done
# Test programs stay in the build tree.
for f in bin/collie-test-rank bin/collie-unit-tests bin/collie-multiproc-tests; do
  [ ! -e "$prefix/$f" ] || fail "$f is installed"
done
(cd "$prefix" && find . -maxdepth 4 | sort)

check_examples "$prefix" "$prefix/$libdir_rel" "$src" "$tmp"
echo "PASS: install into a prefix"
