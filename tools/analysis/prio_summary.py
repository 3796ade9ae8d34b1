"""Side-by-side table of the priority benchmarks from one GPU run.

Reads `replaydb bench --json` lines (prio_sample / prio_update, device cpu and
gpu) and tools/analysis/prio_baseline.py lines (torch on the same priorities), and
prints microseconds per call of 4096 draws or updates for each n, then the
speed-up of the GPU table over each baseline (baseline time / ours).

usage: python3 prio_summary.py BENCH_JSONL BASELINE_JSONL
"""
import json
import os
import sys

COLUMNS = [
    ("gpu sample", "prio_sample:gpu"),
    ("gpu update (logged)", "prio_update:gpu"),
    ("gpu update (unlogged)", "prio_update:gpu:unlogged"),
    ("torch multinomial", "prio_sample_baseline:torch_multinomial"),
    ("torch cumsum+search", "prio_sample_baseline:torch_cumsum_searchsorted"),
    ("cpu tree sample", "prio_sample:cpu"),
    ("cpu tree update", "prio_update:cpu"),
]


def load(paths):
    rows = {}
    for path in paths:
        if not os.path.exists(path):
            continue
        for line in open(path):
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            p = r.get("params", {})
            name = r["bench"] + ":" + str(p.get("device", p.get("method", "")))
            if p.get("logged") == "no":
                name += ":unlogged"
            rows.setdefault(p.get("n"), {})[name] = r.get("value")
            if r.get("target") == "MISSED":
                missed.append(f"{r['bench']} {' '.join(f'{k}={v}' for k, v in p.items())}: "
                              f"{r.get('value')} {r.get('unit', '')}, target "
                              f"{r.get('target_text', '')}")
    return rows


missed = []


def cell(v):
    return "-" if v is None else f"{v:.1f}"


def speedup(ours, other):
    if ours is None or other is None or ours <= 0:
        return "-"
    return f"{other / ours:.1f}x"


def main():
    rows = load(sys.argv[1:])
    sizes = sorted(n for n in rows if n is not None)
    print(f"{'n':>10} " + " ".join(f"{c:>20}" for c, _ in COLUMNS))
    for n in sizes:
        print(f"{n:>10} " + " ".join(f"{cell(rows[n].get(k)):>20}" for _, k in COLUMNS))
    print("speed-up of the GPU table (baseline time / ours):")
    for n in sizes:
        r = rows[n]
        s, u = r.get("prio_sample:gpu"), r.get("prio_update:gpu")
        print(f"{n:>10}  sample: vs torch.multinomial "
              f"{speedup(s, r.get('prio_sample_baseline:torch_multinomial'))}, "
              f"vs torch cumsum+searchsorted "
              f"{speedup(s, r.get('prio_sample_baseline:torch_cumsum_searchsorted'))}, "
              f"vs cpu sum tree {speedup(s, r.get('prio_sample:cpu'))}; "
              f"update: vs cpu sum tree {speedup(u, r.get('prio_update:cpu'))}")
    for line in missed:
        print("MISSED:", line)
    if not missed:
        print("every priority target met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
