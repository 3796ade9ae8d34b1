"""What the Python package adds to a sample: ``python -m replaydb.bench``.

One run measures, on the same table:
  * ``c_api``: the C API called directly (ctypes, nothing else), per batch
    replaydb_table_sample_to_device (or replaydb_table_sample on the host) and
    replaydb_batch_release: the engine's own cost plus two bare foreign calls;
  * ``python``: ``table.sample(B, device=...)`` and the sampled column taken into
    the framework without a copy (``torch.from_dlpack`` on a GPU,
    ``numpy.asarray`` on the host), then dropped.
Both are timed as many calls queued back to back, synchronised at the end, in
paired repetitions (one of each in turn, so that drift on a shared host falls
on both). The overhead is the median of the pairs' python - c_api; the target
is <= 10% of c_api or <= 20 us per batch, whichever is larger.

    python -m replaydb.bench                 # GPU 0 when there is one, else the host
    python -m replaydb.bench --device cpu --quick
    python -m replaydb.bench --json          # one JSON object per line
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict

import replaydb
from replaydb import _convert
from replaydb._lib import SampleOptions, lib


def _median_micros(fn: Callable[[], None], calls: int, repetitions: int,
                   sync: Callable[[], None]) -> float:
    results = []
    for _ in range(repetitions):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        results.append((time.perf_counter() - t0) * 1e6 / calls)
    return statistics.median(results)


def run(device: str, batch: int, seq: int, step_bytes: int, calls: int, repetitions: int,
        directory: str) -> Dict[str, object]:
    on_gpu = device != "cpu"
    torch = None
    if on_gpu:
        import torch  # noqa: F811  (the framework the batch goes into)
    np = _convert.numpy()
    steps = max(4 * batch * seq, 1 << 14)
    with replaydb.open(directory, wal=False, checkpoint_every=None, checkpoint_wal_bytes=None,
                       checkpoint_on_close=False) as db:
        table = db.create_table("bench", {"obs": (np.uint8, (step_bytes,))},
                                capacity_steps=steps, sequence_length=seq,
                                placement="device:0" if on_gpu else "host")
        envs = 64
        writer = table.vector_writer(envs)
        if on_gpu:
            frame = torch.randint(0, 255, (envs, step_bytes), dtype=torch.uint8, device="cuda")
        else:
            frame = np.random.default_rng(1).integers(0, 255, (envs, step_bytes), dtype=np.uint8)
        for _ in range(steps // envs):
            writer.append({"obs": frame})
        for e in range(envs):
            writer.end(e)
        writer.close()

        handle = table._h()
        options = SampleOptions()
        lib.replaydb_sample_options_init(ctypes.byref(options))
        out = ctypes.c_void_p()
        err = ctypes.c_char_p()
        if on_gpu:
            stream = torch.cuda.current_stream().cuda_stream
            sync = torch.cuda.synchronize

            def c_api() -> None:
                code = lib.replaydb_table_sample_to_device(handle, batch, ctypes.byref(options),
                                                           ctypes.c_void_p(stream),
                                                           ctypes.byref(out), ctypes.byref(err))
                if code:
                    raise RuntimeError(err.value)
                lib.replaydb_batch_release(out)

            def python() -> None:
                b = table.sample(batch, device="cuda")
                torch.from_dlpack(b["obs"])
        else:
            def sync() -> None:
                pass

            def c_api() -> None:
                code = lib.replaydb_table_sample(handle, batch, ctypes.byref(options),
                                                 ctypes.byref(out), ctypes.byref(err))
                if code:
                    raise RuntimeError(err.value)
                lib.replaydb_batch_release(out)

            def python() -> None:
                b = table.sample(batch)
                np.asarray(b["obs"])

        for fn in (c_api, python):  # warm-up: pools, caches, lazy CUDA and DLPack set-up
            for _ in range(200):
                fn()
            sync()
        bare = _median_micros(lambda: lib.replaydb_version(), 10000, repetitions, lambda: None)
        # Paired repetitions, one of each in turn, so that drift on a shared
        # host falls on both; the overhead is the median of the differences.
        bases, pys, overheads = [], [], []
        for _ in range(repetitions):
            bases.append(_median_micros(c_api, calls, 1, sync))
            pys.append(_median_micros(python, calls, 1, sync))
            overheads.append(pys[-1] - bases[-1])
        base, py = statistics.median(bases), statistics.median(pys)
        overhead = statistics.median(overheads)
        table.close()
    allowed = max(0.10 * base, 20.0)
    return {
        "bench": "python_sample",
        "params": {"device": "cuda:0" if on_gpu else "cpu", "batch": batch, "L": seq,
                   "step_bytes": step_bytes},
        "value": round(py, 2), "unit": "us per batch",
        "ceiling": round(base, 2), "ceiling_name": "c_api",
        "ratio": round(py / base, 4) if base > 0 else None,
        "overhead_us": round(overhead, 2), "allowed_us": round(allowed, 2),
        "bare_foreign_call_us": round(bare, 3),
        "target": "met" if overhead <= allowed else "MISSED",
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m replaydb.bench", description=__doc__.split("\n")[0])
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when there is one)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--step-bytes", type=int, default=4096)
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--repetitions", type=int, default=11)
    p.add_argument("--quick", action="store_true", help="fewer calls, smaller steps (a smoke run)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    device = args.device or ("cuda" if replaydb.cuda_device_count() > 0 else "cpu")
    if args.quick:
        args.calls, args.repetitions, args.step_bytes = 50, 3, min(args.step_bytes, 256)
    with tempfile.TemporaryDirectory(prefix="replaydb-bench-") as directory:
        r = run(device, args.batch, args.seq, args.step_bytes, args.calls, args.repetitions,
                directory + "/db")
    if args.json:
        print(json.dumps(r))
    else:
        params = " ".join(f"{k}={v}" for k, v in r["params"].items())
        print(f"{r['bench']} {params}: {r['value']:.1f} us per batch; c_api (same run) "
              f"{r['ceiling']:.1f} us (ratio {r['ratio']}); Python adds {r['overhead_us']:.1f} us, "
              f"allowed {r['allowed_us']:.1f} (max of 10% and 20 us): {r['target']}; "
              f"a bare foreign call costs {r['bare_foreign_call_us']:.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
