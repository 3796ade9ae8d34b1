"""python -m replaydb.bench: its rows, and the statistics it reports."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

from replaydb import bench

ROOT = Path(__file__).resolve().parents[2]


def test_median_interval_brackets_the_median_and_narrows_with_more_samples():
    # A fixed seed: with a fresh one the 9-sample interval comes out the
    # narrower about once in 10^4 runs.
    rng = random.Random(20261125)
    few = [rng.gauss(5.0, 2.0) for _ in range(9)]
    many = [rng.gauss(5.0, 2.0) for _ in range(301)]
    for values in (few, many):
        med, lo, hi = bench.median_interval(values)
        assert lo <= med <= hi
        assert min(values) <= lo and hi <= max(values)
    _, lo9, hi9 = bench.median_interval(few)
    _, lo301, hi301 = bench.median_interval(many)
    assert hi301 - lo301 < hi9 - lo9
    # Known ranks: n = 9 gives [x_2, x_8] (P(Bin(9, 1/2) <= 1) = 0.0195 <= 0.025).
    assert bench.median_interval(list(range(1, 10))) == (5, 2, 8)
    # Too few values for 95%: the whole range.
    assert bench.median_interval([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0)


def test_quick_cpu_run_prints_every_host_row_with_an_interval_and_a_verdict(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    out = subprocess.run([sys.executable, "-m", "replaydb.bench", "--device", "cpu", "--quick",
                          "--json"], env=env, capture_output=True, text=True, timeout=120,
                         check=True)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [r["bench"] for r in rows] == ["python_sample_host", "python_vector_append",
                                         "python_update_priorities"]
    for r in rows:
        lo, hi = r["overhead_ci95_us"]
        assert lo <= r["overhead_us"] <= hi
        assert r["ceiling"] > 0 and r["value"] > 0
        assert r["target"] == ("met" if r["overhead_us"] <= r["allowed_us"] else "MISSED")
    assert "python bench: sample_host" in out.stderr  # progress goes to stderr


def test_unknown_row_is_refused_naming_the_rows_there_are():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    out = subprocess.run([sys.executable, "-m", "replaydb.bench", "--rows", "sample_hots"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "unknown rows sample_hots; choose from sample_host" in out.stderr
