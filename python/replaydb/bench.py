"""What the Python package adds per call: ``python -m replaydb.bench``.

Each row times one call two ways on the same table, in the same run:
  * ``c_api``: the C API called directly through ctypes with arguments built
    once (the engine's own cost plus a bare foreign call or two);
  * ``python``: the package's call as a learner or an actor writes it.
Rows: ``sample_host`` (``table.sample(B)`` and a column taken into NumPy),
``sample_device`` (on a GPU: ``table.sample(B, device="cuda")`` and a column
taken into PyTorch with ``torch.from_dlpack``), ``vector_append`` (one step of
E environments, from host arrays, or device tensors on a GPU) and
``update_priorities`` (B keys, host arrays, or device tensors on a GPU).

Calls run in blocks (queued back to back, synchronised at the end of a block on
a GPU); each repetition times one block of each kind, in alternating order, so
that drift on a shared host falls on both. The overhead is the median over the
repetitions of python - c_api, with a 95% confidence interval of that median
(order statistics, no assumption on the distribution). Target: <= 10 us added
per call, printed as met or MISSED.

    python -m replaydb.bench                  # GPU 0 when there is one, else the host
    python -m replaydb.bench --device cpu --quick
    python -m replaydb.bench --json           # one JSON object per row
    python -m replaydb.bench --rows sample_host,update_priorities
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import replaydb
from replaydb import _convert
from replaydb._lib import SampleOptions, Tensor, lib

TARGET_US = 10.0
ROWS = ("sample_host", "sample_device", "vector_append", "update_priorities")


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _block_micros(fn: Callable[[], None], calls: int, sync: Callable[[], None]) -> float:
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - t0) * 1e6 / calls


def median_interval(values: List[float]) -> Tuple[float, float, float]:
    """The median of ``values`` and a distribution-free 95% confidence interval
    for it: the order statistics whose ranks bound the binomial(n, 1/2) at
    2.5% on each side (for n < 6 the interval is the whole range)."""
    xs = sorted(values)
    n = len(xs)
    med = statistics.median(xs)
    # The largest k with P(Binomial(n, 1/2) < k) <= 0.025: [x_k, x_(n-k+1)].
    cumulative, k = 0.0, 0
    for j in range(n + 1):
        cumulative += math.comb(n, j) / 2.0 ** n
        if cumulative > 0.025:
            k = j
            break
    lo = xs[max(0, k - 1)] if k > 0 else xs[0]
    hi = xs[min(n - 1, n - k)] if k > 0 else xs[-1]
    return med, lo, hi


def _paired(name: str, c_api: Callable[[], None], python: Callable[[], None],
            calls: int, repetitions: int, sync: Callable[[], None],
            params: Dict[str, Any]) -> Dict[str, Any]:
    for fn in (c_api, python):  # warm-up: pools, caches, lazy CUDA and DLPack set-up
        for _ in range(min(200, calls)):
            fn()
        sync()
    bases: List[float] = []
    pys: List[float] = []
    diffs: List[float] = []
    started = time.monotonic()
    for r in range(repetitions):
        if r % 2 == 0:
            b = _block_micros(c_api, calls, sync)
            p = _block_micros(python, calls, sync)
        else:
            p = _block_micros(python, calls, sync)
            b = _block_micros(c_api, calls, sync)
        bases.append(b)
        pys.append(p)
        diffs.append(p - b)
        if time.monotonic() - started > 2.0 and (r + 1) % max(1, repetitions // 5) == 0:
            _progress(f"  {name}: {r + 1}/{repetitions} repetitions")
    overhead, lo, hi = median_interval(diffs)
    base = statistics.median(bases)
    py = statistics.median(pys)
    return {
        "bench": f"python_{name}", "params": params,
        "value": round(py, 2), "unit": "us per call",
        "ceiling": round(base, 2), "ceiling_name": "c_api",
        "ratio": round(py / base, 4) if base > 0 else None,
        "overhead_us": round(overhead, 2), "overhead_ci95_us": [round(lo, 2), round(hi, 2)],
        "allowed_us": TARGET_US, "repetitions": repetitions, "calls": calls,
        "target": "met" if overhead <= TARGET_US else "MISSED",
    }


class _Env:
    """The tables and the framework of one run."""

    def __init__(self, db: Any, on_gpu: bool, batch: int, seq: int, step_bytes: int, envs: int):
        self.db, self.on_gpu, self.batch, self.seq = db, on_gpu, batch, seq
        self.step_bytes, self.envs = step_bytes, envs
        self.np = _convert.numpy()
        self.torch = None
        self.sync: Callable[[], None] = lambda: None
        self.stream = 0
        if on_gpu:
            import torch  # the framework the batches go into
            self.torch = torch
            self.sync = torch.cuda.synchronize
            self.stream = torch.cuda.current_stream().cuda_stream
        self.steps = max(4 * batch * seq, 64 * envs, 1 << 14)

    def frame(self) -> Any:
        if self.torch is not None:
            return self.torch.randint(0, 255, (self.envs, self.step_bytes),
                                      dtype=self.torch.uint8, device="cuda")
        return self.np.random.default_rng(1).integers(0, 255, (self.envs, self.step_bytes),
                                                      dtype=self.np.uint8)

    def table(self, name: str, placement: str, selector: str = "uniform",
              seq: Optional[int] = None) -> Any:
        kwargs: Dict[str, Any] = {}
        if selector == "prioritized" and placement != "host":
            kwargs["priority_device"] = 0
        table = self.db.create_table(name, {"obs": (self.np.uint8, (self.step_bytes,))},
                                     capacity_steps=self.steps,
                                     sequence_length=self.seq if seq is None else seq,
                                     placement=placement, selector=selector, **kwargs)
        writer = table.vector_writer(self.envs)
        frame = self.frame()
        per_trajectory = max(1, min(64, self.steps // (4 * self.envs)))
        for i in range(self.steps // self.envs):
            writer.append({"obs": frame})
            if (i + 1) % per_trajectory == 0:
                writer.end_many(range(self.envs))
        writer.close()
        return table


def _sample_row(env: _Env, on_device: bool, calls: int, repetitions: int) -> Dict[str, Any]:
    placement = "device:0" if on_device else "host"
    table = env.table("sample_" + ("device" if on_device else "host"), placement)
    handle = table._h()
    options = SampleOptions()
    lib.replaydb_sample_options_init(ctypes.byref(options))
    out = ctypes.c_void_p()
    err = ctypes.c_char_p()
    batch = env.batch
    if on_device:
        torch, stream = env.torch, ctypes.c_void_p(env.stream)
        sample_to_device = lib.replaydb_table_sample_to_device

        def c_api() -> None:
            if sample_to_device(handle, batch, ctypes.byref(options), stream, ctypes.byref(out),
                                ctypes.byref(err)):
                raise RuntimeError(err.value)
            lib.replaydb_batch_release(out)

        def python() -> None:
            torch.from_dlpack(table.sample(batch, device="cuda")["obs"])
    else:
        asarray, sample = env.np.asarray, lib.replaydb_table_sample

        def c_api() -> None:
            if sample(handle, batch, ctypes.byref(options), ctypes.byref(out), ctypes.byref(err)):
                raise RuntimeError(err.value)
            lib.replaydb_batch_release(out)

        def python() -> None:
            asarray(table.sample(batch)["obs"])
    params = {"device": "cuda:0" if on_device else "cpu", "batch": batch, "L": env.seq,
              "step_bytes": env.step_bytes}
    return _paired("sample_device" if on_device else "sample_host", c_api, python, calls,
                   repetitions, env.sync, params)


def _append_row(env: _Env, calls: int, repetitions: int) -> Dict[str, Any]:
    table = env.table("append", "device:0" if env.on_gpu else "host", seq=1)
    writer = table.vector_writer(env.envs)
    handle = writer._h()
    frame = env.frame()
    if env.on_gpu:
        data, nbytes = frame.data_ptr(), frame.numel()
    else:
        data, nbytes = frame.ctypes.data, frame.nbytes
    dims = (ctypes.c_int64 * 2)(env.envs, env.step_bytes)
    tensors = (Tensor * 1)(Tensor(1, 2, dims, data, nbytes))
    err = ctypes.c_char_p()
    np = env.np
    every = (np.arange(env.envs, dtype=np.uintp))
    every_ptr = every.ctypes.data_as(ctypes.POINTER(ctypes.c_size_t))
    count = [0]
    step = {"obs": frame}

    def end_now() -> None:  # trajectories stay short of the capacity: both sides alike
        count[0] += 1
        if count[0] % 32 == 0:
            lib.replaydb_vector_writer_end_many(handle, every_ptr, env.envs, 1, ctypes.byref(err))

    if env.on_gpu:
        stream = ctypes.c_void_p(env.stream)
        append = lib.replaydb_vector_writer_append_from_device

        def c_api() -> None:
            if append(handle, tensors, 1, stream, None, 0, ctypes.byref(err)):
                raise RuntimeError(err.value)
            end_now()
    else:
        append = lib.replaydb_vector_writer_append

        def c_api() -> None:
            if append(handle, tensors, 1, None, 0, ctypes.byref(err)):
                raise RuntimeError(err.value)
            end_now()

    def python() -> None:
        writer.append(step)
        end_now()

    params = {"device": "cuda:0" if env.on_gpu else "cpu", "envs": env.envs,
              "step_bytes": env.step_bytes, "from": "device" if env.on_gpu else "host"}
    row = _paired("vector_append", c_api, python, calls, repetitions, env.sync, params)
    writer.close()
    return row


def _update_row(env: _Env, calls: int, repetitions: int) -> Dict[str, Any]:
    placement = "device:0" if env.on_gpu else "host"
    table = env.table("update", placement, selector="prioritized", seq=1)
    handle = table._h()
    np = env.np
    keys = np.asarray(table.sample(env.batch)["keys"] if not env.on_gpu else
                      env.torch.from_dlpack(table.sample(env.batch, device="cuda")["keys"])
                      .cpu().numpy()).astype(np.uint64).reshape(-1)
    priorities = np.random.default_rng(2).random(keys.size)
    err = ctypes.c_char_p()
    if env.on_gpu:
        torch = env.torch
        dkeys = torch.from_numpy(keys.astype(np.int64)).cuda()
        dprio = torch.from_numpy(priorities.astype(np.float32)).cuda()
        stream = ctypes.c_void_p(env.stream)
        update = lib.replaydb_table_update_priorities_from_device
        kp, pp = ctypes.c_void_p(dkeys.data_ptr()), ctypes.c_void_p(dprio.data_ptr())

        def c_api() -> None:
            if update(handle, kp, pp, keys.size, stream, ctypes.byref(err)):
                raise RuntimeError(err.value)

        def python() -> None:
            table.update_priorities(dkeys, dprio)
    else:
        kp = keys.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64))
        pp = priorities.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
        updated, skipped = ctypes.c_int64(), ctypes.c_int64()
        update = lib.replaydb_table_update_priorities

        def c_api() -> None:
            if update(handle, kp, pp, keys.size, ctypes.byref(updated), ctypes.byref(skipped),
                      ctypes.byref(err)):
                raise RuntimeError(err.value)

        def python() -> None:
            table.update_priorities(keys, priorities)

    params = {"device": "cuda:0" if env.on_gpu else "cpu", "keys": int(keys.size),
              "from": "device" if env.on_gpu else "host"}
    return _paired("update_priorities", c_api, python, calls, repetitions, env.sync, params)


def run(device: str, batch: int, seq: int, step_bytes: int, envs: int, calls: int,
        repetitions: int, directory: str, rows: Tuple[str, ...] = ROWS) -> List[Dict[str, Any]]:
    """Runs the rows asked for; returns one result dict per row."""
    on_gpu = device != "cpu"
    results: List[Dict[str, Any]] = []
    with replaydb.open(directory, wal=False, checkpoint_every=None, checkpoint_wal_bytes=None,
                       checkpoint_on_close=False) as db:
        env = _Env(db, on_gpu, batch, seq, step_bytes, envs)
        for name in rows:
            if name == "sample_device" and not on_gpu:
                continue
            _progress(f"python bench: {name} ({calls} calls x {repetitions} repetitions "
                      "of each kind)")
            if name == "sample_host":
                results.append(_sample_row(env, False, calls, repetitions))
            elif name == "sample_device":
                results.append(_sample_row(env, True, calls, repetitions))
            elif name == "vector_append":
                results.append(_append_row(env, calls, repetitions))
            elif name == "update_priorities":
                results.append(_update_row(env, calls, repetitions))
        bare = statistics.median(_block_micros(lambda: lib.replaydb_version(), 10000, lambda: None)
                                 for _ in range(5))
    for r in results:
        r["bare_foreign_call_us"] = round(bare, 3)
    return results


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m replaydb.bench",
                                description=__doc__.split("\n")[0])
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when there is one)")
    p.add_argument("--batch", type=int, default=256, help="B of sample and of update_priorities")
    p.add_argument("--seq", type=int, default=None,
                   help="L of the sampled windows (default: 32 on a GPU, 4 on the host)")
    p.add_argument("--step-bytes", type=int, default=None,
                   help="bytes per step (default: 4096 on a GPU, 64 on the host, so that a "
                        "host sample costs tens of microseconds, not milliseconds)")
    p.add_argument("--envs", type=int, default=64, help="environments of vector_append")
    p.add_argument("--calls", type=int, default=200, help="calls per timed block")
    p.add_argument("--repetitions", type=int, default=31, help="paired blocks per row")
    p.add_argument("--rows", default=",".join(ROWS), help="comma-separated: " + ", ".join(ROWS))
    p.add_argument("--quick", action="store_true", help="fewer calls and repetitions (a smoke run)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    device = args.device or ("cuda" if replaydb.cuda_device_count() > 0 else "cpu")
    on_gpu = device != "cpu"
    seq = args.seq or (32 if on_gpu else 4)
    step_bytes = args.step_bytes or (4096 if on_gpu else 64)
    if args.quick:
        args.calls, args.repetitions = 50, 9
    rows = tuple(r for r in args.rows.split(",") if r)
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        p.error(f"unknown rows {', '.join(unknown)}; choose from {', '.join(ROWS)}")
    with tempfile.TemporaryDirectory(prefix="replaydb-bench-") as directory:
        results = run(device, args.batch, seq, step_bytes, args.envs, args.calls,
                      args.repetitions, directory + "/db", rows)
    for r in results:
        if args.json:
            print(json.dumps(r))
            continue
        params = " ".join(f"{k}={v}" for k, v in r["params"].items())
        lo, hi = r["overhead_ci95_us"]
        print(f"{r['bench']:26s} {params}: python {r['value']:.1f} us, c_api {r['ceiling']:.1f} us "
              f"(ratio {r['ratio']}); adds {r['overhead_us']:.1f} us [95% CI {lo:.1f}, {hi:.1f}], "
              f"allowed {r['allowed_us']:.0f}: {r['target']}")
    if results and not args.json:
        print(f"a bare foreign call costs {results[0]['bare_foreign_call_us']:.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
