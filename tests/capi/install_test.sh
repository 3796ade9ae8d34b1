#!/usr/bin/env bash
# ctest capi.install: installs the build into a temporary prefix
# (`cmake --install --prefix`), checks what landed there and what the shared
# library exports (every function of replaydb/c.h; nothing of the CUDA
# runtime or of the engine's internal namespaces), then builds programs
# against the installed package and runs them, with LD_LIBRARY_PATH into the
# prefix:
#   - with find_package(replaydb) (tests/capi/consumer/): examples/c_quickstart.c
#     and examples/quickstart.cc (the C++ API from the shared library),
#   - with pkg-config (PKG_CONFIG_PATH into the prefix): examples/c_quickstart.c.
# Each must print four items whose two steps hold obs[0] = start, start + 1.
#   install_test.sh BUILD_DIR SOURCE_DIR LIBDIR CMAKE CC CXX VERSION
set -euo pipefail
build="$1" src="$2" libdir="$3" cmake="$4" cc="$5" cxx="$6" version="$7"
build="$(cd "$build" && pwd)" src="$(cd "$src" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/replaydb-install-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

fail() {
  echo "install_test: $*" >&2
  exit 1
}
# run_logged LOG COMMAND...: runs COMMAND, printing its output only on failure.
run_logged() {
  local log="$1"
  shift
  "$@" >"$log" 2>&1 || { cat "$log" >&2; fail "failed: $*"; }
}

echo "--- cmake --install $build --prefix $prefix"
run_logged "$work/install.log" "$cmake" --install "$build" --prefix "$prefix"
lib="$prefix/$libdir/libreplaydb.so"
for f in "$lib" "$prefix/include/replaydb/c.h" "$prefix/include/replaydb/db.h" \
         "$prefix/$libdir/pkgconfig/replaydb.pc" \
         "$prefix/$libdir/cmake/replaydb/replaydbConfig.cmake" \
         "$prefix/$libdir/cmake/replaydb/replaydbConfigVersion.cmake" \
         "$prefix/$libdir/cmake/replaydb/replaydbTargets.cmake"; do
  [ -e "$f" ] || fail "$f was not installed"
done
tool="$prefix/bin/replaydb"
[ -x "$tool" ] || fail "$tool (the replaydb tool) was not installed"
# It runs with no library path (the engine is linked into it).
env -u LD_LIBRARY_PATH "$tool" --version >"$work/tool.out" 2>&1 || { cat "$work/tool.out" >&2; fail "$tool --version failed"; }
grep -q "$version" "$work/tool.out" || fail "$tool --version printed: $(cat "$work/tool.out")"
soname="$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')"
want_soname="libreplaydb.so.${version%.*}"  # major.minor
[ "$soname" = "$want_soname" ] || fail "soname is '$soname', expected $want_soname"
if readelf -d "$lib" | grep -E 'RPATH|RUNPATH' | grep -q "$build"; then
  fail "the installed library still points into the build tree: $(readelf -d "$lib" | grep PATH)"
fi

echo "--- exported symbols"
nm -D --defined-only "$lib" | awk '{print $3}' | sort >"$work/exported"
declared="$(tr '\n' ' ' <"$src/include/replaydb/c.h" | grep -o 'REPLAYDB_C_EXPORT[^;(]*(' |
            grep -o 'replaydb_[a-z0-9_]*($' | tr -d '(' | sort -u)"
[ "$(echo "$declared" | wc -l)" -gt 80 ] || fail "found only $(echo "$declared" | wc -l) functions in c.h"
missing="$(echo "$declared" | comm -23 - "$work/exported")"
[ -z "$missing" ] || fail "c.h declares functions libreplaydb.so does not export: $missing"
# Everything else exported belongs to namespace replaydb's public C++ API,
# none of it to the engine's own namespaces (capi/replaydb.map; instances
# of the public Result template over engine types, such as
# Result<std::unique_ptr<engine::ColdStore>>, are public names and stay).
cpp="$(grep -v '^replaydb_' "$work/exported" | c++filt)"
foreign="$(echo "$cpp" | grep -v 'replaydb::' || true)"
[ -z "$foreign" ] || fail "libreplaydb.so exports symbols outside replaydb: $(echo "$foreign" | head -5)"
internal="$(echo "$cpp" |
            grep -E '^(typeinfo name for |typeinfo for |vtable for |VTT for )?replaydb::(engine|index|kernels|wal|util|fb|internal|testing_util)::' ||
            true)"
[ -z "$internal" ] || fail "libreplaydb.so exports the engine's internals: $(echo "$internal" | head -5)"
# And every exported name of namespace replaydb is one that the public C++
# headers declare in code (comments stripped): an internal class or function
# left in namespace replaydb (as FaultInjectionEnv, Random or ForkJoin once
# were) fails here.
declared_cpp="$(ls "$src"/include/replaydb/*.h | grep -v "/c\.h$" | xargs cat | grep -v '^#include' | sed -e 's://.*$::' |
                grep -oE '\b[A-Z][A-Za-z0-9_]*\b' | sort -u)"
exported_names="$(echo "$cpp" | sed -E 's/^(typeinfo name for |typeinfo for |vtable for |VTT for )//' |
                  sed -nE 's/^replaydb::([A-Za-z_][A-Za-z0-9_]*).*/\1/p' | sort -u)"
undeclared="$(comm -23 <(echo "$exported_names") <(echo "$declared_cpp") | grep . || true)"
[ -z "$undeclared" ] ||
  fail "libreplaydb.so exports names that include/replaydb/ does not declare: $(echo $undeclared)"
echo "$(echo "$declared" | wc -l) C functions and $(echo "$cpp" | grep -c .) C++ symbols exported," \
     "nothing outside replaydb's public API"

# check_run NAME BINARY: runs the program on a fresh database and checks
# its four items.
check_run() {
  local name="$1" bin="$2" out="$work/$1.out"
  LD_LIBRARY_PATH="$prefix/$libdir" "$bin" "$work/db-$name" >"$out" 2>&1 ||
    { cat "$out" >&2; fail "$name exited with $?"; }
  grep -qx 'sampled 4 items' "$out" || [ "$name" = cpp_consumer ] ||
    { cat "$out" >&2; fail "$name did not print 'sampled 4 items'"; }
  local items
  items="$(sed -nE 's/^item [0-3]: trajectory [0-9]+, steps ([0-9]+)\.\.([0-9]+), obs\[0\] = ([0-9]+), ([0-9]+)$/\1 \2 \3 \4/p' "$out")"
  [ "$(echo "$items" | grep -c .)" = 4 ] || { cat "$out" >&2; fail "$name did not print 4 items"; }
  echo "$items" | while read -r first second obs0 obs1; do
    [ "$first" = "$obs0" ] && [ "$second" = "$obs1" ] && [ "$second" = $((first + 1)) ] ||
      { cat "$out" >&2; fail "$name: an item's steps and values disagree"; }
  done
  echo "$name: ok"
}

echo "--- find_package(replaydb)"
run_logged "$work/configure.log" "$cmake" -S "$src/tests/capi/consumer" -B "$work/consumer" \
  -DCMAKE_PREFIX_PATH="$prefix" -DREPLAYDB_EXAMPLES="$src/examples" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release
grep -q "replaydb_DIR:PATH=$prefix/" "$work/consumer/CMakeCache.txt" ||
  fail "find_package did not find the package in $prefix"
run_logged "$work/build.log" "$cmake" --build "$work/consumer" -j 2
check_run c_consumer "$work/consumer/c_consumer"
check_run cpp_consumer "$work/consumer/cpp_consumer"

echo "--- pkg-config"
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
flags="$(pkg-config --cflags --libs replaydb)"
[ "$(pkg-config --modversion replaydb)" = "$version" ] || fail "pkg-config --modversion replaydb"
echo "pkg-config --cflags --libs replaydb: $flags"
# shellcheck disable=SC2086  # the flags are words
run_logged "$work/cc.log" "$cc" -std=c99 -Wall -Wextra -Wpedantic -Werror \
  "$src/examples/c_quickstart.c" $flags -o "$work/c_pkgconfig"
check_run c_pkgconfig "$work/c_pkgconfig"
echo "install_test: all passed"
