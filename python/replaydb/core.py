"""The Python API: databases, tables, writers, batches.

Everything goes through the C API (include/replaydb/c.h) with ctypes, which
releases the GIL for every call, so writers and samplers in several Python
threads run in parallel inside the engine. A batch's calls (sample, its
arrays, DLPack capsules) go through the C module _speedups.c where the build
made one (see _lib.speedups), which releases the GIL the same way.
"""

from __future__ import annotations

import ctypes
import json
import math
import operator
import os
import queue
import sys
import threading
import time
from ctypes import POINTER, byref, c_char_p, c_double, c_int64, c_size_t, c_uint64, c_void_p
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from replaydb import _convert, _dlpack
from replaydb._lib import (MAX_DIMS, INT64_MAX as _INT64_MAX, INT64_MIN as _INT64_MIN, Array as _CArray,
                           SampleOptions as _CSampleOptions, TableInfo as _CInfo,
                           Tensor as _CTensor, fast as _fast, int64_array as _int64_array,
                           lib as _lib, take_string, take_strings)
from replaydb import _lib as _lib_module
from replaydb.errors import (Error, FailedPreconditionError, InvalidArgumentError,
                             NotFoundError, NotSupportedError, check as _check)

# A stream: a cudaStream_t as an int, or an object with .cuda_stream
# (torch.cuda.Stream) or .ptr (cupy); None picks a default (see Table.sample).
StreamLike = Any
DeviceLike = Union[None, str, int, Any]

_TERMINAL = 0
_TRUNCATED = 1


def _err() -> c_char_p:
    return c_char_p()


def _call(fn, *args) -> None:
    err = _err()
    _check(fn(*args, byref(err)), err)


def _bytes(s: str) -> bytes:
    return s.encode()


_NAME_BYTES: Dict[str, bytes] = {}


def _name_bytes(name: str) -> bytes:
    """``name`` encoded, remembered: field names repeat on every batch."""
    encoded = _NAME_BYTES.get(name)
    if encoded is None:
        encoded = name.encode()
        if len(_NAME_BYTES) < 4096:
            _NAME_BYTES[name] = encoded
    return encoded


def _index(value: Any, what: str) -> int:
    """``value`` as an int64 for the plain (unchecked) calls of ``_lib.fast``."""
    if type(value) is not int:
        try:
            value = operator.index(value)
        except TypeError:
            raise TypeError(f"replaydb: {what} must be an integer, not "
                            f"{type(value).__name__} {value!r}") from None
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise InvalidArgumentError(f"replaydb: {what} {value} does not fit a signed 64-bit "
                                   "C integer")
    return value


_MAX_MS = 2**63 - 1

# Waits in the engine last at most a slice; Python then runs its signal
# handlers (Ctrl-C raises KeyboardInterrupt) and waits again until the caller's
# timeout has passed. A retry after DeadlineExceeded is the same call again:
# nothing was taken or stored by the slice that timed out.
_SLICE_S = 0.1
_SLICE_MS = 100
_DEADLINE_EXCEEDED = 5


def _sliced_ms(timeout: Optional[float]) -> int:
    """The engine's wait for one slice of a wait of ``timeout`` seconds."""
    ms = _timeout_ms(timeout)
    return _SLICE_MS if ms < 0 or ms > _SLICE_MS else ms


def _until(timeout: Optional[float]) -> Optional[float]:
    """The monotonic time a wait of ``timeout`` seconds (None: forever) ends."""
    ms = _timeout_ms(timeout)
    return None if ms < 0 else time.monotonic() + ms / 1000.0


def _again(code: int, err: c_char_p, until: Optional[float]) -> bool:
    """After a slice's DeadlineExceeded with time left: frees its message, and
    the caller tries again (Python's signal handlers run before it does)."""
    if code != _DEADLINE_EXCEEDED or (until is not None and time.monotonic() >= until):
        return False
    if err.value is not None:
        _lib.replaydb_free(ctypes.cast(err, c_void_p))
        err.value = None
    return True


# Handles belong to the process that made them. A fork (a DataLoader worker,
# multiprocessing) copies them without the engine's threads and with its locks
# in whatever state they were: the child may not use them, nor free them.
_PID = os.getpid()


def _after_fork_in_child() -> None:
    global _PID
    _PID = os.getpid()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _foreign(what: str, owner: int) -> Error:
    return FailedPreconditionError(
        f"replaydb: this {what} was opened by process {owner}; process {os.getpid()} is a fork "
        "of it, where the engine's threads do not run and its locks may be held: open the "
        "database again in this process (replaydb.open(path, read_only=True) beside the "
        "parent's read-write open), or give this process data rather than handles")


def _foreign_remote(what: str, owner: int) -> Error:
    return FailedPreconditionError(
        f"replaydb: this {what} was connected by process {owner}; process {os.getpid()} is a "
        "fork of it, and UCX's state does not survive a fork (nor can the fork connect "
        "again): pickle the database or table into a process started fresh (multiprocessing's "
        "'spawn' or 'forkserver'; torch DataLoader(multiprocessing_context='spawn')), which "
        "connects again")


def _no_pickle(what: str) -> TypeError:
    return TypeError(f"replaydb: a {what} cannot be pickled: it is a handle into this "
                     "process's engine. Pass the database path and table name instead, and "
                     "open it in the other process (read-only beside a read-write opener)")


def _timeout_ms(timeout: Optional[float]) -> int:
    """Seconds to the C API's milliseconds: None or infinity waits forever (-1),
    a negative timeout does not wait, one past int64 milliseconds is forever too."""
    if timeout is None:
        return -1
    seconds = float(timeout)
    if math.isnan(seconds):
        raise ValueError("replaydb: timeout is NaN; give seconds, or None to wait forever")
    if seconds * 1000 >= _MAX_MS:  # infinity included
        return -1
    return max(0, int(round(seconds * 1000)))


def _stream_value(stream: StreamLike) -> Optional[int]:
    if stream is None:
        return None
    for attr in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    return int(stream)


def _reason_code(reason: str) -> int:
    if reason == "terminal":
        return _TERMINAL
    if reason == "truncated":
        return _TRUNCATED
    raise ValueError(f"replaydb: reason must be 'terminal' or 'truncated', not {reason!r}")


# ---------------------------------------------------------------- columns


# SampleOptions::weight_normalization (REPLAYDB_WEIGHTS_* in replaydb/c.h).
_WEIGHT_NORMALIZATIONS = {"buffer": 0, "batch": 1}


@dataclass(frozen=True)
class Column:
    """A column of a table: a name, an element type and a per-step shape."""

    name: str
    dtype: str  # NumPy's name: "float32", "uint8", "bfloat16", ...
    shape: Tuple[int, ...]

    @property
    def code(self) -> int:
        return _convert.dtype_code(self.dtype)


def _column_spec(name: str, value: Any) -> Tuple[int, Tuple[int, ...]]:
    """(dtype code, shape) of a column given as dtype, (dtype, shape) or a Column."""
    if isinstance(value, Column):
        return value.code, value.shape
    if isinstance(value, tuple) and len(value) == 2 and not isinstance(value[1], (str, type)):
        dtype, shape = value
        if isinstance(shape, int):
            shape = (shape,)
        return _convert.dtype_code(dtype), tuple(int(d) for d in shape)
    return _convert.dtype_code(value), ()


# ---------------------------------------------------------------- rate limiter


@dataclass(frozen=True)
class RateLimiter:
    """Reverb's rate limiter (replaydb::RateLimiterSpec): inserts block while
    ``inserts * samples_per_insert - samples`` would pass ``max_diff``, samples
    block while the table holds fewer than ``min_size_to_sample`` items or the
    same difference would fall below ``min_diff``."""

    samples_per_insert: float = 1.0
    min_size_to_sample: int = 1
    min_diff: float = -sys.float_info.max
    max_diff: float = sys.float_info.max

    @staticmethod
    def min_size(n: int) -> "RateLimiter":
        """Samples wait until the table holds ``n`` items; nothing else waits."""
        return RateLimiter(1.0, n)

    @staticmethod
    def sample_to_insert_ratio(samples_per_insert: float, min_size_to_sample: int,
                               error_buffer: float) -> "RateLimiter":
        """Keeps samples per insert near ``samples_per_insert`` (within
        ``error_buffer``) once the table holds ``min_size_to_sample`` items."""
        offset = samples_per_insert * min_size_to_sample
        return RateLimiter(samples_per_insert, min_size_to_sample, offset - error_buffer,
                           offset + error_buffer)

    @staticmethod
    def queue(size: int) -> "RateLimiter":
        """At most ``size`` items waiting (use with selector="fifo", max_times_sampled=1)."""
        return RateLimiter(1.0, 1, 0.0, float(size))

    @staticmethod
    def stack(size: int) -> "RateLimiter":
        """Reverb's Stack: the queue's limits (at most ``size`` items waiting, a
        sample waits for an item), for a table drawn last-in first-out: use
        with selector="lifo", max_times_sampled=1."""
        return RateLimiter(1.0, 1, 0.0, float(size))


# ---------------------------------------------------------------- batches


class _PyArrayBase:
    """What _speedups.ArrayBase does in C, through ctypes: an array's
    description (``_shape``, ``_device``, ...), and the reference of its own
    that views made from its raw pointer keep (``_own``)."""

    __slots__ = ("_batch", "name", "_ndim", "_dtype_code", "_device", "_nbytes", "_data",
                 "_shape", "_own")

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("replaydb: arrays come from batches (batch[name]); they cannot be made")

    def _set_own(self, handle: int) -> None:
        if self._own is None:
            _fast.replaydb_batch_retain(handle)
            self._own = handle

    def __del__(self) -> None:
        own = getattr(self, "_own", None)
        if own is not None:
            self._own = None
            if self._batch._pid == _PID:  # a fork's copy is dropped
                _fast.replaydb_batch_release(own)


def _py_field(cls: type, batch: "Batch", handle: int, name: str, name_bytes: bytes,
              squeeze: bool) -> Any:
    """_speedups.field through ctypes: field ``name`` of the batch as a
    ``cls``, or (code, message address) for a failure."""
    info = _CArray()
    err = c_char_p()
    code = _fast.replaydb_batch_field(handle, name_bytes, byref(info), byref(err))
    if code:
        return code, ctypes.cast(err, c_void_p).value or 0
    if squeeze:
        _drop_sequence_axis(info.dims, info.ndim, info)
    a = object.__new__(cls)
    a._batch, a.name, a._own = batch, name, None
    a._ndim, a._dtype_code, a._device = info.ndim, info.dtype, info.device
    a._nbytes, a._data, a._shape = info.nbytes, info.data or 0, tuple(info.dims[:info.ndim])
    return a


def _fail(failure: Tuple[int, int]) -> None:
    """Raises for a (code, message address) that _speedups or _py_field returned."""
    _check(failure[0], c_char_p(failure[1] or None))


_speedups = _lib_module.speedups
_ArrayBase: Any = _speedups.ArrayBase if _speedups is not None else _PyArrayBase
_field: Any = _speedups.field if _speedups is not None else _py_field


class Array(_ArrayBase):
    """One array of a batch, in host or GPU memory that the batch owns.

    Zero-copy into any framework: ``torch.from_dlpack(a)``,
    ``jax.dlpack.from_dlpack(a)``, ``numpy.from_dlpack(a)`` (host) or
    ``numpy.asarray(a)`` (host, through the buffer protocol, or
    ``__array_interface__``); device arrays also offer
    ``__cuda_array_interface__``. What a framework made from it keeps the
    memory for as long as it lives, also after ``Batch.close()``; the Array
    object itself reads through its batch (closed: ValueError)."""

    __slots__ = ("__weakref__",)

    def _handle(self) -> int:
        if self._batch._pid != _PID:
            raise _foreign("batch", self._batch._pid)
        own = self._own
        if own is not None:
            return own
        handle = self._batch._handle
        if handle is None:
            raise ValueError(f"replaydb: array {self.name!r}: the batch was closed")
        return handle

    def _hold(self) -> None:
        """Takes a reference of its own, so that views made from the raw
        pointer outlive ``Batch.close()``."""
        handle = self._handle()  # raises in a fork's child or after close
        if self._own is None:
            self._set_own(handle)

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._shape

    @property
    def device(self) -> int:
        """-1 for host memory, else the CUDA device."""
        return self._device

    @property
    def dtype(self) -> str:
        """NumPy's name of the element type ("float32", "bool", "bfloat16", ...)."""
        return _convert.NAMES[self._dtype_code]

    @property
    def nbytes(self) -> int:
        return self._nbytes

    @property
    def data_ptr(self) -> int:
        """Address of the first element (host or device)."""
        return self._data

    def __dlpack_device__(self) -> Tuple[int, int]:
        device = self._device
        return (_dlpack.CPU, 0) if device < 0 else (_dlpack.CUDA, device)

    def __dlpack__(self, *, stream: Optional[int] = None, max_version: Any = None,
                   dl_device: Any = None, copy: Optional[bool] = None) -> object:
        """A DLPack capsule over this array (no copy). For a device array,
        ``stream`` (the consumer's, per the DLPack convention) is made to wait
        for the work that wrote it."""
        if copy:
            raise BufferError("replaydb: arrays are exported without copies (copy=True)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"replaydb: array {self.name!r} is on {self.__dlpack_device__()}, "
                              f"not {tuple(dl_device)}")
        if stream is not None and stream != -1 and self._device >= 0:
            self._batch._wait_on(0 if stream == 1 else stream)
        return self._batch._capsule(self.name, self._own)

    @property
    def __array_interface__(self) -> Dict[str, Any]:
        if self._device >= 0:
            raise TypeError(f"replaydb: array {self.name!r} is in GPU memory; use "
                            "torch.from_dlpack or __cuda_array_interface__")
        typestr = _convert.TYPESTR.get(self._dtype_code)
        if typestr is None:
            raise TypeError(f"replaydb: NumPy has no {self.dtype}; use torch.from_dlpack")
        self._hold()
        return {"shape": self._shape, "typestr": typestr, "data": (self._data, False),
                "version": 3}

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        if self._device < 0:
            raise AttributeError("replaydb: a host array has no __cuda_array_interface__")
        typestr = _convert.TYPESTR.get(self._dtype_code)
        if typestr is None:
            raise TypeError(f"replaydb: no type string for {self.dtype}; use DLPack")
        self._hold()
        stream = self._batch._stream
        return {"shape": self._shape, "typestr": typestr, "data": (self._data, False),
                "strides": None, "version": 3, "stream": stream if stream else 1}

    def numpy(self):
        """The host array as a NumPy array over the same memory."""
        return _convert.numpy().asarray(self)

    def __len__(self) -> int:
        shape = self._shape
        return shape[0] if shape else 0

    def __reduce__(self):
        raise _no_pickle("batch array (copy it out: numpy.array(array))")

    def __repr__(self) -> str:
        device = self._device
        where = "host" if device < 0 else f"cuda:{device}"
        return f"replaydb.Array({self.name!r}, {self.dtype}{list(self._shape)}, {where})"


_from_capsule: Any = None


def _torch_from_capsule() -> Any:
    """torch._C._from_dlpack (a capsule to a tensor), looked up once."""
    global _from_capsule
    if _from_capsule is None:
        import torch
        _from_capsule = getattr(torch._C, "_from_dlpack", None) or False
    return _from_capsule or None


def _count(shape: Tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _drop_sequence_axis(dims: Any, ndim: int, owner: Any) -> None:
    """Removes axis 1 (L = 1) of a [B, 1, ...] shape in place (``owner.ndim``)."""
    if ndim >= 2 and dims[1] == 1:
        for d in range(1, ndim - 1):
            dims[d] = dims[d + 1]
        owner.ndim = ndim - 1


class Batch(Mapping):
    """B items, each a window of L steps: a read-only mapping from field name
    to :class:`Array`: one per column ([B, L, shape...]), and ``"keys"``,
    ``"probabilities"``, ``"weights"`` (with ``importance_beta``), ``"mask"``
    ([B, L], 1 = real step), and on the host ``"priorities"`` and
    ``"times_sampled"``. ``batch["obs"]`` is a column, ``dict(batch)`` every
    field, ``batch.keys()`` the field names (the mapping's), and
    ``batch.item_keys`` the items' keys (``batch["keys"]``).

    The batch's memory lives while the batch or any array from it does;
    ``close()`` (or ``with``) lets go of the batch's own reference early."""

    def __init__(self, handle: int, stream: Optional[int] = None,
                 device: Optional[int] = None):
        self._handle: Optional[int] = handle
        self._stream = stream
        self._device_known = device  # where every field is (-1: host), when the caller knows
        self._pid = _PID
        # _squeeze, _sizes and _names_cache start as the class's (below): sizes
        # and names are read when first asked for, so sampling stays a single
        # foreign call.

    _squeeze = False  # sample(squeeze=True): [B, 1, ...] fields shown as [B, ...]
    _sizes: Optional[Tuple[int, int, int]] = None
    _names_cache: Optional[List[str]] = None

    def _read_sizes(self) -> Tuple[int, int, int]:
        if self._sizes is None:
            h = self._handle
            if h is None or self._pid != _PID:
                raise self._gone()
            self._sizes = (_lib.replaydb_batch_size(h), _lib.replaydb_batch_sequence_length(h),
                           _lib.replaydb_batch_device(h))
        return self._sizes

    @property
    def batch_size(self) -> int:
        """B: items in the batch."""
        return self._read_sizes()[0]

    @property
    def sequence_length(self) -> int:
        """L: steps per item."""
        return self._read_sizes()[1]

    @property
    def device(self) -> int:
        """-1 for host memory, else the CUDA device the batch is on."""
        return self._read_sizes()[2]

    @property
    def _names(self) -> List[str]:
        if self._names_cache is None:
            if self._handle is None or self._pid != _PID:
                raise self._gone()
            names = POINTER(c_char_p)()
            count = c_size_t()
            _call(_lib.replaydb_batch_field_names, self._handle, byref(names), byref(count))
            self._names_cache = take_strings(names, count.value)
        return self._names_cache

    def fields(self) -> List[str]:
        """Names of the batch's arrays: the columns, then keys, probabilities, ..."""
        return list(self._names)

    def __getitem__(self, name: str) -> Array:
        handle = self._handle
        if handle is None or self._pid != _PID:
            raise self._gone()
        if not isinstance(name, str):
            raise TypeError(f"replaydb: batch fields are named by str, not {type(name).__name__}")
        array = _field(Array, self, handle, name, _name_bytes(name), self._squeeze)
        if type(array) is tuple:
            _fail(array)  # an unknown name: the message names the fields there are
        return array

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self._names else default

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    @property
    def item_keys(self) -> Array:
        """The sampled items' keys ([B] uint64), for ``update_priorities``."""
        return self["keys"]

    @property
    def probabilities(self) -> Array:
        return self["probabilities"]

    @property
    def weights(self) -> Optional[Array]:
        return self.get("weights")

    @property
    def mask(self) -> Array:
        return self["mask"]

    @property
    def priorities(self) -> Optional[Array]:
        return self.get("priorities")

    @property
    def times_sampled(self) -> Optional[Array]:
        return self.get("times_sampled")

    def columns(self) -> Dict[str, Array]:
        """The table columns' arrays by name."""
        skip = {"keys", "probabilities", "weights", "mask", "priorities", "times_sampled"}
        return {n: self[n] for n in self._names if n not in skip}

    def numpy(self) -> Dict[str, Any]:
        """Every host array as a NumPy array (no copies)."""
        return {n: self[n].numpy() for n in self._names}

    def torch(self, name: Optional[str] = None) -> Any:
        """Field ``name`` as a PyTorch tensor over the batch's memory (no copy),
        or, without a name, every field as a dict of tensors. The fast way in:
        one foreign call per field, and on a GPU the tensor is ordered after
        the sample on PyTorch's current stream (which the sample used by
        default). ``torch.from_dlpack(batch[name])`` gives the same tensor."""
        from_capsule = _torch_from_capsule()
        if name is None:
            return {n: self.torch(n) for n in self._names}
        if from_capsule is None:  # not this PyTorch's: the public, slower way
            import torch
            return torch.from_dlpack(self[name])
        device = self._device_known
        if device is None:
            device = self._read_sizes()[2]
        if device >= 0:
            self._wait_on(_convert.torch_stream(device) or 0)
        return from_capsule(self._capsule(name, None))

    def _wait_on(self, consumer: int) -> None:
        """Makes stream ``consumer`` wait for the stream the batch was written on."""
        mine = self._stream or 0
        if consumer != mine:
            err = c_char_p()
            code = _fast.replaydb_stream_wait(consumer, mine, byref(err))
            if code:
                _check(code, err)

    def _capsule(self, name: str, handle: Optional[int]) -> object:
        """A DLPack capsule over field ``name`` (the tensor made in C holds its
        own reference to the batch; its deleter, or the capsule's destructor
        when nobody consumes it, gives that back)."""
        if self._pid != _PID:
            raise _foreign("batch", self._pid)
        if handle is None:
            handle = self._handle
            if handle is None:
                raise ValueError(f"replaydb: array {name!r}: the batch was closed")
        if _speedups is not None:
            capsule = _speedups.capsule(handle, _name_bytes(name), self._squeeze)
            if type(capsule) is tuple:
                _fail(capsule)
            return capsule
        managed = c_void_p()
        err = c_char_p()
        code = _fast.replaydb_batch_dlpack(handle, _name_bytes(name), byref(managed), byref(err))
        if code:
            _check(code, err)
        if self._squeeze:  # the tensor's shape is the C API's to give, and ours until consumed
            t = ctypes.cast(managed.value, POINTER(_dlpack.DLManagedTensor)).contents.dl_tensor
            _drop_sequence_axis(t.shape, t.ndim, t)
        return _dlpack.capsule(managed.value)

    def close(self) -> None:
        """Lets go of the batch's own reference: tensors and arrays that
        frameworks made from it keep the memory until they go."""
        handle, self._handle = self._handle, None
        if handle is not None and self._pid == _PID:  # a fork's copy is dropped
            _fast.replaydb_batch_release(handle)

    def _gone(self) -> Exception:
        if self._pid != _PID:
            return _foreign("batch", self._pid)
        return ValueError("replaydb: the batch was closed")

    def __reduce__(self):
        raise _no_pickle("batch (copy its arrays out: batch.numpy())")

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None:
            self._handle = None
            if getattr(self, "_pid", None) == _PID:
                _fast.replaydb_batch_release(handle)

    def __repr__(self) -> str:
        where = "host" if self.device < 0 else f"cuda:{self.device}"
        return f"replaydb.Batch(B={self.batch_size}, L={self.sequence_length}, {where})"


# ---------------------------------------------------------------- handles


class _Owned:
    """Owns a C handle, given back once by ``close()``, ``with`` or garbage
    collection through the C function named by ``_destroy``."""

    _destroy = ""  # name of the C function that gives the handle back
    _what = "object"

    def __init__(self, handle: int):
        self._handle: Optional[int] = handle
        self._pid = _PID

    def _h(self) -> int:
        if self._pid != _PID:
            raise _foreign(self._what, self._pid)
        if self._handle is None:
            raise ValueError(f"replaydb: the {self._what} was closed")
        return self._handle

    def close(self) -> None:
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None and getattr(self, "_pid", None) == _PID:  # a fork's copy: dropped
            getattr(_lib, self._destroy)(handle)

    def __reduce__(self):
        raise _no_pickle(self._what)

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


# ---------------------------------------------------------------- writers


class _Inputs:
    """A step's tensors for the C API, and what keeps their memory alive."""

    def __init__(self, table: "Table", step: Union[Mapping[str, Any], Sequence[Any]],
                 leading: Optional[int], stream: Optional[int], what: str):
        columns = table.columns
        names = list(columns)
        if isinstance(step, Mapping):
            unknown = [k for k in step if k not in columns]
            missing = [n for n in names if n not in step]
            if unknown or missing:
                raise ValueError(
                    f"replaydb: table {table.name!r}: {what} needs one value per column "
                    f"({', '.join(names)})" + (f"; unknown: {', '.join(map(str, unknown))}"
                                               if unknown else "")
                    + (f"; missing: {', '.join(missing)}" if missing else ""))
            values = [step[n] for n in names]
        else:
            values = list(step)
            if len(values) != len(names):
                raise ValueError(f"replaydb: table {table.name!r}: {what} got {len(values)} "
                                 f"values for {len(names)} columns ({', '.join(names)})")
        self.inputs: List[_convert.Input] = []
        try:
            for name, value in zip(names, values):
                self.inputs.append(_convert.as_input(value, columns[name].code,
                                                     f"table {table.name!r} column {name!r}",
                                                     stream))
        except BaseException:
            self.close()
            raise
        self.on_device = [i.device != -1 for i in self.inputs]
        self.tensors = (_CTensor * len(self.inputs))()
        self._dims = []
        for i, inp in enumerate(self.inputs):
            dims = (c_int64 * max(1, len(inp.shape)))(*inp.shape)
            self._dims.append(dims)
            size = _convert.SIZES.get(inp.dtype, 1)
            count = 1
            for d in inp.shape:
                count *= d
            self.tensors[i] = _CTensor(inp.dtype, len(inp.shape), dims, inp.data, count * size)

    def drop_leading(self, k: int) -> None:
        """Drops the first ``k`` rows of every tensor (steps already stored)."""
        if k <= 0:
            return
        for i, inp in enumerate(self.inputs):
            t = self.tensors[i]
            rows = inp.shape[0] if inp.shape else 1
            row_bytes = t.nbytes // rows if rows else 0
            self._dims[i][0] = rows - k
            t.data = (t.data or 0) + k * row_bytes
            t.nbytes -= k * row_bytes
            inp.shape = (rows - k,) + tuple(inp.shape[1:])

    def close(self) -> None:
        for inp in self.inputs:
            inp.close()


class _StepSlots:
    """The C tensors of one writer's appends, filled in place call after call
    when every value is a C-contiguous NumPy array or PyTorch tensor of its
    column's dtype (a writer is used by one thread at a time)."""

    def __init__(self, table: "Table"):
        self.names = list(table.columns)
        self.codes = [c.code for c in table.columns.values()]
        self.n = len(self.names)
        self.tensors = (_CTensor * self.n)()
        self.dims = [(c_int64 * MAX_DIMS)() for _ in range(self.n)]
        for i in range(self.n):
            self.tensors[i].dims = self.dims[i]

    def fill(self, step: Any) -> Optional[int]:
        """Where the step's memory is (-1: host, else a CUDA device), with the
        tensors filled; None when it is not all of one kind or not exact, for
        ``_Inputs`` to take (and explain)."""
        if type(step) is dict:
            if len(step) != self.n:
                return None
            try:
                values = [step[name] for name in self.names]
            except KeyError:
                return None
        elif type(step) in (list, tuple) and len(step) == self.n:
            values = step
        else:
            return None
        where = None
        exact = _convert.exact
        for i, value in enumerate(values):
            got = exact(value)
            if got is None:
                return None
            data, code, shape, device = got
            if code != self.codes[i]:  # converted, exactly or not at all, by _Inputs
                return None
            if where is None:
                where = device
            elif where != device or len(shape) > MAX_DIMS:
                return None
            t = self.tensors[i]
            dims = self.dims[i]
            count = 1
            for d, extent in enumerate(shape):
                dims[d] = extent
                count *= extent
            t.dtype = code
            t.ndim = len(shape)
            t.data = data
            t.nbytes = count * _convert.SIZES[code]
        return where


def _priorities(values: Any, n_what: str) -> Tuple[Any, int]:
    if values is None:
        return None, 0
    if isinstance(values, (int, float)):
        values = [values]
    np = _convert.numpy()
    arr = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    return arr, arr.size


class Writer(_Owned):
    """Appends the steps of one trajectory at a time (a replaydb TrajectoryWriter).
    One thread at a time; use one writer per actor thread. ``close()`` (or the
    end of a ``with`` block) ends an open trajectory as truncated."""

    _destroy = "replaydb_writer_destroy"
    _what = "writer"

    def __init__(self, table: "Table", handle: int, timeout: Optional[float] = None):
        super().__init__(handle)
        self._table = table
        self._slots = _StepSlots(table)
        self._timeout = timeout  # of each call; the engine waits in slices of it

    def append(self, step: Union[Mapping[str, Any], Sequence[Any]],
               priority: Optional[float] = None) -> None:
        """Appends one step: a value per column (a dict by name, or a sequence in
        schema order), each of the column's dtype and shape. ``priority`` (>= 0)
        becomes item priorities per the table's step_priority."""
        slots = self._slots
        if priority is None and slots.fill(step) == -1:
            err = c_char_p()
            code = _fast.replaydb_writer_append(self._h(), slots.tensors, slots.n, None,
                                                byref(err))
            if code:  # on any error nothing was stored: a slice's timeout is tried again
                until = _until(self._timeout)
                while _again(code, err, until):
                    code = _fast.replaydb_writer_append(self._h(), slots.tensors, slots.n, None,
                                                        byref(err))
                _check(code, err)
            return
        inputs = _Inputs(self._table, step, None, None, "append")
        try:
            if any(inputs.on_device):
                raise ValueError(f"replaydb: table {self._table.name!r}: Writer.append takes host "
                                 "arrays; use a vector writer's append for device arrays")
            p = c_double(priority) if priority is not None else None
            until = _until(self._timeout)
            while True:
                err = c_char_p()
                code = _lib.replaydb_writer_append(self._h(), inputs.tensors, len(inputs.inputs),
                                                   byref(p) if p is not None else None,
                                                   byref(err))
                if not _again(code, err, until):
                    break
            _check(code, err)
        finally:
            inputs.close()

    def append_many(self, steps: Union[Mapping[str, Any], Sequence[Any]],
                    priorities: Optional[Sequence[float]] = None) -> None:
        """Appends n steps: each value is [n, column shape...]."""
        inputs = _Inputs(self._table, steps, None, None, "append_many")
        try:
            arr, n = _priorities(priorities, "priorities")
            until = _until(self._timeout)
            while True:
                before = self.num_steps
                err = c_char_p()
                code = _lib.replaydb_writer_append_many(
                    self._h(), inputs.tensors, len(inputs.inputs),
                    arr.ctypes.data_as(POINTER(c_double)) if arr is not None else None, n,
                    byref(err))
                if not _again(code, err, until):
                    break
                # The steps before the one that waited stay: go on from there.
                done = self.num_steps - before
                inputs.drop_leading(done)
                if arr is not None:
                    arr, n = arr[done:], n - done
            _check(code, err)
        finally:
            inputs.close()

    def end(self, reason: str = "terminal") -> None:
        """Ends the trajectory ("terminal" or "truncated"); the next append starts one."""
        code_reason = _reason_code(reason)
        until = _until(self._timeout)
        while True:  # padded items may wait; End again makes the ones still missing
            err = c_char_p()
            code = _lib.replaydb_writer_end(self._h(), code_reason, byref(err))
            if not _again(code, err, until):
                break
        _check(code, err)

    @property
    def trajectory_id(self) -> int:
        """Id of the current trajectory; 0 before its first step."""
        return _lib.replaydb_writer_trajectory_id(self._h())

    @property
    def num_steps(self) -> int:
        return _lib.replaydb_writer_num_steps(self._h())



class VectorWriter(_Owned):
    """Appends one step for each of ``num_envs`` environments at once; environment
    i writes its own trajectory. Steps may come from host memory or, for tables
    whose hot tier a GPU can address, straight from device arrays (a GPU
    simulator's torch or JAX tensors): no host copy is made. ``close()`` ends
    open trajectories as truncated."""

    _destroy = "replaydb_vector_writer_destroy"
    _what = "vector writer"

    def __init__(self, table: "Table", handle: int, num_envs: int):
        super().__init__(handle)
        self._table = table
        self.num_envs = num_envs
        self._slots = _StepSlots(table)

    def append(self, steps: Union[Mapping[str, Any], Sequence[Any]],
               priorities: Optional[Sequence[float]] = None,
               stream: StreamLike = None) -> None:
        """One step per environment: each value is [num_envs, column shape...],
        all in host memory or all in GPU memory. For device arrays ``stream``
        orders the read after the work that produced them (default: PyTorch's
        current stream when PyTorch is in use, else the legacy default stream)."""
        slots = self._slots
        where = slots.fill(steps)
        if where is not None:  # the fast path: arrays of the columns' dtypes, as they are
            if priorities is None:
                p, n = None, 0
            else:
                arr, n = _priorities(priorities, "priorities")
                p = arr.ctypes.data_as(POINTER(c_double))
            err = c_char_p()
            if where == -1:
                code = _fast.replaydb_vector_writer_append(self._h(), slots.tensors, slots.n, p,
                                                           n, byref(err))
            else:
                stream_value = _stream_value(stream)
                if stream_value is None:
                    stream_value = _convert.torch_stream(where)
                code = _fast.replaydb_vector_writer_append_from_device(
                    self._h(), slots.tensors, slots.n, stream_value, p, n, byref(err))
            if code:
                _check(code, err)
            return
        device = self._table._device()
        stream_value = _stream_value(stream)
        if stream_value is None:
            stream_value = _convert.torch_stream(device) if device >= 0 else None
        inputs = _Inputs(self._table, steps, self.num_envs, stream_value, "append")
        try:
            arr, n = _priorities(priorities, "priorities")
            p = arr.ctypes.data_as(POINTER(c_double)) if arr is not None else None
            if all(inputs.on_device):
                _call(_lib.replaydb_vector_writer_append_from_device, self._h(), inputs.tensors,
                      len(inputs.inputs), c_void_p(stream_value or 0), p, n)
            elif any(inputs.on_device):
                raise ValueError(f"replaydb: table {self._table.name!r}: append got some columns "
                                 "in GPU memory and some in host memory; give all of them in one")
            else:
                _call(_lib.replaydb_vector_writer_append, self._h(), inputs.tensors,
                      len(inputs.inputs), p, n)
        finally:
            inputs.close()

    def end(self, env: int, reason: str = "terminal") -> None:
        """Ends environment ``env``'s trajectory; its next step starts a new one."""
        _call(_lib.replaydb_vector_writer_end, self._h(), env, _reason_code(reason))

    def end_many(self, envs: Any, reason: str = "terminal") -> None:
        """``end`` for many environments at once (one call into the engine): ``envs``
        is a sequence or 1-D array of environment numbers, or a boolean mask of
        ``num_envs`` values (a simulator's done flags; a PyTorch tensor may be on
        the GPU). Repeats are no-ops; a number out of range fails before anything
        ends."""
        np = _convert.numpy()
        if hasattr(envs, "detach") and hasattr(envs, "cpu"):  # a PyTorch tensor
            envs = envs.detach().cpu().numpy()
        arr = np.asarray(envs)
        if arr.dtype == np.bool_:
            if arr.shape != (self.num_envs,):
                raise ValueError(f"replaydb: table {self._table.name!r}: end_many got a mask of "
                                 f"shape {arr.shape}; the vector writer has {self.num_envs} "
                                 "environments")
            arr = np.flatnonzero(arr)
        elif arr.size == 0:
            arr = arr.astype(np.int64)
        if arr.ndim > 1 or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"replaydb: table {self._table.name!r}: end_many takes environment "
                             f"numbers or a boolean mask, not an array of {arr.dtype} and "
                             f"shape {arr.shape}")
        arr = arr.reshape(-1)
        if arr.size and arr.min() < 0:
            raise ValueError(f"replaydb: table {self._table.name!r}: end_many got environment "
                             f"{int(arr.min())}; environments are 0..{self.num_envs - 1}")
        arr = np.ascontiguousarray(arr, dtype=np.uintp)
        _call(_lib.replaydb_vector_writer_end_many, self._h(),
              arr.ctypes.data_as(POINTER(c_size_t)), arr.size, _reason_code(reason))

    def trajectory_id(self, env: int) -> int:
        return _lib.replaydb_vector_writer_trajectory_id(self._h(), env)



# ---------------------------------------------------------------- prefetching


class BatchIterator:
    """Batches sampled ahead of the consumer (Table.batches). Iterate it, or call
    ``next()``; ``close()`` (or ``with``) stops it. On a GPU the engine's device
    sampler keeps ``prefetch`` batches gathered ahead on its own stream; on the
    host a background thread keeps ``prefetch`` batches in a queue."""

    def __init__(self, table: "Table", batch_size: int, prefetch: int, device: int,
                 options: _CSampleOptions, stream: Optional[int], timeout: Optional[float]):
        self._table = table
        self._timeout = timeout
        self._stream = stream
        self._pid = _PID
        self._sampler: Optional[int] = None
        self._thread: Optional[threading.Thread] = None
        self._closed = False
        if device >= 0:
            handle = c_void_p()
            _call(_lib.replaydb_table_new_sampler, table._h(), batch_size, prefetch,
                  byref(options), byref(handle))
            self._sampler = handle.value
        else:
            self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=prefetch)
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._fill, args=(batch_size, options),
                                            name=f"replaydb-prefetch-{table.name}", daemon=True)
            self._thread.start()

    def _fill(self, batch_size: int, options: _CSampleOptions) -> None:
        # Short waits, so that close() is seen while the rate limiter blocks.
        opts = _CSampleOptions.from_buffer_copy(options)
        opts.timeout_ms = 100
        while not self._stop.is_set():
            handle = c_void_p()
            err = _err()
            code = _lib.replaydb_table_sample(self._table._h(), batch_size, byref(opts),
                                              byref(handle), byref(err))
            if code == 5:  # DeadlineExceeded: look at the stop flag, then wait again
                _lib.replaydb_free(ctypes.cast(err, c_void_p))
                continue
            try:
                _check(code, err)
                item: Any = Batch(handle.value)
            except Error as e:
                item = e
            while not self._stop.is_set():
                try:
                    self._queue.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if isinstance(item, Error):
                return

    def __iter__(self) -> "BatchIterator":
        return self

    def __next__(self) -> Batch:
        if self._closed:
            raise StopIteration
        if self._pid != _PID:
            raise _foreign("batch iterator", self._pid)
        if self._sampler is not None:
            handle = c_void_p()
            until = _until(self._timeout)
            slice_ms = _sliced_ms(self._timeout)
            while True:
                err = c_char_p()
                code = _lib.replaydb_sampler_next(self._sampler, c_void_p(self._stream or 0),
                                                  slice_ms, byref(handle), byref(err))
                if not _again(code, err, until):
                    break
            _check(code, err)
            return Batch(handle.value, self._stream)
        try:
            item = self._queue.get(timeout=self._timeout)
        except queue.Empty:
            raise TimeoutError(f"replaydb: no batch of table {self._table.name!r} within "
                               f"{self._timeout} s") from None
        if isinstance(item, Error):
            raise item
        return item

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._pid != _PID:  # a fork's copy: no thread here, the sampler is the parent's
            self._sampler = None
            return
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if isinstance(item, Batch):
                    item.close()
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            _lib.replaydb_sampler_destroy(sampler)

    def __enter__(self) -> "BatchIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()

    def __reduce__(self):
        raise _no_pickle("batch iterator")


# ---------------------------------------------------------------- tables


class Table(_Owned):
    """A named table of trajectories (replaydb::Table). Thread-safe. ``close()``
    lets go of this handle; the table stays in the database."""

    _destroy = "replaydb_table_release"

    def __init__(self, db: "DB", handle: int):
        super().__init__(handle)
        self._db = db
        self.name: str = _lib.replaydb_table_name(handle).decode()
        spec = _lib.replaydb_table_get_spec(handle)
        try:
            self.columns: Dict[str, Column] = {}
            for i in range(_lib.replaydb_table_spec_num_columns(spec)):
                name = _lib.replaydb_table_spec_column_name(spec, i).decode()
                ndim = _lib.replaydb_table_spec_column_ndim(spec, i)
                dims = _lib.replaydb_table_spec_column_dims(spec, i)
                self.columns[name] = Column(
                    name, _convert.NAMES[_lib.replaydb_table_spec_column_dtype(spec, i)],
                    tuple(dims[d] for d in range(ndim)))
            self.sequence_length: int = _lib.replaydb_table_spec_sequence_length(spec)
            self._spec = json.loads(take_string(_lib.replaydb_table_spec_json(spec)))
        finally:
            _lib.replaydb_table_spec_destroy(spec)
        self._device_cache: Optional[int] = None
        self._options_cache: Dict[Tuple[Any, ...], _CSampleOptions] = {}
        self._devices: Dict[Any, int] = {}
        self._default_options = self._options(None, None, False, None, False, True)

    @property
    def _what(self) -> str:  # for the closed-handle message
        return f"table {self.name!r}"

    def _h(self) -> int:
        if self._pid != _PID and self._db._connect_args is not None:
            raise _foreign_remote(self._what, self._pid)
        return super()._h()

    def __reduce__(self):
        if self._db._connect_args is None:
            raise _no_pickle(self._what)
        return (_remote_table, (self._db, self.name))

    def _device(self) -> int:
        if self._device_cache is None:
            info = _CInfo()
            _call(_lib.replaydb_table_info, self._h(), byref(info))
            self._device_cache = info.device
        return self._device_cache

    @property
    def spec(self) -> Dict[str, Any]:
        """The table's spec as created (columns, capacity, selector, ...)."""
        return json.loads(json.dumps(self._spec))

    def writer(self, timeout: Optional[float] = None, sync: bool = False,
               acks: Optional[str] = None) -> Writer:
        """A writer of one trajectory at a time. ``timeout`` (seconds) bounds each
        wait on the rate limiter; ``sync`` waits for the log to be durable;
        ``acks`` ("none", "leader", "leader_durable", "replicated(K)"; None: the
        table's) says what each append waits for (docs/replication.md)."""
        handle = c_void_p()
        # The engine's writer waits a slice at a time (see _again).
        _call(_lib.replaydb_table_new_writer_with_acks, self._h(), _sliced_ms(timeout),
              int(sync), None if acks is None else _bytes(str(acks)), byref(handle))
        return Writer(self, handle.value, timeout)

    def vector_writer(self, num_envs: int, timeout: Optional[float] = None,
                      sync: bool = False, threads: int = 0) -> VectorWriter:
        """A writer of one step for each of ``num_envs`` environments per call.
        ``threads``: how many threads an append splits its work over the
        environments between (0: automatic; 1: the caller's alone)."""
        if not -2**31 <= threads < 2**31:  # ctypes would wrap it into range
            raise ValueError(f"replaydb: table {self.name!r}: threads {threads} is outside "
                             "[0, 64] (0: automatic)")
        handle = c_void_p()
        _call(_lib.replaydb_table_new_vector_writer, self._h(), num_envs, _timeout_ms(timeout),
              int(sync), int(threads), byref(handle))
        return VectorWriter(self, handle.value, num_envs)

    def _options(self, seq_len: Optional[int], importance_beta: Optional[float],
                 stratified: bool, timeout: Optional[float], peek: bool,
                 gather: bool, weight_normalization: str = "buffer") -> _CSampleOptions:
        if seq_len is not None and seq_len != self.sequence_length:
            raise ValueError(f"replaydb: table {self.name!r} samples windows of "
                             f"{self.sequence_length} steps (its sequence_length), not {seq_len}; "
                             "create a table with that sequence_length")
        normalization = _WEIGHT_NORMALIZATIONS.get(weight_normalization)
        if normalization is None:
            raise ValueError(f"replaydb: table {self.name!r}: weight_normalization must be "
                             f"'buffer' or 'batch', not {weight_normalization!r}")
        key = (timeout, importance_beta, stratified, peek, gather, normalization)
        options = self._options_cache.get(key)
        if options is None:  # built once per combination: sampling is a hot path
            options = _CSampleOptions()
            _lib.replaydb_sample_options_init(byref(options))
            options.timeout_ms = _sliced_ms(timeout)
            options.importance_beta = -1.0 if importance_beta is None else float(importance_beta)
            options.stratified = int(stratified)
            options.peek = int(peek)
            options.gather = int(gather)
            options.weight_normalization = normalization
            options._address = ctypes.addressof(options)  # for _speedups (the options live on)
            if len(self._options_cache) < 64:
                self._options_cache[key] = options
        return options

    def _resolve_device(self, device: DeviceLike) -> int:
        if device is None:
            return -1
        if isinstance(device, (str, int)):
            known = self._devices.get(device)
            if known is not None:
                return known
            self._devices[device] = self._resolve_device_uncached(device)
            return self._devices[device]
        return self._resolve_device_uncached(device)

    def _resolve_device_uncached(self, device: DeviceLike) -> int:
        text = str(device)
        if text in ("cpu", "host"):
            return -1
        index: Optional[int] = None
        if isinstance(device, int):
            index = device
        elif text == "cuda":
            index = None
        elif text.startswith("cuda:"):
            index = int(text[len("cuda:"):])
        else:
            raise ValueError(f"replaydb: device must be 'cpu', 'cuda' or 'cuda:N', not {device!r}")
        mine = self._device()
        if mine < 0:
            raise ValueError(f"replaydb: table {self.name!r} has no GPU to sample on (its hot "
                             "tier is in plain host memory); sample with device='cpu'")
        if index is not None and index != mine:
            raise ValueError(f"replaydb: table {self.name!r} samples on cuda:{mine}, "
                             f"not cuda:{index}")
        return mine

    def sample(self, batch_size: int, *, seq_len: Optional[int] = None,
               device: DeviceLike = None, importance_beta: Optional[float] = None,
               stratified: bool = False, timeout: Optional[float] = None, peek: bool = False,
               gather: bool = True, stream: StreamLike = None,
               weight_normalization: str = "buffer", squeeze: bool = False) -> Batch:
        """Draws ``batch_size`` items with the table's selector.

        ``device=None`` or ``"cpu"``: a batch in host memory. ``"cuda"`` (or the
        table's ``"cuda:N"``): gathered into GPU memory by one kernel on ``stream``
        (default: PyTorch's current stream when PyTorch is in use, else the legacy
        default stream), returning without waiting for it. ``seq_len`` must be the
        table's sequence_length. ``importance_beta`` adds importance weights
        (N * P(i))^-beta, divided by the largest any live item could get
        (``weight_normalization="buffer"``, prioritized replay's definition) or by
        the batch's largest (``"batch"``); ``peek`` draws without taking (host
        only); ``timeout`` (seconds) bounds the wait for the rate limiter.
        ``squeeze`` drops the L axis of a table of transitions (sequence_length
        1): columns come as [B, shape...] and the mask as [B]."""
        if squeeze:
            if self.sequence_length != 1:
                raise ValueError(f"replaydb: table {self.name!r} samples windows of "
                                 f"{self.sequence_length} steps: squeeze=True drops the L axis "
                                 "only of tables of sequence_length 1")
            batch = self.sample(batch_size, seq_len=seq_len, device=device,
                                importance_beta=importance_beta, stratified=stratified,
                                timeout=timeout, peek=peek, gather=gather, stream=stream,
                                weight_normalization=weight_normalization)
            batch._squeeze = True
            return batch
        if (seq_len is None and importance_beta is None and timeout is None and not stratified
                and not peek and gather is True and weight_normalization == "buffer"):
            options = self._default_options  # the usual call: nothing to look up
        else:
            options = self._options(seq_len, importance_beta, stratified, timeout, peek, gather,
                                    weight_normalization)
        # (options.timeout_ms is one slice of the wait: see _again.)
        dev = -1 if device is None else self._resolve_device(device)
        if type(batch_size) is not int or not 0 <= batch_size <= _INT64_MAX:
            batch_size = _index(batch_size, f"table {self.name!r}: batch_size")
        me = self._handle
        if me is None or self._pid != _PID:
            me = self._h()  # raises, saying why
        if _speedups is not None:
            stream_value = None
            if dev < 0:
                got = _speedups.sample(me, batch_size, options._address)
                if type(got) is int:
                    return Batch(got, None, -1)
            else:
                stream_value = _stream_value(stream)
                if stream_value is None:
                    stream_value = _convert.torch_stream(dev)
                got = _speedups.sample(me, batch_size, options._address, stream_value)
                if type(got) is int:
                    return Batch(got, stream_value, dev)
            return self._sample_again(got, batch_size, options, timeout, dev, stream_value)
        handle = c_void_p()
        err = c_char_p()
        if dev < 0:
            code = _fast.replaydb_table_sample(me, batch_size, byref(options),
                                               byref(handle), byref(err))
            if code:
                until = _until(timeout)
                while _again(code, err, until):
                    code = _fast.replaydb_table_sample(self._h(), batch_size, byref(options),
                                                       byref(handle), byref(err))
                _check(code, err)
            return Batch(handle.value, None, -1)
        stream_value = _stream_value(stream)
        if stream_value is None:
            stream_value = _convert.torch_stream(dev)
        code = _fast.replaydb_table_sample_to_device(me, batch_size, byref(options),
                                                     stream_value, byref(handle), byref(err))
        if code:
            until = _until(timeout)
            while _again(code, err, until):
                code = _fast.replaydb_table_sample_to_device(self._h(), batch_size,
                                                             byref(options), stream_value,
                                                             byref(handle), byref(err))
            _check(code, err)
        return Batch(handle.value, stream_value, dev)

    def _sample_again(self, failure: Tuple[int, int], batch_size: int,
                      options: _CSampleOptions, timeout: Optional[float], dev: int,
                      stream_value: Optional[int]) -> Batch:
        """After a sample through _speedups failed: the waits of the rate
        limiter go on in slices until ``timeout`` (see _again), or it raises."""
        code, err = failure[0], c_char_p(failure[1] or None)
        until = _until(timeout)
        while _again(code, err, until):
            if dev < 0:
                got = _speedups.sample(self._h(), batch_size, options._address)
            else:
                got = _speedups.sample(self._h(), batch_size, options._address, stream_value)
            if type(got) is int:
                return Batch(got, stream_value if dev >= 0 else None, dev)
            code, err = got[0], c_char_p(got[1] or None)
        _check(code, err)
        raise AssertionError("unreachable: _check raises for a failure")

    def lookup(self, keys: Any) -> Batch:
        """Reads the items ``keys`` into a host batch without drawing."""
        np = _convert.numpy()
        k = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
        handle = c_void_p()
        _call(_lib.replaydb_table_lookup, self._h(), k.ctypes.data_as(POINTER(c_uint64)), k.size,
              byref(handle))
        return Batch(handle.value)

    def batches(self, batch_size: int, *, prefetch: int = 2, device: DeviceLike = None,
                importance_beta: Optional[float] = None, stratified: bool = False,
                timeout: Optional[float] = None, stream: StreamLike = None,
                weight_normalization: str = "buffer") -> BatchIterator:
        """An iterator of batches sampled ahead: ``prefetch`` of them wait ready
        (on the GPU with ``device="cuda"``). Options as for ``sample``."""
        options = self._options(None, importance_beta, stratified, None, False, True,
                                weight_normalization)
        dev = self._resolve_device(device)
        stream_value = _stream_value(stream)
        if stream_value is None and dev >= 0:
            stream_value = _convert.torch_stream(dev)
        return BatchIterator(self, batch_size, prefetch, dev, options, stream_value, timeout)

    def update_priorities(self, keys: Any, priorities: Any,
                          stream: StreamLike = None) -> Optional[Tuple[int, int]]:
        """Sets the items' priorities (finite, >= 0; the last of repeated keys
        wins). Host arrays or lists: returns (updated, skipped), skipped counting
        keys no longer present. GPU arrays (uint64 or int64 keys, float32
        priorities) are read on the device with no host copy, ordered on
        ``stream``; the table must keep its priorities there (priority_device)."""
        if getattr(keys, "__self__", None).__class__ is Batch and callable(keys):
            raise TypeError("replaydb: update_priorities got batch.keys, the mapping's field "
                            "names; give batch.item_keys (the items' keys)")
        fast = self._update_fast(keys, priorities, stream)
        if fast is not False:
            return fast
        dev = self._device()
        stream_value = _stream_value(stream)
        if stream_value is None and dev >= 0:
            stream_value = _convert.torch_stream(dev)
        k = _convert.as_input(keys, 101, "keys", stream_value, device_dtype_strict=False)
        p = _convert.as_input(priorities, 9, "priorities", stream_value,
                              device_dtype_strict=False)
        try:
            if k.device != -1 or p.device != -1:
                if k.device == -1 or p.device == -1:
                    raise ValueError("replaydb: update_priorities got keys and priorities in "
                                     "different memories; give both on the GPU or both on the host")
                if k.dtype not in (5, 101) or p.dtype != 8:
                    raise ValueError("replaydb: update_priorities from the GPU takes uint64 or "
                                     f"int64 keys and float32 priorities, not "
                                     f"{_convert.NAMES[k.dtype]} and {_convert.NAMES[p.dtype]}")
                n = 1
                for d in k.shape:
                    n *= d
                m = 1
                for d in p.shape:
                    m *= d
                if n != m:
                    raise ValueError(f"replaydb: update_priorities got {n} keys and "
                                     f"{m} priorities")
                _call(_lib.replaydb_table_update_priorities_from_device, self._h(),
                      c_void_p(k.data), c_void_p(p.data), n, c_void_p(stream_value or 0))
                return None
        except BaseException:
            k.close()
            p.close()
            raise
        k.close()
        p.close()
        np = _convert.numpy()
        kk = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
        pp = np.ascontiguousarray(priorities, dtype=np.float64).reshape(-1)
        if kk.size != pp.size:
            raise ValueError(f"replaydb: update_priorities got {kk.size} keys and "
                             f"{pp.size} priorities")
        updated = c_int64()
        skipped = c_int64()
        _call(_lib.replaydb_table_update_priorities, self._h(),
              kk.ctypes.data_as(POINTER(c_uint64)), pp.ctypes.data_as(POINTER(c_double)),
              kk.size, byref(updated), byref(skipped))
        return updated.value, skipped.value

    def _update_fast(self, keys: Any, priorities: Any, stream: StreamLike) -> Any:
        """update_priorities without conversions, for uint64 (or on a GPU int64)
        keys and float64 (host) or float32 (GPU) priorities, each C-contiguous
        and of one memory; False for anything else."""
        k = _convert.exact(keys)
        if k is None:
            return False
        p = _convert.exact(priorities)
        if p is None or k[3] != p[3]:
            return False
        n = 1
        for d in k[2]:
            n *= d
        m = 1
        for d in p[2]:
            m *= d
        if n != m:
            return False
        err = c_char_p()
        if k[3] == -1:
            if k[1] != 101 or p[1] != 9:
                return False
            updated = c_int64()
            skipped = c_int64()
            code = _fast.replaydb_table_update_priorities(self._h(), k[0], p[0], n,
                                                          byref(updated), byref(skipped),
                                                          byref(err))
            if code:
                _check(code, err)
            return updated.value, skipped.value
        if k[1] not in (5, 101) or p[1] != 8:
            return False
        stream_value = _stream_value(stream)
        if stream_value is None:
            stream_value = _convert.torch_stream(k[3])
        code = _fast.replaydb_table_update_priorities_from_device(self._h(), k[0], p[0], n,
                                                                  stream_value, byref(err))
        if code:
            _check(code, err)
        return None

    def __len__(self) -> int:
        """The number of live items (what a sample draws from)."""
        info = _CInfo()
        _call(_lib.replaydb_table_info, self._h(), byref(info))
        return info.num_items

    def info(self) -> Dict[str, Any]:
        """Sizes, memory and counters (replaydb::TableInfo) as a dict."""
        info = _CInfo()
        _call(_lib.replaydb_table_info, self._h(), byref(info))
        out: Dict[str, Any] = {}
        for name, _ in _CInfo._fields_:
            value = getattr(info, name)
            out[name] = value.decode() if isinstance(value, bytes) else value
        return out

    def mass(self) -> Tuple[float, int]:
        """``(total, items)``: the table's sampling mass now (the sum of
        priority**priority_exponent over its live items, or the item count for
        a uniform table) and its live items, for sampling several tables as
        one (``replaydb.distributed``; a connected database's sharded tables,
        docs/sharding.md). NotSupportedError for FIFO, LIFO and heap tables; a
        vector table's counts an item per environment."""
        total = c_double()
        items = c_int64()
        _call(_lib.replaydb_table_mass, self._h(), byref(total), byref(items))
        return total.value, items.value

    def delete(self, keys: Any) -> int:
        """Deletes the items ``keys`` (item keys, e.g. ``batch.item_keys``),
        durably: they are never drawn again, the rate limiter counts them as
        deletes, and a trajectory with nothing left goes once it has ended.
        Keys of items that are gone already are skipped (as Reverb does);
        returns how many were deleted."""
        np = _convert.numpy()
        k = _convert.as_input(keys, 101, "keys")
        try:
            if k.device != -1:
                raise ValueError("replaydb: delete takes item keys in host memory")
            arr = np.frombuffer(ctypes.string_at(k.data, 8 * _count(k.shape)), np.uint64) \
                if _count(k.shape) else np.zeros(0, np.uint64)
        finally:
            k.close()
        deleted = c_int64()
        _call(_lib.replaydb_table_delete_items, self._h(),
              arr.ctypes.data_as(POINTER(c_uint64)), arr.size, byref(deleted))
        return deleted.value

    def seed(self, seed: int) -> None:
        """Seeds the table's draws: the same contents, seed and calls give the
        same batches (a prefetching iterator draws in its own order).
        NotSupportedError for a table whose priorities live on a GPU
        (priority_device): its priority table has a generator of its own."""
        _call(_lib.replaydb_table_seed, self._h(), seed)

    def clear(self) -> None:
        """Empties the table, durably and at once (one logged change: a crash
        leaves it as it was or empty): every trajectory, hot and cold, goes
        with its items, and the rate limiter starts afresh (as Reverb's reset
        does). The table keeps its name and spec, and this and every other
        handle, writer and iterator of it go on working; a writer whose
        trajectory was open gets ``FailedPreconditionError`` from its next
        call, and the call after that starts a new trajectory."""
        _call(_lib.replaydb_table_clear, self._h())

    def set_rate_limiter(self, limiter: RateLimiter) -> None:
        """Replaces the rate limiter's parameters, keeping its counters."""
        _call(_lib.replaydb_table_set_rate_limiter, self._h(), limiter.samples_per_insert,
              limiter.min_size_to_sample, limiter.min_diff, limiter.max_diff)

    def load(self, trajectory_ids: Sequence[int]) -> None:
        """Brings cold trajectories back into the hot tier."""
        ids = (c_uint64 * max(1, len(trajectory_ids)))(*trajectory_ids)
        _call(_lib.replaydb_table_load, self._h(), ids, len(trajectory_ids))

    def __repr__(self) -> str:
        cols = ", ".join(f"{c.name}: {c.dtype}{list(c.shape)}" for c in self.columns.values())
        return f"replaydb.Table({self.name!r}, {{{cols}}}, sequence_length={self.sequence_length})"


# ---------------------------------------------------------------- databases

_SPEC_SETTERS = {
    "padding": "replaydb_table_spec_set_padding",
    "selector": "replaydb_table_spec_set_selector",
    "eviction": "replaydb_table_spec_set_eviction",
    "step_priority": "replaydb_table_spec_set_step_priority",
    "placement": "replaydb_table_spec_set_placement",
    "logging": "replaydb_table_spec_set_logging",
    "acks": "replaydb_table_spec_set_acks",
}


class DB(_Owned):
    """A replaydb database: a directory of tables. Thread-safe. ``close()`` (or
    the end of a ``with`` block) takes the closing checkpoint and releases the
    lock; tables and writers of it fail from then on, batches stay readable."""

    _destroy = "replaydb_close"
    _what = "database"

    def __init__(self, handle: int, connect_args: Optional[Tuple[Any, ...]] = None):
        super().__init__(handle)
        self.path: str = _lib.replaydb_db_path(handle).decode()
        self.read_only: bool = bool(_lib.replaydb_db_read_only(handle))
        # A served database (replaydb.connect): what to connect with again,
        # in a fork or a process that unpickles it.
        self._connect_args = connect_args

    def _h(self) -> int:
        if self._pid != _PID and self._connect_args is not None:
            raise _foreign_remote(self._what, self._pid)
        return super()._h()

    def __reduce__(self):
        if self._connect_args is None:
            raise _no_pickle(self._what)
        return (_reconnect, self._connect_args)

    def tables(self) -> List[str]:
        """Names of all tables, sorted."""
        names = POINTER(c_char_p)()
        count = c_size_t()
        _call(_lib.replaydb_list_tables, self._h(), byref(names), byref(count))
        return take_strings(names, count.value)

    def table(self, name: str) -> Table:
        handle = c_void_p()
        _call(_lib.replaydb_get_table, self._h(), _bytes(name), byref(handle))
        return Table(self, handle.value)

    __getitem__ = table

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.tables()

    def __iter__(self) -> Iterator[str]:
        """The table names, sorted (``for name in db``, ``list(db)``)."""
        return iter(self.tables())

    def __len__(self) -> int:
        """The number of tables."""
        return len(self.tables())

    def create_table(self, name: str, columns: Mapping[str, Any], *,
                     capacity_steps: Optional[int] = None,
                     capacity_bytes: Optional[int] = None,
                     block_steps: Optional[int] = None,
                     sequence_length: int = 1,
                     padding: str = "none",
                     selector: str = "uniform",
                     priority_exponent: float = 1.0,
                     step_priority: str = "item",
                     eviction: str = "oldest_first",
                     priority_device: Optional[int] = None,
                     placement: str = "host",
                     logging: str = "default",
                     acks: str = "leader",
                     max_lag_ms: int = 10000,
                     max_times_sampled: int = 0,
                     rate_limiter: Optional[RateLimiter] = None,
                     spill: bool = False,
                     rotation_fraction: float = 0.0,
                     rotation_every_samples: int = 0,
                     lanes: int = 1,
                     exist_ok: bool = False) -> Table:
        """Creates a table. ``columns`` maps each column name to its dtype (a
        scalar per step) or to ``(dtype, shape)``; dtypes are NumPy dtypes or
        names ("float32", "f32", "uint8", ...), or PyTorch dtypes. The other
        options are replaydb::TableSpec's, with its defaults (capacity: 1 GiB).
        ``lanes`` > 1 makes a vector table: each step holds a row per
        environment, written by ``vector_writer(lanes)``, and each row is an
        item (docs/vector_tables.md). ``acks`` and ``max_lag_ms``: what writers'
        appends wait for, and how far behind replicas may fall (docs/replication.md).
        ``exist_ok``: a table of that name and the
        same spec is returned as it is (a different spec raises
        InvalidArgumentError naming what differs)."""
        spec = _lib.replaydb_table_spec_create(_bytes(name))
        try:
            for col_name, col in columns.items():
                code, shape = _column_spec(col_name, col)
                dims = _int64_array(shape, f"column {col_name!r} shape")
                _call(_lib.replaydb_table_spec_add_column, spec, _bytes(col_name), code,
                      len(shape), dims)
            if capacity_steps is not None:
                _lib.replaydb_table_spec_set_capacity_steps(spec, capacity_steps)
            if capacity_bytes is not None:
                _lib.replaydb_table_spec_set_capacity_bytes(spec, capacity_bytes)
            if block_steps is not None:
                _lib.replaydb_table_spec_set_block_steps(spec, block_steps)
            _lib.replaydb_table_spec_set_sequence_length(spec, sequence_length)
            for key, value in (("padding", padding), ("selector", selector),
                               ("eviction", eviction), ("step_priority", step_priority),
                               ("placement", placement), ("logging", logging),
                               ("acks", acks)):
                _call(getattr(_lib, _SPEC_SETTERS[key]), spec, _bytes(str(value)))
            _lib.replaydb_table_spec_set_max_lag_ms(spec, max_lag_ms)
            _lib.replaydb_table_spec_set_priority_exponent(spec, priority_exponent)
            if priority_device is not None:
                _lib.replaydb_table_spec_set_priority_device(spec, priority_device)
            _lib.replaydb_table_spec_set_max_times_sampled(spec, max_times_sampled)
            if rate_limiter is not None:
                _lib.replaydb_table_spec_set_rate_limiter(
                    spec, rate_limiter.samples_per_insert, rate_limiter.min_size_to_sample,
                    rate_limiter.min_diff, rate_limiter.max_diff)
            _lib.replaydb_table_spec_set_spill(spec, int(spill))
            _lib.replaydb_table_spec_set_rotation(spec, rotation_fraction, rotation_every_samples)
            _lib.replaydb_table_spec_set_lanes(spec, lanes)
            if exist_ok and name in self:
                existing = self.table(name)
                wanted = json.loads(take_string(_lib.replaydb_table_spec_json(spec)))
                have = existing.spec
                differ = [k for k in sorted(set(wanted) | set(have)) if wanted.get(k) != have.get(k)]
                if differ:
                    existing.close()
                    raise InvalidArgumentError(
                        f"replaydb: table {name!r} exists with another spec: "
                        + "; ".join(f"{k} is {have.get(k)!r}, not {wanted.get(k)!r}"
                                    for k in differ))
                return existing
            handle = c_void_p()
            _call(_lib.replaydb_create_table, self._h(), spec, byref(handle))
            return Table(self, handle.value)
        finally:
            _lib.replaydb_table_spec_destroy(spec)

    def export_table(self, name: str, directory: str) -> None:
        """Copies table ``name``, as of now, into a new database created in
        ``directory`` (its spec, every trajectory hot and cold, priorities and
        sample counts; open trajectories arrive ended). A read-write database
        takes a checkpoint first. On error nothing is left behind."""
        _call(_lib.replaydb_export_table, self._h(), _bytes(name), _bytes(str(directory)))

    def import_table(self, source_directory: str, source_table: str,
                     name: Optional[str] = None) -> Table:
        """Imports table ``source_table`` of the database in
        ``source_directory`` (opened read-only: a writer may be using it, and
        its last checkpoint is what comes) as a new table ``name`` (default:
        the source's name) with the source's spec; returns it."""
        handle = c_void_p()
        _call(_lib.replaydb_import_table, self._h(), _bytes(str(source_directory)),
              _bytes(source_table), _bytes(name) if name else None, byref(handle))
        return Table(self, handle.value)

    def import_d4rl(self, path: str, name: str, *, tool: Optional[str] = None) -> Table:
        """Imports an HDF5 file in D4RL's layout (observations, actions,
        rewards, terminals, timeouts, and any other dataset as a column;
        trajectories cut after each terminal or timeout; docs/cold_tier.md) as
        a new table ``name``. The D4RL reader is an optional part of the
        engine, in the ``replaydb`` tool where it was built with libhdf5: the
        tool imports the file into a scratch database beside this one, with
        its progress on the terminal, and ``import_table`` copies the table
        here. ``tool``: the tool's path (default: REPLAYDB_TOOL, the build tree
        this package sits in, then ``replaydb`` on PATH)."""
        import shutil
        import subprocess
        import tempfile

        exe = tool or os.environ.get("REPLAYDB_TOOL")
        if not exe:
            built = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
                os.path.abspath(__file__)))), "build", "bin", "replaydb")
            exe = built if os.path.isfile(built) else shutil.which("replaydb")
        if not exe:
            raise NotSupportedError("replaydb: import_d4rl runs the replaydb tool, which was not "
                                    "found: give tool=, set REPLAYDB_TOOL, or put it on PATH "
                                    "(cmake --install installs it)")
        source = os.path.abspath(str(path))
        if not os.path.isfile(source):
            raise NotFoundError(f"replaydb: import_d4rl: no file {source}")
        if any(c.isspace() for c in name) or not name:
            raise InvalidArgumentError(f"replaydb: import_d4rl: table name {name!r} must be "
                                       "non-empty, without spaces")
        scratch = tempfile.mkdtemp(prefix=".import-d4rl-",
                                   dir=os.path.dirname(os.path.abspath(self.path)))
        try:
            link = os.path.join(scratch, "file.hdf5")  # a path the tool's parser takes as is
            os.symlink(source, link)
            staging = os.path.join(scratch, "db")
            open(staging, create=True).close()
            done = subprocess.run([exe, staging, "-c", f"import-d4rl {link} {name}"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if done.returncode != 0:
                why = (done.stderr or done.stdout).strip().replace(link, source)
                kind = NotSupportedError if "libhdf5" in why else InvalidArgumentError
                raise kind(f"replaydb: import_d4rl {source}: {why}")
            return self.import_table(staging, name, name)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def drop_table(self, name: str) -> None:
        _call(_lib.replaydb_drop_table, self._h(), _bytes(name))

    def checkpoint(self) -> None:
        """Writes what changed since the last checkpoint into the cold store."""
        _call(_lib.replaydb_checkpoint, self._h())

    def __repr__(self) -> str:
        return f"replaydb.DB({self.path!r}{', read-only' if self.read_only else ''})"


def open(path: str, *, create: bool = True, error_if_exists: bool = False,
         read_only: bool = False, wal: bool = True, wal_sync: str = "batch",
         checkpoint_every: Optional[float] = 300.0,
         checkpoint_wal_bytes: Optional[int] = 256 << 20,
         checkpoint_on_close: bool = True) -> DB:
    """Opens (and by default creates) the database in directory ``path``.

    ``read_only`` opens beside a writer that may be running, seeing its last
    checkpoint. ``wal`` and ``wal_sync`` ("none", "batch", "always") set the
    write-ahead log; ``checkpoint_every`` (seconds) and ``checkpoint_wal_bytes``
    (None: off) the automatic checkpoints."""
    handle = c_void_p()
    if read_only:
        _call(_lib.replaydb_open_read_only, _bytes(str(path)), byref(handle))
        return DB(handle.value)
    options = _lib.replaydb_options_create()
    try:
        _lib.replaydb_options_set_create_if_missing(options, int(create))
        _lib.replaydb_options_set_error_if_exists(options, int(error_if_exists))
        _lib.replaydb_options_set_wal_enabled(options, int(wal))
        _call(_lib.replaydb_options_set_wal_sync, options, _bytes(wal_sync))
        _lib.replaydb_options_set_checkpoint(
            options, int(checkpoint_every or 0), int(checkpoint_wal_bytes or 0),
            int(checkpoint_on_close))
        _call(_lib.replaydb_open, options, _bytes(str(path)), byref(handle))
    finally:
        _lib.replaydb_options_destroy(options)
    return DB(handle.value)


def connect(address: str, *, client_name: Optional[str] = None,
            token_file: Optional[str] = None, connect_timeout: float = 10.0,
            call_timeout: float = 60.0, heartbeat: float = 0.1, read_in_place: bool = True,
            read_in_place_min_bytes: int = 64 << 10, skip_unavailable_shards: bool = False) -> DB:
    """The database that ``replaydb serve`` hosts at ``address``
    ("ucx://HOST:PORT"; or the primary a cluster's coordinator names,
    "etcd://HOST:PORT/CLUSTER" or "file://PATH", whose connection and
    trajectory writers follow the primary through a failover:
    docs/replication.md; or several of these joined by "+", the shards of
    one database whose tables span them and sample with exact global
    probabilities, "-" keeping the place of a shard that left:
    docs/sharding.md), with the same DB and
    Table calls, each run on the
    server (those it does not serve yet raise NotSupportedError). Many
    processes may connect to one server at once: actors writing, learners
    sampling. ``client_name`` names this process in the server's log.
    ``token_file`` holds the token of a server started with ``--token-file``
    (its first line's). UnavailableError when nothing answers within
    ``connect_timeout`` seconds; FailedPreconditionError when the server refuses
    the client (no token, a wrong one).

    ``call_timeout``: how long a call waits for its reply beyond its own wait
    (seconds). ``heartbeat``: the connection's heartbeat interval in seconds,
    which must be the server's (0.1 unless it was started otherwise).
    ``read_in_place``: where the server shares its hot tier and reads are
    one-sided (shared memory between processes of one host, RDMA), samples of
    at least ``read_in_place_min_bytes`` are read straight from the server's
    memory; False: always in the reply. ``skip_unavailable_shards`` (sharded
    addresses only): a sample leaves out shards that are down and draws from
    the others, its probabilities and importance weights those of the shards
    that answered; False: it raises UnavailableError naming the shard.
    InvalidArgumentError names an option out of range."""
    args = (address, client_name, None if token_file is None else str(token_file),
            connect_timeout, call_timeout, heartbeat, read_in_place, read_in_place_min_bytes,
            bool(skip_unavailable_shards))
    return DB(_connect_handle(*args), args)


def _reconnect(*args) -> DB:
    return DB(_connect_handle(*args), args)


def _remote_table(db: "DB", name: str) -> "Table":
    return db.table(name)


def _connect_handle(address: str, client_name: Optional[str], token_file: Optional[str],
                    connect_timeout: float, call_timeout: float, heartbeat: float,
                    read_in_place: bool, read_in_place_min_bytes: int,
                    skip_unavailable_shards: bool = False) -> int:
    def ms(seconds: float) -> int:
        return int(round(float(seconds) * 1000))
    if int(read_in_place_min_bytes) < 0:
        raise InvalidArgumentError(
            f"read_in_place_min_bytes is {read_in_place_min_bytes}; it must be 0 or more")
    options = _lib.replaydb_connect_options_create()
    if not options:
        raise MemoryError("replaydb_connect_options_create")
    try:
        if client_name is not None:
            _lib.replaydb_connect_options_set_client_name(options, _bytes(client_name))
        if token_file is not None:
            _lib.replaydb_connect_options_set_token_file(options, _bytes(token_file))
        _lib.replaydb_connect_options_set_connect_timeout_ms(options, ms(connect_timeout))
        _lib.replaydb_connect_options_set_call_timeout_ms(options, ms(call_timeout))
        _lib.replaydb_connect_options_set_heartbeat_ms(options, ms(heartbeat))
        _lib.replaydb_connect_options_set_read_in_place(options, int(bool(read_in_place)),
                                                        int(read_in_place_min_bytes))
        _lib.replaydb_connect_options_set_skip_unavailable_shards(
            options, int(bool(skip_unavailable_shards)))
        handle = c_void_p()
        _call(_lib.replaydb_connect_with_options, _bytes(address), options, byref(handle))
        return handle.value
    finally:
        _lib.replaydb_connect_options_destroy(options)


def version() -> str:
    """The engine's version ("0.1.0")."""
    return _lib.replaydb_version().decode()


def cuda_device_count() -> int:
    """GPUs the engine can use (0 without a GPU or a CUDA build)."""
    return _lib.replaydb_cuda_device_count()


def live_batches() -> int:
    """Batches alive in the engine (for tests that check nothing leaks)."""
    return _lib.replaydb_live_batches()
