#!/usr/bin/env bash
# The Debian packages (cpack, as make deb makes them): three packages with their dependencies,
# each with its own files; unpacked into a temporary root, the examples build and run there.
# Usage: install_deb_test.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/lib.sh"
build=$1 src=$2
need cpack cmake cc c++ pkg-config ldd dpkg-deb dpkg-shlibdeps file
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir "$tmp/pkg"
(cd "$tmp/pkg" && cpack --config "$build/CPackConfig.cmake" -B "$tmp/pkg") >"$tmp/cpack.log" ||
  { cat "$tmp/cpack.log"; fail "cpack"; }
shopt -s nullglob
debs=("$tmp"/pkg/deb/*.deb)
[ ${#debs[@]} -eq 3 ] || { cat "$tmp/cpack.log"; fail "cpack made ${#debs[@]} packages, not 3"; }

declare -A depends files
for d in "${debs[@]}"; do
  name=$(dpkg-deb -f "$d" Package)
  depends[$name]=$(dpkg-deb -f "$d" Depends)
  files[$name]=$(dpkg-deb -c "$d" | awk '{print $6}')
  echo "$name: Depends: ${depends[$name]}"
  dpkg-deb -x "$d" "$tmp/root"
done
runtime=$(printf '%s\n' "${!depends[@]}" | grep -E '^libcollie[0-9]+$') || fail "no libcollieN"
ver=$(dpkg-deb -f "$tmp"/pkg/deb/"$runtime"_*.deb Version)
grep -q 'libc6' <<<"${depends[$runtime]}" || fail "$runtime does not depend on libc6"
for p in libcollie-dev collie-tools; do
  grep -qF "$runtime (= $ver)" <<<"${depends[$p]:-}" || fail "$p does not depend on $runtime"
done
# has PACKAGE REGEX: the package holds a file matching REGEX.
has() { grep -qE "$2" <<<"${files[$1]}" || fail "$1 lacks $2"; }
has "$runtime" '^\./usr/lib/.*libcollie\.so\.[0-9]+$'
has libcollie-dev '^\./usr/include/collie/collie\.h$'
has libcollie-dev '^\./usr/lib/.*libcollie\.a$'
has libcollie-dev '^\./usr/lib/.*cmake/collie/collieConfig\.cmake$'
has libcollie-dev '^\./usr/lib/.*pkgconfig/collie\.pc$'
has collie-tools '^\./usr/bin/collie-run$'
has collie-tools '^\./usr/bin/collie-perf$'
! grep -q include <<<"${files[$runtime]}" || fail "$runtime holds headers"

pc=$(find "$tmp/root" -name collie.pc)
check_examples "$tmp/root/usr" "$(dirname "$(dirname "$pc")")" "$src" "$tmp"
echo "PASS: Debian packages"
