"""Times table.sample(256) into host memory through the Python package, as a
learner calls it (a new batch each call, the previous one dropped), from a
prioritized table drawn on GPU 0 (L=32, 4 KiB steps: 32 MiB per batch) whose
hot tier is in device memory and in pinned host memory. Prints one JSON line
per placement with the payload GB/s. Issue 36 item 3's user path; the
targets are checked by `replaydb bench --filter sample_to_host`.

    REPLAYDB_LIBRARY=... PYTHONPATH=python python3 tools/analysis/python_sample_to_host.py
"""
import json
import tempfile
import time

import numpy as np

import replaydb

B, L, STEP = 256, 32, 4096


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        db = replaydb.open(d)
        for placement in ("device:0", "host"):
            t = db.create_table(f"t_{placement.replace(':', '')}", {"obs": ("uint8", (STEP,))},
                                capacity_steps=64 * 1024, sequence_length=L,
                                selector="prioritized", priority_device=0,
                                placement=placement)
            envs = 64
            w = t.vector_writer(envs)
            rows = np.random.default_rng(1).integers(0, 255, (envs, STEP), dtype=np.uint8)
            for _ in range(1000):
                w.append({"obs": rows})
            w.end_many(list(range(envs)))
            batch = t.sample(B)  # warm-up
            del batch
            n = 30
            start = time.perf_counter()
            for _ in range(n):
                batch = t.sample(B)
            seconds = (time.perf_counter() - start) / n
            del batch
            print(json.dumps({"placement": t.info()["placement"], "ms_per_sample": seconds * 1e3,
                              "GB/s": B * L * STEP / seconds / 1e9}))
        db.close()


if __name__ == "__main__":
    main()
