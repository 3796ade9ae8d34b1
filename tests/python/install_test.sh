#!/usr/bin/env bash
# ctest python.install: `pip install` of python/ into a fresh virtual
# environment, offline (--no-build-isolation --no-index: setuptools from the
# system), then the installed package finds libreplaydb.so once through
# REPLAYDB_LIBRARY and once through the library path (LD_LIBRARY_PATH, as
# after `cmake --install` into a lib folder the loader searches), and does a
# round trip.
#   install_test.sh PYTHON SOURCE_DIR LIBRARY
set -euo pipefail
python="$1" src="$2" library="$3"
work="$(mktemp -d "${TMPDIR:-/tmp}/replaydb-python-install-XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp -r "$src/python" "$work/package"  # pip builds in the source folder: not ours
"$python" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install -q --no-build-isolation --no-index --no-deps \
  "$work/package" >"$work/pip.log" 2>&1 || { cat "$work/pip.log" >&2; exit 1; }
cat >"$work/check.py" <<'PY'
import sys, numpy as np, replaydb
where = replaydb.__file__
assert "/venv/" in where, f"imported {where}, not the installed package"
with replaydb.open(sys.argv[1]) as db:
    t = db.create_table("t", {"x": (np.int32, (3,))}, capacity_steps=64)
    with t.writer() as w:
        w.append({"x": np.arange(3, dtype=np.int32)})
    b = t.sample(2)
    assert np.asarray(b["x"]).tolist() == [[[0, 1, 2]], [[0, 1, 2]]]
print("installed replaydb", replaydb.version(), "round trip ok")
PY
cd "$work"
REPLAYDB_LIBRARY="$library" "$work/venv/bin/python" check.py "$work/db1"
env -u REPLAYDB_LIBRARY LD_LIBRARY_PATH="$(dirname "$library")" "$work/venv/bin/python" check.py \
  "$work/db2"
