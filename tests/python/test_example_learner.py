"""examples/dqn_learner.py end to end: it trains and its return improves; killed
with SIGKILL, it resumes from its checkpoint with its replay intact. Needs
PyTorch (skipped without it); on a GPU the table lives in GPU memory."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the example learner needs PyTorch")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dqn_learner.py"


def run(args, env):
    return subprocess.run([sys.executable, str(EXAMPLE)] + args, env=env, capture_output=True,
                          text=True, timeout=900)


def test_learner_trains_survives_a_kill_and_resumes(tmp_path):
    device = os.environ.get("REPLAYDB_EXAMPLE_DEVICE",
                            "cuda" if torch.cuda.is_available() else "cpu")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    common = ["--dir", str(tmp_path / "run"), "--device", device, "--iterations", "1500",
              "--checkpoint-every", "500", "--eval-every", "250"]
    first = run(common + ["--kill-after", "700"], env)
    assert first.returncode == -9, first.stdout + first.stderr
    assert "killing myself at iteration 700" in first.stdout
    returns = [float(x) for x in re.findall(r"greedy return ([0-9.]+)", first.stdout)]
    start_return = returns[0]

    second = run(common, env)
    assert second.returncode == 0, second.stdout + second.stderr
    resumed = re.search(r"resumed at iteration (\d+) \(the network's checkpoint\) with (\d+) "
                        r"transitions in replay: (\d+) at the checkpoint, (\d+) more written "
                        r"after it, until the process stopped", second.stdout)
    assert resumed, second.stdout
    assert int(resumed.group(1)) == 500, "the last checkpoint before the kill"
    in_replay, at_checkpoint, after = (int(resumed.group(i)) for i in (2, 3, 4))
    envs = 32  # the example's default: one transition per environment per iteration
    assert at_checkpoint == 500 * envs, "the network's checkpoint saw 500 iterations of them"
    if device == "cpu":  # a logged table: everything acknowledged before the kill is back
        assert after == (700 - 500) * envs
    else:  # a table in GPU memory is not logged by default: as of its checkpoint
        assert after == 0
    assert in_replay == at_checkpoint + after
    later = [float(x) for x in re.findall(r"greedy return ([0-9.]+)", second.stdout)]
    print(first.stdout, second.stdout)
    assert max(later) >= 100 and max(later) > 3 * start_return, (
        f"the greedy return did not improve: {start_return} -> {later}")
