"""replaydb.distributed: a table sharded over the ranks of a torch.distributed
group. Real processes on 127.0.0.1 (gloo), each with a database and a shard of
its own (distributed_worker.py); skipped, saying why, without PyTorch's
distributed package."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import replaydb
from replaydb.distributed import draw_counts

HERE = Path(__file__).resolve().parent
CHI_Z = 5.3  # as the engine's chi-square checks: about 6e-8 per check


def _torch_distributed():
    try:
        import torch.distributed as dist
    except Exception as e:  # noqa: BLE001 - any import failure means "not here"
        return f"PyTorch is not importable ({e})"
    if not dist.is_available() or not dist.is_gloo_available():
        return "this PyTorch has no torch.distributed with gloo"
    return None


needs_torch = pytest.mark.skipif(_torch_distributed() is not None,
                                 reason=str(_torch_distributed()))


def _gpus(world):
    """None when `world` ranks can each have a GPU with NCCL, else why not."""
    why = _torch_distributed()
    if why is not None:
        return why
    import torch
    import torch.distributed as dist
    if not dist.is_nccl_available():
        return "this PyTorch has no NCCL"
    if torch.cuda.device_count() < world:
        return f"{world} ranks need {world} GPUs; {torch.cuda.device_count()} here"
    return None


BACKENDS = [("gloo", 1), ("gloo", 2), ("gloo", 3), ("nccl", 1), ("nccl", 2)]
EXCHANGES = ["shm", "collective"]  # the masses through shared memory, or all_gather


def _skip_unless(backend, world):
    if backend == "nccl" and _gpus(world) is not None:
        pytest.skip(_gpus(world))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_group(tmp_path, world, **cfg):
    """Runs `world` ranks of the worker; returns their results by rank. Every
    process is waited for (120 s at most) and killed if it overstays. The
    rendezvous port is free when chosen, but another process (tests run in
    parallel) may take it before rank 0 binds it: then the group runs again
    on another port, three times at most."""
    for attempt in range(3):
        try:
            return _run_group_once(tmp_path, world, dict(cfg))
        except _PortTaken:
            if attempt == 2:
                raise


class _PortTaken(Exception):
    pass


def _run_group_once(tmp_path, world, cfg):
    cfg.update(world=world, dir=str(tmp_path), init=f"tcp://127.0.0.1:{_free_port()}")
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo")  # gloo's sockets on loopback only
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parents[1] / "python"),
                                         env.get("PYTHONPATH", "")])
    procs = [subprocess.Popen([sys.executable, str(HERE / "distributed_worker.py"),
                               json.dumps(cfg), str(r)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(world)]
    outputs = []
    try:
        for r, p in enumerate(procs):
            out, _ = p.communicate(timeout=120)
            outputs.append(out)
            if r == 0 and p.returncode != 0 and "Address already in use" in out:
                raise _PortTaken(out)  # the others are killed below
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for r, (p, out) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, f"rank {r} exited {p.returncode}:\n{out}"
    return [json.loads((tmp_path / f"result{r}.json").read_text()) for r in range(world)]


def chi_square_ok(counts, probabilities):
    """Chi-square below its critical value z = CHI_Z out; bins expected below 5
    draws are pooled into one (the chi-square approximation needs it)."""
    counts = np.asarray(counts, np.float64)
    expected = counts.sum() * np.asarray(probabilities)
    small = expected < 5
    if small.any():
        counts = np.append(counts[~small], counts[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    dof = len(counts) - 1
    # The critical value by Wilson-Hilferty (tests/test_util.h's
    # ChiSquareCritical): the chi-square's right tail is far heavier than the
    # normal's at a few degrees of freedom, so dof + z*sqrt(2 dof) failed a fair
    # draw about once in 4,000 checks at 9 degrees of freedom, not 6e-8.
    a = 2.0 / (9.0 * dof)
    critical = dof * (1.0 - a + CHI_Z * np.sqrt(a)) ** 3
    return chi2 <= critical, (chi2, dof, critical)


def skewed_priorities(rng, world):
    """Shards of different sizes and very different totals."""
    return [list(rng.uniform(0.1, 1.0, size=int(rng.integers(5, 12))) * 10.0 ** s)
            for s in range(world)]


# ------------------------------------------------------------ the check itself


def test_the_chi_square_check_passes_fair_draws_and_refuses_a_skewed_one(rng):
    p = rng.uniform(0.1, 1.0, size=int(rng.integers(5, 12)))
    p /= p.sum()
    assert chi_square_ok(rng.multinomial(20000, p), p)[0]
    skewed = p.copy()
    skewed[np.argmax(p)] *= 1.5  # at least 1/11 of the draws: hundreds too many
    skewed /= skewed.sum()
    assert not chi_square_ok(rng.multinomial(20000, skewed), p)[0]


# ------------------------------------------------------------ draw_counts (no processes)


def test_per_rank_counts_are_multinomial_rows_of_the_batch(rng):
    masses = rng.uniform(0, 5, size=4)
    counts = draw_counts(masses, [10] * 4, 64, 3, np.random.default_rng(7))
    assert counts.shape == (3, 4) and (counts.sum(axis=1) == 64).all()
    again = draw_counts(masses, [10] * 4, 64, 3, np.random.default_rng(7))
    assert np.array_equal(counts, again)  # the same plan on every rank


def test_union_counts_keep_local_rows_and_move_only_the_difference(rng):
    world, batch = 4, 256
    masses = np.full(world, rng.uniform(1, 2))  # equal shards: about sqrt(B * world) move
    gen = np.random.default_rng(int(rng.integers(1 << 32)))
    moved = 0
    for _ in range(200):
        state = gen.bit_generator.state
        counts = draw_counts(masses, [1] * world, batch, world, gen, mode="union")
        gen2 = np.random.default_rng()
        gen2.bit_generator.state = state
        drawn = gen2.multinomial(batch * world, masses / masses.sum())
        assert (counts.sum(axis=1) == batch).all()  # every rank gets its batch
        assert np.array_equal(counts.sum(axis=0), drawn)  # every shard serves its draws
        for r in range(world):
            assert counts[r, r] == min(drawn[r], batch)
        moved += counts.sum() - np.trace(counts)
    # About sqrt(B * world) rows move per step, far from B * (world - 1).
    assert moved / 200 < 0.2 * batch * (world - 1)


def test_all_zero_masses_draw_by_item_count():
    counts = draw_counts([0.0, 0.0], [0, 5], 16, 2, np.random.default_rng(1))
    assert (counts[:, 0] == 0).all() and (counts[:, 1] == 16).all()


@pytest.mark.parametrize("masses,items,message", [
    ([1.0, -1.0], [1, 1], "finite and >= 0"),
    ([1.0, float("nan")], [1, 1], "finite and >= 0"),
    ([0.0, 0.0], [0, 0], "every shard is empty"),
])
def test_bad_masses_are_refused(masses, items, message):
    with pytest.raises(ValueError, match=message):
        draw_counts(masses, items, 4, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="mode must be one of"):
        draw_counts([1.0], [1], 4, 1, np.random.default_rng(0), mode="nearest")


# ------------------------------------------------------------ Table.mass


def test_mass_is_the_sum_of_priorities_to_the_exponent(db_path, rng):
    alpha = float(rng.uniform(0.3, 1.7))
    with replaydb.open(db_path) as db:
        t = db.create_table("p", {"x": np.float32}, capacity_steps=1000, sequence_length=1,
                            selector="prioritized", priority_exponent=alpha)
        u = db.create_table("u", {"x": np.float32}, capacity_steps=1000, sequence_length=1)
        f = db.create_table("f", {"x": np.float32}, capacity_steps=1000, sequence_length=1,
                            selector="fifo")
        prios = rng.uniform(0.01, 100, size=int(rng.integers(3, 30)))
        with t.writer() as w, u.writer() as wu:
            for p in prios:
                w.append({"x": 0.0}, priority=float(p))
                wu.append({"x": 0.0})
        total, items = t.mass()
        assert items == len(prios)
        assert total == pytest.approx(float((prios ** alpha).sum()), rel=1e-12)
        b = t.sample(1)
        t.update_priorities(b.item_keys, np.array([0.0]))
        k = replaydb.key_start(int(np.asarray(b.item_keys)[0]))
        assert t.mass()[0] == pytest.approx(float((prios ** alpha).sum() - prios[k] ** alpha),
                                            rel=1e-9)
        assert u.mass() == (float(len(prios)), len(prios))
        with pytest.raises(replaydb.NotSupportedError, match="'f'.*fifo table has no sampling mass"):
            f.mass()


# ------------------------------------------------------------ process groups


@needs_torch
@pytest.mark.parametrize("exchange", EXCHANGES)
@pytest.mark.parametrize("backend,world", BACKENDS)
def test_every_rank_samples_the_whole_table_exactly(tmp_path, rng, backend, world, exchange):
    _skip_unless(backend, world)
    prios = skewed_priorities(rng, world)
    results = run_group(tmp_path, world, scenario="sample", mode="per_rank", steps=60, batch=64,
                        seed=int(rng.integers(1 << 31)), priorities=prios, backend=backend,
                        exchange=exchange)
    want = np.concatenate([np.asarray(p) / sum(map(sum, prios)) for p in prios])
    # Between GPUs the rows go through peer memory where the exchange has
    # shared memory (its words order the writes), else through NCCL.
    transfer = None if backend == "gloo" else "peer" if exchange == "shm" else "nccl"
    assert [r["transfer"] for r in results] == [transfer] * world
    for res in results:  # each rank alone follows the global distribution
        ok, detail = chi_square_ok(np.concatenate(res["counts"]), want)
        assert ok, (res["rank"], detail)


@needs_torch
@pytest.mark.parametrize("backend,world,transfer", [("gloo", 3, "auto"), ("nccl", 2, "peer"),
                                                    ("nccl", 2, "nccl")])
def test_the_union_of_a_steps_batches_samples_the_whole_table_exactly(tmp_path, rng, backend,
                                                                       world, transfer):
    _skip_unless(backend, world)
    prios = skewed_priorities(rng, world)
    results = run_group(tmp_path, world, scenario="sample", mode="union", steps=60, batch=64,
                        seed=int(rng.integers(1 << 31)), priorities=prios, alpha=0.7,
                        backend=backend, transfer=transfer)
    assert [r["transfer"] for r in results] == [None if backend == "gloo" else transfer] * world
    want = np.concatenate([np.asarray(p) ** 0.7 for p in prios])
    union = sum(np.concatenate(r["counts"]) for r in results)
    ok, detail = chi_square_ok(union, want / want.sum())
    assert ok, detail
    # The weights' normaliser is the union's: the same on every rank, its largest weight 1.
    for r in results[1:]:
        assert np.allclose(r["scales"], results[0]["scales"], rtol=1e-5)
    assert np.allclose(np.max([r["largest"] for r in results], axis=0), 1.0, rtol=1e-5)


@needs_torch
def test_uniform_shards_are_drawn_by_item_count(tmp_path, rng):
    prios = [[1.0] * int(rng.integers(2, 6)), [1.0] * int(rng.integers(10, 30))]
    results = run_group(tmp_path, 2, scenario="sample", mode="per_rank", steps=40, batch=64,
                        seed=int(rng.integers(1 << 31)), priorities=prios, selector="uniform")
    n = sum(map(len, prios))
    for res in results:
        ok, detail = chi_square_ok(np.concatenate(res["counts"]), np.full(n, 1.0 / n))
        assert ok, detail


@needs_torch
@pytest.mark.parametrize("backend,world", [("gloo", 3), ("nccl", 2)])
def test_priority_updates_reach_the_shard_that_holds_the_item(tmp_path, rng, backend, world):
    _skip_unless(backend, world)
    prios = skewed_priorities(rng, world)
    results = run_group(tmp_path, world, scenario="updates", batch=32,
                        seed=int(rng.integers(1 << 31)), priorities=prios, backend=backend)
    rel = 1e-5 if backend == "nccl" else 1e-9  # a GPU keeps priorities as float
    for res in results:
        assert res["mass"] == pytest.approx(res["want_mass"], rel=rel), res


@needs_torch
def test_the_rate_limiter_stops_every_rank_at_the_same_step(tmp_path, rng):
    prios = [[1.0] * 20, [1.0] * 20]
    results = run_group(tmp_path, 2, scenario="limiter", batch=4, error_buffer=3.0,
                        seed=int(rng.integers(1 << 31)), priorities=prios)
    # 40 inserts at 1 sample per insert, min_diff 1 - 3: 8 samples a step
    # while 40 - (granted + 8) >= -2, i.e. 5 steps.
    assert [r["steps"] for r in results] == [5, 5]
    for r in results:
        assert "no batch of 4 x 2 ranks within 1.0 s: 40 items in the shards, 40 inserts, " \
               "40 samples granted" in r["error"], r


@needs_torch
@pytest.mark.parametrize("backend,world,transfer", [("gloo", 2, "auto"), ("nccl", 2, "peer"),
                                                    ("nccl", 2, "nccl")])
def test_a_shard_that_cannot_draw_fails_its_rank_and_tells_the_others(tmp_path, rng, backend,
                                                                      world, transfer):
    _skip_unless(backend, world)
    prios = [[1.0] * 10, [1.0] * 10]
    results = run_group(tmp_path, world, scenario="failure", batch=64, blocked_rank=1,
                        seed=int(rng.integers(1 << 31)), priorities=prios, backend=backend,
                        transfer=transfer)
    blocked, other = results[1]["errors"], results[0]["errors"]
    # Step 1: the blocked shard's rank raises its own draw's error.
    assert blocked[0] is not None and "rank 1's shard:" in blocked[0], blocked
    # Over gloo the other rank learns it from the failed rows at once, through
    # peer memory from the failed rank's posted word; over NCCL (no wait on
    # the device) at the next step, where every rank stops before any transfer.
    if backend == "gloo" or transfer == "peer":
        assert "the shards of ranks [1] failed to draw" in other[0], other
    else:
        assert other[0] is None, other
    for errors in (blocked, other):
        assert "the shards of ranks [1] failed to draw in the last step" in errors[1], errors
    # Step 3 draws again (and the shard is still blocked).
    assert "rank 1's shard:" in blocked[2], blocked


@needs_torch
def test_a_rank_that_does_not_come_stops_every_rank_for_good(tmp_path, rng):
    results = run_group(tmp_path, 2, scenario="late", batch=4, seed=int(rng.integers(1 << 31)),
                        priorities=[[1.0] * 5, [2.0] * 5])
    gave_up, late = results[0]["errors"], results[1]["errors"]
    assert gave_up[0] == ("replaydb.distributed: ranks [1] did not come to exchange 1 within "
                          "1 s; the sampler cannot go on: make a new one on every rank"), gave_up
    assert late[0] == ("replaydb.distributed: ranks [0] gave up waiting for the others; the "
                       "sampler cannot go on: make a new one on every rank"), late
    # For good: the next call refuses at once, with the same reason.
    assert gave_up[1] == gave_up[0] and late[1] == late[0]


@needs_torch
def test_a_rank_that_cannot_make_its_peer_buffers_stops_every_rank_once(tmp_path, rng):
    _skip_unless("nccl", 2)
    results = run_group(tmp_path, 2, scenario="peer_setup", batch=16, backend="nccl",
                        seed=int(rng.integers(1 << 31)), priorities=[[1.0] * 5, [2.0] * 5])
    for r in results:
        assert "the peer path could not make its rows' buffers: rank 1: replaydb.distributed: " \
               "rank 1: cudaMalloc(" in r["error"], r
        assert "on GPU 1: out of memory (CUDA error 2)" in r["error"], r
        assert r["rows"] == 16, r


@needs_torch
def test_ranks_that_call_alike_are_required_and_a_closed_sampler_refuses(tmp_path, rng):
    results = run_group(tmp_path, 2, scenario="misuse", seed=int(rng.integers(1 << 31)),
                        priorities=[[1.0] * 5, [2.0] * 5])
    for r in results:
        e = r["errors"]
        assert "seq_len 2 is not table 't''s sequence_length 1" in e["seq_len"], e
        assert "the ranks called sample differently: batch sizes [8, 16]" in e["batch"], e
        assert "the sampler was closed" in e["closed"], e
        assert "transfer='peer' moves rows between GPUs; this group's backend is gloo" in \
            e["transfer_peer"], e
        assert "transfer must be one of ('auto', 'peer', 'nccl'), not 'rdma'" in \
            e["transfer_rdma"], e


@needs_torch
def test_a_subgroup_shards_a_table_over_its_own_ranks(tmp_path, rng):
    prios = skewed_priorities(rng, 3)
    results = run_group(tmp_path, 3, scenario="subgroup", steps=40, batch=64,
                        seed=int(rng.integers(1 << 31)), priorities=prios)
    assert "counts" not in results[0]
    want = np.concatenate([np.asarray(p) for p in prios[1:]])
    for r in results[1:]:
        ok, detail = chi_square_ok(np.concatenate(r["counts"][1:]), want / want.sum())
        assert ok, detail
        assert sum(r["counts"][0]) == 0


@needs_torch
def test_a_fifo_table_is_refused(tmp_path):
    results = run_group(tmp_path, 1, scenario="fifo", priorities=[[1.0]], selector="fifo")
    assert "table 't' draws fifo; a sharded table draws uniform or prioritized" in \
        results[0]["error"]


@needs_torch
def test_the_ddp_example_learns_on_two_cpu_ranks(tmp_path):
    """examples/ddp_learner.py over gloo, launched as torchrun would (its
    environment variables; Debian's torch.distributed.run of PyTorch 1.13
    fails before starting workers)."""
    port = _free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
        env["PYTHONPATH"] = os.pathsep.join([str(HERE.parents[1] / "python"),
                                             env.get("PYTHONPATH", "")])
        procs.append(subprocess.Popen(
            [sys.executable, str(HERE.parents[1] / "examples" / "ddp_learner.py"), "--dir",
             str(tmp_path / "replay"), "--device", "cpu", "--iterations", "60", "--batch", "64"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=180)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], outs
    assert "iteration 60: loss" in outs[0] and "shard items [" in outs[0], outs[0]
    assert (tmp_path / "replay" / "rank0").is_dir() and (tmp_path / "replay" / "rank1").is_dir()
