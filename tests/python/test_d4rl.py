"""DB.import_d4rl: a D4RL HDF5 file as a table, through the replaydb tool's
reader. The file comes from the C++ test helper (Python here has no HDF5
writer); skipped, saying why, where the build has no D4RL reader."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import replaydb

ROOT = Path(__file__).resolve().parents[2]
TESTS = Path(os.environ.get("REPLAYDB_TESTS_BINARY", ROOT / "build" / "bin" / "replaydb_tests"))


def _write_file(path, seed):
    if not TESTS.exists():
        pytest.skip(f"no {TESTS} to write a D4RL file with")
    env = dict(os.environ, REPLAYDB_D4RL_FILE=str(path), REPLAYDB_TEST_SEED=str(seed))
    out = subprocess.run([str(TESTS), "--gtest_filter=D4rlFileForPython.*"], env=env,
                         capture_output=True, text=True, timeout=120)
    if "0 tests from 0 test suites" in out.stdout:
        pytest.skip("this build has no D4RL reader (libhdf5 was not found)")
    assert out.returncode == 0 and path.exists(), out.stdout + out.stderr


def test_import_d4rl_cuts_trajectories_at_ends_and_keeps_every_step(db_path, tmp_path, seed):
    source = tmp_path / "hopper.hdf5"
    _write_file(source, seed)
    rewards = np.fromfile(f"{source}.rewards", np.float32)
    obs = np.fromfile(f"{source}.observations", np.float32).reshape(rewards.size, -1)
    ends = (np.fromfile(f"{source}.terminals", np.uint8) |
            np.fromfile(f"{source}.timeouts", np.uint8)).astype(bool)
    with replaydb.open(db_path) as db:
        table = db.import_d4rl(str(source), "hopper")
        assert table.name == "hopper" and "hopper" in db
        assert table.info()["num_steps"] == rewards.size
        # Trajectories in file order, each cut after a terminal or timeout.
        cuts = np.flatnonzero(ends) + 1
        lengths = np.diff(np.concatenate([[0], cuts, [rewards.size]]))
        lengths = lengths[lengths > 0]
        assert table.info()["num_trajectories"] == lengths.size
        # Ids are consecutive in file order (the lowest drawn by many peeks is the first).
        first = min(replaydb.key_trajectory(np.asarray(table.sample(4096, peek=True).item_keys)))
        keys = np.concatenate([replaydb.item_key(np.full(n, int(first) + i), np.arange(n))
                               for i, n in enumerate(lengths)])
        batch = table.lookup(keys)
        np.testing.assert_array_equal(np.asarray(batch["rewards"]).reshape(-1), rewards)
        np.testing.assert_array_equal(np.asarray(batch["observations"])[:, 0], obs)
        with pytest.raises(replaydb.AlreadyExistsError):
            db.import_d4rl(str(source), "hopper")
        with pytest.raises(replaydb.NotFoundError, match="import_d4rl: no file"):
            db.import_d4rl(str(tmp_path / "nope.hdf5"), "x")
        garbage = tmp_path / "garbage.hdf5"
        garbage.write_bytes(os.urandom(4096))
        with pytest.raises(replaydb.Error, match=f"import_d4rl {garbage}"):
            db.import_d4rl(str(garbage), "g")
        assert "g" not in db
