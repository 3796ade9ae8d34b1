#!/usr/bin/env python3
"""Baseline for window gathers on the GPU with PyTorch.

For the shapes of `replaydb bench`'s gather rows (tools/replaydb/bench/bench_gpu.cc):
step_bytes in (256, 4096, 65536), batch 256, L in (1, 32), times
  torch_index_select:        torch.index_select(src, 0, idx, out=out)
  torch_index_select_graph:  the same calls captured in a torch.cuda.CUDAGraph
                             and replayed (no launch overhead per call)
where src is a uint8 tensor [rows, step_bytes] in device memory holding as
many steps as the bench's table (1024-step trajectories; about
max(min(2 GiB, 1M steps), 8 batches), at most 4 GiB) and idx holds the
B * L rows of B random windows of L consecutive rows inside one trajectory:
the rows a window gather reads. The calls cycle through enough index sets
that one pass reads >= 256 MiB (not L2-resident), as the bench's key sets
do. Time: CUDA events around a loop of many calls after a warm-up, median of
--reps loops. Prints one JSON object per line, in the shape of
`replaydb bench --json`:
  {"bench": "gather_baseline", "params": {"step_bytes": 4096, "batch": 256,
   "L": 32, "method": "torch_index_select"}, "value": 1150.0, "unit": "GB/s",
   "ceiling": null, "ceiling_name": "", "ratio": null}
where value is payload GB/s (batch * L * step_bytes bytes per call). A method
that fails is printed with "value": null and its error in "note"; without
torch or CUDA one such line is printed and the exit status is still 0.

  python3 tools/analysis/gather_baseline.py [--step-bytes 256,4096,65536] [--L 1,32]
                                   [--batch 256] [--reps 11] [--no-graph]
"""
import argparse
import json
import statistics
import sys

TRAJECTORY_STEPS = 1024
FILL_BYTES = 2 << 30
FILL_MAX_STEPS = 1 << 20
FILL_MIN_BATCHES = 8
FILL_MAX_BYTES = 4 << 30
FILL_MAX_ENVS = 256
KEY_CYCLE_BYTES = 256 << 20
MIN_KEY_SETS = 8
MAX_KEY_SETS = 4096


def record(step_bytes, batch, length, method, value=None, note=None):
    r = {"bench": "gather_baseline",
         "params": {"step_bytes": step_bytes, "batch": batch, "L": length, "method": method},
         "value": value, "unit": "GB/s", "ceiling": None, "ceiling_name": "", "ratio": None}
    if note:
        r["note"] = note
    return r


def fill_trajectories(step_bytes, batch, length):
    """Trajectories of the bench's table (tools/replaydb/bench/bench_gpu.cc GatherFillFor)."""
    batch_bytes = batch * length * step_bytes
    size = min(FILL_BYTES, FILL_MAX_STEPS * step_bytes)
    size = min(FILL_MAX_BYTES, max(size, FILL_MIN_BATCHES * batch_bytes))
    traj_bytes = TRAJECTORY_STEPS * step_bytes
    trajectories = max(1, -(-size // traj_bytes))
    envs = min(trajectories, FILL_MAX_ENVS)
    return -(-trajectories // envs) * envs


def key_sets(payload):
    return min(MAX_KEY_SETS, max(MIN_KEY_SETS, -(-KEY_CYCLE_BYTES // payload)))


def gbps(payload, calls, ms):
    return payload * calls / (ms * 1e-3) / 1e9


def time_loops(torch, run, reps):
    """Median milliseconds of run() between two CUDA events."""
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def measure(torch, args, step_bytes, length):
    dev = torch.device("cuda")
    batch = args.batch
    payload = batch * length * step_bytes
    trajectories = fill_trajectories(step_bytes, batch, length)
    rows = trajectories * TRAJECTORY_STEPS
    sets = key_sets(payload)
    gen = torch.Generator(device=dev)
    gen.manual_seed(step_bytes * 131 + length)
    src = torch.randint(0, 256, (rows, step_bytes), dtype=torch.uint8, device=dev,
                        generator=gen)
    # idx[k]: batch windows of `length` consecutive rows inside one trajectory.
    traj = torch.randint(0, trajectories, (sets, batch, 1), device=dev, generator=gen)
    start = torch.randint(0, TRAJECTORY_STEPS - length + 1, (sets, batch, 1), device=dev,
                          generator=gen)
    offsets = torch.arange(length, device=dev).view(1, 1, length)
    idx = (traj * TRAJECTORY_STEPS + start + offsets).reshape(sets, batch * length)
    out = torch.empty((batch * length, step_bytes), dtype=torch.uint8, device=dev)
    size_note = f"src {rows} rows ({rows * step_bytes / 2**30:.2f} GiB), {sets} index sets"

    # Calls per timed loop: at least 20, about 4 GiB of payload.
    calls = max(20, min(1000, (4 << 30) // payload))
    results = []
    next_set = [0]

    def eager_loop():
        k = next_set[0]
        for _ in range(calls):
            torch.index_select(src, 0, idx[k], out=out)
            k = k + 1 if k + 1 < sets else 0
        next_set[0] = k

    try:
        for _ in range(max(1, args.warmup)):
            eager_loop()
        torch.cuda.synchronize()
        ms = time_loops(torch, eager_loop, args.reps)
        results.append(record(step_bytes, batch, length, "torch_index_select",
                              round(gbps(payload, calls, ms), 2), size_note))
    except RuntimeError as e:
        results.append(record(step_bytes, batch, length, "torch_index_select",
                              note=str(e).split("\n")[0][:200]))

    if not args.no_graph:
        method = "torch_index_select_graph"
        try:
            # One graph runs every index set once (one pass of the cycle).
            warm = torch.cuda.Stream()
            warm.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(warm):
                for k in range(min(sets, 3)):
                    torch.index_select(src, 0, idx[k], out=out)
            torch.cuda.current_stream().wait_stream(warm)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for k in range(sets):
                    torch.index_select(src, 0, idx[k], out=out)
            replays = max(1, -(-calls // sets))

            def graph_loop():
                for _ in range(replays):
                    graph.replay()

            graph_loop()
            torch.cuda.synchronize()
            ms = time_loops(torch, graph_loop, args.reps)
            results.append(record(step_bytes, batch, length, method,
                                  round(gbps(payload, replays * sets, ms), 2),
                                  size_note + f", {sets} calls per graph"))
            del graph
        except RuntimeError as e:
            results.append(record(step_bytes, batch, length, method,
                                  note=str(e).split("\n")[0][:200]))
    del src, idx, out
    torch.cuda.empty_cache()
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--step-bytes", default="256,4096,65536")
    parser.add_argument("--L", dest="lengths", default="1,32")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--reps", type=int, default=11)
    parser.add_argument("--warmup", type=int, default=1, help="untimed loops first")
    parser.add_argument("--no-graph", action="store_true", help="skip the CUDA graph method")
    args = parser.parse_args()
    step_sizes = [int(s) for s in args.step_bytes.split(",")]
    lengths = [int(s) for s in args.lengths.split(",")]

    def no_baseline(note):
        print(json.dumps({"bench": "gather_baseline", "params": {}, "value": None,
                          "unit": "GB/s", "ceiling": None, "ceiling_name": "", "ratio": None,
                          "note": note}), flush=True)
        return 0

    try:
        import torch
    except ImportError as e:
        return no_baseline(f"no torch: {e}")
    if not torch.cuda.is_available():
        return no_baseline("no CUDA device for PyTorch")

    for step_bytes in step_sizes:
        for length in lengths:
            try:
                rows = measure(torch, args, step_bytes, length)
            except RuntimeError as e:  # e.g. out of memory for src
                methods = ["torch_index_select"]
                if not args.no_graph:
                    methods.append("torch_index_select_graph")
                rows = [record(step_bytes, args.batch, length, m,
                               note=str(e).split("\n")[0][:200]) for m in methods]
                torch.cuda.empty_cache()
            for r in rows:
                print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
