"""Loads libreplaydb.so and declares the C API (include/replaydb/c.h) for ctypes.

The library is looked for, in order:
  1. the path in the environment variable REPLAYDB_LIBRARY;
  2. the copy inside the package (replaydb/lib/), which ``pip install`` puts there;
  3. the build tree this package sits in (python/../build/lib), for developers;
  4. the system's library search (LD_LIBRARY_PATH, the ld cache) by its soname,
     libreplaydb.so.0.1, then libreplaydb.so, where ``cmake --install`` puts them.
"""

from __future__ import annotations

import atexit
import ctypes
import operator
import os
import sys
import threading
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int32,
                    c_int64, c_size_t, c_uint8, c_uint64, c_void_p)
from pathlib import Path
from typing import List, Optional

from replaydb.errors import InvalidArgumentError, interrupts

MAX_DIMS = 8
WAIT_FOREVER = -1


class Tensor(Structure):
    """replaydb_tensor_t: a view of caller memory."""

    _fields_ = [
        ("dtype", c_int),
        ("ndim", c_int),
        ("dims", POINTER(c_int64)),
        ("data", c_void_p),
        ("nbytes", c_size_t),
    ]


class Array(Structure):
    """replaydb_array_t: one array of a batch."""

    _fields_ = [
        ("data", c_void_p),
        ("dtype", c_int),
        ("ndim", c_int),
        ("dims", c_int64 * MAX_DIMS),
        ("nbytes", c_size_t),
        ("device", c_int),
    ]


class SampleOptions(Structure):
    """replaydb_sample_options_t."""

    _fields_ = [
        ("timeout_ms", c_int64),
        ("importance_beta", c_double),
        ("stratified", c_int),
        ("gather", c_int),
        ("peek", c_int),
        ("weight_normalization", c_int),
    ]


_INFO_FIELDS = [
    ("num_steps", c_int64),
    ("num_items", c_int64),
    ("num_trajectories", c_int64),
    ("num_open_trajectories", c_int64),
    ("placement", c_char * 32),
    ("device", c_int32),
    ("bytes_used", c_int64),
    ("bytes_reserved", c_int64),
    ("bytes_capacity", c_int64),
    ("blocks_used", c_int64),
    ("blocks_capacity", c_int64),
    ("steps_inserted", c_int64),
    ("items_inserted", c_int64),
    ("items_sampled", c_int64),
    ("items_removed", c_int64),
    ("evicted_trajectories", c_int64),
    ("evicted_items", c_int64),
    ("priority_updates", c_int64),
    ("priority_updates_skipped", c_int64),
    ("max_priority_seen", c_double),
    ("rate_limiter_inserts", c_int64),
    ("rate_limiter_samples", c_int64),
    ("rate_limiter_deletes", c_int64),
    ("rate_limiter_blocked_inserts", c_int64),
    ("rate_limiter_blocked_samples", c_int64),
    ("cold_trajectories", c_int64),
    ("cold_steps", c_int64),
    ("cold_bytes", c_int64),
    ("spilled_trajectories", c_int64),
    ("spilled_bytes", c_int64),
    ("loaded_trajectories", c_int64),
    ("rotations", c_int64),
    ("spill_queue", c_int64),
]


class TableInfo(Structure):
    """replaydb_table_info_t."""

    _fields_ = _INFO_FIELDS


# The library's soname (CMakeLists.txt: VERSION 0.1.0, SOVERSION major.minor).
SONAME = "libreplaydb.so.0.1"


def _candidates() -> List[str]:
    found = []
    env = os.environ.get("REPLAYDB_LIBRARY")
    if env:
        found.append(env)
    here = Path(__file__).resolve().parent
    packaged = here / "lib" / "libreplaydb.so"  # what `pip install` put in the package
    if packaged.exists():
        found.append(str(packaged))
    for build in ("build", "build-asan", "build-tsan"):
        lib = here.parent.parent / build / "lib" / "libreplaydb.so"
        if lib.exists():
            found.append(str(lib))
            break
    # The system's search (LD_LIBRARY_PATH, the ld cache): an installed
    # library by its soname first (a runtime install has no libreplaydb.so).
    found += [SONAME, "libreplaydb.so"]
    return found


def _load() -> ctypes.CDLL:
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise ImportError(
        "replaydb: cannot load libreplaydb.so; set REPLAYDB_LIBRARY to its path, build it "
        "(tools/scripts/build.sh puts it in build/lib), or install it (cmake --install build). Tried:\n  "
        + "\n  ".join(errors))


lib = _load()

# ctypes converts a Python int to a C integer by wrapping it into range
# (2**32 + 1 arrives as a C int 1, -1 as a size_t 2**64 - 1): an argument
# that does not fit would reach the engine as another, valid-looking value.
# Every integer argument is declared with one of these instead, which
# refuses such a value (InvalidArgumentError, a ValueError, naming it).
_OUT_OF_RANGE = "does not fit"


def _checked_int(base, bits: int, signed: bool):
    low, high = (-2**(bits - 1), 2**(bits - 1) - 1) if signed else (0, 2**bits - 1)
    what = f"{'a signed' if signed else 'an unsigned'} {bits}-bit C integer [{low}, {high}]"

    class Checked(base):
        @classmethod
        def from_param(cls, value):
            value = operator.index(value)  # TypeError for what is no integer
            if not low <= value <= high:
                raise ValueError(f"{value} {_OUT_OF_RANGE} {what}")
            return cls(value)

    Checked.__name__ = f"checked_{base.__name__}"
    return Checked


# c_int32 is c_int, and c_uint64 is c_size_t, on the platforms we build for.
_CHECKED = {c_int: _checked_int(c_int, 32, True), c_int64: _checked_int(c_int64, 64, True),
            c_size_t: _checked_int(c_size_t, 64, False)}
_CHECKED.setdefault(c_int32, _checked_int(c_int32, 32, True))
_CHECKED.setdefault(c_uint64, _checked_int(c_uint64, 64, False))


def int64_array(values, what: str):
    """A C int64_t array of ``values``, each checked to fit (``what`` names them)."""
    try:
        checked = [_CHECKED[c_int64].from_param(v) for v in values]
    except ValueError as e:
        raise InvalidArgumentError(f"replaydb: {what}: {e}") from None
    return (c_int64 * max(1, len(checked)))(*(v.value for v in checked))


def _refusing_out_of_range(name: str, fn):
    def call(*args):
        try:
            return fn(*args)
        except ctypes.ArgumentError as e:
            # "argument 2: ValueError: 4294967297 does not fit ...", or
            # "argument 2: TypeError: 'float' object cannot be ..."
            message = str(e)
            if _OUT_OF_RANGE in message:
                raise InvalidArgumentError(
                    f"replaydb: {name}: {message.replace('ValueError: ', '')}") from None
            if "TypeError: " in message:
                raise TypeError(f"replaydb: {name}: {message.replace('TypeError: ', '')}") from None
            raise

    call.__name__ = name
    return call


_errp = POINTER(c_char_p)
# (name, restype, argtypes). Functions that return an int status take a
# char** errptr last.
_SIGNATURES = [
    ("replaydb_free", None, [c_void_p]),
    ("replaydb_set_interrupt_check", None, [c_void_p, c_void_p]),
    ("replaydb_free_strings", None, [POINTER(c_char_p), c_size_t]),
    ("replaydb_version", c_char_p, []),
    ("replaydb_code_name", c_char_p, [c_int]),
    ("replaydb_dtype_name", c_char_p, [c_int]),
    ("replaydb_dtype_size", c_size_t, [c_int]),
    ("replaydb_dtype_from_name", c_int, [c_char_p]),
    ("replaydb_cuda_device_count", c_int, []),
    ("replaydb_stream_wait", c_int, [c_void_p, c_void_p, _errp]),
    ("replaydb_options_create", c_void_p, []),
    ("replaydb_options_destroy", None, [c_void_p]),
    ("replaydb_options_set_create_if_missing", None, [c_void_p, c_int]),
    ("replaydb_options_set_error_if_exists", None, [c_void_p, c_int]),
    ("replaydb_options_set_wal_enabled", None, [c_void_p, c_int]),
    ("replaydb_options_set_wal_sync", c_int, [c_void_p, c_char_p, _errp]),
    ("replaydb_options_set_checkpoint", None, [c_void_p, c_int64, c_uint64, c_int]),
    ("replaydb_open", c_int, [c_void_p, c_char_p, POINTER(c_void_p), _errp]),
    ("replaydb_open_read_only", c_int, [c_char_p, POINTER(c_void_p), _errp]),
    ("replaydb_connect", c_int,
     [c_char_p, c_char_p, c_char_p, c_int64, POINTER(c_void_p), _errp]),
    ("replaydb_connect_options_create", c_void_p, []),
    ("replaydb_connect_options_destroy", None, [c_void_p]),
    ("replaydb_connect_options_set_client_name", None, [c_void_p, c_char_p]),
    ("replaydb_connect_options_set_token_file", None, [c_void_p, c_char_p]),
    ("replaydb_connect_options_set_connect_timeout_ms", None, [c_void_p, c_int64]),
    ("replaydb_connect_options_set_call_timeout_ms", None, [c_void_p, c_int64]),
    ("replaydb_connect_options_set_heartbeat_ms", None, [c_void_p, c_int64]),
    ("replaydb_connect_options_set_read_in_place", None, [c_void_p, c_int, c_uint64]),
    ("replaydb_connect_options_set_skip_unavailable_shards", None, [c_void_p, c_int]),
    ("replaydb_connect_with_options", c_int, [c_char_p, c_void_p, POINTER(c_void_p), _errp]),
    ("replaydb_close", None, [c_void_p]),
    ("replaydb_checkpoint", c_int, [c_void_p, _errp]),
    ("replaydb_list_tables", c_int, [c_void_p, POINTER(POINTER(c_char_p)), POINTER(c_size_t),
                                     _errp]),
    ("replaydb_drop_table", c_int, [c_void_p, c_char_p, _errp]),
    ("replaydb_export_table", c_int, [c_void_p, c_char_p, c_char_p, _errp]),
    ("replaydb_import_table", c_int, [c_void_p, c_char_p, c_char_p, c_char_p,
                                      POINTER(c_void_p), _errp]),
    ("replaydb_db_path", c_char_p, [c_void_p]),
    ("replaydb_db_read_only", c_int, [c_void_p]),
    ("replaydb_table_spec_create", c_void_p, [c_char_p]),
    ("replaydb_table_spec_destroy", None, [c_void_p]),
    ("replaydb_table_spec_add_column", c_int, [c_void_p, c_char_p, c_int, c_int,
                                               POINTER(c_int64), _errp]),
    ("replaydb_table_spec_set_capacity_steps", None, [c_void_p, c_int64]),
    ("replaydb_table_spec_set_capacity_bytes", None, [c_void_p, c_int64]),
    ("replaydb_table_spec_set_block_steps", None, [c_void_p, c_int64]),
    ("replaydb_table_spec_set_sequence_length", None, [c_void_p, c_int64]),
    ("replaydb_table_spec_set_padding", c_int, [c_void_p, c_char_p, _errp]),
    ("replaydb_table_spec_set_selector", c_int, [c_void_p, c_char_p, _errp]),
    ("replaydb_table_spec_set_eviction", c_int, [c_void_p, c_char_p, _errp]),
    ("replaydb_table_spec_set_step_priority", c_int, [c_void_p, c_char_p, _errp]),
    ("replaydb_table_spec_set_priority_exponent", None, [c_void_p, c_double]),
    ("replaydb_table_spec_set_priority_device", None, [c_void_p, c_int32]),
    ("replaydb_table_spec_set_placement", c_int, [c_void_p, c_char_p, _errp]),
    ("replaydb_table_spec_set_logging", c_int, [c_void_p, c_char_p, _errp]),
    ("replaydb_table_spec_set_acks", c_int, [c_void_p, c_char_p, _errp]),
    ("replaydb_table_spec_set_max_lag_ms", None, [c_void_p, c_int64]),
    ("replaydb_table_spec_set_max_times_sampled", None, [c_void_p, c_int64]),
    ("replaydb_table_spec_set_spill", None, [c_void_p, c_int]),
    ("replaydb_table_spec_set_rotation", None, [c_void_p, c_double, c_int64]),
    ("replaydb_table_spec_set_lanes", None, [c_void_p, c_int64]),
    ("replaydb_table_spec_set_rate_limiter", None, [c_void_p, c_double, c_int64, c_double,
                                                    c_double]),
    ("replaydb_table_spec_json", c_void_p, [c_void_p]),
    ("replaydb_create_table", c_int, [c_void_p, c_void_p, POINTER(c_void_p), _errp]),
    ("replaydb_get_table", c_int, [c_void_p, c_char_p, POINTER(c_void_p), _errp]),
    ("replaydb_table_release", None, [c_void_p]),
    ("replaydb_table_get_spec", c_void_p, [c_void_p]),
    ("replaydb_table_name", c_char_p, [c_void_p]),
    ("replaydb_table_spec_num_columns", c_size_t, [c_void_p]),
    ("replaydb_table_spec_column_name", c_char_p, [c_void_p, c_size_t]),
    ("replaydb_table_spec_column_dtype", c_int, [c_void_p, c_size_t]),
    ("replaydb_table_spec_column_ndim", c_int, [c_void_p, c_size_t]),
    ("replaydb_table_spec_column_dims", POINTER(c_int64), [c_void_p, c_size_t]),
    ("replaydb_table_spec_sequence_length", c_int64, [c_void_p]),
    ("replaydb_table_info", c_int, [c_void_p, POINTER(TableInfo), _errp]),
    ("replaydb_table_mass", c_int, [c_void_p, POINTER(c_double), POINTER(c_int64), _errp]),
    ("replaydb_table_seed", c_int, [c_void_p, c_uint64, _errp]),
    ("replaydb_table_clear", c_int, [c_void_p, _errp]),
    ("replaydb_table_delete_items", c_int, [c_void_p, POINTER(c_uint64), c_size_t,
                                            POINTER(c_int64), _errp]),
    ("replaydb_table_set_rate_limiter", c_int, [c_void_p, c_double, c_int64, c_double, c_double,
                                                _errp]),
    ("replaydb_table_load", c_int, [c_void_p, POINTER(c_uint64), c_size_t, _errp]),
    ("replaydb_table_update_priorities", c_int, [c_void_p, POINTER(c_uint64), POINTER(c_double),
                                                 c_size_t, POINTER(c_int64), POINTER(c_int64),
                                                 _errp]),
    ("replaydb_table_update_priorities_from_device", c_int, [c_void_p, c_void_p, c_void_p,
                                                             c_int64, c_void_p, _errp]),
    ("replaydb_table_close", None, [c_void_p]),
    ("replaydb_table_new_writer", c_int, [c_void_p, c_int64, c_int, POINTER(c_void_p), _errp]),
    ("replaydb_table_new_writer_with_acks", c_int,
     [c_void_p, c_int64, c_int, c_char_p, POINTER(c_void_p), _errp]),
    ("replaydb_writer_destroy", None, [c_void_p]),
    ("replaydb_writer_append", c_int, [c_void_p, POINTER(Tensor), c_size_t, POINTER(c_double),
                                       _errp]),
    ("replaydb_writer_append_many", c_int, [c_void_p, POINTER(Tensor), c_size_t,
                                            POINTER(c_double), c_size_t, _errp]),
    ("replaydb_writer_end", c_int, [c_void_p, c_int, _errp]),
    ("replaydb_writer_trajectory_id", c_uint64, [c_void_p]),
    ("replaydb_writer_num_steps", c_int64, [c_void_p]),
    ("replaydb_table_new_vector_writer", c_int, [c_void_p, c_size_t, c_int64, c_int, c_int,
                                                 POINTER(c_void_p), _errp]),
    ("replaydb_vector_writer_destroy", None, [c_void_p]),
    ("replaydb_vector_writer_append", c_int, [c_void_p, POINTER(Tensor), c_size_t,
                                              POINTER(c_double), c_size_t, _errp]),
    ("replaydb_vector_writer_append_from_device", c_int, [c_void_p, POINTER(Tensor), c_size_t,
                                                          c_void_p, POINTER(c_double), c_size_t,
                                                          _errp]),
    ("replaydb_vector_writer_end", c_int, [c_void_p, c_size_t, c_int, _errp]),
    ("replaydb_vector_writer_end_many", c_int, [c_void_p, POINTER(c_size_t), c_size_t, c_int,
                                                 _errp]),
    ("replaydb_vector_writer_num_envs", c_size_t, [c_void_p]),
    ("replaydb_vector_writer_trajectory_id", c_uint64, [c_void_p, c_size_t]),
    ("replaydb_sample_options_init", None, [POINTER(SampleOptions)]),
    ("replaydb_table_sample", c_int, [c_void_p, c_int64, POINTER(SampleOptions),
                                      POINTER(c_void_p), _errp]),
    ("replaydb_table_lookup", c_int, [c_void_p, POINTER(c_uint64), c_size_t, POINTER(c_void_p),
                                      _errp]),
    ("replaydb_table_sample_to_device", c_int, [c_void_p, c_int64, POINTER(SampleOptions),
                                                c_void_p, POINTER(c_void_p), _errp]),
    ("replaydb_table_sample_into", c_int, [c_void_p, c_int64, POINTER(SampleOptions),
                                           POINTER(c_void_p), c_size_t, c_void_p, c_void_p,
                                           c_void_p, c_void_p, c_void_p, _errp]),
    ("replaydb_table_sample_runs", c_int, [c_void_p, c_void_p, c_size_t, POINTER(SampleOptions),
                                           c_size_t, c_void_p, c_void_p, _errp]),
    ("replaydb_copy_regions", c_int, [c_void_p, c_size_t, c_void_p, c_size_t, c_void_p,
                                      c_void_p, _errp]),
    ("replaydb_label_batch_runs", c_int, [c_int, c_size_t, c_void_p, c_void_p, c_void_p,
                                          c_void_p, c_void_p, c_void_p, c_void_p, _errp]),
    ("replaydb_table_new_sampler", c_int, [c_void_p, c_int64, c_int, POINTER(SampleOptions),
                                           POINTER(c_void_p), _errp]),
    ("replaydb_sampler_destroy", None, [c_void_p]),
    ("replaydb_sampler_next", c_int, [c_void_p, c_void_p, c_int64, POINTER(c_void_p), _errp]),
    ("replaydb_batch_retain", None, [c_void_p]),
    ("replaydb_batch_release", None, [c_void_p]),
    ("replaydb_batch_size", c_int64, [c_void_p]),
    ("replaydb_batch_sequence_length", c_int64, [c_void_p]),
    ("replaydb_batch_device", c_int, [c_void_p]),
    ("replaydb_batch_field", c_int, [c_void_p, c_char_p, POINTER(Array), _errp]),
    ("replaydb_batch_field_names", c_int, [c_void_p, POINTER(POINTER(c_char_p)),
                                           POINTER(c_size_t), _errp]),
    ("replaydb_live_batches", c_int64, []),
    ("replaydb_batch_dlpack", c_int, [c_void_p, c_char_p, POINTER(c_void_p), _errp]),
    ("replaydb_dlpack_capsule_destructor", None, [c_void_p]),
]

for _name, _restype, _argtypes in _SIGNATURES:
    _fn = getattr(lib, _name)
    _fn.restype = _restype
    _fn.argtypes = [_CHECKED.get(t, t) for t in _argtypes]
    if any(t in _CHECKED for t in _argtypes):
        setattr(lib, _name, _refusing_out_of_range(_name, _fn))



class _Fast:
    """The hot calls (sample, DLPack export, appends, priority updates) over
    the same library with plain argument types: no per-argument Python
    conversion. Callers check that every integer they pass fits (see
    ``fits_int64``); a value that does not would be wrapped into range."""


fast = _Fast()
_FAST_NAMES = {
    "replaydb_table_sample", "replaydb_table_sample_to_device", "replaydb_batch_field",
    "replaydb_batch_dlpack", "replaydb_batch_release", "replaydb_batch_retain",
    "replaydb_writer_append", "replaydb_vector_writer_append",
    "replaydb_vector_writer_append_from_device", "replaydb_table_update_priorities",
    "replaydb_table_update_priorities_from_device", "replaydb_stream_wait",
    "replaydb_table_sample_into", "replaydb_table_sample_runs", "replaydb_label_batch_runs",
    "replaydb_copy_regions",
}
_plain = ctypes.CDLL(lib._name)  # the same loaded library: its own function objects
for _name, _restype, _argtypes in _SIGNATURES:
    if _name in _FAST_NAMES:
        _fn = getattr(_plain, _name)
        _fn.restype = _restype
        # Arrays of numbers go as addresses (ints) or ctypes pointers alike.
        _fn.argtypes = [c_void_p if t in (POINTER(c_uint64), POINTER(c_double)) else t
                        for t in _argtypes]
        setattr(fast, _name, _fn)
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


# The per-batch calls in C (_speedups.c): the module the build puts beside
# the library (build/lib, or replaydb/lib in an installed package), for
# CPython >= 3.11. Without it the package does the same through ctypes;
# ``speedups_error`` says why it is not in use (REPLAYDB_PURE_PYTHON=1 turns
# it off, to test that path).
SPEEDUPS_FILE = "_speedups.abi3.so"
speedups = None
speedups_error = ""


def _load_speedups():
    global speedups_error
    if os.environ.get("REPLAYDB_PURE_PYTHON", "") not in ("", "0"):
        speedups_error = "turned off by REPLAYDB_PURE_PYTHON"
        return None
    if sys.implementation.name != "cpython" or sys.version_info < (3, 11):
        speedups_error = "needs CPython >= 3.11"
        return None
    directory = Path(lib._name).resolve().parent if os.sep in lib._name else None
    path = directory / SPEEDUPS_FILE if directory is not None else None
    if path is None or not path.is_file():
        speedups_error = f"no {SPEEDUPS_FILE} beside {lib._name}"
        return None
    import importlib.util
    try:
        spec = importlib.util.spec_from_file_location("replaydb._speedups", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.bind(*(ctypes.cast(getattr(_plain, name), c_void_p).value for name in (
            "replaydb_table_sample", "replaydb_table_sample_to_device", "replaydb_batch_field",
            "replaydb_batch_retain", "replaydb_batch_release", "replaydb_batch_dlpack")))
    except (ImportError, OSError, AttributeError, TypeError, ValueError) as e:
        speedups_error = f"{path}: {e}"
        return None
    return module


speedups = _load_speedups()


# Ctrl-C inside the engine: a call of the main thread that waits there (for
# the rate limiter, or for hot-tier blocks) runs this every 100 ms
# (replaydb_set_interrupt_check). Python runs its signal handlers as the
# callback starts; an exception one raises there (KeyboardInterrupt) cannot
# reach the callback's code, and ctypes hands it to sys.unraisablehook,
# where _keep_interrupts keeps it in errors.interrupts (ctypes' return value
# is then undefined: the next poll, 100 ms on, returns 1). The call that
# waited raises it once the engine returns (errors.check). With another
# unraisable hook installed in place of this one (pytest's, during a test),
# Ctrl-C reaches those waits only when they time out, as before.
_InterruptCheck = ctypes.CFUNCTYPE(c_int, c_void_p)


def _run_signal_handlers(_arg: Optional[int]) -> int:
    return 1 if interrupts else 0


_interrupt_check = _InterruptCheck(_run_signal_handlers)
_prior_unraisablehook = sys.unraisablehook


def _keep_interrupts(unraisable) -> None:
    if unraisable.object is _run_signal_handlers and unraisable.exc_value is not None:
        interrupts.append(unraisable.exc_value)
        return
    _prior_unraisablehook(unraisable)


def _set_interrupt_check() -> None:
    if threading.current_thread() is threading.main_thread():
        sys.unraisablehook = _keep_interrupts
        lib.replaydb_set_interrupt_check(ctypes.cast(_interrupt_check, c_void_p), None)
        # Cleared before the interpreter goes: nothing may call into it then.
        atexit.register(lib.replaydb_set_interrupt_check, None, None)


_set_interrupt_check()


def take_string(ptr: Optional[int]) -> str:
    """Decodes and frees a malloc'ed string the C API returned."""
    if not ptr:
        return ""
    try:
        return ctypes.string_at(ptr).decode()
    finally:
        lib.replaydb_free(ptr)


def take_strings(array, count: int) -> List[str]:
    """Decodes and frees an array of strings the C API returned."""
    try:
        return [array[i].decode() for i in range(count)]
    finally:
        lib.replaydb_free_strings(array, count)


# Unused here but kept importable for the modules that build raw arrays.
c_float_p = POINTER(c_float)
c_uint8_p = POINTER(c_uint8)
