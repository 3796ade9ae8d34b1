"""Issue 38's benchmark: a table sharded over the GPUs of one host, every rank
sampling its own batch (replaydb.distributed.ShardedSampler over NCCL).

    python3 -m torch.distributed.run --standalone --nproc_per_node N \\
        tools/analysis/multi_gpu_bench.py [--json FILE]

Every rank fills its shard (placement device:RANK, priorities on the same GPU,
4 KiB steps) and samples B=256 windows of L=32 (32 MiB a batch), prioritized,
for both modes (per_rank: every rank's batch is B draws from the whole table;
union: the union of a step's batches is), the rows crossing GPUs through peer
memory (CUDA IPC) and through NCCL. Rank 0 prints one JSON line per row:

- ``shard_sample`` mode=M, world=N: batches per second per rank (the slowest
  rank's), with the same rank's local ``table.sample(B, device=...)`` rate as
  the reference (ShardedSampler's exchange and transfers are the difference);
  gpu-run.sh divides world N's rate by world 1's (weak scaling, target >= 0.9).
  Rows with N > 1 carry ``solo``: the same ranks' rate, in the same run, each
  sampling its own shard alone (a one-rank group; all ranks at once), the
  one-GPU rate that machine drift between runs cannot move; gpu-run.sh divides
  by it too.
  per_rank rows with N > 1 carry ``nvlink_bound``: the batches per second a
  rank could take if moving its peers' rows ((N - 1) / N of a batch) at
  cudaMemcpyPeer one way (same run) were the step's only cost;
- ``peer_gather`` world=N: rank 0's gather of B windows into rank 1's memory
  (the peer path's write over NVLink, its draws included) against
  cudaMemcpyPeer one way of the same bytes (target >= 0.8);
- ``peer_transfer`` world=N: NCCL's all-to-all of the rows that cross GPUs in a
  per_rank step (B * (N - 1) / N windows a rank, each way), in GB/s a rank,
  against cudaMemcpyPeer of the same bytes (``dst.copy_(src)`` between two
  GPUs of one process, both ways at once as the rows move; one way alone in the
  note) in the same run (target >= 0.8).
"""

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import replaydb  # noqa: E402
from replaydb.distributed import ShardedSampler  # noqa: E402

B, L, STEP_BYTES = 256, 32, 4096


def fill(table, device, steps, envs=64):
    writer = table.vector_writer(envs)
    gen = torch.Generator(device="cpu").manual_seed(1 + dist.get_rank())
    frame = torch.randint(0, 255, (envs, STEP_BYTES), dtype=torch.uint8, generator=gen).to(device)
    per_trajectory = 256
    for i in range(steps // envs):
        prios = np.random.default_rng(i).uniform(0.1, 10.0, size=envs)
        writer.append({"obs": frame}, priorities=prios)
        if (i + 1) % per_trajectory == 0:
            writer.end_many(range(envs))
    writer.close()
    torch.cuda.synchronize(device)


def timed(fn, seconds, device):
    """Calls per second of fn (the slowest rank's) over about `seconds`, after
    a warm-up; every rank makes the same number of calls, so fn may be a
    collective."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(20):
        fn()
    torch.cuda.synchronize(device)
    per_call = (time.perf_counter() - t0) / 20
    calls = torch.tensor([max(20, int(seconds / per_call))], device=device)
    dist.all_reduce(calls, op=dist.ReduceOp.MIN)
    calls = int(calls.item())
    dist.barrier()
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize(device)
    rate = torch.tensor([calls / (time.perf_counter() - t0)], device=device, dtype=torch.float64)
    dist.all_reduce(rate, op=dist.ReduceOp.MIN)
    return float(rate.item())


def peer_copy_rate(nbytes, seconds=1.0):
    """cudaMemcpyPeer of nbytes between GPUs 0 and 1, in GB/s each way, both
    ways at once (as a step's rows move), and one way alone, each the better
    of the copies queued on the source's stream and on the destination's;
    (0, 0) with one GPU."""
    if torch.cuda.device_count() < 2:
        return 0.0, 0.0
    a = [torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{d}") for d in (0, 1)]
    b = [torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{d}") for d in (0, 1)]
    streams = [torch.cuda.Stream(device=f"cuda:{d}") for d in (0, 1)]

    def run(both, pull):
        # The copy 0 -> 1 on GPU 1's stream when pulling, else on GPU 0's.
        s01, s10 = (streams[1], streams[0]) if pull else (streams[0], streams[1])

        def once():
            with torch.cuda.stream(s01):
                b[1].copy_(a[0], non_blocking=True)
            if both:
                with torch.cuda.stream(s10):
                    b[0].copy_(a[1], non_blocking=True)

        for _ in range(3):
            once()
        for st in streams:
            st.synchronize()
        t0 = time.perf_counter()
        n = 0
        while time.perf_counter() - t0 < seconds:
            once()
            n += 1
            if n % 16 == 0:
                for st in streams:
                    st.synchronize()
        for st in streams:
            st.synchronize()
        return n * nbytes / (time.perf_counter() - t0) / 1e9

    return (max(run(True, False), run(True, True)), max(run(False, False), run(False, True)))


def peer_gather_row(table, rank, device, seconds):
    """Rank 0's gather of B windows from its shard straight into rank 1's
    memory (the peer path's write over NVLink, draws included), in GB/s,
    against cudaMemcpyPeer one way of the same bytes; the others wait."""
    sampler = ShardedSampler(table, seed=7, transfer="peer")
    sampler.sample(B)  # maps the peers' buffers
    nbytes = B * L * STEP_BYTES
    row = None
    if rank == 0:
        to_peer = sampler._peers.addresses(1, 0, 0)

        def gather():
            sampler._sample_to(B, *to_peer)

        for _ in range(5):
            gather()
        torch.cuda.synchronize(device)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            gather()
            n += 1
            if n % 16 == 0:
                torch.cuda.synchronize(device)
        torch.cuda.synchronize(device)
        value = n * nbytes / (time.perf_counter() - t0) / 1e9
        _, one_way = peer_copy_rate(nbytes)
        row = {"bench": "peer_gather", "params": {"world": dist.get_world_size(), "batch": B,
                                                   "L": L, "step_bytes": STEP_BYTES},
               "value": value, "unit": "GB/s", "ceiling": one_way,
               "ceiling_name": "cudaMemcpyPeer one way", "ratio": value / one_way}
    dist.barrier()
    sampler.close()
    return row


def start_rank():
    """Joins the NCCL process group on this rank's GPU: (rank, world, device)."""
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    return rank, world, torch.device("cuda", local)


def filled_shard(db, device, steps):
    """This rank's shard (B=256 windows of L=32 4 KiB steps, prioritized, hot
    tier and priorities on `device`), filled with `steps` steps."""
    table = db.create_table("shard", {"obs": (np.uint8, (STEP_BYTES,))},
                            capacity_steps=steps, sequence_length=L,
                            placement=f"device:{device.index}", selector="prioritized",
                            priority_device=device.index)
    fill(table, device, steps)
    return table


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="append the rows to this file too")
    p.add_argument("--steps", type=int, default=1 << 17, help="steps per shard")
    p.add_argument("--seconds", type=float, default=2.0)
    args = p.parse_args()
    rank, world, device = start_rank()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        db = replaydb.open(os.path.join(tmp, f"rank{rank}"))
        table = filled_shard(db, device, args.steps)
        local_rate = timed(lambda: table.sample(B, device=str(device)), args.seconds, device)
        solo = {}
        if world > 1:
            # One GPU's rate in this run: every rank samples its own shard
            # alone (a group of its own), all at the same time.
            groups = [dist.new_group([r]) for r in range(world)]
            for mode in ("per_rank", "union"):
                sampler = ShardedSampler(table, mode=mode, seed=7, transfer="peer",
                                         group=groups[rank])
                solo[mode] = timed(lambda: sampler.sample(B), args.seconds, device)
                sampler.close()
        for mode in ("per_rank", "union"):
            for transfer in ("peer", "nccl") if world > 1 else ("peer",):
                sampler = ShardedSampler(table, mode=mode, seed=7, transfer=transfer)
                rate = timed(lambda: sampler.sample(B), args.seconds, device)
                sampler.close()
                rows.append({"bench": "shard_sample",
                             "params": {"mode": mode, "world": world, "transfer": transfer,
                                        "batch": B, "L": L, "step_bytes": STEP_BYTES},
                             "value": rate, "unit": "batches/s per rank", "ceiling": local_rate,
                             "ceiling_name": "local table.sample",
                             "ratio": rate / local_rate})
                if mode in solo:
                    rows[-1]["solo"] = solo[mode]
        if world > 1:
            gather = peer_gather_row(table, rank, device, args.seconds)
            rows.append(gather)
            if gather is not None:  # rank 0's
                # What NVLink alone allows a per_rank step: (N - 1) / N of a
                # batch's bytes come from the peers, at cudaMemcpyPeer one way.
                inbound = B * L * STEP_BYTES * (world - 1) / world
                for r in rows:
                    if r["bench"] == "shard_sample" and r["params"]["mode"] == "per_rank":
                        r["nvlink_bound"] = gather["ceiling"] * 1e9 / inbound
        if world > 1:
            # The rows a per_rank step moves off each rank, spread over its peers.
            per_peer = B // world
            send = [per_peer] * world
            send[rank] = 0
            row_bytes = L * STEP_BYTES
            inp = torch.empty((sum(send), row_bytes), dtype=torch.uint8, device=device)
            out = torch.empty_like(inp)

            def exchange():
                dist.all_to_all_single(out, inp, output_split_sizes=send, input_split_sizes=send)

            rate = timed(exchange, args.seconds, device)
            moved = sum(send) * row_bytes
            dist.barrier()
            both, one_way = peer_copy_rate(moved) if rank == 0 else (0.0, 0.0)
            value = rate * moved / 1e9
            rows.append({"bench": "peer_transfer", "params": {"world": world, "bytes": moved},
                         "value": value, "unit": "GB/s per rank", "ceiling": both,
                         "ceiling_name": "cudaMemcpyPeer both ways",
                         "ratio": value / both if both else 0.0,
                         "note": f"cudaMemcpyPeer one way alone: {one_way:.1f} GB/s"})
        db.close()
    if rank == 0:
        for r in filter(None, rows):
            print(json.dumps(r), flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(r) + "\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
