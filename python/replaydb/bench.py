"""What the Python package adds per call: ``python -m replaydb.bench``.

Each row times one call two ways on the same table, in the same run:
  * ``c_api``: the C API called directly through ctypes with arguments built
    once (the engine's own cost plus a bare foreign call or two);
  * ``python``: the package's call as a learner or an actor writes it.
Rows: ``sample_host`` (``table.sample(B)`` and a column taken into NumPy),
``sample_device`` (on a GPU: ``table.sample(B, device="cuda")`` and a column
taken into PyTorch with ``batch.torch(name)``; ``torch.from_dlpack(batch[name])``
gives the same tensor and costs PyTorch's own few microseconds more), ``vector_append`` (one step of
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
from replaydb import _convert, _lib
from replaydb._lib import SampleOptions, Tensor, lib

TARGET_US = 10.0
# A host sample of B=256 windows of L=32 steps of 4 KiB copies 32 MiB (milliseconds): the
# host rows use small steps, so that the call's fixed costs are what is measured.
HOST_SEQ, HOST_STEP_BYTES = 4, 64
DEVICE_SEQ, DEVICE_STEP_BYTES = 32, 4096
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
        """``seq`` and ``step_bytes``: of the rows whose data lives on the GPU
        on a GPU machine, of every row on a host (host rows use host sizes)."""
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
        self.host_seq, self.host_step_bytes = seq, step_bytes

    def frame(self, on_device: bool, step_bytes: int) -> Any:
        if on_device:
            return self.torch.randint(0, 255, (self.envs, step_bytes),
                                      dtype=self.torch.uint8, device="cuda")
        return self.np.random.default_rng(1).integers(0, 255, (self.envs, step_bytes),
                                                      dtype=self.np.uint8)

    def table(self, name: str, on_device: bool, seq: int, step_bytes: int,
              selector: str = "uniform") -> Any:
        kwargs: Dict[str, Any] = {}
        if selector == "prioritized" and on_device:
            kwargs["priority_device"] = 0
        steps = max(4 * self.batch * seq, 64 * self.envs, 1 << 14)
        table = self.db.create_table(name, {"obs": (self.np.uint8, (step_bytes,))},
                                     capacity_steps=steps, sequence_length=seq,
                                     placement="device:0" if on_device else "host",
                                     selector=selector, **kwargs)
        writer = table.vector_writer(self.envs)
        frame = self.frame(on_device, step_bytes)
        # Trajectories of at least L steps (windows fit), well short of the capacity.
        per_trajectory = max(seq, min(64, steps // (4 * self.envs)))
        for i in range(steps // self.envs):
            writer.append({"obs": frame})
            if (i + 1) % per_trajectory == 0:
                writer.end_many(range(self.envs))
        writer.close()
        return table


def _sample_row(env: _Env, on_device: bool, calls: int, repetitions: int) -> Dict[str, Any]:
    seq, step_bytes = (env.seq, env.step_bytes) if on_device else (env.host_seq,
                                                                   env.host_step_bytes)
    table = env.table("sample_" + ("device" if on_device else "host"), on_device, seq,
                      step_bytes)
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
            table.sample(batch, device="cuda").torch("obs")
    else:
        asarray, sample = env.np.asarray, lib.replaydb_table_sample

        def c_api() -> None:
            if sample(handle, batch, ctypes.byref(options), ctypes.byref(out), ctypes.byref(err)):
                raise RuntimeError(err.value)
            lib.replaydb_batch_release(out)

        def python() -> None:
            asarray(table.sample(batch)["obs"])
    params = {"device": "cuda:0" if on_device else "cpu", "batch": batch, "L": seq,
              "step_bytes": step_bytes}
    return _paired("sample_device" if on_device else "sample_host", c_api, python, calls,
                   repetitions, env.sync, params)


def _append_row(env: _Env, calls: int, repetitions: int) -> Dict[str, Any]:
    step_bytes = env.step_bytes
    table = env.table("append", env.on_gpu, 1, step_bytes)
    writer = table.vector_writer(env.envs)
    handle = writer._h()
    frame = env.frame(env.on_gpu, step_bytes)
    if env.on_gpu:
        data, nbytes = frame.data_ptr(), frame.numel()
    else:
        data, nbytes = frame.ctypes.data, frame.nbytes
    dims = (ctypes.c_int64 * 2)(env.envs, step_bytes)
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
              "step_bytes": step_bytes, "from": "device" if env.on_gpu else "host"}
    row = _paired("vector_append", c_api, python, calls, repetitions, env.sync, params)
    writer.close()
    return row


def _update_row(env: _Env, calls: int, repetitions: int) -> Dict[str, Any]:
    table = env.table("update", env.on_gpu, 1, 64, selector="prioritized")
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
        repetitions: int, directory: str, rows: Tuple[str, ...] = ROWS,
        host_seq: int = HOST_SEQ, host_step_bytes: int = HOST_STEP_BYTES) -> List[Dict[str, Any]]:
    """Runs the rows asked for; returns one result dict per row. ``seq`` and
    ``step_bytes`` size every row on a host, the device rows on a GPU (where
    ``host_seq`` and ``host_step_bytes`` size sample_host)."""
    on_gpu = device != "cpu"
    results: List[Dict[str, Any]] = []
    with replaydb.open(directory, wal=False, checkpoint_every=None, checkpoint_wal_bytes=None,
                       checkpoint_on_close=False) as db:
        env = _Env(db, on_gpu, batch, seq, step_bytes, envs)
        if on_gpu:
            env.host_seq, env.host_step_bytes = host_seq, host_step_bytes
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
    path = "C module" if _lib.speedups is not None else f"ctypes ({_lib.speedups_error})"
    for r in results:
        r["bare_foreign_call_us"] = round(bare, 3)
        r["python_path"] = path
    return results


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m replaydb.bench",
                                description=__doc__.split("\n")[0])
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when there is one)")
    p.add_argument("--batch", type=int, default=256, help="B of sample and of update_priorities")
    p.add_argument("--seq", type=int, default=None,
                   help=f"L of the sampled windows (default: {DEVICE_SEQ} on a GPU, "
                        f"{HOST_SEQ} in host memory)")
    p.add_argument("--step-bytes", type=int, default=None,
                   help=f"bytes per step (default: {DEVICE_STEP_BYTES} on a GPU, "
                        f"{HOST_STEP_BYTES} in host memory, so that a host sample costs tens "
                        "of microseconds, not milliseconds)")
    p.add_argument("--envs", type=int, default=64, help="environments of vector_append")
    p.add_argument("--calls", type=int, default=200, help="calls per timed block")
    p.add_argument("--repetitions", type=int, default=31, help="paired blocks per row")
    p.add_argument("--rows", default=",".join(ROWS), help="comma-separated: " + ", ".join(ROWS))
    p.add_argument("--quick", action="store_true", help="fewer calls and repetitions (a smoke run)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    device = args.device or ("cuda" if replaydb.cuda_device_count() > 0 else "cpu")
    on_gpu = device != "cpu"
    seq = args.seq or (DEVICE_SEQ if on_gpu else HOST_SEQ)
    step_bytes = args.step_bytes or (DEVICE_STEP_BYTES if on_gpu else HOST_STEP_BYTES)
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
        print(f"a bare foreign call costs {results[0]['bare_foreign_call_us']:.2f} us; "
              f"per-batch calls through the {results[0]['python_path']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
