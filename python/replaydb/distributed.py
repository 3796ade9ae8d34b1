"""replaydb.distributed: one table sharded over the ranks of a torch.distributed
group, every rank drawing batches with exact global probabilities.

The layout (docs/multi_gpu.md says why): every rank (one process per GPU under
``torchrun``) opens a database of its own and, in it, its shard of the table,
with the same spec; on a GPU the shard's hot tier and priorities live on that
rank's GPU (``placement="device"``, ``priority_device=rank``). Actors write to
the shard of their rank. A learner step is collective: every rank calls
:meth:`ShardedSampler.sample` with the same batch size, and

1. the ranks exchange each shard's sampling mass and item count (7 doubles a
   rank: ``Table.mass()``, the insert count for the rate limiter, a deadline
   flag, a failed-draw flag, the batch size and a seed/mode fingerprint) through
   shared memory on one host, else by an all-gather;
2. every rank draws, from a generator seeded with (seed, step) and so the same
   on every rank, how many rows each rank takes from each shard:
   ``n ~ Multinomial(B, M_s / sum M)`` for each rank (``mode="per_rank"``); a
   draw from shard s then picks an item of mass m with probability m / M_s, so
   with probability m / sum M over the whole table;
3. every shard draws the rows asked of it. Between GPUs of one host
   (``transfer="peer"``, the default where it works) the owning GPU's gather
   kernel writes them straight into the asking rank's memory, mapped by CUDA
   IPC (peer access over NVLink), ordered by interprocess events whose records
   the ranks post through the shared memory of step 1; no NCCL call and no
   host wait on the device. Otherwise (``transfer="nccl"``, or ranks on
   several hosts) NCCL point-to-point moves them; on the host (gloo) one
   all-to-all per column plus one for the keys and probabilities.

``mode="union"`` draws ``n ~ Multinomial(B * world, M_s / sum M)`` once per step
and lets each rank keep up to B rows of its own shard, moving only the
difference: the union of the step's batches is an exact sample of B * world
items from the whole table (what a data-parallel learner's averaged gradient
sees), but one rank's batch leans to its own shard. With shards of equal mass
it moves about sqrt(B * world) rows a step instead of B * (world - 1) / world a
rank (in general (B * world / 2) * sum |M_s / sum M - 1 / world|). Its weights
are normalised over the union (one all-reduce of the largest).

Probabilities are global (m / sum M, in float64) and importance weights use
the global item count, ``(N * P)^-beta`` over the batch's largest. They are
exact for the masses read in step 1; rows written between step 1 and the
draws shift a shard's share by their own mass.

Priority updates are collective too: :meth:`ShardedSampler.update_priorities`
sends every (key, priority) to the rank whose shard holds it (the batch's
``shards`` say which) by one all-to-all.

The rate limiter: a shard's own rate limiter would block one rank inside a
collective while the others wait for it. Give the shards the default limiter
(a sample waits for one item) and the sampler a :class:`replaydb.RateLimiter`:
it grants B * world samples a step against the inserts of every shard, and
every rank takes the same decision from the same gathered counts, so all wait
together, or all give up together with DeadlineExceededError (the deadline is
rank 0's).
"""

from __future__ import annotations

import ctypes
import functools
import math
import platform
import socket
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from replaydb import _lib
from replaydb.core import RateLimiter, Table
from replaydb.errors import DeadlineExceededError, Error, InvalidArgumentError, check

__all__ = ["ShardedSampler", "ShardedBatch", "draw_counts"]

_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
           "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
           "bool": "bool"}
_MODES = ("per_rank", "union")
_TRANSFERS = ("auto", "peer", "nccl")
_MAX_RUNS = 64  # kMaxBatchRuns: runs one replaydb_label_batch_runs labels


def draw_counts(masses: Sequence[float], items: Sequence[int], batch_size: int, world: int,
                rng: np.random.Generator, mode: str = "per_rank") -> np.ndarray:
    """The step's plan: ``counts[r, s]`` rows rank r takes from shard s, drawn
    from the shards' masses (or, when every mass is 0, their item counts) with
    ``rng``. Every rank calls it with the same arguments and gets the same
    plan. ``per_rank``: each row of ``counts`` is Multinomial(B, M / sum M).
    ``union``: n ~ Multinomial(B * world, M / sum M); rank r keeps min(n_r, B)
    rows of its own shard and takes what it lacks from the shards with rows to
    spare, in rank order."""
    if mode not in _MODES:
        raise ValueError(f"replaydb.distributed: mode must be one of {_MODES}, not {mode!r}")
    m = np.asarray(masses, dtype=np.float64)
    if not np.all(np.isfinite(m)) or np.any(m < 0):
        raise ValueError(f"replaydb.distributed: shard masses must be finite and >= 0: {list(m)}")
    if m.sum() <= 0:
        m = np.asarray(items, dtype=np.float64)
    if m.sum() <= 0:
        raise ValueError("replaydb.distributed: every shard is empty")
    p = m / m.sum()
    if mode == "per_rank":
        return rng.multinomial(batch_size, p, size=world).astype(np.int64)
    drawn = rng.multinomial(batch_size * world, p).astype(np.int64)
    counts = np.zeros((world, len(p)), dtype=np.int64)
    spare = np.maximum(drawn - batch_size, 0)
    for r in range(world):
        counts[r, r] = min(drawn[r], batch_size)
    for r in range(world):
        need = batch_size - counts[r, r]
        for s in range(len(p)):
            if need == 0:
                break
            take = min(need, spare[s])
            counts[r, s] += take
            spare[s] -= take
            need -= take
    return counts


class ShardedBatch:
    """One rank's batch of a sharded table (PyTorch tensors on the sampler's
    device): ``columns`` ([B, L, shape...] by name), ``mask`` ([B, L]),
    ``keys`` ([B] int64: the uint64 item keys' bits, for ``update_priorities``),
    ``shards`` ([B] int64: the rank whose shard holds each row),
    ``probabilities`` ([B] float64, over the whole table) and ``weights``
    ([B] float32 with ``importance_beta``, else None)."""

    def __init__(self, columns: Dict[str, Any], mask: Any, keys: Any, shards: Any,
                 probabilities: Any, weights: Any):
        self.columns = columns
        self.mask = mask
        self.keys = keys
        self.shards = shards
        self.probabilities = probabilities
        self.weights = weights

    def __getitem__(self, name: str) -> Any:
        return self.columns[name]

    def __len__(self) -> int:
        return int(self.keys.shape[0])


class ShardedSampler:
    """Samples a table sharded over the ranks of ``group`` (default: the
    default process group of ``torch.distributed``), ``table`` being this
    rank's shard. Every call is collective: every rank must make it, in the
    same order, with the same batch size.

    ``device``: where batches land; by default the shard's GPU under NCCL and
    the host under gloo (whose collectives take host tensors). ``seed`` must
    be the same on every rank. ``rate_limiter``: see the module's text.
    ``timeout`` (seconds): how long a step waits for that limiter.
    ``transfer`` (NCCL groups): how rows cross GPUs; "peer" (CUDA IPC: needs
    the shared-memory exchange, a loadable libcudart and peer access between
    every pair of the ranks' GPUs; ValueError naming what is missing), "nccl",
    or "auto" (peer where every rank can, else NCCL). :attr:`transfer` says
    which was taken."""

    def __init__(self, table: Table, *, seq_len: Optional[int] = None,
                 importance_beta: Optional[float] = None, mode: str = "per_rank",
                 seed: int = 0, rate_limiter: Optional[RateLimiter] = None,
                 timeout: Optional[float] = None, group: Any = None,
                 device: Optional[str] = None, exchange: str = "auto",
                 transfer: str = "auto"):
        import torch
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("replaydb.distributed: torch.distributed is not initialised "
                               "(call torch.distributed.init_process_group first)")
        if mode not in _MODES:
            raise ValueError(f"replaydb.distributed: mode must be one of {_MODES}, not {mode!r}")
        if transfer not in _TRANSFERS:
            raise ValueError(f"replaydb.distributed: transfer must be one of {_TRANSFERS}, "
                             f"not {transfer!r}")
        if exchange not in ("auto", "shm", "collective"):
            raise ValueError("replaydb.distributed: exchange must be 'auto', 'shm' or "
                             f"'collective', not {exchange!r}")
        spec = table.spec
        if spec["selector"] not in ("uniform", "prioritized"):
            raise InvalidArgumentError(
                f"replaydb.distributed: table {spec['name']!r} draws {spec['selector']}; a "
                "sharded table draws uniform or prioritized (by mass)")
        if int(spec.get("lanes", 1)) != 1:
            raise InvalidArgumentError(
                f"replaydb.distributed: table {spec['name']!r} is a vector table")
        self._torch = torch
        self._dist = dist
        self._table = table
        self._group = group
        self._rank = dist.get_rank(group)
        self._world = dist.get_world_size(group)
        if seq_len is not None and int(seq_len) != int(spec["sequence_length"]):
            raise ValueError(f"replaydb.distributed: seq_len {seq_len} is not table "
                             f"{spec['name']!r}'s sequence_length {spec['sequence_length']} "
                             "(a sharded table samples whole windows of its own length)")
        self._seq_len = int(spec["sequence_length"])
        self._beta = importance_beta
        self._mode = mode
        self._seed = int(seed)
        self._limiter = rate_limiter
        self._timeout = timeout
        self._samples = 0  # granted by the limiter, the same count on every rank
        nccl = dist.get_backend(group) == "nccl"
        self._nccl = nccl
        if transfer == "peer" and not nccl:
            raise ValueError("replaydb.distributed: transfer='peer' moves rows between GPUs; "
                             "this group's backend is " + str(dist.get_backend(group)))
        if device is None:
            info_device = table.info()["device"]
            device = f"cuda:{info_device}" if nccl and info_device >= 0 else (
                "cuda" if nccl else "cpu")
        self._device = torch.device(device)
        if self._device.type == "cuda" and self._device.index is None:
            self._device = torch.device("cuda", torch.cuda.current_device())
        if nccl and self._device.type != "cuda":
            raise ValueError("replaydb.distributed: NCCL moves GPU tensors; device must be cuda")
        self._sample_device = "cpu" if self._device.type == "cpu" else str(self._device)
        self._columns = [(c["name"], getattr(torch, _DTYPES[c["dtype"]]),
                          (self._seq_len, *c["shape"])) for c in spec["columns"]]
        self._stats_device = self._device if nccl else torch.device("cpu")
        self._options = None  # the NCCL path's SampleOptions, made once
        # How long a shard's own draw may wait (its own rate limiter): `timeout`, or 60 s.
        self._draw_timeout = float(timeout) if timeout is not None else 60.0
        # The plan's generator: seeded alike and called alike on every rank.
        self._rng = np.random.Generator(np.random.PCG64(self._seed))
        # What every rank's exchange carries to check that the ranks call alike.
        self._call_batch = 0
        self._fingerprint = float((self._seed * 1_000_003 + _MODES.index(mode)) % (1 << 52))
        self._failed = False  # this rank's last draw failed: the next exchange says so
        self._send_buffers: Optional[tuple] = None
        self._shm: Optional[_SharedStats] = None
        self._closed = False
        if exchange != "collective":
            # Shared memory needs one host and stores seen in program order (x86-64).
            here = (socket.gethostname(), platform.machine())
            hosts = [None] * self._world
            dist.all_gather_object(hosts, here, group=group)
            usable = len(set(hosts)) == 1 and hosts[0][1] in ("x86_64", "AMD64")
            if usable:
                self._shm = _SharedStats.create(dist, group, self._rank, self._world)
                usable = self._shm is not None
            if not usable and exchange == "shm":
                raise ValueError("replaydb.distributed: exchange='shm' needs every rank on "
                                 "one x86-64 host sharing /dev/shm; the ranks are on "
                                 f"{sorted(set(hosts))}")
        # How a GPU step's rows cross GPUs: written by the owning GPU's gather
        # straight into the asking rank's memory (CUDA IPC, peer access over
        # NVLink), or NCCL point-to-point.
        self._peers: Optional[_PeerRows] = None
        self._peer_steps = 0  # steps of the peer path, the same count on every rank
        self._transfer = "nccl" if nccl else None
        self._transfer_asked = transfer
        if nccl and transfer != "nccl":
            devices = [None] * self._world
            dist.all_gather_object(devices, self._device.index, group=group)
            why = _PeerRows.unusable(torch, self._device.index, devices, self._shm)
            every = [None] * self._world
            dist.all_gather_object(every, why, group=group)
            why_not = [f"rank {r}: {w}" for r, w in enumerate(every) if w]
            if not why_not:
                self._transfer = "peer"
            elif transfer == "peer":
                raise ValueError("replaydb.distributed: transfer='peer' needs CUDA IPC and "
                                 "peer access between every rank's GPU; " +
                                 "; ".join(why_not))

    def close(self) -> None:
        """Lets go of the shared-memory segment of the exchange and frees the
        peer path's buffers (both also at exit; call it when a sampler is
        dropped before then); the sampler cannot sample after."""
        self._closed = True
        if self._peers is not None:
            self._peers.close()
            self._peers = None
        if self._shm is not None:
            self._shm.close()
            self._shm = None

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._world

    @property
    def transfer(self) -> Optional[str]:
        """How rows cross GPUs: "peer" (CUDA IPC), "nccl", or None on the host."""
        return self._transfer

    # ------------------------------------------------------------ sampling

    def _gather_stats(self, out_of_time: bool) -> np.ndarray:
        """[world, 5]: each shard's mass, items, inserts, deadline flag and
        whether its last draw failed."""
        torch = self._torch
        total, items = self._table.mass()
        inserts = self._table.info()["items_inserted"] if self._limiter is not None else 0
        values = [total, float(items), float(inserts), float(out_of_time), float(self._failed),
                  float(self._call_batch), float(self._fingerprint)]
        if self._shm is not None:
            stats = self._shm.exchange(values, self._timeout)
        else:
            mine = torch.tensor(values, dtype=torch.float64, device=self._stats_device)
            every = [torch.empty_like(mine) for _ in range(self._world)]
            self._dist.all_gather(every, mine, group=self._group)
            stats = torch.stack(every).cpu().numpy()
        # A draw that failed in the last step stops this step on every rank
        # alike (before any transfer), the failed rank included; the next call
        # starts afresh.
        self._failed = False
        if not (np.all(stats[:, 5] == stats[0, 5]) and np.all(stats[:, 6] == stats[0, 6])):
            raise ValueError("replaydb.distributed: the ranks called sample differently: batch "
                             f"sizes {stats[:, 5].astype(np.int64).tolist()}; every rank must "
                             "make the same calls with the same batch size, seed and mode")
        failed = [r for r in range(self._world) if stats[r, 4]]
        if failed:
            raise Error(f"replaydb.distributed: the shards of ranks {failed} failed to draw in "
                        "the last step (their ranks raised the reason then); this step is "
                        "skipped on every rank, and a batch of the last step holds NaN "
                        "probabilities where their rows were")
        return stats

    def _granted(self, stats: np.ndarray, batch_size: int) -> bool:
        lim = self._limiter
        if lim is None:
            return True
        inserts = float(stats[:, 2].sum())
        if stats[:, 1].sum() < lim.min_size_to_sample or inserts < lim.min_size_to_sample:
            return False
        want = self._samples + batch_size * self._world
        return inserts * lim.samples_per_insert - want >= lim.min_diff

    def _stats_for_step(self, batch_size: int) -> np.ndarray:
        start = time.monotonic()
        wait = 0.0005
        while True:
            late = (self._rank == 0 and self._timeout is not None
                    and time.monotonic() - start > self._timeout)
            stats = self._gather_stats(late)
            if self._granted(stats, batch_size) and stats[:, 1].sum() > 0:
                return stats
            if stats[0, 3]:
                raise DeadlineExceededError(
                    f"replaydb.distributed: no batch of {batch_size} x {self._world} ranks within "
                    f"{self._timeout} s: {int(stats[:, 1].sum())} items in the shards, "
                    f"{int(stats[:, 2].sum())} inserts, {self._samples} samples granted")
            time.sleep(wait)
            wait = min(wait * 2, 0.05)

    def sample(self, batch_size: int) -> ShardedBatch:
        """This rank's batch of ``batch_size`` rows (collective)."""
        torch = self._torch
        if self._closed:
            raise ValueError("replaydb.distributed: the sampler was closed")
        if batch_size < 1:
            raise ValueError(f"replaydb.distributed: batch_size must be >= 1, not {batch_size}")
        self._call_batch = int(batch_size)
        stats = self._stats_for_step(batch_size)
        masses, items = stats[:, 0], stats[:, 1]
        if self._nccl and masses.sum() <= 0:
            raise Error("replaydb.distributed: every priority in every shard is 0; a shard "
                        "drawing on a GPU cannot draw then (set a priority above 0)")
        counts = draw_counts(masses, items, batch_size, self._world, self._rng, self._mode)
        self._samples += batch_size * self._world
        if self._transfer == "peer":
            return self._sample_through_peers(batch_size, counts, masses, items)
        if self._nccl:
            return self._sample_on_gpus(batch_size, counts, masses, items)
        me = self._rank
        send = counts[:, me]  # rows this shard sends to each rank
        recv = counts[me, :]  # rows this rank takes from each shard
        n_local = int(send.sum())

        # The local draw: every row this shard owes, rank 0's first.
        failure: Optional[str] = None
        local: Dict[str, Any] = {}
        meta = torch.zeros((n_local, 3), dtype=torch.int64, device=self._device)
        if n_local > 0:
            try:
                batch = self._table.sample(n_local, seq_len=self._seq_len,
                                           device=self._sample_device,
                                           timeout=self._draw_timeout)
                for name, _, _ in self._columns:
                    local[name] = self._field(batch, name)
                local["mask"] = self._field(batch, "mask")
                meta[:, 0] = _int64_keys(torch, batch["keys"], self._device)
                meta[:, 1] = self._field(batch, "probabilities").to(torch.float64).view(torch.int64)
                meta[:, 2] = 1
            except Exception as e:  # noqa: BLE001 - the rows go out marked failed; raised below
                failure = f"rank {me}'s shard: {e}"
                local = {}
                self._failed = True
        # The transfers: one all-to-all per column, one for the keys and probabilities.
        out_meta = torch.empty((batch_size, 3), dtype=torch.int64, device=self._device)
        self._all_to_all(out_meta, meta, recv, send)
        columns: Dict[str, Any] = {}
        for name, dtype, shape in self._columns + [("mask", torch.uint8, (self._seq_len,))]:
            src = local.get(name)
            if src is None:
                src = torch.zeros((n_local, *shape), dtype=dtype, device=self._device)
            dst = torch.empty((batch_size, *shape), dtype=src.dtype, device=self._device)
            self._all_to_all(_bytes_view(dst), _bytes_view(src.contiguous()), recv, send)
            columns[name] = dst
        if failure is not None:
            self._finish_skipped()
            raise Error(f"replaydb.distributed: {failure}")
        ok = out_meta[:, 2]
        if not bool(ok.all()):
            bad = sorted(set(np.repeat(np.arange(self._world), recv)[
                (ok == 0).cpu().numpy()].tolist()))
            self._finish_skipped()
            raise Error(f"replaydb.distributed: the shards of ranks {bad} failed to draw "
                        "(their ranks raised the reason)")
        mask = columns.pop("mask")
        return self._finish(columns, mask, out_meta[:, 0].clone(),
                            [(r, int(recv[r])) for r in range(self._world)],
                            out_meta[:, 1].view(torch.float64), masses, items)

    def _finish(self, columns: Dict[str, Any], mask: Any, keys: Any,
                runs: List[tuple], local_probabilities: Any, masses: np.ndarray,
                items: np.ndarray) -> ShardedBatch:
        """The batch, with global probabilities and weights. ``runs``: (shard,
        rows) in row order; each run is scaled by its shard's share."""
        torch = self._torch
        use = masses if masses.sum() > 0 else items
        share = use / use.sum()
        n = int(local_probabilities.shape[0])
        runs = [(shard, rows) for shard, rows in runs if rows]
        if self._device.type == "cuda" and len(runs) <= _MAX_RUNS:
            # Every row's probability and shard in one launch.
            meta = torch.empty((2, n), dtype=torch.int64, device=self._device)
            probabilities, shards = meta[0].view(torch.float64), meta[1]
            self._label(runs, share, local_probabilities, probabilities, shards)
        else:
            probabilities = local_probabilities.to(torch.float64).contiguous()
            shards = torch.empty(n, dtype=torch.int64, device=self._device)
            at = 0
            for shard, rows in runs:
                probabilities[at:at + rows].mul_(float(share[shard]))
                shards[at:at + rows].fill_(int(shard))
                at += rows
        weights = None
        if self._beta is not None:
            # Rows of a shard that failed (NaN probabilities, NCCL path) weigh 0.
            w = torch.nan_to_num((float(items.sum()) * probabilities) ** (-float(self._beta)),
                                 nan=0.0)
            top = w.max()
            if self._mode == "union":
                # The union of the step's batches is the sample: one normaliser for all.
                top = self._union_top(top)
            weights = (w / top).to(torch.float32)
        if self._transfer == "nccl":  # rows of a failed shard: masked out too
            mask.mul_(torch.isfinite(probabilities).to(mask.dtype)[:, None])
        return ShardedBatch(columns, mask, keys, shards, probabilities, weights)

    def _union_top(self, top: Any) -> Any:
        """The largest weight over every rank's batch (union mode's one
        all-reduce a step); `top` None from a rank that raises this step."""
        torch = self._torch
        if top is None:
            top = torch.zeros(1, dtype=torch.float64, device=self._stats_device)
        else:
            top = top.reshape(1).to(self._stats_device)
        self._dist.all_reduce(top, op=self._dist.ReduceOp.MAX, group=self._group)
        return top.to(self._device)

    def _finish_skipped(self) -> None:
        """A rank that raises after the plan still takes part in what
        ``_finish`` does collectively (union mode's all-reduce of the weights),
        so that the ranks' collectives stay in step."""
        if self._beta is not None and self._mode == "union":
            self._union_top(None)

    def _sample_on_gpus(self, batch_size: int, counts: np.ndarray, masses: np.ndarray,
                        items: np.ndarray) -> ShardedBatch:
        """The NCCL path: this rank's own rows are drawn straight into the
        batch's tensors, the rows other ranks asked for into one send buffer
        each column, and every transfer of the step goes in one NCCL group
        (batch_isend_irecv): no copy of the local rows, one launch."""
        dist = self._dist
        me, world = self._rank, self._world
        recv, send = counts[me].copy(), counts[:, me].copy()
        own = int(counts[me, me])
        n_out = int(send.sum()) - own

        buffers = self._empty_batch
        cols, mask, keys, probs = buffers(batch_size)
        # The send buffers are kept: the next step's draws into them queue on
        # the stream after this step's sends.
        if n_out and (self._send_buffers is None or self._send_buffers[2].shape[0] < n_out):
            self._send_buffers = buffers(max(n_out, batch_size))
        out_cols: List[Any] = []
        out_mask = out_keys = out_probs = None
        # This rank's own rows straight into the batch, then the rows the
        # others asked for into the send buffers: one engine call.
        runs = [(own, [c.data_ptr() for c in cols], mask.data_ptr(), keys.data_ptr(),
                 probs.data_ptr())]
        if n_out:
            sb_cols, sb_mask, sb_keys, sb_probs = self._send_buffers
            out_cols, out_mask = [c[:n_out] for c in sb_cols], sb_mask[:n_out]
            out_keys, out_probs = sb_keys[:n_out], sb_probs[:n_out]
            runs.append((n_out, [c.data_ptr() for c in sb_cols], sb_mask.data_ptr(),
                         sb_keys.data_ptr(), sb_probs.data_ptr()))
        failure = None
        try:
            self._sample_runs(runs, _raw_stream(self._torch, self._device))
        except Exception as e:  # noqa: BLE001 - told to every rank at the next exchange
            failure = e
        if failure is not None and n_out:
            out_probs.fill_(float("nan"))  # the receivers' rows say so
        if failure is not None:
            self._failed = True
        ops = (self._p2p(dist.isend, out_cols + [out_mask, out_keys, out_probs], send, 0) +
               self._p2p(dist.irecv, cols + [mask, keys, probs], recv, own))
        if ops:
            for req in dist.batch_isend_irecv(ops):
                req.wait()
        if failure is not None:
            self._finish_skipped()
            raise Error(f"replaydb.distributed: rank {me}'s shard: {failure}")
        runs = [(me, own)] + [(r, int(recv[r])) for r in range(world) if r != me]
        columns = {name: c for (name, _, _), c in zip(self._columns, cols)}
        return self._finish(columns, mask, keys, runs, probs, masses, items)

    def _sample_through_peers(self, batch_size: int, counts: np.ndarray, masses: np.ndarray,
                              items: np.ndarray) -> ShardedBatch:
        """The peer path: this rank draws its own rows straight into the batch
        and the rows each other rank asked of its shard straight into that
        rank's inbound buffer (mapped here by CUDA IPC; the gather kernel
        writes over NVLink). The ranks order the writes by interprocess
        events, posted through the shared memory of the exchange: a rank
        records "pushed" after its writes, and the asking rank's stream waits
        for it, copies its inbound rows into the batch and records "consumed",
        which a writer waits for before it writes that buffer again (two
        buffers a rank, by the step's parity). No NCCL call, no host wait on
        the device."""
        torch = self._torch
        me, world = self._rank, self._world
        if world > 1 and (self._peers is None or self._peers.capacity < batch_size):
            if self._peers is not None:  # every rank alike: the same batch sizes
                self._peers.close()
                self._peers = None
            try:
                self._peers = _PeerRows(self, batch_size)
            except Error as e:  # on every rank alike (the outcome is all-gathered)
                if self._transfer_asked == "peer":
                    raise
                warnings.warn(f"{e}; this sampler moves rows through NCCL from now on",
                              RuntimeWarning)
                self._transfer = "nccl"
                return self._sample_on_gpus(batch_size, counts, masses, items)
        peers = self._peers
        if peers is None:  # one rank: its own rows only
            own = batch_size
            cols, mask, keys, probs = self._empty_batch(batch_size)
            self._sample_into(own, cols, mask, keys, probs)
            columns = {name: c for (name, _, _), c in zip(self._columns, cols)}
            return self._finish(columns, mask, keys, [(me, own)], probs, masses, items)
        step = self._peer_steps
        self._peer_steps += 1
        parity = step % 2
        own = int(counts[me, me])
        failure: Optional[BaseException] = None
        stream = None
        fields: List[Any] = []
        previous = None
        recorded = False
        try:
            # Everything up to the posted word is caught: a rank that fails
            # here must still post it, or the others wait for it.
            try:
                previous = peers.enter()
                stream = _raw_stream(torch, self._device)
                cols, mask, keys, probs = self._empty_batch(batch_size)
                fields = cols + [mask, keys, probs]
                # Rows 0..own of the batch (the tensors' own addresses), then
                # the rows each other rank asked for, into its inbound buffer
                # once it has consumed that buffer's last rows: one engine call.
                # The call records this rank's "pushed" event after them,
                # whether or not a run failed.
                runs = [(own, [c.data_ptr() for c in cols], mask.data_ptr(), keys.data_ptr(),
                         probs.data_ptr())]
                for s in range(world):
                    n = int(counts[s, me])
                    if s == me or n == 0:
                        continue
                    # Rank s's inbound rows: the other shards' in rank order.
                    first = int(sum(counts[s, q] for q in range(me) if q != s))
                    runs.append((n, *peers.addresses(s, parity, first),
                                 peers.consumed_event(s, parity)))
                recorded = True
                self._sample_runs(runs, stream, peers.pushed_event(parity))
            except Exception as e:  # noqa: BLE001 - the askers learn it from the posted word
                failure = e
            if stream is not None and not recorded:
                try:
                    peers.record_pushed(parity, stream)
                except Exception as e:  # noqa: BLE001 - as above
                    failure = failure or e
            self._shm.post(2 * step + (failure is not None))
            if failure is not None:
                self._failed = True
                if not fields:  # nothing to receive into: the others know from the word
                    self._finish_skipped()
                    raise Error(f"replaydb.distributed: rank {me}'s step: {failure}")
            inbound = [s for s in range(world) if s != me and counts[me, s]]
            words = self._shm.wait_posted(inbound, 2 * step)
            bad = [s for s in inbound if int(words[s]) & 1]
            n_in = batch_size - own if not bad else 0
            peers.receive(parity, inbound, own, n_in, [t.data_ptr() for t in fields], stream)
        finally:
            if previous is not None:
                peers.leave(previous)
        if failure is not None or bad:
            self._finish_skipped()
            if failure is not None:
                raise Error(f"replaydb.distributed: rank {me}'s shard: {failure}")
            raise Error(f"replaydb.distributed: the shards of ranks {bad} failed to draw "
                        "(their ranks raised the reason)")
        runs = [(me, own)] + [(r, int(counts[me, r])) for r in range(world) if r != me]
        columns = {name: c for (name, _, _), c in zip(self._columns, cols)}
        return self._finish(columns, mask, keys, runs, probs, masses, items)

    def _empty_batch(self, n: int) -> tuple:
        """Device tensors for n rows: the columns, mask, keys and probabilities."""
        torch, dev = self._torch, self._device
        return ([torch.empty((n, *shape), dtype=dtype, device=dev)
                 for _, dtype, shape in self._columns],
                torch.empty((n, self._seq_len), dtype=torch.uint8, device=dev),
                torch.empty(n, dtype=torch.int64, device=dev),
                torch.empty(n, dtype=torch.float32, device=dev))

    def _p2p(self, op: Any, tensors: List[Any], counts: np.ndarray, first: int) -> List[Any]:
        """`op` (isend or irecv) of every tensor's rows for each other rank:
        counts[r] rows each, in rank order from row `first`."""
        ops = []
        offset = first
        for r in range(self._world):
            if r != self._rank and counts[r]:
                rows = slice(offset, offset + int(counts[r]))
                offset += int(counts[r])
                for t in tensors:
                    ops.append(self._dist.P2POp(op, t[rows], self._global(r), self._group))
        return ops

    def _global(self, group_rank: int) -> int:
        """The global rank of `group_rank` (what P2POp takes)."""
        if self._group is None:
            return group_rank
        return self._dist.get_global_rank(self._group, group_rank)

    def _sample_into(self, n: int, cols: List[Any], mask: Any, keys: Any, probs: Any,
                     stream: Optional[int] = None) -> None:
        """Table::SampleToDevice of n rows into these tensors, on PyTorch's stream."""
        self._sample_to(n, [c.data_ptr() for c in cols], mask.data_ptr(), keys.data_ptr(),
                        probs.data_ptr(), stream)

    def _sample_options(self) -> Any:
        if self._options is None:
            self._options = _lib.SampleOptions()
            _lib.lib.replaydb_sample_options_init(ctypes.byref(self._options))
            self._options.timeout_ms = int(self._draw_timeout * 1000)
        return self._options

    def _sample_to(self, n: int, cols: List[int], mask: int, keys: int, probs: int,
                   stream: Optional[int] = None) -> None:
        """Table::SampleToDevice of n rows to these device addresses (this GPU's
        memory or a peer's mapped here), on `stream` (default PyTorch's)."""
        ptrs = (ctypes.c_void_p * len(cols))(*cols)
        if stream is None:
            stream = _raw_stream(self._torch, self._device)
        err = ctypes.c_char_p()
        code = _lib.fast.replaydb_table_sample_into(
            self._table._h(), n, ctypes.byref(self._sample_options()), ptrs, len(cols), keys,
            probs, None, mask, stream, ctypes.byref(err))
        if code:
            check(code, err)

    def _sample_runs(self, runs: List[tuple], stream: int, record_event: int = 0) -> None:
        """Table::SampleToDevice of each run's rows to its addresses, in order,
        in one engine call (replaydb_table_sample_runs). A run: (rows, column
        addresses, mask, keys, probabilities[, an event to wait for before
        it]); ``record_event`` (if any) is recorded after the runs, failed or
        not."""
        ncols = len(self._columns)
        # replaydb_sample_run_t: rows, then the columns array's, keys',
        # probabilities', mask's and the wait event's addresses (8 bytes each).
        table = np.zeros((len(runs), 6), dtype=np.int64)
        cols = np.zeros((len(runs), max(ncols, 1)), dtype=np.int64)
        for i, (n, col_ptrs, mask, keys, probs, *wait) in enumerate(runs):
            cols[i, :ncols] = col_ptrs
            table[i] = (n, cols.ctypes.data + i * cols.strides[0] if ncols else 0, keys, probs,
                        mask, wait[0] if wait else 0)
        err = ctypes.c_char_p()
        code = _lib.fast.replaydb_table_sample_runs(
            self._table._h(), table.ctypes.data, len(runs), ctypes.byref(self._sample_options()),
            ncols, record_event or None, stream, ctypes.byref(err))
        if code:
            check(code, err)

    def _label(self, runs: List[tuple], share: np.ndarray, local: Any, probabilities: Any,
               shards: Any) -> None:
        """probabilities = local x the share of each row's shard, and shards,
        on the device in one launch (replaydb_label_batch_runs)."""
        ids = np.array([shard for shard, _ in runs], dtype=np.int64)
        rows = np.array([n for _, n in runs], dtype=np.int64)
        shares = np.ascontiguousarray(share[ids], dtype=np.float64)
        err = ctypes.c_char_p()
        code = _lib.fast.replaydb_label_batch_runs(
            self._device.index, len(runs), rows.ctypes.data, ids.ctypes.data, shares.ctypes.data,
            local.data_ptr(), probabilities.data_ptr(), shards.data_ptr(),
            _raw_stream(self._torch, self._device), ctypes.byref(err))
        if code:
            check(code, err)

    def update_priorities(self, keys: Any, shards: Any, priorities: Any) -> None:
        """Sets the priorities of the items ``keys`` (a batch's ``keys``), each
        on the shard ``shards`` names (collective; every rank calls it, with
        its own keys, possibly none)."""
        torch = self._torch
        keys = torch.as_tensor(keys, device=self._device).to(torch.int64).reshape(-1)
        shards = torch.as_tensor(shards, device=self._device).to(torch.int64).reshape(-1)
        prio = torch.as_tensor(priorities, device=self._device).to(torch.float64).reshape(-1)
        if not (keys.shape == shards.shape == prio.shape):
            raise ValueError("replaydb.distributed: keys, shards and priorities differ in length: "
                             f"{keys.shape[0]}, {shards.shape[0]}, {prio.shape[0]}")
        if keys.numel() and (int(shards.min()) < 0 or int(shards.max()) >= self._world):
            raise ValueError(f"replaydb.distributed: a shard outside [0, {self._world})")
        order = torch.argsort(shards, stable=True)
        send = torch.bincount(shards, minlength=self._world).cpu()
        packed = torch.stack([keys[order], prio[order].view(torch.int64)], dim=1).contiguous()
        counts = torch.empty(self._world, dtype=torch.int64, device=self._stats_device)
        self._dist.all_to_all_single(counts, send.to(self._stats_device), group=self._group)
        recv = counts.cpu().numpy()
        out = torch.empty((int(recv.sum()), 2), dtype=torch.int64, device=self._device)
        self._all_to_all(out, packed, recv, send.numpy())
        if out.shape[0]:
            got_keys = out[:, 0]
            got_prio = out[:, 1].view(torch.float64)
            if self._device.type == "cpu":
                self._table.update_priorities(got_keys.numpy().view(np.uint64),
                                              got_prio.numpy())
            else:
                self._table.update_priorities(got_keys, got_prio.to(torch.float32))

    def _field(self, batch: Any, name: str) -> Any:
        """Field ``name`` of a local batch as a tensor over its memory."""
        if self._device.type == "cpu" and batch[name].dtype != "bfloat16":
            # Through NumPy: older PyTorch takes no bool DLPack (NumPy has no bfloat16).
            return self._torch.from_numpy(np.asarray(batch[name]))
        return batch.torch(name)

    def _all_to_all(self, out: Any, inp: Any, recv: Sequence[int], send: Sequence[int]) -> None:
        self._dist.all_to_all_single(out, inp, output_split_sizes=[int(x) for x in recv],
                                     input_split_sizes=[int(x) for x in send], group=self._group)


class _SharedStats:
    """The step's exchange of 7 doubles a rank through shared memory, for
    ranks on one host (a few microseconds; an NCCL all-gather and its copy
    back take 70-120). One segment, a slot per rank and per parity of the
    exchange's count: a rank writes its values into slot [count % 2], then
    its count; it reads once every rank's count has reached its own. A rank
    cannot write slot [count % 2] again before every rank has posted count + 1,
    that is, has read count's values. Stores become visible in program order
    (x86-64's TSO; the GPU machines). The peer path's words (one a rank, 2 x
    step + failed) follow the slots.
    """

    WAIT_S = 600.0  # a rank that never comes (as NCCL's default timeout)

    def __init__(self, shm: Any, rank: int, world: int, owner: bool):
        self._shm = shm
        self._rank = rank
        self._world = world
        self._owner = owner
        self._counts = np.ndarray((world,), dtype=np.int64, buffer=shm.buf, offset=0)
        self._values = np.ndarray((2, world, 8), dtype=np.float64, buffer=shm.buf,
                                  offset=8 * world)
        # The peer path's words: 2 * step + (1 if the rank's draw failed).
        self._posted = np.ndarray((world,), dtype=np.int64, buffer=shm.buf,
                                  offset=8 * world + 2 * world * 8 * 8)
        self._count = 0
        self.broken: Optional[str] = None  # why no exchange can happen any more

    @classmethod
    def create(cls, dist: Any, group: Any, rank: int, world: int) -> Optional["_SharedStats"]:
        """The segment, or None on every rank when one could not attach it."""
        from multiprocessing import resource_tracker, shared_memory
        size = 8 * world + 2 * world * 8 * 8 + 8 * world
        name = [None]
        shm = None
        if rank == 0:
            shm = shared_memory.SharedMemory(create=True, size=size)
            np.ndarray((size,), dtype=np.uint8, buffer=shm.buf)[:] = 0
            np.ndarray((world,), dtype=np.int64, buffer=shm.buf,
                       offset=size - 8 * world)[:] = -1  # nothing posted
            name[0] = shm.name
        dist.broadcast_object_list(name, src=dist.get_global_rank(group, 0)
                                   if group is not None else 0, group=group)
        attached = True
        if rank != 0:
            try:
                shm = shared_memory.SharedMemory(name=name[0])
            except OSError:  # same host name, another /dev/shm (a container)
                attached = False
            else:
                # Only the creator unlinks it (Python's tracker would at this exit).
                try:
                    resource_tracker.unregister(shm._name, "shared_memory")
                except Exception:  # noqa: BLE001 - the tracker's internals vary by version
                    pass
        every = [None] * world
        dist.all_gather_object(every, attached, group=group)
        if rank == 0:
            shm.unlink()  # the mappings stay; nothing is left behind at exit
        if not all(every):
            if shm is not None:
                shm.close()
            return None
        return cls(shm, rank, world, rank == 0)

    def exchange(self, values: Sequence[float], timeout: Optional[float]) -> np.ndarray:
        if self.broken:  # before this rank's count can cover a -1
            raise Error(f"replaydb.distributed: {self.broken}")
        self._count += 1
        slot = self._values[self._count % 2]
        slot[self._rank, :len(values)] = values
        self._counts[self._rank] = self._count
        counts, count = self._counts, self._count
        self._wait(lambda: int(counts.min()) >= count,
                   lambda: [r for r in range(self._world) if counts[r] < count],
                   f"exchange {count}")
        return slot[:, :len(values)].copy()

    def _wait(self, ready: Any, late: Any, what: str) -> None:
        """Spins, then sleeps, until ready(). After WAIT_S this rank gives up:
        it marks its count -1, so that every other rank, waiting now or
        coming later, stops too instead of going on with stale values (and
        the ranks' steps apart); an Error either way, and the segment is
        broken for good."""
        start = time.monotonic()
        spins = 0
        while not ready():
            gone = [r for r in range(self._world) if self._counts[r] < 0]
            if gone:
                self.broken = (f"ranks {gone} gave up waiting for the others; the sampler "
                               "cannot go on: make a new one on every rank")
                raise Error(f"replaydb.distributed: {self.broken}")
            spins += 1
            if spins > 200:
                time.sleep(0 if spins < 2000 else 0.0002)
                if time.monotonic() - start > self.WAIT_S:
                    missing = late()
                    self._counts[self._rank] = -1
                    self.broken = (f"ranks {missing} did not come to {what} within "
                                   f"{self.WAIT_S:g} s; the sampler cannot go on: make a new "
                                   "one on every rank")
                    raise Error(f"replaydb.distributed: {self.broken}")

    def post(self, word: int) -> None:
        """The peer path: this rank's word for the step (after its writes)."""
        self._posted[self._rank] = word

    def wait_posted(self, ranks: Sequence[int], least: int) -> np.ndarray:
        """Every rank's posted word, once those of `ranks` are >= least."""
        posted = self._posted
        self._wait(lambda: all(int(posted[r]) >= least for r in ranks),
                   lambda: [r for r in ranks if int(posted[r]) < least],
                   f"post their rows of peer step {least // 2}")
        return posted.copy()

    def close(self) -> None:
        del self._counts, self._values, self._posted
        self._shm.close()


class _IpcHandle(ctypes.Structure):
    """cudaIpcMemHandle_t and cudaIpcEventHandle_t (64 opaque bytes, by value)."""
    _fields_ = [("reserved", ctypes.c_char * 64)]


@functools.lru_cache(maxsize=None)  # loaded once
def _cudart() -> Any:
    """The CUDA runtime library (ctypes), for IPC handles and events; None
    where none loads. PyTorch's own first (its wheel's nvidia runtime or its
    lib/), then the system's."""
    import ctypes.util
    import glob
    import os
    names: List[str] = []
    try:
        import torch
        base = os.path.dirname(torch.__file__)
        names += sorted(glob.glob(os.path.join(os.path.dirname(base), "nvidia", "cuda_runtime",
                                               "lib", "libcudart.so*")), reverse=True)
        names += sorted(glob.glob(os.path.join(base, "lib", "libcudart.so*")), reverse=True)
    except ImportError:
        pass
    found = ctypes.util.find_library("cudart")
    names += ([found] if found else []) + ["libcudart.so.13", "libcudart.so.12",
                                            "/usr/local/cuda/lib64/libcudart.so"]
    lib = None
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is not None:
        vp, u = ctypes.c_void_p, ctypes.c_uint
        lib.cudaSetDevice.argtypes = [ctypes.c_int]
        lib.cudaGetDevice.argtypes = [ctypes.POINTER(ctypes.c_int)]
        lib.cudaMalloc.argtypes = [ctypes.POINTER(vp), ctypes.c_size_t]
        lib.cudaFree.argtypes = [vp]
        lib.cudaIpcGetMemHandle.argtypes = [ctypes.POINTER(_IpcHandle), vp]
        lib.cudaIpcOpenMemHandle.argtypes = [ctypes.POINTER(vp), _IpcHandle, u]
        lib.cudaIpcCloseMemHandle.argtypes = [vp]
        lib.cudaEventCreateWithFlags.argtypes = [ctypes.POINTER(vp), u]
        lib.cudaEventDestroy.argtypes = [vp]
        lib.cudaIpcGetEventHandle.argtypes = [ctypes.POINTER(_IpcHandle), vp]
        lib.cudaIpcOpenEventHandle.argtypes = [ctypes.POINTER(vp), _IpcHandle]
        lib.cudaEventRecord.argtypes = [vp, vp]
        lib.cudaStreamWaitEvent.argtypes = [vp, vp, u]
        lib.cudaMemcpyAsync.argtypes = [vp, vp, ctypes.c_size_t, ctypes.c_int, vp]
        lib.cudaHostAlloc.argtypes = [ctypes.POINTER(vp), ctypes.c_size_t, u]
        lib.cudaFreeHost.argtypes = [vp]
        lib.cudaEventSynchronize.argtypes = [vp]
        lib.cudaGetErrorString.argtypes = [ctypes.c_int]
        lib.cudaGetErrorString.restype = ctypes.c_char_p
    return lib


class _PeerRows:
    """The peer path's memory and events on one rank: two inbound buffers
    (by a step's parity) that the other ranks' gathers write into, every
    other rank's two mapped here, and per parity a "pushed" and a "consumed"
    interprocess event of every rank. A buffer holds `capacity` rows of every
    column, the mask, keys and probabilities, each field 256-byte aligned at
    the same offsets on every rank (the same spec). Made collectively (one
    all_gather_object of the handles)."""

    _EVENT_FLAGS = 0x2 | 0x4  # cudaEventDisableTiming | cudaEventInterprocess
    _LAZY_PEER_ACCESS = 0x1  # cudaIpcMemLazyEnablePeerAccess

    @staticmethod
    def unusable(torch: Any, device: int, devices: Sequence[int],
                 shm: Optional["_SharedStats"]) -> Optional[str]:
        """Why this rank cannot take the peer path (None: it can)."""
        if shm is None:
            return "no shared-memory exchange (ranks on several hosts, or exchange='collective')"
        if _cudart() is None:
            return "no CUDA runtime library (libcudart) loads"
        for d in set(devices):
            if d is not None and d != device and not torch.cuda.can_device_access_peer(device, d):
                return f"GPU {device} cannot access GPU {d} (no peer access)"
        return None

    def __init__(self, sampler: "ShardedSampler", capacity: int):
        torch, dist = sampler._torch, sampler._dist
        self._rt = _cudart()
        self._device = sampler._device
        self._rank, self._world = sampler._rank, sampler._world
        self.capacity = capacity
        L = sampler._seq_len
        fields = [(dtype, shape) for _, dtype, shape in sampler._columns] + [
            (torch.uint8, (L,)), (torch.int64, ()), (torch.float32, ())]
        self._fields = []  # (offset, bytes a row) of each field
        size = 0
        for dtype, shape in fields:
            row = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
            self._fields.append((size, row))
            size += (capacity * row + 255) // 256 * 256
        self._own: List[int] = []
        self._events: Dict[str, List[Any]] = {"pushed": [], "consumed": []}
        self._mapped: Dict[int, List[int]] = {}
        self._peer_events: Dict[int, Dict[str, List[Any]]] = {}
        handles: Dict[str, List[bytes]] = {"memory": [], "pushed": [], "consumed": []}
        # Every rank makes its part, then all learn whether every rank could,
        # twice (made, then opened): a rank that fails alone must not leave the
        # others waiting in a collective or, later, for its words.
        group = sampler._group
        previous = -1
        try:
            previous = self.enter()
            for _ in range(2):
                ptr = ctypes.c_void_p()
                self._ok(self._rt.cudaMalloc(ctypes.byref(ptr), size), f"cudaMalloc({size})")
                self._own.append(int(ptr.value))
                h = _IpcHandle()
                self._ok(self._rt.cudaIpcGetMemHandle(ctypes.byref(h), ptr),
                         "cudaIpcGetMemHandle")
                handles["memory"].append(bytes(h))
                for kind in ("pushed", "consumed"):
                    ev = ctypes.c_void_p()
                    self._ok(self._rt.cudaEventCreateWithFlags(ctypes.byref(ev),
                                                               self._EVENT_FLAGS),
                             "cudaEventCreateWithFlags")
                    self._events[kind].append(ev)
                    eh = _IpcHandle()
                    self._ok(self._rt.cudaIpcGetEventHandle(ctypes.byref(eh), ev),
                             "cudaIpcGetEventHandle")
                    handles[kind].append(bytes(eh))
        except Exception as e:  # noqa: BLE001 - told to every rank below
            handles = {"error": str(e)}
        if "error" in handles:
            self.leave(previous)
        self._all_or_none(dist, group, handles.get("error"), "make its rows' buffers")
        every: List[Any] = [None] * self._world
        dist.all_gather_object(every, handles, group=group)
        error = None
        try:
            for r, theirs in enumerate(every):
                if r == self._rank:
                    continue
                self._mapped[r] = []
                self._peer_events[r] = {"pushed": [], "consumed": []}
                for parity in range(2):
                    ptr = ctypes.c_void_p()
                    self._ok(self._rt.cudaIpcOpenMemHandle(
                        ctypes.byref(ptr), _IpcHandle.from_buffer_copy(theirs["memory"][parity]),
                        self._LAZY_PEER_ACCESS), f"cudaIpcOpenMemHandle of rank {r}'s rows")
                    self._mapped[r].append(int(ptr.value))
                    for kind in ("pushed", "consumed"):
                        ev = ctypes.c_void_p()
                        self._ok(self._rt.cudaIpcOpenEventHandle(
                            ctypes.byref(ev), _IpcHandle.from_buffer_copy(theirs[kind][parity])),
                            f"cudaIpcOpenEventHandle of rank {r}'s {kind} event")
                        self._peer_events[r][kind].append(ev)
        except Exception as e:  # noqa: BLE001 - as above
            error = str(e)
        self.leave(previous)
        self._all_or_none(dist, group, error, "map the other ranks' buffers")

    def _all_or_none(self, dist: Any, group: Any, error: Optional[str], what: str) -> None:
        """Raises on every rank, naming the ranks that failed to `what`,
        when any did (and frees what this rank made)."""
        every: List[Any] = [None] * self._world
        dist.all_gather_object(every, error, group=group)
        failed = [f"rank {r}: {e}" for r, e in enumerate(every) if e]
        if failed:
            self.close()
            raise Error(f"replaydb.distributed: the peer path could not {what}: " +
                        "; ".join(failed))

    def _ok(self, code: int, what: str) -> None:
        if code != 0:
            msg = self._rt.cudaGetErrorString(code).decode(errors="replace")
            raise Error(f"replaydb.distributed: rank {self._rank}: {what} on GPU "
                        f"{self._device.index}: {msg} (CUDA error {code})")

    def set_device(self) -> None:
        """This runtime's current device (per thread) is the rank's GPU."""
        self._ok(self._rt.cudaSetDevice(self._device.index), "cudaSetDevice")

    def enter(self) -> int:
        """Makes the rank's GPU this thread's current device for a step (the
        runtime may be PyTorch's own); returns the one to give back."""
        current = ctypes.c_int(-1)
        self._ok(self._rt.cudaGetDevice(ctypes.byref(current)), "cudaGetDevice")
        if current.value != self._device.index:
            self.set_device()
        return current.value

    def leave(self, previous: int) -> None:
        if previous != self._device.index and previous >= 0:
            self._rt.cudaSetDevice(previous)

    def addresses(self, rank: int, parity: int, first: int) -> tuple:
        """Rank `rank`'s inbound buffer from row `first`, mapped here: the
        columns' addresses, then the mask's, keys' and probabilities'."""
        base = self._mapped[rank][parity]
        ptrs = [base + offset + first * row for offset, row in self._fields]
        return ptrs[:-3], ptrs[-3], ptrs[-2], ptrs[-1]

    def consumed_event(self, rank: int, parity: int) -> int:
        """Rank `rank`'s "consumed" event of this parity (opened here)."""
        return self._peer_events[rank]["consumed"][parity].value

    def pushed_event(self, parity: int) -> int:
        """This rank's own "pushed" event of this parity."""
        return self._events["pushed"][parity].value

    def receive(self, parity: int, ranks: Sequence[int], first: int, n: int,
                fields: List[int], stream: int) -> None:
        """On `stream`, in one call (replaydb_copy_regions): waits for the
        "pushed" events of `ranks`, copies this rank's inbound rows 0..n into
        rows first.. of the batch's fields (their addresses: columns, mask,
        keys, probabilities), one copy a field, and records this rank's
        "consumed" event."""
        waits = (ctypes.c_void_p * max(len(ranks), 1))(
            *[self._peer_events[r]["pushed"][parity].value for r in ranks])
        copies = np.zeros((len(fields) if n else 0, 3), dtype=np.int64)
        base = self._own[parity]
        for i, ((offset, row), dst) in enumerate(zip(self._fields, fields) if n else ()):
            copies[i] = (dst + first * row, base + offset, n * row)
        err = ctypes.c_char_p()
        code = _lib.fast.replaydb_copy_regions(
            copies.ctypes.data, copies.shape[0], waits, len(ranks),
            self._events["consumed"][parity].value, stream, ctypes.byref(err))
        if code:
            check(code, err)

    def record_pushed(self, parity: int, stream: int) -> None:
        self._ok(self._rt.cudaEventRecord(self._events["pushed"][parity], stream),
                 "recording the pushed event")

    def close(self) -> None:
        """Unmaps the peers' buffers and frees this rank's, after this GPU's
        work (the other ranks' writes into them ended with the last step)."""
        if self._rt is None:
            return
        self._torch_sync()
        # The other ranks' last recorded writes into this rank's buffers
        # (a rank that raised mid-step may not have waited for them).
        for evs in self._peer_events.values():
            for ev in evs["pushed"]:
                self._rt.cudaEventSynchronize(ev)
        for ptrs in self._mapped.values():
            for ptr in ptrs:
                self._rt.cudaIpcCloseMemHandle(ctypes.c_void_p(ptr))
        for evs in self._peer_events.values():
            for ev in evs["pushed"] + evs["consumed"]:
                self._rt.cudaEventDestroy(ev)
        for ev in self._events["pushed"] + self._events["consumed"]:
            self._rt.cudaEventDestroy(ev)
        for ptr in self._own:
            self._rt.cudaFree(ctypes.c_void_p(ptr))
        self._own, self._mapped, self._peer_events = [], {}, {}
        self._events = {"pushed": [], "consumed": []}
        self._rt = None

    def _torch_sync(self) -> None:
        import torch
        torch.cuda.synchronize(self._device)


def _raw_stream(torch: Any, device: Any) -> int:
    """PyTorch's current CUDA stream on `device` as its handle (the cheap
    internal call where this PyTorch has it)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return int(raw(device.index))
    return torch.cuda.current_stream(device).cuda_stream


def _bytes_view(t: Any) -> Any:
    """``t`` as [rows, bytes per row] of uint8 (collectives of any dtype)."""
    import torch
    flat = t.reshape(t.shape[0], math.prod(t.shape[1:]))
    return flat if flat.dtype == torch.uint8 else flat.view(torch.uint8)


def _int64_keys(torch: Any, keys: Any, device: Any) -> Any:
    """The uint64 item keys as int64 (their bits), on ``device``."""
    if device.type == "cpu":
        return torch.from_numpy(np.asarray(keys).view(np.int64))
    cai = dict(keys.__cuda_array_interface__)
    cai["typestr"] = "<i8"

    class _View:
        __cuda_array_interface__ = cai
        owner = keys

    return torch.as_tensor(_View(), device=device)
