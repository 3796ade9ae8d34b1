"""Where a ShardedSampler step's host time goes, part by part, on every rank
(issue 38's profile; run on a GPU machine):

    python3 -m torch.distributed.run --standalone --nproc_per_node N \\
        tools/analysis/multi_gpu_profile.py [per_rank|union] [--transfer peer|nccl]

Every rank fills a shard as multi_gpu_bench.py does (B=256, L=32, 4 KiB
steps, prioritized, priorities on the rank's GPU), then times 400 steps with
the sampler's parts wrapped (the engine calls, the exchange and its waits, the
plan, the peer path's receive of its inbound rows, the batch's finish). Rank 0
prints each part's microseconds a step on every rank; parts nest (``sample``
holds the rest, ``_finish`` holds ``_label``). The wrappers add about a
microsecond a call, so the step is a little slower than the bench's.
"""

import argparse
import collections
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import multi_gpu_bench as mb  # noqa: E402
import replaydb  # noqa: E402
from replaydb import distributed as D  # noqa: E402
from replaydb.core import Table  # noqa: E402

PARTS = [(Table, "mass"), (D, "draw_counts"), (D._SharedStats, "exchange"),
         (D._SharedStats, "post"), (D._SharedStats, "wait_posted"),
         (D.ShardedSampler, "_sample_to"), (D.ShardedSampler, "_sample_runs"),
         (D.ShardedSampler, "_empty_batch"), (D.ShardedSampler, "_label"),
         (D.ShardedSampler, "_finish"), (D.ShardedSampler, "sample")] + [
         (D._PeerRows, n) for n in ("enter", "leave", "receive")]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", nargs="?", default="per_rank", choices=["per_rank", "union"])
    p.add_argument("--transfer", default="peer", choices=["peer", "nccl"])
    p.add_argument("--steps", type=int, default=400)
    args = p.parse_args()
    rank, world, device = mb.start_rank()
    spent, calls = collections.defaultdict(float), collections.defaultdict(int)

    def wrap(owner, name):
        fn = getattr(owner, name)

        def timed(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += time.perf_counter() - t0
                calls[name] += 1
        setattr(owner, name, timed)

    for owner, name in PARTS:
        wrap(owner, name)
    with tempfile.TemporaryDirectory() as tmp:
        db = replaydb.open(os.path.join(tmp, f"rank{rank}"))
        table = mb.filled_shard(db, device, 1 << 16)
        sampler = D.ShardedSampler(table, seed=3, mode=args.mode, transfer=args.transfer)
        for _ in range(30):
            sampler.sample(mb.B)
        torch.cuda.synchronize(device)
        dist.barrier()
        spent.clear()
        calls.clear()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            sampler.sample(mb.B)
        torch.cuda.synchronize(device)
        step = (time.perf_counter() - t0) / args.steps * 1e6
        mine = (step, {k: v / args.steps * 1e6 for k, v in spent.items()},
                {k: v / args.steps for k, v in calls.items()})
        every = [None] * world
        dist.all_gather_object(every, mine)
        if rank == 0:
            print(f"{args.mode} world {world} transfer {sampler.transfer}: step "
                  + " ".join(f"{e[0]:.0f}" for e in every) + " us on ranks 0.."
                  + f"{world - 1}; microseconds a step per part:")
            for name in sorted(every[0][1], key=lambda k: -every[0][1][k]):
                print(f"  {name:16s}" + "".join(f"{e[1].get(name, 0.0):8.1f}" for e in every)
                      + f"   calls a step {every[0][2].get(name, 0.0):.1f}")
        sampler.close()
        db.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
