# Steps the install tests share: build the examples against an installed prefix, with
# find_package and with pkg-config, and run them under that prefix's collie-run.
set -euo pipefail

# Exit 77 (ctest: skipped) when a program the test needs is missing.
need() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null || { echo "SKIP: $t is missing (make test installs it)"; exit 77; }
  done
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Runs prog under PREFIX's collie-run with 2 ranks; both ranks must print their "ok" line.
run_two() {
  local prefix=$1 prog=$2 out
  shift 2
  out=$(env "$@" "$prefix/bin/collie-run" -n 2 "$prog") || fail "$prog: exit $?: $out"
  echo "$out"
  [ "$(grep -c ' ok$' <<<"$out")" -eq 2 ] || fail "$prog: not both ranks said ok"
}

# The program must load libcollie from PREFIX, not from the build tree or the system.
loads_from() {
  local prefix=$1 prog=$2 lib
  lib=$(env "${@:3}" ldd "$prog" | awk '/libcollie\.so/ {print $3}')
  case "$lib" in
    "$prefix"/*) ;;
    *) fail "$prog loads libcollie from '$lib', not from $prefix" ;;
  esac
}

# check_examples PREFIX LIBDIR SRC WORK: both examples with find_package(collie), then the one
# line pkg-config builds, each run under PREFIX/bin/collie-run.
check_examples() {
  local prefix=$1 libdir=$2 src=$3 work=$4 ex
  for ex in c cpp; do
    cmake -S "$src/examples/$ex" -B "$work/$ex" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=Release >"$work/$ex.configure.log" ||
      { cat "$work/$ex.configure.log"; fail "configure examples/$ex against $prefix"; }
    cmake --build "$work/$ex" -j 2
    loads_from "$prefix" "$work/$ex/collie-example-$ex"
    run_two "$prefix" "$work/$ex/collie-example-$ex"
  done
  loads_from "$prefix" "$prefix/bin/collie-perf"

  cp "$src/examples/c/allreduce.c" "$work/app.c"
  cp "$src/examples/cpp/allreduce.cpp" "$work/app.cpp"
  (
    cd "$work"
    export PKG_CONFIG_PATH=$libdir/pkgconfig
    set -x
    # The one-line builds as a user types them: the flags must split.
    # shellcheck disable=SC2046
    cc app.c $(pkg-config --cflags --libs collie) -o app
    # shellcheck disable=SC2046
    c++ -std=c++17 app.cpp $(pkg-config --cflags --libs collie) -o app_cpp
  )
  loads_from "$prefix" "$work/app" LD_LIBRARY_PATH="$libdir"
  run_two "$prefix" "$work/app" LD_LIBRARY_PATH="$libdir"
  run_two "$prefix" "$work/app_cpp" LD_LIBRARY_PATH="$libdir"
}
