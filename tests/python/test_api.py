"""The Python API people expect: mappings, lengths, exist_ok, transitions
without the L axis, item keys, Reverb's Stack, a PyTorch dataset."""

import numpy as np
import pytest

import replaydb


def _write(table, n, start=0):
    w = table.writer()
    for i in range(n):
        w.append({"x": np.full(3, start + i, np.float32), "a": start + i})
    tid = w.trajectory_id
    w.end()
    return tid


def _torch_with_uint64():
    """PyTorch, where it takes uint64 and bool tensors through DLPack (2.3 on;
    Debian 12's 1.13 takes neither); skips otherwise, saying why."""
    torch = pytest.importorskip("torch", reason="needs PyTorch")
    if not hasattr(torch, "uint64"):
        pytest.skip(f"PyTorch {torch.__version__} has no uint64 tensors (2.3 and later have)")
    return torch


def _spec():
    return {"x": ("f32", (3,)), "a": "i64"}


def test_databases_iterate_and_count_their_tables(db_path, rng):
    names = sorted({f"t{int(v)}" for v in rng.integers(0, 1000, 5)})
    with replaydb.open(db_path) as db:
        assert list(db) == [] and len(db) == 0
        for name in names:
            db.create_table(name, _spec(), capacity_steps=64)
        assert list(db) == names and len(db) == len(names)
        assert names[0] in db and "nope" not in db and 3 not in db


def test_create_table_exist_ok_returns_the_same_table_or_names_what_differs(db_path):
    with replaydb.open(db_path) as db:
        t = db.create_table("t", _spec(), capacity_steps=64)
        _write(t, 4)
        again = db.create_table("t", _spec(), capacity_steps=64, exist_ok=True)
        assert len(again) == 4
        with pytest.raises(replaydb.AlreadyExistsError):
            db.create_table("t", _spec(), capacity_steps=64)
        with pytest.raises(replaydb.InvalidArgumentError,
                           match="table 't' exists with another spec: capacity_steps is 64, "
                                 "not 128; selector is 'uniform', not 'fifo'"):
            db.create_table("t", _spec(), capacity_steps=128, selector="fifo", exist_ok=True)


def test_batches_are_mappings_and_len_counts_items(db_path, rng):
    n = int(rng.integers(3, 20))
    with replaydb.open(db_path) as db:
        t = db.create_table("t", _spec(), capacity_steps=64)
        tid = _write(t, n)
        assert len(t) == n
        batch = t.sample(5)
        d = dict(batch)
        assert list(d) == list(batch.keys()) == batch.fields()
        assert set(d) >= {"x", "a", "keys", "probabilities", "mask"}
        assert len(batch) == len(d) and "x" in batch and "nope" not in batch
        keys = np.asarray(batch.item_keys)
        assert (replaydb.key_trajectory(keys) == tid).all()
        assert np.array_equal(np.asarray(d["a"]).reshape(-1), replaydb.key_start(keys))
        assert batch.get("weights") is None and batch.get("weights", 7) == 7
        with pytest.raises(TypeError, match="got batch.keys, the mapping's field names; give "
                                            "batch.item_keys"):
            t.update_priorities(batch.keys, np.ones(5))


def test_squeeze_drops_the_sequence_axis_of_transitions(db_path):
    with replaydb.open(db_path) as db:
        t = db.create_table("t", _spec(), capacity_steps=64)
        _write(t, 6)
        b = t.sample(4, squeeze=True)
        assert b["x"].shape == (4, 3) and np.asarray(b["x"]).shape == (4, 3)
        assert np.from_dlpack(b["a"]).shape == (4,) and b["mask"].shape == (4,)
        assert b["keys"].shape == (4,)
        assert t.sample(4)["x"].shape == (4, 1, 3)
        seq = db.create_table("seq", _spec(), capacity_steps=64, sequence_length=2)
        with pytest.raises(ValueError, match="samples windows of 2 steps: squeeze=True drops"):
            seq.sample(1, squeeze=True)


def test_item_keys_encode_and_decode_like_the_engine(db_path, rng):
    with replaydb.open(db_path) as db:
        t = db.create_table("t", _spec(), capacity_steps=256)
        tid = _write(t, 10)
        starts = rng.integers(0, 10, 6)
        keys = replaydb.item_key(np.full(6, tid), starts)
        got = np.asarray(t.lookup(keys)["a"]).reshape(-1)
        assert np.array_equal(got, starts)
        assert replaydb.item_key(tid, 3) == int(keys[0]) - int(starts[0]) + 3
        assert replaydb.key_trajectory(replaydb.item_key(2**40 - 1, 2**24 - 1)) == 2**40 - 1
        for bad in ((2**40, 0), (0, 2**24), (-1, 0)):
            with pytest.raises(ValueError, match="outside"):
                replaydb.item_key(*bad)


def test_a_stack_gives_the_newest_item_once(db_path):
    with replaydb.open(db_path) as db:
        t = db.create_table("s", _spec(), capacity_steps=64, selector="lifo",
                            max_times_sampled=1, rate_limiter=replaydb.RateLimiter.stack(3))
        w = t.writer(timeout=0.2)
        for i in range(3):
            w.append({"x": np.zeros(3, np.float32), "a": i})
        with pytest.raises(replaydb.DeadlineExceededError):
            w.append({"x": np.zeros(3, np.float32), "a": 3})  # full: waits for a sample
        got = [int(np.asarray(t.sample(1)["a"]).reshape(-1)[0]) for _ in range(3)]
        assert got == [2, 1, 0]
        with pytest.raises(replaydb.DeadlineExceededError):
            t.sample(1, timeout=0.1)


def test_replay_dataset_yields_dicts_of_tensors(db_path):
    torch = _torch_with_uint64()
    with replaydb.open(db_path) as db:
        t = db.create_table("t", _spec(), capacity_steps=64)
        _write(t, 8)
        ds = replaydb.data.ReplayDataset(t, batch_size=4, num_batches=3)
        batches = list(torch.utils.data.DataLoader(ds, batch_size=None))
        assert len(batches) == 3 and batches[0]["x"].shape == (4, 1, 3)
        assert batches[0]["keys"].dtype == torch.uint64


def test_bool_and_uint64_fields_reach_torch_and_cpu_tensors_go_in(db_path, rng):
    torch = _torch_with_uint64()
    with replaydb.open(db_path) as db:
        t = db.create_table("b", {"flag": "bool", "v": ("f32", (2, 3))}, capacity_steps=64)
        w = t.writer()
        flags = rng.random(5) < 0.5
        values = torch.randn(5, 3, 2)
        for i in range(5):
            # A CPU tensor, non-contiguous (a transposed view): copied, as NumPy arrays are.
            w.append({"flag": torch.tensor(bool(flags[i])), "v": values[i].t()})
        tid = w.trajectory_id
        keys = replaydb.item_key(np.full(5, tid), np.arange(5))
        b = t.lookup(keys)
        assert b.torch("flag").dtype == torch.bool and b.torch("keys").dtype == torch.uint64
        assert torch.from_dlpack(b["flag"]).dtype == torch.bool
        assert b.torch("flag").reshape(-1).tolist() == flags.tolist()
        assert torch.equal(b.torch("v")[:, 0], values.transpose(1, 2))


def test_seeded_tables_draw_the_same_batches(db_path, rng):
    with replaydb.open(db_path) as db:
        tables = [db.create_table(n, _spec(), capacity_steps=1024, selector=sel)
                  for n, sel in (("u", "uniform"), ("p", "prioritized"))]
        for t in tables:
            w = t.writer()
            for i in range(200):
                w.append({"x": np.zeros(3, np.float32), "a": i}, priority=float(i % 7 + 1))
            w.end()
        seed = int(rng.integers(0, 2**63))
        for t in tables:
            t.seed(seed)
            first = [np.asarray(t.sample(16, peek=True)["a"]).tolist() for _ in range(3)]
            t.seed(seed)
            again = [np.asarray(t.sample(16, peek=True)["a"]).tolist() for _ in range(3)]
            assert first == again
            t.seed(seed + 1)
            assert [np.asarray(t.sample(16, peek=True)["a"]).tolist() for _ in range(3)] != first
        with pytest.raises(replaydb.InvalidArgumentError, match="does not fit"):
            tables[0].seed(2**64)


def test_clear_empties_the_table_durably_and_every_handle_goes_on(db_path):
    with replaydb.open(db_path) as db:
        t = db.create_table("t", _spec(), capacity_steps=256, block_steps=8, selector="prioritized")
        other = db["t"]
        open_writer = t.writer()
        open_writer.append({"x": np.zeros(3, np.float32), "a": 1})
        _write(t, 5)
        spec = t.spec
        t.clear()
        assert len(t) == 0 and len(other) == 0 and t.spec == spec
        assert t.info()["rate_limiter_inserts"] == 0
        with pytest.raises(replaydb.FailedPreconditionError, match="by a Clear of the table"):
            open_writer.append({"x": np.zeros(3, np.float32), "a": 2})
        open_writer.append({"x": np.zeros(3, np.float32), "a": 3})  # a new trajectory
        open_writer.end()
        _write(other, 2)
        assert len(t) == 3
    with replaydb.open(db_path) as db:
        assert len(db["t"]) == 3
        assert set(np.asarray(db["t"].sample(64, peek=True)["a"]).ravel().tolist()) == {0, 1, 3}


def test_export_then_import_copies_every_column(db_path, tmp_path, rng):
    with replaydb.open(db_path) as db:
        t = db.create_table("t", _spec(), capacity_steps=256)
        tid = _write(t, 20, start=int(rng.integers(0, 1000)))
        db.export_table("t", str(tmp_path / "exported"))
        with pytest.raises(replaydb.AlreadyExistsError):
            db.export_table("t", str(tmp_path / "exported"))
        with pytest.raises(replaydb.NotFoundError):
            db.export_table("nope", str(tmp_path / "other"))
        copy = db.import_table(str(tmp_path / "exported"), "t", "copy")
        assert copy.name == "copy" and copy.spec["columns"] == t.spec["columns"]
        keys = replaydb.item_key(np.full(20, tid), np.arange(20))
        a, b = t.lookup(keys), copy.lookup(keys)
        for name in ("x", "a"):
            np.testing.assert_array_equal(np.asarray(a[name]), np.asarray(b[name]))
        with pytest.raises(replaydb.AlreadyExistsError):
            db.import_table(str(tmp_path / "exported"), "t", "copy")


def test_delete_removes_items_durably_and_skips_the_gone(db_path, rng):
    with replaydb.open(db_path) as db:
        t = db.create_table("t", _spec(), capacity_steps=256, selector="prioritized")
        tid = _write(t, 30)
        keys = replaydb.item_key(np.full(30, tid), np.arange(30))
        doomed = keys[rng.random(30) < 0.4]
        assert t.delete(doomed) == doomed.size
        assert t.delete(doomed) == 0 and t.delete([]) == 0
        assert len(t) == 30 - doomed.size
        drawn = set(np.asarray(t.sample(512, peek=True).item_keys).tolist())
        assert not drawn & set(doomed.tolist())
        with pytest.raises(replaydb.InvalidArgumentError, match="keys is u64: value -1"):
            t.delete([-1])
    with replaydb.open(db_path) as db:  # the log brings the deletions back
        t = db["t"]
        assert len(t) == 30 - doomed.size
        drawn = set(np.asarray(t.sample(512, peek=True).item_keys).tolist())
        assert not drawn & set(doomed.tolist())


def test_every_engine_status_code_has_its_exception_class():
    from replaydb import errors
    from replaydb._lib import lib

    code = 1
    while lib.replaydb_code_name(code) != b"invalid":
        cls = errors._BY_CODE[code]
        assert cls.code == lib.replaydb_code_name(code).decode(), (code, cls)
        assert issubclass(cls, replaydb.Error) and cls.__name__ in replaydb.__all__
        code += 1
    assert code - 1 == max(errors._BY_CODE), "a Python class for a code the library lacks"
    assert issubclass(replaydb.UnavailableError, ConnectionError)
