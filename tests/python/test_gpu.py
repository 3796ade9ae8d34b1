"""The Python package on a GPU, with PyTorch (and JAX and CuPy where installed):
device tensors in and out without copies, checked against the host path.
Skipped, with the reason, where there is no GPU."""

import gc

import numpy as np
import pytest

import replaydb

torch = pytest.importorskip("torch", reason="the GPU tests use PyTorch")
if not torch.cuda.is_available() or replaydb.cuda_device_count() == 0:
    pytest.skip("no GPU that both PyTorch and replaydb can use", allow_module_level=True)


def make_table(db, placement, selector="uniform", seq=1, priority_device=None):
    return db.create_table("t", {"obs": (torch.float32, (3, 5)), "a": torch.int64,
                                 "raw": (torch.uint8, (33,))},
                           capacity_steps=1 << 14, sequence_length=seq, placement=placement,
                           selector=selector, priority_device=priority_device)


@pytest.mark.parametrize("placement", ["device:0", "host"])
def test_device_tensors_in_and_out_without_copies(db_path, seed, placement):
    gen = torch.Generator(device="cuda").manual_seed(seed % (1 << 62))
    envs, steps, seq = 16, 12, 3
    with replaydb.open(db_path) as db:
        table = make_table(db, placement, seq=seq)
        assert table.info()["device"] == 0, "pinned host or device memory on GPU 0"
        vw = table.vector_writer(envs)
        written = []
        for _ in range(steps):
            step = {"obs": torch.randn(envs, 3, 5, device="cuda", generator=gen),
                    "a": torch.randint(0, 100, (envs,), device="cuda", generator=gen),
                    "raw": torch.randint(0, 255, (envs, 33), device="cuda", generator=gen,
                                         dtype=torch.uint8)}
            vw.append(step)  # AppendFromDevice on PyTorch's current stream
            written.append({k: v.cpu() for k, v in step.items()})
        ids = [vw.trajectory_id(e) for e in range(envs)]
        # A simulator's done flags as a GPU tensor end those environments,
        # then end(e) the others.
        done = torch.rand(envs, device="cuda", generator=gen) < 0.5
        vw.end_many(done)
        assert table.info()["num_open_trajectories"] == envs - int(done.sum())
        for e in range(envs):
            assert vw.trajectory_id(e) == (0 if done[e] else ids[e])
            vw.end(e)
        assert table.info()["num_open_trajectories"] == 0
        torch.cuda.synchronize()

        batch = table.sample(64, device="cuda", importance_beta=0.5)
        assert batch.device == 0
        obs = torch.from_dlpack(batch["obs"])
        assert obs.is_cuda and obs.shape == (64, seq, 3, 5)
        assert obs.data_ptr() == batch["obs"].data_ptr, "the same device memory: no copy"
        keys = batch.item_keys
        assert keys.__cuda_array_interface__["data"][0] == keys.data_ptr
        # The same items read through the host path are byte-identical.
        host_keys = keys_to_host(keys)
        host = table.lookup(host_keys)
        for name in ("obs", "a", "raw"):
            dev = torch.from_dlpack(batch[name]).cpu().numpy()
            assert np.array_equal(dev, np.asarray(host[name])), name
        mask = torch.from_dlpack(batch.mask).cpu().numpy()
        assert np.array_equal(mask, np.asarray(host.mask))
        # And equal to what was written.
        index = {tid: e for e, tid in enumerate(ids)}
        for b, key in enumerate(host_keys.tolist()):
            e, start = index[key >> 24], key & 0xFFFFFF
            for s in range(seq):
                if start + s < steps:
                    assert torch.equal(obs[b, s].cpu(), written[start + s]["obs"][e])


@pytest.mark.parametrize("placement", ["device:0", "host"])
def test_vector_table_on_the_gpu(db_path, seed, placement):
    """A vector table (lanes=N) written from GPU tensors: a device sample's
    rows are each drawn environment's, the same as the host path's."""
    gen = torch.Generator(device="cuda").manual_seed(seed % (1 << 62))
    lanes = 2 + seed % 200
    with replaydb.open(db_path) as db:
        table = db.create_table("v", {"obs": (torch.float32, (3,)), "a": torch.int64},
                                lanes=lanes, block_steps=4, capacity_steps=256,
                                placement=placement)
        vw = table.vector_writer(lanes)
        written = {}
        for _ in range(10):
            step = {"obs": torch.randn(lanes, 3, device="cuda", generator=gen),
                    "a": torch.randint(0, 1 << 40, (lanes,), device="cuda", generator=gen)}
            before = vw.trajectory_id(0)
            vw.append(step)
            segment = vw.trajectory_id(0) or before
            written.setdefault(segment, []).append({k: v.cpu() for k, v in step.items()})
        torch.cuda.synchronize()
        assert table.info()["num_items"] == 10 * lanes
        batch = table.sample(48, device="cuda")
        obs = torch.from_dlpack(batch["obs"]).cpu()
        a = torch.from_dlpack(batch["a"]).cpu()
        host_keys = keys_to_host(batch.item_keys)
        host = table.lookup(host_keys)
        assert np.array_equal(obs.numpy(), np.asarray(host["obs"]))
        for b, key in enumerate(host_keys.tolist()):
            step, lane = divmod(key & 0xFFFFFF, lanes)
            want = written[key >> 24][step]
            assert torch.equal(obs[b, 0], want["obs"][lane])
            assert a[b, 0] == want["a"][lane]


def keys_to_host(keys_array):
    """The keys of a device batch copied to the host through PyTorch (uint64
    travels as int64: the same bits)."""
    cai = dict(keys_array.__cuda_array_interface__)
    holder = type("K", (), {})()
    cai["typestr"] = "<i8"
    holder.__cuda_array_interface__ = cai
    return torch.as_tensor(holder, device="cuda").cpu().numpy().view(np.uint64)


def test_priorities_from_the_device_steer_sampling(db_path, seed):
    envs, steps = 8, 4
    with replaydb.open(db_path) as db:
        table = make_table(db, "device:0", selector="prioritized", priority_device=0)
        vw = table.vector_writer(envs)
        for _ in range(steps):
            vw.append({"obs": torch.zeros(envs, 3, 5, device="cuda"),
                       "a": torch.arange(envs, device="cuda"),
                       "raw": torch.zeros(envs, 33, dtype=torch.uint8, device="cuda")})
        every = [(vw.trajectory_id(e) << 24) | s for e in range(envs) for s in range(steps)]
        chosen = every[seed % len(every)]
        # Every item's priority, from device arrays: one item keeps mass.
        keys = torch.tensor(every, dtype=torch.int64, device="cuda")
        priorities = (keys == chosen).float()
        assert table.update_priorities(keys, priorities) is None
        drawn = keys_to_host(table.sample(64, device="cuda").item_keys)
        assert set(drawn.tolist()) == {chosen}
        # And back to all equal: every item is drawn again (with 64 draws of 32
        # items, each one misses with probability (31/32)^64 < 0.14; over all,
        # at least 2 distinct).
        table.update_priorities(keys, torch.ones(len(every), device="cuda"))
        drawn = keys_to_host(table.sample(64, device="cuda").item_keys)
        assert len(set(drawn.tolist())) > 2


def test_prefetching_on_the_device_and_buffers_come_back(db_path):
    with replaydb.open(db_path) as db:
        table = make_table(db, "device:0")
        vw = table.vector_writer(4)
        for _ in range(16):
            vw.append({"obs": torch.ones(4, 3, 5, device="cuda"),
                       "a": torch.arange(4, device="cuda"),
                       "raw": torch.ones(4, 33, dtype=torch.uint8, device="cuda")})
        gc.collect()
        baseline = replaydb.live_batches()
        with table.batches(32, device="cuda", prefetch=2, timeout=10) as it:
            for _, batch in zip(range(20), it):
                obs = torch.from_dlpack(batch["obs"])
                assert float(obs.sum()) == 32 * 15
                del obs
                batch.close()
        gc.collect()
        assert replaydb.live_batches() == baseline


def test_jax_and_cupy_read_device_batches(db_path):
    with replaydb.open(db_path) as db:
        table = make_table(db, "device:0")
        vw = table.vector_writer(2)
        vw.append({"obs": torch.full((2, 3, 5), 2.0, device="cuda"),
                   "a": torch.arange(2, device="cuda"),
                   "raw": torch.zeros(2, 33, dtype=torch.uint8, device="cuda")})
        torch.cuda.synchronize()
        batch = table.sample(4, device="cuda")
        torch.cuda.synchronize()
        try:
            import cupy
            c = cupy.asarray(batch["obs"])
            assert float(c.sum()) == 4 * 15 * 2.0
        except ImportError:
            pass
        try:
            import jax
            import jax.dlpack
            j = jax.dlpack.from_dlpack(batch["obs"])
            assert float(j.sum()) == 4 * 15 * 2.0
        except ImportError:
            pass


def test_batch_torch_gives_the_tensors_from_dlpack_gives(db_path, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed % (1 << 62))
    with replaydb.open(db_path) as db:
        table = make_table(db, "device:0", seq=2)
        vw = table.vector_writer(8)
        for _ in range(4):
            vw.append({"obs": torch.randn(8, 3, 5, device="cuda", generator=gen),
                       "a": torch.randint(0, 9, (8,), device="cuda", generator=gen),
                       "raw": torch.zeros(8, 33, dtype=torch.uint8, device="cuda")})
        vw.close()
        batch = table.sample(16, device="cuda")
        one = batch.torch("obs")
        assert one.is_cuda and one.shape == (16, 2, 3, 5)
        assert one.data_ptr() == torch.from_dlpack(batch["obs"]).data_ptr()
        every = batch.torch()
        assert set(every) == set(batch.fields()) and every["a"].dtype == torch.int64
        batch.close()  # the tensors keep the memory
        assert torch.equal(one, every["obs"])
        with pytest.raises(replaydb.NotFoundError, match="no field 'nope'"):
            table.sample(1, device="cuda").torch("nope")


def test_update_priorities_takes_the_batchs_own_keys_and_float32_tensors(db_path):
    with replaydb.open(db_path) as db:
        table = make_table(db, "device:0", selector="prioritized", priority_device=0)
        vw = table.vector_writer(8)
        for _ in range(4):
            vw.append({"obs": torch.zeros(8, 3, 5, device="cuda"),
                       "a": torch.zeros(8, dtype=torch.int64, device="cuda"),
                       "raw": torch.zeros(8, 33, dtype=torch.uint8, device="cuda")})
        vw.close()
        batch = table.sample(16, device="cuda")
        td = torch.rand(16, device="cuda") + 0.1  # float32, as a learner's TD errors are
        assert table.update_priorities(batch.item_keys, td) is None  # on the device
        with pytest.raises(ValueError, match="uint64 or int64 keys and float32 priorities"):
            table.update_priorities(batch.item_keys, td.double())


def test_deleted_items_are_never_drawn_on_the_device(db_path):
    with replaydb.open(db_path) as db:
        table = make_table(db, "device:0", selector="prioritized", priority_device=0)
        vw = table.vector_writer(8)
        for _ in range(8):
            vw.append({"obs": torch.zeros(8, 3, 5, device="cuda"),
                       "a": torch.zeros(8, dtype=torch.int64, device="cuda"),
                       "raw": torch.zeros(8, 33, dtype=torch.uint8, device="cuda")})
        keys = [(vw.trajectory_id(e) << 24) | s for e in range(8) for s in range(8)]
        vw.close()
        doomed = np.array(keys[::3], np.uint64)
        assert table.delete(doomed) == doomed.size
        for _ in range(20):
            drawn = keys_to_host(table.sample(256, device="cuda").item_keys)
            assert not set(drawn.tolist()) & set(doomed.tolist())


def test_seed_is_refused_where_the_priorities_live_on_the_gpu(db_path):
    with replaydb.open(db_path) as db:
        table = make_table(db, "device:0", selector="prioritized", priority_device=0)
        with pytest.raises(replaydb.NotSupportedError, match="priorities live on GPU 0"):
            table.seed(1)
