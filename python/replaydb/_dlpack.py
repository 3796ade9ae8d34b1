"""DLPack in and out.

Out: :func:`capsule` wraps a DLManagedTensor that the C API made over a batch's
memory (replaydb_batch_dlpack) in a ``"dltensor"`` capsule (the unversioned
protocol, which every consumer accepts) whose destructor is the C API's
(replaydb_dlpack_capsule_destructor): a consumer renames the capsule
``"used_dltensor"`` and calls the tensor's deleter when done; a capsule nobody
consumed calls it when destroyed. Either way exactly once, with no Python on
the path.

In: :func:`consume` takes the capsule an object's ``__dlpack__`` returns, marks
it used, and gives back the tensor's description and, on close, its deleter.

The structs follow the DLPack specification (dlpack.h).
"""

from __future__ import annotations

import ctypes
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int32, c_int64, c_uint8,
                    c_uint16, c_uint64, c_void_p)
from typing import Dict, Optional

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
_DL_TYPES: Dict[int, tuple] = {
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

_destructor: Optional[c_void_p] = None


def capsule(managed_tensor: int) -> object:
    """A ``"dltensor"`` capsule over a DLManagedTensor from the C API."""
    global _destructor
    if _destructor is None:
        from replaydb._lib import lib

        _destructor = ctypes.cast(lib.replaydb_dlpack_capsule_destructor, c_void_p)
    return _api.PyCapsule_New(managed_tensor, _NAME, _destructor)


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
