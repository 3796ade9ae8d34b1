#!/usr/bin/env python3
"""Baselines for prioritized sampling on the GPU with PyTorch.

For n in (1M, 10M, 100M) priorities spread over twelve orders of magnitude,
the same values as `replaydb bench` (tools/replaydb/bench/bench_priority.cc): item i gets
10^(12 u_i - 6), u_i = (splitmix64(2026 + i) >> 11) / 2^53, and batch 4096,
times
  torch_multinomial:          torch.multinomial(p, 4096, replacement=True)
  torch_cumsum_searchsorted:  c = torch.cumsum(p); torch.searchsorted(c, u * c[-1])
with CUDA events (warm-up, then the median of many runs) and prints one JSON
object per line, in the shape of `replaydb bench --json`:
  {"bench": "prio_sample_baseline", "params": {"n": 10000000, "batch": 4096,
   "method": "torch_multinomial"}, "value": 7100.0, "unit": "us",
   "ceiling": null, "ceiling_name": "", "ratio": null}
A method that PyTorch refuses at some n (multinomial takes at most 2^24
categories) is printed with "value": null and its error in "note".

  python3 tools/analysis/prio_baseline.py [--sizes 1000000,10000000] [--reps 50]
"""
import argparse
import json
import statistics
import sys


MASK64 = (1 << 64) - 1


def splitmix64_py(x):
    """Reference splitmix64 on Python ints (tools/replaydb/bench/bench_priority.cc)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def signed64(c):
    return c - (1 << 64) if c >= (1 << 63) else c


def priorities(torch, n, seed, device):
    """float32 priorities 10^(12 u_i - 6), u_i from splitmix64(seed + i).

    int64 arithmetic wraps like uint64; right shifts are made logical with a mask.
    """
    def lsr(x, k):
        return (x >> k) & ((1 << (64 - k)) - 1)

    x = torch.arange(n, device=device, dtype=torch.int64) + seed
    x = x + signed64(0x9E3779B97F4A7C15)
    x = (x ^ lsr(x, 30)) * signed64(0xBF58476D1CE4E5B9)
    x = (x ^ lsr(x, 27)) * signed64(0x94D049BB133111EB)
    x = x ^ lsr(x, 31)
    u = lsr(x, 11).to(torch.float64) * 2.0 ** -53
    # Check the wrapping arithmetic against the reference on a few items.
    for i in (0, 1, n - 1):
        want = ((splitmix64_py(seed + i) >> 11) * 2.0 ** -53)
        if abs(float(u[i]) - want) > 1e-15:
            raise RuntimeError(f"splitmix64 mismatch at {i}: {float(u[i])} != {want}")
    return torch.pow(10.0, 12.0 * u - 6.0).to(torch.float32)


def time_us(torch, fn, warmup, reps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000000,10000000,100000000")
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seed", type=int, default=2026,
                        help="item i's priority uses splitmix64(seed + i)")
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("prio_baseline.py: no CUDA device for PyTorch", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)
    for n in (int(s) for s in args.sizes.split(",")):
        p = priorities(torch, n, args.seed, dev)  # float32, as a learner holds them

        def multinomial():
            return torch.multinomial(p, args.batch, replacement=True, generator=gen)

        def cumsum_searchsorted():
            c = torch.cumsum(p, 0)
            u = torch.rand(args.batch, device=dev, generator=gen) * c[-1]
            return torch.searchsorted(c, u)

        for method, fn in (("torch_multinomial", multinomial),
                           ("torch_cumsum_searchsorted", cumsum_searchsorted)):
            record = {"bench": "prio_sample_baseline",
                      "params": {"n": n, "batch": args.batch, "method": method},
                      "value": None, "unit": "us", "ceiling": None, "ceiling_name": "",
                      "ratio": None}
            try:
                record["value"] = round(time_us(torch, fn, args.warmup, args.reps), 2)
            except RuntimeError as e:
                record["note"] = str(e).split("\n")[0][:200]
            print(json.dumps(record), flush=True)
        del p
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
