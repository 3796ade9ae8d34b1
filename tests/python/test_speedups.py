"""The package's per-batch calls in C (replaydb/_speedups.c): in use where the
build made them, the buffer protocol over host arrays, and the same answers
and messages as the ctypes path (ctest runs every Python test a second time
with REPLAYDB_PURE_PYTHON=1: python.pytest.pure)."""

import gc
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import replaydb
from replaydb import _lib, core

from test_replaydb import DTYPES, random_columns, random_values

PURE = os.environ.get("REPLAYDB_PURE_PYTHON", "") not in ("", "0")


def _filled(db, rng, columns, steps):
    table = db.create_table("t", columns, capacity_steps=4 * steps)
    w = table.writer()
    written = []
    for _ in range(steps):
        step = {name: random_values(rng, dtype, shape) for name, (dtype, shape) in columns.items()}
        w.append(step)
        written.append(step)
    trajectory = w.trajectory_id
    w.end()
    return table, written, trajectory


def test_the_build_puts_the_module_beside_the_library_and_the_package_uses_it():
    if PURE:
        assert _lib.speedups is None and "REPLAYDB_PURE_PYTHON" in _lib.speedups_error
        assert core._ArrayBase is core._PyArrayBase
        return
    beside = Path(_lib.lib._name).resolve().parent / _lib.SPEEDUPS_FILE
    if not beside.is_file():
        pytest.skip(f"no {beside} (the build found no Python >= 3.11 headers, python3-dev)")
    if sys.version_info < (3, 11):
        pytest.skip("the module is for CPython >= 3.11")
    assert _lib.speedups is not None, _lib.speedups_error
    assert core._ArrayBase is _lib.speedups.ArrayBase and issubclass(core.Array, core._ArrayBase)


def test_arrays_come_only_from_batches():
    with pytest.raises(TypeError, match=r"arrays come from batches \(batch\[name\]\)"):
        core.Array()


def test_host_arrays_read_back_exactly_through_numpy_and_memoryview(db_path, rng):
    columns = random_columns(rng, int(rng.integers(1, 6)))
    with replaydb.open(db_path) as db:
        table, written, trajectory = _filled(db, rng, columns, int(rng.integers(2, 9)))
        keys = (trajectory << 24) + np.arange(len(written), dtype=np.uint64)  # in order
        batch = table.lookup(keys)
        for name, (dtype, shape) in columns.items():
            array = batch[name]
            want = np.stack([step[name] for step in written]).reshape((len(written), 1) + shape)
            got = np.asarray(array)
            assert got.dtype == np.dtype(dtype) and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            assert array.shape == want.shape and array.dtype == dtype
            assert array.nbytes == want.nbytes and array.data_ptr == got.ctypes.data
            if PURE:  # the ctypes path offers __array_interface__ only
                with pytest.raises(TypeError):
                    memoryview(array)
                continue
            view = memoryview(array)
            assert view.shape == want.shape and view.itemsize == want.itemsize
            assert np.dtype(view.format) == want.dtype and not view.readonly
            np.testing.assert_array_equal(np.asarray(view), want)


def test_views_keep_the_memory_and_new_views_after_close_say_the_batch_was_closed(db_path, rng):
    with replaydb.open(db_path) as db:
        table, _, _ = _filled(db, rng, {"x": ("float32", (3,))}, 4)
        gc.collect()
        baseline = replaydb.live_batches()
        batch = table.sample(8)
        array = batch["x"]
        taken = np.asarray(array)
        copy = taken.copy()
        views = [taken] + ([] if PURE else [memoryview(array)])
        batch.close()
        assert replaydb.live_batches() == baseline + 1, "the views hold the batch"
        for view in views:
            np.testing.assert_array_equal(np.asarray(view), copy)
        # The array already holds a reference: more views of it still work.
        np.testing.assert_array_equal(np.asarray(array), copy)
        other = table.sample(8)
        fresh = other["x"]  # no reference of its own yet
        other.close()
        with pytest.raises(ValueError, match=r"array 'x': the batch was closed"):
            np.asarray(fresh)
        if not PURE:
            with pytest.raises(ValueError, match=r"array 'x': the batch was closed"):
                memoryview(fresh)
        del views, view, taken, array, fresh, other
        gc.collect()
        assert replaydb.live_batches() == baseline


def test_unknown_fields_and_types_numpy_lacks_say_so(db_path):
    with replaydb.open(db_path) as db:
        table = db.create_table("t", {"b": "bf16", "x": "f32"}, capacity_steps=64)
        w = table.writer()
        for i in range(4):
            w.append({"b": float(i), "x": float(i)})
        w.end()
        batch = table.sample(2)
        with pytest.raises(replaydb.NotFoundError, match=r"'nope'.*\b(b|x)\b"):
            batch["nope"]
        with pytest.raises(TypeError, match="batch fields are named by str, not int"):
            batch[3]
        with pytest.raises(TypeError, match="NumPy has no bfloat16; use torch.from_dlpack"):
            np.asarray(batch["b"])
        if not PURE:
            with pytest.raises(BufferError, match="NumPy has no such type"):
                memoryview(batch["b"])


def test_a_forked_child_gets_no_view_and_frees_nothing(db_path, rng):
    with replaydb.open(db_path) as db:
        table, _, _ = _filled(db, rng, {"x": ("int32", (2,))}, 4)
        batch = table.sample(4)
        array, held = batch["x"], batch["x"]
        parent_view = np.asarray(held)  # `held` has its own reference now
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(read)
                messages = []
                for call in (lambda: np.asarray(array), lambda: np.asarray(held),
                             lambda: memoryview(array)):
                    try:
                        call()
                        messages.append("no error")
                    except replaydb.FailedPreconditionError as e:
                        messages.append(str(e))
                    except TypeError as e:  # memoryview without the C module
                        messages.append("TypeError" if PURE else f"TypeError {e}")
                os.write(write, "\n".join(messages).encode())
                del array, held, batch  # must not release the parent's references
            except BaseException:
                code = 3
            os._exit(code)
        os.close(write)
        with os.fdopen(read) as f:
            lines = f.read().split("\n")
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        assert len(lines) == 3, lines
        for line in lines[:2] + ([] if PURE else lines[2:]):
            assert f"process {pid} is a fork" in line, line
        np.testing.assert_array_equal(np.asarray(array), parent_view)


def test_a_batch_that_holds_its_own_array_is_collected(db_path, rng):
    with replaydb.open(db_path) as db:
        table, _, _ = _filled(db, rng, {"x": ("float32", (2,))}, 4)
        gc.collect()
        baseline = replaydb.live_batches()
        for _ in range(int(rng.integers(1, 5))):
            batch = table.sample(2)
            batch.keep = batch["x"]  # a cycle: batch -> array -> batch
            np.asarray(batch.keep)  # and the array's own reference
        del batch
        gc.collect()
        assert replaydb.live_batches() == baseline


def test_fields_are_named_by_str_and_its_subclasses(db_path, rng):
    with replaydb.open(db_path) as db:
        table, _, _ = _filled(db, rng, {"x": ("int16", (3,))}, 4)
        batch = table.sample(3)
        np.testing.assert_array_equal(np.asarray(batch[np.str_("x")]), np.asarray(batch["x"]))
        assert batch[np.str_("x")].name == "x"
