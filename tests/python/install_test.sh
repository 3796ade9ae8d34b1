#!/usr/bin/env bash
# ctest python.install: `pip install` of the package into fresh virtual
# environments, offline (--no-build-isolation --no-index: setuptools from the
# system), each checked by a round trip run with no REPLAYDB_* variables, no
# library path and no build tree beside the installed package:
#   1. from a copy of python/ alone, packaging the built library named by
#      REPLAYDB_LIBRARY at install time;
#   2. from a copy of the repository's sources with no build/ in it: setup.py
#      builds the library with CMake (the library alone, without CUDA to keep
#      the test short: REPLAYDB_CMAKE_ARGS);
#   3. no pip: the package's files run against `cmake --install`'s library,
#      found by its soname on LD_LIBRARY_PATH (no libreplaydb.so link there).
#   install_test.sh PYTHON SOURCE_DIR LIBRARY BUILD_DIR CMAKE
set -euo pipefail
python="$1" src="$2" library="$3" build="$4" cmake="$5"
# The per-batch calls in C go with the library where the build made them
# (Python >= 3.11 with its headers); the system install of case 3 has none.
speedups=0
[ ! -f "$(dirname "$library")/_speedups.abi3.so" ] || speedups=1
work="$(mktemp -d "${TMPDIR:-/tmp}/replaydb-python-install-XXXXXX")"
trap 'rm -rf "$work"' EXIT

cat >"$work/check.py" <<'PY'
import sys, numpy as np, replaydb
from replaydb import _lib
where, speedups = sys.argv[2], sys.argv[3] == "1"
assert where in replaydb.__file__ or where in _lib.lib._name, (replaydb.__file__, _lib.lib._name)
assert (_lib.speedups is not None) == speedups, (speedups, _lib.speedups_error)
with replaydb.open(sys.argv[1]) as db:
    t = db.create_table("t", {"x": (np.int32, (3,))}, capacity_steps=64)
    with t.writer() as w:
        w.append({"x": np.arange(3, dtype=np.int32)})
    b = t.sample(2)
    assert np.asarray(b["x"]).tolist() == [[[0, 1, 2]], [[0, 1, 2]]]
print("replaydb", replaydb.version(), "from", _lib.lib._name, "round trip ok")
PY
# clean_run DIR ARGS...: python with a minimal environment, outside the repository.
clean_run() {
  local dir="$1"
  shift
  (cd "$dir" && env -i PATH=/usr/bin:/bin HOME="$work" "$@")
}

echo "--- 1. pip install of python/ alone, packaging $library"
cp -r "$src/python" "$work/package"
"$python" -m venv --system-site-packages "$work/venv1"  # NumPy from the system
REPLAYDB_LIBRARY="$library" "$work/venv1/bin/python" -m pip install -q --no-build-isolation \
  --no-index --no-deps "$work/package" >"$work/pip1.log" 2>&1 || { cat "$work/pip1.log" >&2; exit 1; }
rm -rf "$work/package"
clean_run "$work" "$work/venv1/bin/python" "$work/check.py" "$work/db1" "$work/venv1/" "$speedups"

echo "--- 2. pip install from the sources, CMake building the library"
mkdir "$work/repo"
(cd "$src" && git ls-files -z 2>/dev/null || find . -path ./build\* -prune -o -type f -print0) |
  (cd "$src" && xargs -0 cp --parents -t "$work/repo")
[ ! -e "$work/repo/build" ] || { echo "install_test: the copy has a build/" >&2; exit 1; }
"$python" -m venv --system-site-packages "$work/venv2"
start=$(date +%s)
REPLAYDB_CMAKE_ARGS="-DREPLAYDB_WITH_CUDA=OFF" "$work/venv2/bin/python" -m pip install -q \
  --no-build-isolation --no-index --no-deps "$work/repo/python" >"$work/pip2.log" 2>&1 ||
  { cat "$work/pip2.log" >&2; exit 1; }
echo "(built and installed in $(( $(date +%s) - start )) s)"
rm -rf "$work/repo"
clean_run "$work" "$work/venv2/bin/python" "$work/check.py" "$work/db2" "$work/venv2/" "$speedups"

echo "--- 3. the library of cmake --install, found by its soname"
"$cmake" --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; exit 1; }
libdir="$(dirname "$(find "$work/prefix" -name 'libreplaydb.so.*' | head -1)")"
rm -f "$libdir/libreplaydb.so"  # a runtime install: the soname's file and its target only
mkdir "$work/pkg3"
cp -r "$src/python/replaydb" "$work/pkg3/"
clean_run "$work" env PYTHONPATH="$work/pkg3" LD_LIBRARY_PATH="$libdir" "$python" \
  "$work/check.py" "$work/db3" "libreplaydb.so.0.1" 0
