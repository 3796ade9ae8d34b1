"""replaydb: an embedded experience-replay database for reinforcement learning.

    import replaydb, numpy as np
    with replaydb.open("/tmp/replay") as db:
        table = db.create_table("transitions", {"obs": (np.float32, (4,)), "action": np.int32},
                                capacity_steps=100_000, sequence_length=2)
        with table.writer() as w:
            for t in range(10):
                w.append({"obs": np.full(4, t, np.float32), "action": t % 3})
            w.end()
        batch = table.sample(4)            # host memory
        obs = np.asarray(batch["obs"])     # [4, 2, 4], no copy

Batches expose ``__dlpack__``: ``torch.from_dlpack(batch["obs"])`` and
``jax.dlpack.from_dlpack`` wrap them without copying, on the host or, with
``table.sample(B, device="cuda")``, on the GPU. Writers take NumPy arrays and
any object with ``__dlpack__`` or ``__cuda_array_interface__`` (PyTorch and JAX
tensors on the GPU go in without a host copy).

The package is pure Python over the engine's C API (libreplaydb.so, see
docs/c_api.md) through ctypes; errors raise :class:`replaydb.Error` subclasses
carrying the engine's message.
"""

from replaydb.core import (DB, Array, Batch, BatchIterator, Column, RateLimiter, Table,
                           VectorWriter, Writer, connect, cuda_device_count, live_batches, open,
                           version)
from replaydb import data
from replaydb.keys import item_key, key_start, key_trajectory
from replaydb.errors import (AlreadyExistsError, BusyError, CancelledError, CorruptionError,
                             DeadlineExceededError, Error, FailedPreconditionError,
                             InternalError, InvalidArgumentError, IOErrorError, NotFoundError,
                             NotSupportedError, ResourceExhaustedError, UnavailableError)

__all__ = [
    "DB", "Table", "Writer", "VectorWriter", "Batch", "Array", "BatchIterator", "Column",
    "RateLimiter", "open", "connect", "version", "cuda_device_count", "live_batches", "data",
    "item_key", "key_trajectory", "key_start",
    "Error", "InvalidArgumentError", "NotFoundError", "AlreadyExistsError",
    "ResourceExhaustedError", "DeadlineExceededError", "CancelledError",
    "FailedPreconditionError", "BusyError", "IOErrorError", "CorruptionError",
    "NotSupportedError", "InternalError", "UnavailableError",
]

__version__ = "0.1.0"
