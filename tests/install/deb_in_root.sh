#!/usr/bin/env bash
# The .debs as a user gets them: apt installs every package of DEB_DIR with its Debian
# dependencies, the examples build against the system's paths (find_package and pkg-config)
# and run on 2 ranks under /usr/bin/collie-run, then a purge must leave no package and no file
# behind. Meant for a pristine root (deb_root_test.sh), it also runs on a machine: it refuses
# where a collie package or file is there already, and leaves the packages as it found them.
# Usage (as root): deb_in_root.sh DEB_DIR EXAMPLES_DIR
source "$(dirname "$0")/lib.sh"
need apt-get dpkg-query dpkg-deb ldd
[ "$(id -u)" -eq 0 ] || { echo "SKIP: apt-get needs root"; exit 77; }
debdir=$(realpath "${1:?usage: deb_in_root.sh DEB_DIR EXAMPLES_DIR}")
examples=$(realpath "${2:?usage: deb_in_root.sh DEB_DIR EXAMPLES_DIR}")
shopt -s nullglob
debs=("$debdir"/*.deb)
[ ${#debs[@]} -gt 0 ] || fail "no .deb in $debdir"
# Whatever ran before (ctest, a build tree) must not point the builds or the loader elsewhere.
unset PYTHONPATH PYTHONDONTWRITEBYTECODE LD_LIBRARY_PATH CMAKE_PREFIX_PATH PKG_CONFIG_PATH
export DEBIAN_FRONTEND=noninteractive
apt() { apt-get -q -y -o DPkg::Lock::Timeout=300 "$@"; }
installed() {
  dpkg-query -W -f '${db:Status-Abbrev} ${binary:Package}\n' | awk '$1 != "un" {print $2}' | sort
}
status() { dpkg-query -W -f '${db:Status-Status}' "$1" 2>/dev/null || echo not-installed; }

# The packages and their files; a folder counts as theirs when it is not there before.
pkgs=() paths=() new_dirs=()
for d in "${debs[@]}"; do
  p=$(dpkg-deb -f "$d" Package)
  [ "$(status "$p")" = not-installed ] || fail "$p is installed already: purge it first"
  pkgs+=("$p")
  while read -r f; do
    f=${f#.}
    case $f in
    / | "") ;;
    */) [ -d "$f" ] || new_dirs+=("${f%/}") ;;
    *)
      if [ -e "$f" ] || [ -L "$f" ]; then fail "$f of $p is there already"; fi
      paths+=("$f")
      ;;
    esac
  done < <(dpkg-deb -c "$d" | awk '{print $6}')
done
echo "packages: ${pkgs[*]} (${#paths[@]} files)"
before=$(installed)
# What apt would autoremove already is the machine's business: then purge only what came in.
orphans=$(apt-get -s autoremove | awk '/^Remv/ {print $2}')

purged=0
purge() {
  [ $purged -eq 0 ] || return 0
  purged=1
  apt purge "${pkgs[@]}" >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; return 1; }
  if [ -z "$orphans" ]; then
    apt autoremove --purge >>"$work/purge.log" 2>&1 || { cat "$work/purge.log"; return 1; }
  fi
  # The build tools, installed by name, and what came with them while orphans were kept.
  mapfile -t pulled < <(comm -13 <(echo "$before") <(installed))
  [ ${#pulled[@]} -eq 0 ] || apt purge "${pulled[@]}" >>"$work/purge.log" 2>&1 ||
    { cat "$work/purge.log"; return 1; }
}
work=$(mktemp -d)
trap 'purge || true; rm -rf "$work"' EXIT

# A user's build tools come with them: a pristine root has none.
apt install "${debs[@]}" cmake g++ make pkg-config >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "apt install"; }
pulled=$(comm -13 <(echo "$before") <(installed) | tr '\n' ' ')
echo "installed: $pulled"

multiarch=$(cc -print-multiarch)
libdir=/usr/lib/$multiarch
[ -e "$libdir/libcollie.so" ] || fail "no libcollie.so in $libdir"
[ "$(command -v collie-run)" = /usr/bin/collie-run ] || fail "collie-run is not /usr/bin's"
# loads PROG: PROG loads the installed libcollie.
loads() {
  local lib
  lib=$(ldd "$1" | awk '/libcollie\.so/ {print $3}')
  [ "$(realpath "$lib")" = "$(realpath "$libdir/libcollie.so")" ] ||
    fail "$1 loads libcollie from '$lib', not from $libdir"
}

# Every example with a CMakeLists.txt, with find_package(collie) from the system's paths.
for dir in "$examples"/*/; do
  ex=$(basename "$dir")
  [ -f "$dir/CMakeLists.txt" ] || continue
  cmake -S "$dir" -B "$work/$ex" -DCMAKE_BUILD_TYPE=Release >"$work/$ex.log" 2>&1 ||
    { cat "$work/$ex.log"; fail "configure examples/$ex"; }
  found=$(sed -n 's/^collie_DIR:PATH=//p' "$work/$ex/CMakeCache.txt")
  [ "$found" = "$libdir/cmake/collie" ] || fail "examples/$ex found collie in '$found'"
  cmake --build "$work/$ex" -j 2 >>"$work/$ex.log" 2>&1 ||
    { cat "$work/$ex.log"; fail "build examples/$ex"; }
  progs=("$work/$ex"/collie-example-*)
  [ ${#progs[@]} -gt 0 ] || fail "examples/$ex built no collie-example-*"
  for prog in "${progs[@]}"; do
    loads "$prog"
    run_two /usr "$prog"
  done
done

# Every C and C++ source, in one line with pkg-config, as a user types it.
[ "$(realpath -m "$(pkg-config --variable=libdir collie)")" = "$libdir" ] ||
  fail "pkg-config's collie libdir is $(pkg-config --variable=libdir collie), not $libdir"
for srcfile in "$examples"/*/*.c "$examples"/*/*.cpp; do
  out=$work/pc-$(basename "$srcfile" | tr . -)
  case $srcfile in
  # shellcheck disable=SC2046
  *.c) cc "$srcfile" $(pkg-config --cflags --libs collie) -o "$out" ;;
  # shellcheck disable=SC2046
  *) c++ -std=c++17 "$srcfile" $(pkg-config --cflags --libs collie) -o "$out" ;;
  esac
  loads "$out"
  run_two /usr "$out"
done

# The PyTorch backend from Debian's python3, and the Python examples on 2 ranks.
if printf '%s\n' "${pkgs[@]}" | grep -qx python3-collie-torch; then
  where=$(cd / && /usr/bin/python3 -c 'import collie_torch; print(collie_torch.__file__)') ||
    fail "/usr/bin/python3 cannot import collie_torch"
  [ "$where" = /usr/lib/python3/dist-packages/collie_torch/__init__.py ] ||
    fail "collie_torch imported from $where"
  for py in "$examples"/*/*.py; do
    out=$(cd / && collie-run -n 2 /usr/bin/python3 "$py") || fail "$py: exit $?: $out"
    echo "$out"
  done
fi

purge || fail "apt purge"
left=()
for p in "${pkgs[@]}"; do
  [ "$(status "$p")" = not-installed ] || left+=("$p ($(status "$p"))")
done
[ ${#left[@]} -eq 0 ] || fail "still in dpkg after the purge: ${left[*]}"
now=$(installed)
changed=$(diff <(echo "$before") <(echo "$now") | grep '^[<>]' | tr '\n' ' ') || true
[ -z "$changed" ] || fail "packages differ from before (< before, > now): $changed"
for f in "${paths[@]}" "${new_dirs[@]}"; do
  if [ -e "$f" ] || [ -L "$f" ]; then left+=("$f"); fi
done
[ ${#left[@]} -eq 0 ] || fail "left behind by the purge: ${left[*]}"
echo "PASS: the .debs install, work and purge without a trace (${pkgs[*]})"
