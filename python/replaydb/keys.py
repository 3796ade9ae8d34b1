"""Item keys: an item is the window of a trajectory that starts at one step,
and its key is ``trajectory_id << 24 | start_step`` (include/replaydb/types.h):
stable for the item's life, unique in a table, decodable without a lookup.
Each helper takes Python ints or NumPy arrays (vectorized)."""

from __future__ import annotations

from typing import Any

START_BITS = 24
MAX_TRAJECTORY_STEPS = 1 << START_BITS  # a trajectory's steps: 0 .. 2**24 - 1
MAX_TRAJECTORY_ID = (1 << (64 - START_BITS)) - 1


def _is_array(x: Any) -> bool:
    return hasattr(x, "dtype") and hasattr(x, "shape") and getattr(x, "ndim", 0) > 0


def item_key(trajectory_id: Any, start_step: Any) -> Any:
    """The key of the item of ``trajectory_id`` that starts at ``start_step``.
    Out of range (an id past 2**40 - 1, a step past 2**24 - 1, a negative
    value) raises ValueError."""
    if _is_array(trajectory_id) or _is_array(start_step):
        import numpy as np

        t = np.asarray(trajectory_id).astype(np.int64, copy=False)
        s = np.asarray(start_step).astype(np.int64, copy=False)
        if (t < 0).any() or (t > MAX_TRAJECTORY_ID).any():
            raise ValueError(f"replaydb: trajectory ids are 0 .. {MAX_TRAJECTORY_ID}")
        if (s < 0).any() or (s >= MAX_TRAJECTORY_STEPS).any():
            raise ValueError(f"replaydb: start steps are 0 .. {MAX_TRAJECTORY_STEPS - 1}")
        return (t.astype(np.uint64) << np.uint64(START_BITS)) | s.astype(np.uint64)
    t, s = int(trajectory_id), int(start_step)
    if not 0 <= t <= MAX_TRAJECTORY_ID:
        raise ValueError(f"replaydb: trajectory id {t} is outside 0 .. {MAX_TRAJECTORY_ID}")
    if not 0 <= s < MAX_TRAJECTORY_STEPS:
        raise ValueError(f"replaydb: start step {s} is outside 0 .. {MAX_TRAJECTORY_STEPS - 1}")
    return (t << START_BITS) | s


def key_trajectory(key: Any) -> Any:
    """The trajectory id of item key(s) ``key``."""
    if _is_array(key) or type(key).__module__ == "numpy":
        import numpy as np

        return np.asarray(key).astype(np.uint64, copy=False) >> np.uint64(START_BITS)
    return int(key) >> START_BITS


def key_start(key: Any) -> Any:
    """The start step of item key(s) ``key``."""
    if _is_array(key) or type(key).__module__ == "numpy":
        import numpy as np

        return np.asarray(key).astype(np.uint64, copy=False) & np.uint64(MAX_TRAJECTORY_STEPS - 1)
    return int(key) & (MAX_TRAJECTORY_STEPS - 1)
