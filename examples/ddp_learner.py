"""A data-parallel learner on a replay table sharded over its ranks.

    python3 -m torch.distributed.run --standalone --nproc_per_node 2 \\
        examples/ddp_learner.py --dir /tmp/ddp-replay [--device cpu]

One process per GPU (or per CPU process with --device cpu, over gloo). Every
rank opens a database of its own, DIR/rank{R}, holding its shard of table
"transitions" (on its GPU: the hot tier and the priorities both there), and
runs an actor thread writing made-up transitions into it. The learner samples
with replaydb.distributed.ShardedSampler: each rank's batch is drawn with
exact probabilities over every shard (rows held on another GPU come over
NCCL), trains a small Q-network under DistributedDataParallel with importance
weights, and sends the new priorities back to the shards that hold the items.
Prints, from rank 0, the loss, the shard sizes and the learner's rate.
"""

import argparse
import os
import threading
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import replaydb
from replaydb.distributed import ShardedSampler

OBS, ACTIONS = 16, 4


def actor(table, rank, stop, steps):
    """Writes episodes of made-up transitions until `stop` (or `steps` steps)."""
    rng = np.random.default_rng(rank)
    written = 0
    with table.writer() as w:
        while not stop.is_set() and written < steps:
            obs = rng.normal(size=OBS).astype(np.float32)
            action = int(rng.integers(ACTIONS))
            reward = float(obs[action] > 0)  # action a pays when obs[a] > 0
            w.append({"obs": obs, "action": action, "reward": reward})
            written += 1
            if written % 50 == 0:
                w.end()
                time.sleep(0.002)  # an environment's pace; leaves the learner the GIL


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", required=True, help="databases go to DIR/rank{R}")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--mode", default="per_rank", choices=("per_rank", "union"))
    args = p.parse_args()

    on_gpu = args.device == "cuda"
    dist.init_process_group("nccl" if on_gpu else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    if on_gpu:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if on_gpu else torch.device("cpu")
    gpu_kwargs = {"placement": f"device:{local}", "priority_device": local} if on_gpu else {}

    os.makedirs(args.dir, exist_ok=True)
    db = replaydb.open(os.path.join(args.dir, f"rank{rank}"))
    table = db.create_table("transitions",
                            {"obs": (np.float32, (OBS,)), "action": np.int64,
                             "reward": np.float32},
                            capacity_steps=100_000, sequence_length=1, selector="prioritized",
                            priority_exponent=0.6, **gpu_kwargs)
    stop = threading.Event()
    writer = threading.Thread(target=actor, args=(table, rank, stop, 200_000), daemon=True)
    writer.start()

    net = DistributedDataParallel(
        nn.Sequential(nn.Linear(OBS, 64), nn.ReLU(), nn.Linear(64, ACTIONS)).to(device),
        device_ids=[local] if on_gpu else None)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    sampler = ShardedSampler(table, mode=args.mode, seed=1234, importance_beta=0.4,
                             rate_limiter=replaydb.RateLimiter.min_size(256), timeout=60)
    t0 = time.perf_counter()
    for it in range(1, args.iterations + 1):
        batch = sampler.sample(args.batch)
        obs = batch["obs"][:, 0].to(device)
        action = batch["action"][:, 0].to(device)
        reward = batch["reward"][:, 0].to(device)
        q = net(obs).gather(1, action[:, None]).squeeze(1)
        td = reward - q
        loss = (batch.weights.to(device) * td.pow(2)).mean()
        opt.zero_grad()
        loss.backward()  # DDP averages the gradients: the union of the ranks' batches
        opt.step()
        sampler.update_priorities(batch.keys, batch.shards, td.detach().abs() + 1e-3)
        if rank == 0 and (it % 100 == 0 or it == args.iterations):
            sizes = [0] * world
            dist.all_gather_object(sizes, table.info()["num_items"])
            print(f"iteration {it}: loss {loss.item():.4f}, shard items {sizes}, "
                  f"{it / (time.perf_counter() - t0):.0f} steps/s per rank", flush=True)
        elif it % 100 == 0 or it == args.iterations:
            dist.all_gather_object([None] * world, table.info()["num_items"])
    stop.set()
    writer.join()
    dist.barrier()
    db.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
