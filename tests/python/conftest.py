"""pytest set-up for the replaydb Python package's tests.

ctest runs them with PYTHONPATH at python/ and REPLAYDB_LIBRARY at the built
libreplaydb.so; run by hand from the repository root:

    PYTHONPATH=python python3 -m pytest tests/python
"""

import os
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "python") not in sys.path:
    sys.path.insert(0, str(ROOT / "python"))


@pytest.fixture
def seed():
    """A fresh seed per test, printed so a failure can be replayed with
    REPLAYDB_TEST_SEED."""
    value = int(os.environ.get("REPLAYDB_TEST_SEED", random.SystemRandom().randrange(2**63)))
    print(f"[ seed ] REPLAYDB_TEST_SEED={value}")
    return value


@pytest.fixture
def rng(seed):
    import numpy as np

    return np.random.default_rng(seed)


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "db")
