"""One rank of test_distributed.py's process groups (not a test module).

    python3 distributed_worker.py CONFIG_JSON RANK

Opens its own database under the config's directory with its shard of table
"t": one item per priority in config["priorities"][RANK], each row's "obs"
being (rank, index) so that a received row names its origin. Runs the
config's scenario and writes what it saw to DIR/result{RANK}.json.
"""

import datetime
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

import replaydb
from replaydb.distributed import ShardedSampler


def open_shard(cfg, rank):
    db = replaydb.open(os.path.join(cfg["dir"], f"rank{rank}"))
    gpu = {}
    if cfg.get("backend") == "nccl":  # the shard on this rank's GPU, priorities too
        gpu = {"placement": f"device:{rank}"}
        if cfg.get("selector", "prioritized") == "prioritized":
            gpu["priority_device"] = rank
    if cfg.get("blocked_rank") == rank:  # this shard's own limiter never lets a draw through
        gpu["rate_limiter"] = replaydb.RateLimiter.min_size(1 << 30)
    table = db.create_table("t", {"obs": (np.float32, (2,)), "flag": np.bool_},
                            capacity_steps=1 << 16, sequence_length=1,
                            selector=cfg.get("selector", "prioritized"),
                            priority_exponent=cfg.get("alpha", 1.0), **gpu)
    with table.writer() as w:
        for i, p in enumerate(cfg["priorities"][rank]):
            w.append({"obs": np.array([rank, i], np.float32), "flag": i % 3 == 0}, priority=p)
        w.end()
    return db, table


def expected_probabilities(cfg):
    alpha = cfg.get("alpha", 1.0)
    masses = [np.asarray(p, np.float64) ** alpha for p in cfg["priorities"]]
    if cfg.get("selector", "prioritized") == "uniform":
        masses = [np.ones(len(p)) for p in cfg["priorities"]]
    total = sum(m.sum() for m in masses)
    return [m / total for m in masses]


def check_rows(cfg, batch, rank):
    """Every row is the item its key and shard name, with the exact global probability."""
    obs = batch["obs"].cpu().numpy()[:, 0]
    shards = batch.shards.cpu().numpy()
    assert batch["obs"].shape[1] == 1
    assert np.array_equal(obs[:, 0].astype(np.int64), shards), (obs[:, 0], shards)
    index = obs[:, 1].astype(np.int64)
    assert np.array_equal(batch["flag"].cpu().numpy()[:, 0], index % 3 == 0)
    keys = batch.keys.cpu().numpy().view(np.uint64)
    assert np.array_equal([replaydb.key_start(int(k)) for k in keys], index)
    want = np.array([expected_probabilities(cfg)[s][i] for s, i in zip(shards, index)])
    # A GPU's priority table keeps priority^alpha as float.
    rtol = 1e-5 if cfg.get("backend") == "nccl" else 1e-9
    got = batch.probabilities.cpu().numpy()
    assert np.allclose(got, want, rtol=rtol), (got, want)
    assert batch.mask.cpu().numpy().all()
    return shards, index


def sample_errors(sampler, batch, calls):
    """Each of `calls` samples' error message, or None where it drew."""
    errors = []
    for _ in range(calls):
        try:
            sampler.sample(batch)
            errors.append(None)
        except replaydb.Error as e:
            errors.append(str(e))
    return errors


def main():
    cfg = json.loads(sys.argv[1])
    rank = int(sys.argv[2])
    world = cfg["world"]
    backend = cfg.get("backend", "gloo")
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=cfg["init"], rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=90))
    result = {"rank": rank}
    db, table = open_shard(cfg, rank)
    scenario = cfg["scenario"]
    if scenario == "sample":
        sampler = ShardedSampler(table, mode=cfg["mode"], seed=cfg["seed"],
                                 importance_beta=0.5, exchange=cfg.get("exchange", "auto"),
                                 transfer=cfg.get("transfer", "auto"))
        result["transfer"] = sampler.transfer
        counts = [[0] * len(p) for p in cfg["priorities"]]
        for _ in range(cfg["steps"]):
            batch = sampler.sample(cfg["batch"])
            assert len(batch) == cfg["batch"]
            shards, index = check_rows(cfg, batch, rank)
            w = batch.weights.cpu().numpy()
            n = sum(len(p) for p in cfg["priorities"])
            raw = (n * batch.probabilities.cpu().numpy()) ** -0.5
            if cfg["mode"] == "per_rank":  # normalised over this rank's batch
                assert np.allclose(w, raw / raw.max(), rtol=1e-5)
            else:  # over the step's union: one scale on every rank, the largest 1 somewhere
                scale = w / raw
                assert np.allclose(scale, scale[0], rtol=1e-5) and w.max() <= 1 + 1e-6
                result.setdefault("scales", []).append(float(scale[0]))
                result.setdefault("largest", []).append(float(w.max()))
            for s, i in zip(shards, index):
                counts[s][i] += 1
        result["counts"] = counts
    elif scenario == "updates":
        sampler = ShardedSampler(table, seed=cfg["seed"], transfer=cfg.get("transfer", "auto"))
        batch = sampler.sample(cfg["batch"])
        shards, index = check_rows(cfg, batch, rank)
        new = 1000.0 + 10 * shards + index  # a function of the item alone
        sampler.update_priorities(batch.keys, batch.shards, new)
        updated = [None] * world
        dist.all_gather_object(updated, sorted(set(zip(shards.tolist(), index.tolist()))))
        mine = dict(enumerate(cfg["priorities"][rank]))
        for part in updated:
            for s, i in part:
                if s == rank:
                    mine[i] = 1000.0 + 10 * s + i
        result["mass"] = table.mass()[0]
        result["want_mass"] = float(sum(mine.values()))
    elif scenario == "limiter":
        lim = replaydb.RateLimiter.sample_to_insert_ratio(1.0, 1, cfg["error_buffer"])
        sampler = ShardedSampler(table, seed=cfg["seed"], rate_limiter=lim, timeout=1.0)
        steps = 0
        try:
            for _ in range(1000):
                sampler.sample(cfg["batch"])
                steps += 1
        except replaydb.DeadlineExceededError as e:
            result["error"] = str(e)
        result["steps"] = steps
    elif scenario == "failure":
        sampler = ShardedSampler(table, seed=cfg["seed"], timeout=0.5,
                                 transfer=cfg.get("transfer", "auto"))
        result["transfer"] = sampler.transfer
        # The NCCL path tells the other ranks at the next step.
        result["errors"] = sample_errors(sampler, cfg["batch"], 3)
    elif scenario == "late":
        # Rank 1 comes 3 s late to a step that waits 1 s: rank 0 gives up,
        # rank 1 finds that it did, and neither can sample again.
        from replaydb import distributed as rd
        rd._SharedStats.WAIT_S = 1.0
        sampler = ShardedSampler(table, seed=cfg["seed"])
        if rank == 1:
            time.sleep(3.0)
        result["errors"] = sample_errors(sampler, cfg["batch"], 2)
    elif scenario == "peer_setup":
        # Rank 1 cannot allocate its inbound buffers once: every rank raises,
        # naming it, and the next step makes them again and draws.
        from replaydb import distributed as rd
        sampler = ShardedSampler(table, seed=cfg["seed"], transfer="peer")
        lib = rd._cudart()
        real = lib.cudaMalloc
        if rank == 1:
            lib.cudaMalloc = lambda ptr, size: 2  # cudaErrorMemoryAllocation
        try:
            sampler.sample(cfg["batch"])
        except replaydb.Error as e:
            result["error"] = str(e)
        lib.cudaMalloc = real
        batch = sampler.sample(cfg["batch"])
        check_rows(cfg, batch, rank)
        result["rows"] = len(batch)
    elif scenario == "misuse":
        errors = {}
        try:
            ShardedSampler(table, seq_len=2)
        except ValueError as e:
            errors["seq_len"] = str(e)
        for transfer in ("peer", "rdma"):
            try:
                ShardedSampler(table, transfer=transfer)
            except ValueError as e:
                errors["transfer_" + transfer] = str(e)
        sampler = ShardedSampler(table, seed=cfg["seed"])
        try:  # ranks asking different batch sizes: every rank refuses the step
            sampler.sample(8 if rank == 0 else 16)
        except ValueError as e:
            errors["batch"] = str(e)
        sampler.sample(8)  # alike again: works
        sampler.close()
        try:
            sampler.sample(8)
        except ValueError as e:
            errors["closed"] = str(e)
        result["errors"] = errors
    elif scenario == "subgroup":
        # Ranks 1 and 2 shard a table between them; rank 0 stays out.
        sub = dist.new_group([1, 2])
        if rank in (1, 2):
            sampler = ShardedSampler(table, seed=cfg["seed"], group=sub)
            counts = [[0] * len(p) for p in cfg["priorities"]]
            for _ in range(cfg["steps"]):
                batch = sampler.sample(cfg["batch"])
                shards = batch.shards.numpy()
                index = batch["obs"].numpy()[:, 0, 1].astype(np.int64)
                # Group rank g holds global rank g + 1's items.
                assert np.array_equal(batch["obs"].numpy()[:, 0, 0].astype(np.int64), shards + 1)
                for s_, i in zip(shards, index):
                    counts[s_ + 1][i] += 1
            result["counts"] = counts
    elif scenario == "fifo":
        try:
            ShardedSampler(table)
        except replaydb.InvalidArgumentError as e:
            result["error"] = str(e)
    dist.barrier()
    with open(os.path.join(cfg["dir"], f"result{rank}.json"), "w") as f:
        json.dump(result, f)
    db.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
