"""Element types, and the memory behind the arrays a caller passes in.

An input is taken without a copy when its memory is already C-contiguous and
of the right type: host arrays through ``__array_interface__`` (NumPy) or
``__dlpack__`` (PyTorch, JAX, ...), device arrays through
``__cuda_array_interface__`` or ``__dlpack__``. Python scalars and lists are
converted with NumPy to the column's type.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from replaydb import _dlpack

# The C API's dtype codes (include/replaydb/c.h) and their NumPy names.
NAMES: Dict[int, str] = {
    0: "bool", 1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64",
    6: "float16", 7: "bfloat16", 8: "float32", 9: "float64", 100: "uint32", 101: "uint64",
}
SIZES: Dict[int, int] = {0: 1, 1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 2, 7: 2, 8: 4, 9: 8, 100: 4, 101: 8}
# The engine's short names ("f32"), as its messages and specs write them.
SHORT: Dict[int, str] = {
    0: "bool", 1: "u8", 2: "i8", 3: "i16", 4: "i32", 5: "i64", 6: "f16", 7: "bf16", 8: "f32",
    9: "f64", 100: "u32", 101: "u64",
}
_BY_NAME: Dict[str, int] = {}
for _code, _name in NAMES.items():
    _BY_NAME[_name] = _code
    _BY_NAME[SHORT[_code]] = _code
_BY_NAME.update({"half": 6, "float": 9, "double": 9, "long": 5, "int": 5, "bool_": 0})

# __array_interface__ type strings (little-endian).
TYPESTR: Dict[int, str] = {
    0: "|b1", 1: "|u1", 2: "|i1", 3: "<i2", 4: "<i4", 5: "<i8", 6: "<f2", 8: "<f4", 9: "<f8",
    100: "<u4", 101: "<u8",
}
_FROM_TYPESTR: Dict[str, int] = {v: k for k, v in TYPESTR.items()}
_FROM_TYPESTR.update({"=f4": 8, "=f8": 9, "=i4": 4, "=i8": 5, "=i2": 3, "=f2": 6, "=u8": 101,
                      "=u4": 100, "|u1": 1, "|i1": 2, "|b1": 0})


def dtype_code(dtype: Any) -> int:
    """The C API's code for a dtype given as a code, a name ("f32", "float32"),
    a NumPy dtype or type, a PyTorch dtype, or the Python types bool, int, float."""
    if isinstance(dtype, int) and not isinstance(dtype, bool) and dtype in NAMES:
        return dtype
    if dtype is bool:
        return 0
    if dtype is int:
        return 5
    if dtype is float:
        return 9
    name = getattr(dtype, "name", None)  # numpy dtypes
    if not isinstance(name, str):
        name = getattr(dtype, "__name__", None)  # numpy scalar types
    if not isinstance(name, str):
        name = str(dtype)
    name = name.lower()
    if name.startswith("torch."):
        name = name[len("torch."):]
    if name in _BY_NAME:
        return _BY_NAME[name]
    raise ValueError(f"replaydb: unknown dtype {dtype!r}; use one of "
                     + ", ".join(NAMES[c] for c in range(10)))


def numpy():
    import numpy as np  # imported when first needed: the package works without it
    return np


@dataclass
class Input:
    """C-contiguous memory of one input array."""

    data: int
    dtype: int
    shape: Tuple[int, ...]
    device: int  # -1 host; a CUDA device; -2 a device the producer did not name
    keep: List[Any] = field(default_factory=list)  # what must live while it is used

    def close(self) -> None:
        for k in self.keep:
            if isinstance(k, _dlpack.Imported):
                k.close()
        self.keep.clear()


# The fast path of an input (see ``exact``): the dtype objects of NumPy and
# PyTorch mapped to the C API's codes, filled when first needed.
_NUMPY_CODES: Dict[Any, int] = {}
_TORCH_CODES: Dict[Any, int] = {}
_TORCH_TENSOR: Any = None


def _numpy_codes() -> Dict[Any, int]:
    if not _NUMPY_CODES:
        np = numpy()
        for code, name in NAMES.items():
            if code in TYPESTR:
                _NUMPY_CODES[np.dtype(name)] = code
    return _NUMPY_CODES


def _torch_codes(torch: Any) -> Dict[Any, int]:
    global _TORCH_TENSOR
    if not _TORCH_CODES:
        for code, name in NAMES.items():
            dtype = getattr(torch, name, None)
            if dtype is not None:
                _TORCH_CODES[dtype] = code
        _TORCH_TENSOR = torch.Tensor
    return _TORCH_CODES


def exact(obj: Any) -> Optional[Tuple[int, int, Tuple[int, ...], int]]:
    """(data, dtype code, shape, device) of a C-contiguous NumPy array or
    PyTorch tensor (host or GPU), read without copies or interface objects;
    None for anything else, which ``as_input`` then takes. The caller keeps
    ``obj`` alive while the memory is used."""
    np = sys.modules.get("numpy")
    if np is not None and type(obj) is np.ndarray:
        code = (_NUMPY_CODES or _numpy_codes()).get(obj.dtype)
        if code is None or not obj.flags.c_contiguous:
            return None
        return obj.ctypes.data, code, obj.shape, -1
    torch = sys.modules.get("torch")
    if torch is not None:
        codes = _TORCH_CODES or _torch_codes(torch)
        if isinstance(obj, _TORCH_TENSOR):
            code = codes.get(obj.dtype)
            if code is None or not obj.is_contiguous() or obj.requires_grad:
                return None
            return obj.data_ptr(), code, tuple(obj.shape), obj.get_device()
    return None


def _contiguous(shape: Tuple[int, ...], strides: Optional[Tuple[int, ...]], itemsize: int) -> bool:
    if strides is None:
        return True
    expected = itemsize
    for dim, stride in zip(reversed(shape), reversed(strides)):
        if dim != 1 and stride != expected:
            return False
        expected *= dim
    return True


def torch_stream(device: int) -> Optional[int]:
    """PyTorch's current stream on ``device`` when PyTorch is in use, else None."""
    torch = sys.modules.get("torch")
    if torch is None or device < 0:
        return None
    try:
        if not torch.cuda.is_initialized():
            return None
        # The raw handle without a Stream object (a tenth of the cost).
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return int(raw(device))
        return int(torch.cuda.current_stream(device).cuda_stream)
    except Exception:  # no CUDA in this torch build
        return None


def _from_cuda_interface(obj: Any, name: str) -> Input:
    cai = obj.__cuda_array_interface__
    shape = tuple(int(d) for d in cai["shape"])
    typestr = cai["typestr"]
    if typestr not in _FROM_TYPESTR:
        raise ValueError(f"replaydb: {name}: unsupported device array type {typestr!r}")
    code = _FROM_TYPESTR[typestr]
    if not _contiguous(shape, cai.get("strides"), SIZES[code]):
        raise ValueError(f"replaydb: {name}: the device array is not C-contiguous "
                         "(make it contiguous first, e.g. tensor.contiguous())")
    device = -2
    dev = getattr(obj, "device", None)
    index = getattr(dev, "index", None)
    if isinstance(index, int):
        device = index
    return Input(int(cai["data"][0] or 0), code, shape, device, [obj])


def _from_array_interface(obj: Any, ai: Dict[str, Any], name: str) -> Input:
    shape = tuple(int(d) for d in ai["shape"])
    typestr = ai["typestr"]
    code = _FROM_TYPESTR.get(typestr)
    if code is None or not _contiguous(shape, ai.get("strides"), SIZES[code]) or \
            ai.get("mask") is not None or not isinstance(ai.get("data"), tuple):
        np = numpy()
        arr = np.asarray(obj)  # (ascontiguousarray would make a 0-d array 1-d)
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        return _from_array_interface(arr, arr.__array_interface__, name)
    return Input(int(ai["data"][0] or 0), code, shape, -1, [obj])


def as_input(obj: Any, dtype: Optional[int], name: str, stream: Optional[int] = None) -> Input:
    """The memory of ``obj``. ``dtype`` (a code) converts Python scalars and lists;
    arrays keep their own type, which the engine then checks against the column.
    ``stream`` is the CUDA stream device inputs are read on (for ``__dlpack__``)."""
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cuda_interface(obj, name)
    ai = getattr(obj, "__array_interface__", None)
    if isinstance(ai, dict):
        np = sys.modules.get("numpy")
        if np is not None:
            # np.asarray holds what the interface points into (a NumPy
            # scalar's interface points into a temporary).
            arr = obj if isinstance(obj, np.ndarray) else np.asarray(obj)
            return _from_array_interface(arr, arr.__array_interface__, name)
        return _from_array_interface(obj, ai, name)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        device_type, device_id = obj.__dlpack_device__()
        on_device = int(device_type) == _dlpack.CUDA
        dl_stream = None
        if on_device:
            dl_stream = 1 if not stream else stream  # 1: the legacy default stream
        imported = _dlpack.consume(obj, dl_stream)
        # DLPack counts strides in elements, the array interfaces in bytes.
        if not _contiguous(imported.shape, imported.strides, 1):
            imported.close()
            raise ValueError(f"replaydb: {name}: the array is not C-contiguous "
                             "(make it contiguous first)")
        return Input(imported.data, imported.dtype, imported.shape, imported.device,
                     [imported, obj])
    np = numpy()
    arr = np.asarray(obj, dtype=None if dtype is None or dtype == 7 else NAMES[dtype])
    return _from_array_interface(arr, arr.__array_interface__, name)
