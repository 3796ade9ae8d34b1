"""The Python package on the CPU: round trips byte for byte, DLPack ownership,
errors carrying the engine's messages, threads, reopening."""

import gc
import threading

import numpy as np
import pytest

import replaydb

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]


def random_values(rng, dtype, shape):
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.startswith("float"):
        return rng.standard_normal(size=shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def random_columns(rng, n):
    columns = {}
    for i in range(n):
        dtype = DTYPES[rng.integers(len(DTYPES))]
        ndim = int(rng.integers(0, 3))
        shape = tuple(int(d) for d in rng.integers(1, 5, size=ndim))
        columns[f"c{i}_{dtype}"] = (dtype, shape)
    return columns


def no_live_batches(baseline):
    gc.collect()
    return replaydb.live_batches() == baseline


def test_round_trip_of_random_steps_is_byte_identical(db_path, rng):
    columns = random_columns(rng, int(rng.integers(1, 5)))
    seq = int(rng.integers(1, 4))
    written = {}  # key -> list of per-column arrays of that step
    with replaydb.open(db_path) as db:
        table = db.create_table("t", columns, capacity_steps=4096, sequence_length=seq,
                                padding="tail")
        assert table.sequence_length == seq
        assert list(table.columns) == list(columns)
        for name, (dtype, shape) in columns.items():
            assert table.columns[name].dtype == dtype and table.columns[name].shape == shape
        with table.writer() as w:
            for _ in range(int(rng.integers(1, 6))):
                for s in range(int(rng.integers(1, 20))):
                    step = {n: random_values(rng, d, sh) for n, (d, sh) in columns.items()}
                    w.append(step, priority=float(rng.random()))
                    written[(w.trajectory_id << 24) | s] = step
                w.end("terminal" if rng.random() < 0.5 else "truncated")
        keys = np.array(sorted(written), dtype=np.uint64)
        batch = table.lookup(keys)
        assert batch.batch_size == len(keys) and batch.sequence_length == seq
        assert np.array_equal(np.asarray(batch.item_keys), keys)
        mask = np.asarray(batch.mask)
        for name, (dtype, shape) in columns.items():
            got = np.asarray(batch[name])
            assert got.dtype == np.dtype(dtype)
            assert got.shape == (len(keys), seq) + shape
            for b, key in enumerate(keys):
                for s in range(seq):
                    nxt = int(key) + s
                    if mask[b, s]:
                        assert nxt in written
                        assert got[b, s].tobytes() == written[nxt][name].tobytes(), (name, b, s)
                    else:
                        assert not got[b, s].any(), "padding is zero"
        # numpy.from_dlpack sees the same memory as __array_interface__.
        name = next(iter(columns))
        if columns[name][0] != "bool":  # NumPy 1.24 reads no DLPack bool
            a = np.from_dlpack(batch[name])
            assert a.ctypes.data == batch[name].data_ptr
            assert np.array_equal(a, np.asarray(batch[name]))


def test_sample_draws_live_items_and_counts_them(db_path, rng):
    with replaydb.open(db_path) as db:
        table = db.create_table("t", {"x": np.int64}, capacity_steps=1024)
        w = table.writer()
        n = int(rng.integers(5, 50))
        for i in range(n):
            w.append({"x": i})
        w.end()
        b = int(rng.integers(1, 64))
        batch = table.sample(b, importance_beta=0.5)
        keys = np.asarray(batch.item_keys)
        assert ((keys & ((1 << 24) - 1)) < n).all()
        assert np.array_equal(np.asarray(batch["x"])[:, 0], keys & ((1 << 24) - 1))
        assert np.allclose(np.asarray(batch.probabilities), 1.0 / n)
        assert np.allclose(np.asarray(batch.weights), 1.0)
        assert table.info()["items_sampled"] == b
        peeked = table.sample(3, peek=True)
        assert (np.asarray(peeked.times_sampled) >= 0).all()
        assert table.info()["items_sampled"] == b, "peek records nothing"


def test_dlpack_capsules_are_consumed_once_and_memory_is_freed(db_path, rng):
    gc.collect()
    baseline = replaydb.live_batches()
    with replaydb.open(db_path) as db:
        table = db.create_table("t", {"v": (np.float32, (3,))}, capacity_steps=64)
        with table.writer() as w:
            w.append({"v": rng.standard_normal(3).astype(np.float32)})
        batch = table.sample(2)
        assert replaydb.live_batches() == baseline + 1
        capsule = batch["v"].__dlpack__()

        class Wrap:
            def __dlpack__(self, stream=None):
                return capsule

            def __dlpack_device__(self):
                return (1, 0)

        a = np.from_dlpack(Wrap())
        with pytest.raises(Exception):
            np.from_dlpack(Wrap())  # a capsule is consumed once
        batch.close()
        del capsule
        gc.collect()
        assert replaydb.live_batches() == baseline + 1, "the array still holds the memory"
        assert a.shape == (2, 1, 3)
        del a
        assert no_live_batches(baseline)
        # A capsule nobody consumes gives its reference back when dropped.
        batch = table.sample(1)
        capsule = batch["v"].__dlpack__()
        del capsule, batch
        assert no_live_batches(baseline)
        # Without the cycle collector: no reference cycle holds a batch (its
        # buffers would wait for a garbage collection).
        gc.disable()
        try:
            batch = table.sample(2)
            view = np.asarray(batch["v"])
            del batch, view
            assert replaydb.live_batches() == baseline
        finally:
            gc.enable()
        # NumPy arrays from __array_interface__ keep the batch's memory too.
        batch = table.sample(1)
        view = np.asarray(batch["v"])
        del batch
        gc.collect()
        assert replaydb.live_batches() == baseline + 1
        assert view.shape == (1, 1, 3)
        del view
        assert no_live_batches(baseline)


def test_vector_table_items_are_environments_rows(db_path, rng):
    lanes = int(rng.integers(2, 17))
    with replaydb.open(db_path) as db:
        table = db.create_table("v", {"obs": (np.uint8, (5,)), "r": np.float32},
                                lanes=lanes, block_steps=4, capacity_steps=256)
        assert table.spec["lanes"] == lanes
        with pytest.raises(replaydb.InvalidArgumentError,
                           match=f"vector writer of {lanes - 1} cannot write it"):
            table.vector_writer(lanes - 1)
        vw = table.vector_writer(lanes)
        steps = {}
        for _ in range(int(rng.integers(1, 30))):
            step = {"obs": rng.integers(0, 255, (lanes, 5), dtype=np.uint8),
                    "r": rng.standard_normal(lanes).astype(np.float32)}
            before = vw.trajectory_id(0)
            vw.append(step)
            # The writer ends a segment once it holds block_steps steps: its
            # id is then 0 until the next step starts the next segment.
            segment = vw.trajectory_id(0) or before
            steps.setdefault(segment, []).append(step)
            assert len(steps[segment]) <= 4
        with pytest.raises(replaydb.InvalidArgumentError,
                           match="keeps no per-environment priorities"):
            vw.append(step, priorities=rng.random(lanes))
        n = sum(len(v) for v in steps.values())
        assert table.info()["num_items"] == n * lanes
        batch = table.sample(64)
        for b, key in enumerate(np.asarray(batch.item_keys).tolist()):
            segment, index = key >> 24, key & ((1 << 24) - 1)
            step, lane = divmod(index, lanes)
            want = steps[segment][step]
            assert np.array_equal(np.asarray(batch["obs"])[b, 0], want["obs"][lane])
            assert np.asarray(batch["r"])[b, 0] == want["r"][lane]


def test_vector_writer_and_append_many(db_path, rng):
    envs = int(rng.integers(1, 9))
    with replaydb.open(db_path) as db:
        table = db.create_table("t", {"obs": (np.uint8, (5,)), "r": np.float32},
                                capacity_steps=4096)
        for threads in (65, 2**32 + 1):
            with pytest.raises(ValueError, match=f"threads {threads} is outside"):
                table.vector_writer(envs, threads=threads)
        vw = table.vector_writer(envs, threads=int(rng.integers(0, 3)))
        steps = []
        for _ in range(int(rng.integers(1, 10))):
            step = {"obs": rng.integers(0, 255, (envs, 5), dtype=np.uint8),
                    "r": rng.standard_normal(envs).astype(np.float32)}
            vw.append(step, priorities=rng.random(envs))
            steps.append(step)
        ids = [vw.trajectory_id(e) for e in range(envs)]
        assert len(set(ids)) == envs
        # Some environments by end, some by end_many (a mask or numbers).
        done = rng.random(envs) < 0.5
        for e in np.flatnonzero(~done)[::2]:
            vw.end(int(e))
            done[e] = True
        if rng.random() < 0.5:
            vw.end_many(done)
        else:
            vw.end_many(list(np.flatnonzero(done)) + [int(np.flatnonzero(done)[0])])
        for e in range(envs):  # an ended environment has no trajectory until its next step
            assert vw.trajectory_id(e) == (0 if done[e] else ids[e])
        open_left = [e for e in range(envs) if not done[e]]
        assert table.info()["num_open_trajectories"] == len(open_left)
        vw.end_many(np.array(open_left, dtype=np.int32))
        assert table.info()["num_open_trajectories"] == 0
        with pytest.raises(ValueError, match=f"mask of shape \\({envs + 1},\\)"):
            vw.end_many(np.zeros(envs + 1, dtype=bool))
        with pytest.raises(ValueError, match="not an array of float64"):
            vw.end_many([0.5])
        with pytest.raises(ValueError, match="end_many got environment -1"):
            vw.end_many([0, -1])
        with pytest.raises(replaydb.InvalidArgumentError,
                           match=f"environment {envs} is out of range"):
            vw.end_many([envs])
        for e, tid in enumerate(ids):
            batch = table.lookup([(tid << 24) | s for s in range(len(steps))])
            got = np.asarray(batch["obs"])[:, 0]
            assert np.array_equal(got, np.stack([s["obs"][e] for s in steps]))
        w = table.writer()
        many = {"obs": rng.integers(0, 255, (7, 5), dtype=np.uint8),
                "r": np.arange(7, dtype=np.float32)}
        w.append_many(many, priorities=np.linspace(0, 1, 7))
        tid = w.trajectory_id
        w.end()
        got = table.lookup([(tid << 24) | s for s in range(7)])
        assert np.array_equal(np.asarray(got["r"])[:, 0], many["r"])


def test_errors_carry_the_engines_messages(db_path):
    with replaydb.open(db_path) as db:
        table = db.create_table("t", {"obs": (np.float32, (4,))}, capacity_steps=64)
        w = table.writer()
        with pytest.raises(replaydb.InvalidArgumentError) as e:  # 0.1 is no float32
            w.append({"obs": np.full(4, 0.1)})
        assert "table 't'" in str(e.value) and "obs" in str(e.value) and "f32" in str(e.value)
        assert isinstance(e.value, ValueError)
        with pytest.raises(replaydb.InvalidArgumentError) as e:
            w.append({"obs": np.zeros(5, np.float32)})
        assert "[5]" in str(e.value) and "[4]" in str(e.value)
        with pytest.raises(ValueError, match="missing: obs"):
            w.append({"action": 1})
        with pytest.raises(ValueError, match="unknown: bogus"):
            w.append({"obs": np.zeros(4, np.float32), "bogus": 1})
        with pytest.raises(replaydb.NotFoundError, match="no table named 'nope'"):
            db.table("nope")
        with pytest.raises(replaydb.AlreadyExistsError):
            db.create_table("t", {"x": np.int32}, capacity_steps=8)
        with pytest.raises(replaydb.InvalidArgumentError, match="selector"):
            db.create_table("u", {"x": np.int32}, selector="roulette")
        with pytest.raises(ValueError, match="unknown dtype"):
            db.create_table("u", {"x": "complex128"})
        with pytest.raises(replaydb.DeadlineExceededError) as e:
            table.sample(1, timeout=0.05)
        assert isinstance(e.value, TimeoutError)
        with pytest.raises(ValueError, match="sequence_length"):
            table.sample(1, seq_len=3)
        if replaydb.cuda_device_count() == 0:
            with pytest.raises(ValueError, match="no GPU to sample on"):
                table.sample(1, device="cuda")
        else:  # a host table is in pinned memory, which the GPU reads
            with pytest.raises(replaydb.DeadlineExceededError):
                table.sample(1, device="cuda", timeout=0.05)
        with pytest.raises(ValueError, match="device must be"):
            table.sample(1, device="tpu")
        with pytest.raises(replaydb.InvalidArgumentError, match="priority"):
            table.update_priorities([1 << 24], [-1.0])
        w.close()
    with pytest.raises(ValueError, match="closed"):
        db.tables()
    with pytest.raises(replaydb.FailedPreconditionError):
        table.sample(1, timeout=1)  # the database is gone
    assert table.info()["num_steps"] == 0, "info answers with the table's last state"


def test_acknowledgment_modes_of_tables_and_writers(db_path, rng):
    """acks (docs/replication.md): a replicated(1) table refuses appends while no
    replica is in sync, storing nothing; a writer asking for none goes on; bad
    modes are named."""
    with replaydb.open(db_path) as db:
        table = db.create_table("acked", {"obs": (np.float32, (3,))}, capacity_steps=64,
                                acks="replicated(1)", max_lag_ms=2500)
        assert table.spec["acks"] == "replicated(1)" and table.spec["max_lag_ms"] == 2500
        step = {"obs": rng.standard_normal(3).astype(np.float32)}
        with table.writer() as w:
            with pytest.raises(replaydb.UnavailableError,
                               match=r"acks replicated\(1\) needs 1 in-sync replica; 0 are in "
                                     r"sync \(none\): nothing was appended"):
                w.append(step)
        assert table.info()["num_steps"] == 0
        with table.writer(acks="none") as w:
            w.append(step)
            w.end()
        assert table.info()["num_steps"] == 1
        with pytest.raises(replaydb.InvalidArgumentError, match="acks 'all' is not one of"):
            table.writer(acks="all")
        with pytest.raises(replaydb.InvalidArgumentError, match=r"replicated\(0\)"):
            db.create_table("bad", {"obs": np.float32}, acks="replicated(0)")
        with pytest.raises(replaydb.InvalidArgumentError, match="only a writer's options"):
            db.create_table("bad", {"obs": np.float32}, acks="table")


def test_integers_that_do_not_fit_a_c_argument_are_refused(db_path, rng):
    # ctypes alone would wrap them into range: 2**64 + k arriving as k.
    k = int(rng.integers(1, 8))
    with replaydb.open(db_path) as db:
        table = db.create_table("t", {"x": np.int32}, capacity_steps=64)
        vw = table.vector_writer(1)
        cases = [
            (lambda: table.sample(2**64 + k, timeout=0),
             f"table 't': batch_size {2**64 + k} does not fit a signed 64-bit"),
            (lambda: table.vector_writer(-k), f"argument 2: {-k} does not fit an unsigned 64-bit"),
            (lambda: vw.end(2**64 + k), "replaydb_vector_writer_end: argument 2"),
            (lambda: db.create_table("u", {"x": np.int32}, capacity_steps=2**63 + k),
             "replaydb_table_spec_set_capacity_steps: argument 2"),
            (lambda: db.create_table("u", {"x": (np.uint8, (2**64 + k,))}),
             f"column 'x' shape: {2**64 + k} does not fit a signed 64-bit"),
        ]
        for call, message in cases:
            with pytest.raises(replaydb.InvalidArgumentError) as e:
                call()
            assert message in str(e.value) and "does not fit" in str(e.value), str(e.value)
            assert isinstance(e.value, ValueError)
        with pytest.raises(TypeError, match="table 't': batch_size must be an integer, not float 1.5"):
            table.sample(1.5)
        # Timeouts are seconds: NaN is refused, infinity and more than int64
        # milliseconds wait forever (the writer is made; it waits for nothing).
        with pytest.raises(ValueError, match="timeout is NaN"):
            table.sample(1, timeout=float("nan"))
        for forever in (float("inf"), 1e300, 2**70):
            table.writer(timeout=forever).close()
            assert replaydb.core._timeout_ms(forever) == -1  # the C API's forever
        assert replaydb.core._timeout_ms(-3) == 0 and replaydb.core._timeout_ms(0.0026) == 3
        # Nothing was created or sampled on the way.
        assert db.tables() == ["t"]
        assert table.info()["items_sampled"] == 0
        # In range, the same calls work.
        vw.close()
        w = table.writer()
        w.append({"x": np.int32(k)})
        w.end()
        assert np.asarray(table.sample(k)["x"]).reshape(-1).tolist() == [k] * k


def test_threads_write_while_one_samples(db_path, seed):
    writers = 4
    per_writer = 200
    errors = []
    with replaydb.open(db_path) as db:
        table = db.create_table("t", {"who": np.int32, "i": np.int32}, capacity_steps=1 << 14)

        def write(who):
            try:
                with table.writer() as w:
                    for i in range(per_writer):
                        w.append({"who": who, "i": i})
                        if i % 50 == 49:
                            w.end()
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=write, args=(k,)) for k in range(writers)]
        for t in threads:
            t.start()
        seen = 0
        while any(t.is_alive() for t in threads) or seen == 0:
            batch = table.sample(8, timeout=10)
            who = np.asarray(batch["who"])[:, 0]
            i = np.asarray(batch["i"])[:, 0]
            assert ((who >= 0) & (who < writers)).all()
            assert (np.asarray(batch.item_keys) & 0xFFFFFF == i % 50).all()
            seen += 1
        for t in threads:
            t.join()
        assert not errors
        assert table.info()["steps_inserted"] == writers * per_writer


def test_reopen_keeps_everything_and_read_only_opens_beside(db_path, rng):
    values = rng.standard_normal((10, 2)).astype(np.float32)
    with replaydb.open(db_path) as db:
        table = db.create_table("t", {"v": (np.float32, (2,))}, capacity_steps=64,
                                selector="prioritized", priority_exponent=0.7)
        with table.writer() as w:
            for v in values:
                w.append({"v": v}, priority=1.0)
            tid = w.trajectory_id
        updated, skipped = table.update_priorities([(tid << 24) | 3, 12345 << 24], [5.0, 1.0])
        assert (updated, skipped) == (1, 1)
        with replaydb.open(db_path, read_only=True) as ro:
            assert ro.read_only and ro.tables() == ["t"]
            with pytest.raises(replaydb.FailedPreconditionError, match="read-only"):
                ro.table("t").writer()
    with replaydb.open(db_path) as db:
        assert db.tables() == ["t"]
        table = db["t"]
        assert table.spec["selector"] == "prioritized"
        batch = table.lookup([(tid << 24) | s for s in range(10)])
        assert np.array_equal(np.asarray(batch["v"])[:, 0], values)
        assert np.asarray(batch.priorities)[3] == 5.0
        info = table.info()
        assert info["num_steps"] == 10 and info["placement"] in ("host", "pinned")


def test_prefetching_iterator_yields_batches_and_stops(db_path):
    with replaydb.open(db_path) as db:
        table = db.create_table("t", {"x": np.int32}, capacity_steps=256)
        with table.writer() as w:
            for i in range(32):
                w.append({"x": i})
        gc.collect()
        baseline = replaydb.live_batches()
        with table.batches(4, prefetch=3, timeout=10) as it:
            for k, batch in zip(range(10), it):
                assert batch.batch_size == 4
                assert (np.asarray(batch["x"]) < 32).all()
                batch.close()
        gc.collect()
        assert replaydb.live_batches() <= baseline


def test_importance_weights_by_buffer_or_batch(db_path):
    with replaydb.open(db_path) as db:
        table = db.create_table("w", {"x": np.int64}, capacity_steps=64,
                                selector="prioritized", priority_exponent=1.0)
        w = table.writer()
        for i, p in enumerate([1.0, 2.0, 4.0, 8.0]):
            w.append({"x": i}, priority=p)
        w.end()
        # The default, prioritized replay's: (P_min / P)^beta over the whole table.
        batch = table.sample(64, importance_beta=0.5, gather=False)
        priorities = np.asarray(batch.priorities)
        assert np.allclose(np.asarray(batch.weights), (1.0 / priorities) ** 0.5)
        # By the batch's largest: the batch's least likely draw gets 1.
        batch = table.sample(64, importance_beta=0.5, weight_normalization="batch", gather=False)
        weights = np.asarray(batch.weights)
        assert weights.max() == 1.0
        p = np.asarray(batch.probabilities)
        assert np.allclose(weights, (p.min() / p) ** 0.5)
        with pytest.raises(ValueError, match="weight_normalization must be 'buffer' or 'batch'"):
            table.sample(4, importance_beta=0.5, weight_normalization="max")


def test_all_zero_priorities_sample_uniformly(db_path):
    with replaydb.open(db_path) as db:
        table = db.create_table("z", {"x": np.int64}, capacity_steps=64,
                                selector="prioritized")
        w = table.writer()
        for i in range(4):
            w.append({"x": i}, priority=0.0)
        w.end()
        batch = table.sample(400, timeout=5.0, gather=False)  # waited forever before
        assert np.allclose(np.asarray(batch.probabilities), 0.25)
        assert len(set(np.asarray(batch.item_keys).tolist())) == 4
