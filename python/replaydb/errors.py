"""Exceptions: one class per engine status code, each carrying the engine's message.

Every class derives from :class:`Error` and from the built-in exception a Python
caller would expect, so ``except ValueError`` catches a bad argument and
``except TimeoutError`` a rate-limiter timeout.
"""

from __future__ import annotations

import ctypes
from typing import Dict, List, Type


class Error(Exception):
    """An error the engine reported. ``code`` names the status ("NotFound")."""

    code: str = "Unknown"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:  # KeyError would quote the message otherwise
        return self.message


class InvalidArgumentError(Error, ValueError):
    code = "InvalidArgument"


class NotFoundError(Error, LookupError):
    code = "NotFound"


class AlreadyExistsError(Error, FileExistsError):
    code = "AlreadyExists"


class ResourceExhaustedError(Error, MemoryError):
    code = "ResourceExhausted"


class DeadlineExceededError(Error, TimeoutError):
    code = "DeadlineExceeded"


class CancelledError(Error, RuntimeError):
    code = "Cancelled"


class FailedPreconditionError(Error, RuntimeError):
    code = "FailedPrecondition"


class BusyError(Error, BlockingIOError):
    code = "Busy"


class IOErrorError(Error, OSError):
    code = "IOError"


class CorruptionError(Error, RuntimeError):
    code = "Corruption"


class NotSupportedError(Error, NotImplementedError):
    code = "NotSupported"


class InternalError(Error, RuntimeError):
    code = "Internal"


class UnavailableError(Error, ConnectionError):
    code = "Unavailable"


# The C API's codes (include/replaydb/c.h), in order.
_BY_CODE: Dict[int, Type[Error]] = {
    1: InvalidArgumentError,
    2: NotFoundError,
    3: AlreadyExistsError,
    4: ResourceExhaustedError,
    5: DeadlineExceededError,
    6: CancelledError,
    7: FailedPreconditionError,
    8: BusyError,
    9: IOErrorError,
    10: CorruptionError,
    11: NotSupportedError,
    12: InternalError,
    13: UnavailableError,
}


# What Python's signal handlers raised while the engine waited (the
# interrupt check of replaydb._lib): the call that waited raises it.
interrupts: List[BaseException] = []


def check(code: int, err: ctypes.c_char_p) -> None:
    """Raises the exception for a non-zero status code, with the message in ``err``
    (which the C API malloc'ed; it is freed here); after a wait that Ctrl-C
    ended, the KeyboardInterrupt."""
    if code == 0:
        return
    from replaydb._lib import lib

    message = ""
    if err.value is not None:
        message = err.value.decode(errors="replace")
        lib.replaydb_free(ctypes.cast(err, ctypes.c_void_p))
        err.value = None
    if interrupts:
        interrupted = interrupts.pop()
        interrupts.clear()
        raise interrupted
    raise _BY_CODE.get(code, InternalError)(message or f"replaydb error code {code}")
