"""Element types, and the memory behind the arrays a caller passes in.

An input is taken without a copy when its memory is already C-contiguous and
of the column's type: NumPy arrays and PyTorch tensors directly, other host
arrays through ``__array_interface__`` or ``__dlpack__``, device arrays through
``__cuda_array_interface__`` or ``__dlpack__``. Host values of another type
(Python numbers and lists, NumPy scalars and arrays, PyTorch CPU tensors) are
converted when the column's dtype represents every value exactly, and refused
naming the value otherwise (``exactly``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from replaydb import _dlpack
from replaydb.errors import InvalidArgumentError

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
    if type(obj).__name__ == "Array" and type(obj).__module__ == "replaydb.core":
        # A batch's own array: C-contiguous, its memory and dtype known.
        return obj._data, obj._dtype_code, obj._shape, obj._device
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


# PyTorch's raw current-stream getter, once PyTorch has initialised CUDA
# (from then on it stays so): one C call per stream asked.
_raw_stream: Any = None


def torch_stream(device: int) -> Optional[int]:
    """PyTorch's current stream on ``device`` when PyTorch is in use, else None."""
    global _raw_stream
    if _raw_stream is not None and device >= 0:
        return _raw_stream(device)
    torch = sys.modules.get("torch")
    if torch is None or device < 0:
        return None
    try:
        if not torch.cuda.is_initialized():
            return None
        # The raw handle without a Stream object (a tenth of the cost).
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            _raw_stream = raw
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


# The integer columns' ranges, by code.
_INT_RANGE: Dict[int, Tuple[int, int]] = {
    1: (0, 2**8 - 1), 2: (-2**7, 2**7 - 1), 3: (-2**15, 2**15 - 1), 4: (-2**31, 2**31 - 1),
    5: (-2**63, 2**63 - 1), 100: (0, 2**32 - 1), 101: (0, 2**64 - 1),
}


class NotExact(InvalidArgumentError):
    """A value the column's dtype does not represent exactly (see ``exactly``)."""


def _refuse(name: str, code: int, value: Any, index: Optional[int]) -> NotExact:
    at = "" if index is None else f" (element {index})"
    if isinstance(value, float) or type(value).__module__ == "numpy":
        value = value.item() if hasattr(value, "item") else value
    return NotExact(f"replaydb: {name} is {SHORT[code]}: value {value!r}{at} is not one that "
                    f"{SHORT[code]} represents exactly")


def _scalar_fits(v: Any, code: int) -> Optional[Any]:
    """``v`` (a Python or NumPy scalar) as the column's value, or None."""
    if hasattr(v, "item") and type(v).__module__ == "numpy":
        v = v.item()
    if isinstance(v, bool):
        v = int(v)
    if not isinstance(v, (int, float)):
        return None
    if code == 0:
        return bool(v) if v in (0, 1) else None
    if code in _INT_RANGE:
        if isinstance(v, float):
            if not v.is_integer():
                return None
            v = int(v)
        lo, hi = _INT_RANGE[code]
        return v if lo <= v <= hi else None
    # Floats: exact when the nearest value of the dtype is the value itself.
    np = numpy()
    target = np.float64 if code in (7, 9) else (np.float32 if code == 8 else np.float16)
    try:
        f = float(v)
    except OverflowError:  # an int past the double range
        return None
    if f != v and not (f != f):  # an int that no double holds (NaN compares unequal)
        return None
    with np.errstate(over="ignore"):
        t = target(f)
    if float(t) != f and f == f:
        return None
    if code == 7 and f == f:  # bfloat16: the float32's low 16 bits must be zero
        bits = int(np.array(f, np.float32).view(np.uint32))
        if float(np.float32(f)) != f or bits & 0xFFFF:
            return None
    return f


def exactly(src: Any, code: int, name: str) -> Any:
    """``src`` (a NumPy array of any dtype) as a C-contiguous NumPy array of
    the column's dtype ``code`` (bfloat16: its bits as uint16), when every
    element is a value that dtype represents exactly: integers in range for
    integer columns (floats with no fraction included), 0 and 1 for bool, and
    for float columns values that survive the round trip (NaN and infinities
    included). Raises NotExact naming the first element that is not."""
    np = numpy()
    kind = src.dtype.kind
    flat = src.reshape(-1)
    if kind == "O" or kind not in "biuf":
        out = []
        for i, v in enumerate(flat):
            got = _scalar_fits(v, code)
            if got is None:
                raise _refuse(name, code, v, i if src.ndim else None)
            out.append(got)
        src = np.array(out, dtype=np.float64 if code in (6, 7, 8, 9) else None).reshape(src.shape)
        if src.dtype.kind == "O":  # ints past int64 that fit u64
            src = np.array(out, dtype=np.uint64).reshape(src.shape)
        kind = src.dtype.kind
        flat = src.reshape(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        if code == 0:
            ok = flat.astype(bool) if kind == "b" else (flat == 0) | (flat == 1)
            out = src.astype(np.bool_)
        elif code in _INT_RANGE:
            lo, hi = _INT_RANGE[code]
            target = np.dtype(NAMES[code])
            if kind in "biu":
                if kind == "b" or (int(flat.min(initial=0)) >= lo and
                                   int(flat.max(initial=0)) <= hi):
                    ok = None
                else:
                    ok = np.array([lo <= int(v) <= hi for v in flat], dtype=bool)
            else:
                ok = (np.isfinite(flat) & (np.floor(flat) == flat) & (flat >= float(lo))
                      & (flat < float(hi) + 1))
            out = src.astype(target)
        else:
            target = np.dtype(np.float16 if code == 6 else np.float32 if code in (7, 8)
                              else np.float64)
            out = src.astype(target)
            back = out.reshape(-1).astype(src.dtype)
            ok = (back == flat) & np.isfinite(out.reshape(-1)) if kind in "biu" else \
                (back == flat) | np.isnan(flat)
            if code == 7:  # bfloat16: the float32's low 16 bits must be zero
                bits = out.reshape(-1).view(np.uint32)
                ok = ok & ((bits & 0xFFFF) == 0)
                out = np.asarray(out.view(np.uint32) >> 16).astype(np.uint16)
    if ok is not None and not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise _refuse(name, code, flat[i], i if src.ndim else None)
    out = np.asarray(out)
    return out if out.flags.c_contiguous else out.copy()  # (0-d stays 0-d)


def _torch_host(obj: Any, code: int, name: str, torch: Any) -> Any:
    """A host PyTorch tensor as NumPy (copied where it is not contiguous)."""
    t = obj.detach()
    if t.dtype == torch.bfloat16:  # NumPy has no bfloat16: exact as float32
        return t.float().contiguous().numpy()
    return t.contiguous().numpy()


def as_input(obj: Any, dtype: Optional[int], name: str, stream: Optional[int] = None,
             device_dtype_strict: bool = True) -> Input:
    """The memory of ``obj`` as values of dtype ``dtype`` (a code; None: the
    array's own). Arrays of that dtype are taken without a copy; host values of
    another type (Python numbers, lists, NumPy scalars and arrays, PyTorch CPU
    tensors, non-contiguous arrays) are converted when every value is one the
    dtype represents exactly (see ``exactly``), else InvalidArgumentError naming
    ``name``, the value and the dtype. Device arrays must have the dtype (no
    conversion on the GPU; ``device_dtype_strict=False``: device arrays keep
    their own dtype, for the caller to check). ``stream`` is the CUDA stream
    device inputs are read on (for ``__dlpack__``)."""
    got = exact(obj)
    if got is not None and (dtype is None or got[1] == dtype):
        return Input(got[0], got[1], tuple(got[2]), got[3], [obj])
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        if obj.is_cuda:
            code = _torch_codes(torch).get(obj.dtype)
            if dtype is not None and code != dtype and device_dtype_strict:
                raise NotExact(f"replaydb: {name} is {SHORT[dtype]}: got a GPU tensor of "
                               f"{obj.dtype}; convert it on the device first (e.g. "
                               f"tensor.to(torch.{NAMES[dtype]}))")
            t = obj.detach().contiguous()
            got = exact(t)
            if got is not None:
                return Input(got[0], got[1], tuple(got[2]), got[3], [t, obj])
        else:
            obj = _torch_host(obj, dtype, name, torch)
    device_input: Optional[Input] = None
    if hasattr(obj, "__cuda_array_interface__"):
        device_input = _from_cuda_interface(obj, name)
    elif (not hasattr(obj, "__array_interface__") and hasattr(obj, "__dlpack__")
          and hasattr(obj, "__dlpack_device__")
          and int(obj.__dlpack_device__()[0]) == _dlpack.CUDA):
        imported = _dlpack.consume(obj, 1 if not stream else stream)  # 1: the legacy stream
        # DLPack counts strides in elements, the array interfaces in bytes.
        if not _contiguous(imported.shape, imported.strides, 1):
            imported.close()
            raise ValueError(f"replaydb: {name}: the array is not C-contiguous "
                             "(make it contiguous first)")
        device_input = Input(imported.data, imported.dtype, imported.shape, imported.device,
                             [imported, obj])
    if device_input is not None:
        if dtype is not None and device_input.dtype != dtype and device_dtype_strict:
            device_input.close()
            raise NotExact(f"replaydb: {name} is {SHORT[dtype]}: got a GPU array of "
                           f"{SHORT.get(device_input.dtype, device_input.dtype)}; convert it "
                           "on the device first")
        return device_input
    np = numpy()
    if hasattr(obj, "__array_interface__") or not hasattr(obj, "__dlpack__"):
        src = np.asarray(obj)
    else:  # a host array known only by DLPack
        src = np.from_dlpack(obj)
    if not src.dtype.isnative:
        src = src.astype(src.dtype.newbyteorder("="))
    if dtype is None:
        code = _FROM_TYPESTR.get(src.dtype.str)
        if code is None:
            raise ValueError(f"replaydb: {name}: unsupported array type {src.dtype}")
        arr = src if src.flags.c_contiguous else src.copy()
    elif src.dtype.kind != "O" and _numpy_codes().get(src.dtype) == dtype:
        arr = src if src.flags.c_contiguous else src.copy()
        code = dtype
    else:
        arr = exactly(src, dtype, name)
        code = dtype
    return Input(arr.ctypes.data, code, tuple(arr.shape), -1, [arr])
