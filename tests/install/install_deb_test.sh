#!/usr/bin/env bash
# The Debian packages (cpack, as make deb makes them): three packages, four with the PyTorch
# backend, with their dependencies, each with its own files under /usr, the library in Debian's
# multiarch folder; unpacked into a temporary root, the examples build and run there.
# Usage: install_deb_test.sh BUILD_DIR SOURCE_DIR HAVE_TORCH(ON|OFF)
source "$(dirname "$0")/lib.sh"
build=$1 src=$2 torch=${3:-OFF}
need cpack cmake cc c++ pkg-config ldd dpkg-deb dpkg-shlibdeps file
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir "$tmp/pkg"
(cd "$tmp/pkg" && cpack --config "$build/CPackConfig.cmake" -B "$tmp/pkg") >"$tmp/cpack.log" ||
  { cat "$tmp/cpack.log"; fail "cpack"; }
shopt -s nullglob
debs=("$tmp"/pkg/deb/*.deb)
want=3
[ "$torch" = ON ] && want=4
[ ${#debs[@]} -eq $want ] ||
  { cat "$tmp/cpack.log"; fail "cpack made ${#debs[@]} packages, not $want"; }

declare -A depends files sections
for d in "${debs[@]}"; do
  name=$(dpkg-deb -f "$d" Package)
  depends[$name]=$(dpkg-deb -f "$d" Depends)
  files[$name]=$(dpkg-deb -c "$d" | awk '{print $6}')
  sections[$name]=$(dpkg-deb -f "$d" Section)
  echo "$name: Section: ${sections[$name]}; Depends: ${depends[$name]}"
  ! grep -vE '^\./usr/' <<<"${files[$name]}" | grep -v '^\./$' ||
    fail "$name holds files outside /usr"
  ! grep -q '^\./usr/local/' <<<"${files[$name]}" || fail "$name holds files under /usr/local"
  dpkg-deb -x "$d" "$tmp/root"
done
runtime=$(printf '%s\n' "${!depends[@]}" | grep -E '^libcollie[0-9]+$') || fail "no libcollieN"
ver=$(dpkg-deb -f "$tmp"/pkg/deb/"$runtime"_*.deb Version)
grep -q 'libc6' <<<"${depends[$runtime]}" || fail "$runtime does not depend on libc6"
others=(libcollie-dev collie-tools)
[ "$torch" = ON ] && others+=(python3-collie-torch)
for p in "${others[@]}"; do
  grep -qF "$runtime (= $ver)" <<<"${depends[$p]:-}" || fail "$p does not depend on $runtime"
done
# section PACKAGE SECTION: the archive section Debian's policy gives that kind of package.
section() { [ "${sections[$1]}" = "$2" ] || fail "$1 is in section '${sections[$1]}', not $2"; }
section "$runtime" libs
section libcollie-dev libdevel
section collie-tools net
dpkg-deb -I "$tmp"/pkg/deb/"$runtime"_*.deb shlibs | grep -qE "^libcollie [0-9]+ $runtime " ||
  fail "$runtime has no shlibs entry for libcollie"
# has PACKAGE REGEX: the package holds a file matching REGEX.
has() { grep -qE "$2" <<<"${files[$1]}" || fail "$1 lacks $2"; }
multiarch=$(cc -print-multiarch)
has "$runtime" "^\./usr/lib/$multiarch/libcollie\.so\.[0-9]+$"
has libcollie-dev '^\./usr/include/collie/collie\.h$'
has libcollie-dev '^\./usr/lib/.*libcollie\.a$'
has libcollie-dev '^\./usr/lib/.*cmake/collie/collieConfig\.cmake$'
has libcollie-dev '^\./usr/lib/.*pkgconfig/collie\.pc$'
has collie-tools '^\./usr/bin/collie-run$'
has collie-tools '^\./usr/bin/collie-perf$'
! grep -q include <<<"${files[$runtime]}" || fail "$runtime holds headers"
if [ "$torch" = ON ]; then
  section python3-collie-torch python
  grep -qE '(^|, )python3-torch(,|$)' <<<"${depends[python3-collie-torch]}" ||
    fail "python3-collie-torch does not depend on python3-torch"
  has python3-collie-torch '^\./usr/lib/python3/dist-packages/collie_torch/__init__\.py$'
  has python3-collie-torch '^\./usr/lib/python3/dist-packages/collie_torch/_C\..*\.so$'
fi

pc=$(find "$tmp/root" -name collie.pc)
check_examples "$tmp/root/usr" "$(dirname "$(dirname "$pc")")" "$src" "$tmp"
echo "PASS: Debian packages"
