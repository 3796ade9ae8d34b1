"""The package's fast paths (arrays of the columns' dtypes passed as they are,
priority updates of uint64 keys and float64 priorities, DLPack out of a
batch) store and return exactly what the general, converting paths do."""

import numpy as np
import pytest

import replaydb


def _table(db, name, selector="uniform"):
    return db.create_table(name, {"obs": (np.float32, (2, 3)), "act": np.int64,
                                  "flag": np.bool_}, capacity_steps=4096,
                           selector=selector)


def _keys(trajectory_ids, steps):
    """Item keys (trajectory_id << 24 | start step, include/replaydb/types.h)."""
    return np.array([(t << 24) | s for t in trajectory_ids for s in range(steps)], np.uint64)


def _vector_keys(writer, envs, steps):
    return _keys([writer.trajectory_id(e) for e in range(envs)], steps)


def _rows(table, keys):
    batch = table.lookup(keys)
    return {k: np.asarray(batch[k]).copy() for k in ("obs", "act", "flag")}


def test_exact_arrays_and_converted_values_store_the_same_steps(db_path, rng):
    envs, steps = 4, 9
    data = [{"obs": rng.standard_normal((envs, 2, 3)).astype(np.float32),
             "act": rng.integers(-2**40, 2**40, envs),
             "flag": rng.random(envs) < 0.5} for _ in range(steps)]
    with replaydb.open(db_path) as db:
        fast, slow = _table(db, "fast"), _table(db, "slow")
        wf, ws = fast.vector_writer(envs), slow.vector_writer(envs)
        for step in data:
            wf.append(step)  # exact dtypes, C-contiguous: filled in place
            # The same values the general way: lists, and a column order by position.
            ws.append([step["obs"].tolist(), step["act"].tolist(), step["flag"].tolist()])
        one_f, one_s = fast.writer(), slow.writer()
        for step in data[:3]:
            one_f.append({k: v[0] for k, v in step.items()})
            one_s.append({"obs": step["obs"][0].tolist(), "act": int(step["act"][0]),
                          "flag": bool(step["flag"][0])})
        keys_f = np.concatenate([_vector_keys(wf, envs, steps), _keys([one_f.trajectory_id], 3)])
        keys_s = np.concatenate([_vector_keys(ws, envs, steps), _keys([one_s.trajectory_id], 3)])
        for w in (wf, ws, one_f, one_s):
            w.close()
        assert fast.info()["num_items"] == slow.info()["num_items"] == envs * steps + 3
        a, b = _rows(fast, keys_f), _rows(slow, keys_s)
        np.testing.assert_array_equal(a["obs"][:envs * steps].reshape(envs, steps, 2, 3),
                                      np.stack([d["obs"] for d in data], axis=1))
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


def test_arrays_off_the_fast_path_still_go_in_or_fail_naming_the_column(db_path, rng):
    with replaydb.open(db_path) as db:
        table = _table(db, "t")
        vw = table.vector_writer(2)
        obs = rng.standard_normal((2, 3, 2)).astype(np.float32)
        # Not C-contiguous (a transposed view): copied on the general path.
        vw.append({"obs": obs.transpose(0, 2, 1), "act": np.array([1, 2]),
                   "flag": np.array([True, False])})
        # A column missing: the general path's message.
        with pytest.raises(ValueError, match="missing: flag"):
            vw.append({"obs": np.zeros((2, 2, 3), np.float32), "act": np.array([1, 2])})
        # A wrong shape on the fast path: the engine names the column.
        with pytest.raises(replaydb.InvalidArgumentError, match="obs"):
            vw.append({"obs": np.zeros((2, 3, 2), np.float32), "act": np.array([1, 2]),
                       "flag": np.array([True, False])})
        keys = _vector_keys(vw, 2, 1)
        vw.close()
        got = np.asarray(table.lookup(keys)["obs"])
        np.testing.assert_array_equal(got[:, 0], obs.transpose(0, 2, 1))


def test_priority_updates_agree_on_the_fast_and_the_converting_paths(db_path, rng):
    with replaydb.open(db_path) as db:
        tables = [_table(db, name, selector="prioritized") for name in ("fast", "slow")]
        for t in tables:
            vw = t.vector_writer(8)
            for _ in range(4):
                vw.append({"obs": np.zeros((8, 2, 3), np.float32),
                           "act": np.zeros(8, np.int64), "flag": np.zeros(8, np.bool_)})
            keys = _vector_keys(vw, 8, 4)
            vw.close()
        gone = np.array([2**40 + 1], dtype=np.uint64)  # no such item: skipped
        priorities = rng.random(33) * 10
        all_keys = np.concatenate([keys, gone])
        assert tables[0].update_priorities(all_keys, priorities) == (32, 1)
        assert tables[1].update_priorities(all_keys.tolist(), priorities.tolist()) == (32, 1)
        p = [np.asarray(t.lookup(keys)["priorities"]) for t in tables]
        np.testing.assert_array_equal(p[0], p[1])
        np.testing.assert_allclose(p[0].reshape(-1), priorities[:32])
        # A length mismatch on arrays the fast path would take: the general message.
        with pytest.raises(ValueError, match="got 32 keys and 31 priorities"):
            tables[0].update_priorities(keys, priorities[:31])


def test_batch_size_is_checked_before_the_unchecked_call(db_path):
    with replaydb.open(db_path) as db:
        table = _table(db, "t")
        with pytest.raises(replaydb.InvalidArgumentError,
                           match="table 't': batch_size -18446744073709551616 does not fit"):
            table.sample(-2**64, timeout=0)
        with pytest.raises(TypeError, match="batch_size must be an integer, not str '4'"):
            table.sample("4")
        # A NumPy integer is an integer: the engine answers (nothing to draw yet).
        with pytest.raises(replaydb.DeadlineExceededError):
            table.sample(np.int64(1), timeout=0)
