"""DLPack in and out, in pure Python over ctypes.

Out: :func:`export` wraps memory that a C batch owns in a ``"dltensor"`` capsule
(the legacy, unversioned DLPack protocol, which every consumer accepts) whose
deleter gives the consumer's reference back to the batch. A consumer renames
the capsule to ``"used_dltensor"`` and calls the deleter when it is done; a
capsule nobody consumed calls it when it is destroyed. Either way exactly once.

In: :func:`consume` takes the capsule an object's ``__dlpack__`` returns,
marks it used, and returns the tensor's description and a function that calls
its deleter.

The structs follow the DLPack specification (dlpack.h, v0.8 layout).
"""

from __future__ import annotations

import ctypes
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int32, c_int64, c_uint8,
                    c_uint16, c_uint64, c_void_p)
from typing import Callable, Dict, Optional, Tuple

# DLDeviceType
CPU = 1
CUDA = 2
CUDA_HOST = 3

# DLDataTypeCode
INT = 0
UINT = 1
FLOAT = 2
BFLOAT = 4
BOOL = 6


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    pass


_Deleter = CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", c_void_p),
    ("deleter", _Deleter),
]

# The C API's dtype codes (include/replaydb/c.h) -> (code, bits).
_DL_TYPES: Dict[int, Tuple[int, int]] = {
    0: (BOOL, 8),
    1: (UINT, 8),
    2: (INT, 8),
    3: (INT, 16),
    4: (INT, 32),
    5: (INT, 64),
    6: (FLOAT, 16),
    7: (BFLOAT, 16),
    8: (FLOAT, 32),
    9: (FLOAT, 64),
    100: (UINT, 32),
    101: (UINT, 64),
}
_FROM_DL = {v: k for k, v in _DL_TYPES.items()}

_NAME = b"dltensor"
_USED = b"used_dltensor"

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [c_void_p, c_char_p, c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, c_char_p]
_api.PyCapsule_GetPointer.restype = c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, c_char_p]
# The capsule destructor gets the capsule while it is being destroyed: it is
# passed as a raw pointer, never as a Python object (which would revive it).
_IsValidRaw = ctypes.PYFUNCTYPE(ctypes.c_int, c_void_p, c_char_p)(("PyCapsule_IsValid", _api))
_GetPointerRaw = ctypes.PYFUNCTYPE(c_void_p, c_void_p, c_char_p)(("PyCapsule_GetPointer", _api))

# Exported tensors not yet deleted: address of the DLManagedTensor -> what
# must live until its deleter runs (the struct, its shape, the release).
_live: Dict[int, Tuple[object, object, Callable[[], None]]] = {}
_live_lock = threading.Lock()


@_Deleter
def _delete(managed) -> None:
    address = ctypes.addressof(managed.contents)
    with _live_lock:
        entry = _live.pop(address, None)
    if entry is not None:
        entry[2]()


@ctypes.CFUNCTYPE(None, c_void_p)
def _capsule_destructor(capsule: int) -> None:
    # Consumed capsules were renamed: their consumer calls the deleter.
    if _IsValidRaw(capsule, _NAME):
        pointer = _GetPointerRaw(capsule, _NAME)
        if pointer:
            _delete(ctypes.cast(pointer, POINTER(DLManagedTensor)))


def live_exports() -> int:
    """Capsules handed out whose deleter has not run yet (for tests)."""
    with _live_lock:
        return len(_live)


def export(data: int, dtype: int, shape: Tuple[int, ...], device: int,
           release: Callable[[], None]) -> object:
    """A ``"dltensor"`` capsule over ``data`` (C order, ``shape``, the C API's
    ``dtype``); ``device`` is -1 for host memory or a CUDA device. ``release`` runs
    once, when the consumer (or the unconsumed capsule) is done."""
    code, bits = _DL_TYPES[dtype]
    managed = DLManagedTensor()
    dims = (c_int64 * max(1, len(shape)))(*shape)
    t = managed.dl_tensor
    t.data = data
    t.device = DLDevice(CPU, 0) if device < 0 else DLDevice(CUDA, device)
    t.ndim = len(shape)
    t.dtype = DLDataType(code, bits, 1)
    t.shape = dims
    t.strides = None  # compact, C order
    t.byte_offset = 0
    managed.manager_ctx = None
    managed.deleter = _delete
    with _live_lock:
        _live[ctypes.addressof(managed)] = (managed, dims, release)
    return _api.PyCapsule_New(ctypes.addressof(managed), _NAME,
                              ctypes.cast(_capsule_destructor, c_void_p))


class Imported:
    """A tensor taken from a producer's ``__dlpack__`` capsule."""

    def __init__(self, capsule: object):
        if not _api.PyCapsule_IsValid(capsule, _NAME):
            raise ValueError("replaydb: __dlpack__ returned no usable 'dltensor' capsule "
                             "(already consumed, or a versioned capsule)")
        pointer = _api.PyCapsule_GetPointer(capsule, _NAME)
        _api.PyCapsule_SetName(capsule, _USED)
        self._managed = ctypes.cast(pointer, POINTER(DLManagedTensor))
        t = self._managed.contents.dl_tensor
        self.shape = tuple(t.shape[i] for i in range(t.ndim))
        self.strides = (None if not t.strides else
                        tuple(t.strides[i] for i in range(t.ndim)))
        key = (t.dtype.code, t.dtype.bits)
        if t.dtype.lanes != 1 or key not in _FROM_DL:
            self.close()
            raise ValueError(f"replaydb: unsupported DLPack dtype (code {key[0]}, "
                             f"{key[1]} bits, {t.dtype.lanes} lanes)")
        self.dtype = _FROM_DL[key]
        self.data = (t.data or 0) + t.byte_offset
        if t.device.device_type in (CPU, CUDA_HOST):
            self.device = -1
        elif t.device.device_type == CUDA:
            self.device = t.device.device_id
        else:
            device = t.device.device_type
            self.close()
            raise ValueError(f"replaydb: unsupported DLPack device type {device}")

    def close(self) -> None:
        """Gives the tensor back to its producer (calls its deleter once)."""
        managed, self._managed = self._managed, None
        if managed and managed.contents.deleter:
            managed.contents.deleter(managed)

    def __del__(self) -> None:
        if getattr(self, "_managed", None):
            self.close()


def consume(obj: object, stream: Optional[int]) -> Imported:
    """Calls ``obj.__dlpack__`` (with ``stream`` for device producers) and takes
    the capsule it returns."""
    try:
        capsule = obj.__dlpack__(stream=stream) if stream is not None else obj.__dlpack__()
    except TypeError:
        capsule = obj.__dlpack__()
    return Imported(capsule)
