#!/usr/bin/env python3
"""Compares two `replaydb bench --json` outputs, row by row.

    compare_bench.py BEFORE.jsonl AFTER.jsonl [--threshold 0.15]

Rows are matched by bench and params. For each, prints the value and the
ratio to its same-run ceiling in both files and the ratio of the two ratios
(after / before; > 1 is better where the value is a rate, < 1 where it is a
time: the unit says which). Rows whose ratios differ by more than the
threshold either way are flagged "CHANGED" -- a place to look again, since
machines are noisy. Exits 1 when a file is missing or a line is not a bench
record, naming the file and line.
"""
import argparse
import json
import sys

TIME_UNITS = {"us", "ms", "s", "ns"}


def load(path):
    rows = {}
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    r = json.loads(line)
                    key = (r["bench"], tuple(sorted((k, str(v)) for k, v in r["params"].items())))
                except (ValueError, KeyError, AttributeError) as e:
                    sys.exit(f"{path}:{n}: not a bench record ({e})")
                rows[key] = r
    except OSError as e:
        sys.exit(f"{path}: {e.strerror}")
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--threshold", type=float, default=0.15,
                   help="flag rows whose ratios differ by more than this fraction")
    a = p.parse_args()
    before, after = load(a.before), load(a.after)
    print(f"{'bench':<20} {'params':<48} {'unit':<8} {'ratio before':>12} {'ratio after':>12} "
          f"{'after/before':>12}")
    changed = 0
    for key in sorted(before.keys() | after.keys()):
        b, n = before.get(key), after.get(key)
        params = " ".join(f"{k}={v}" for k, v in key[1])
        unit = (n or b)["unit"]
        rb = b.get("ratio") if b else None
        ra = n.get("ratio") if n else None
        if rb is None or ra is None or rb == 0:
            print(f"{key[0]:<20} {params:<48} {unit:<8} {str(rb):>12} {str(ra):>12} {'-':>12}")
            continue
        rel = ra / rb
        flag = ""
        if abs(rel - 1) > a.threshold:
            flag = "  CHANGED"
            changed += 1
        print(f"{key[0]:<20} {params:<48} {unit:<8} {rb:>12.4g} {ra:>12.4g} {rel:>12.3f}{flag}")
    print(f"\n{len(before.keys() & after.keys())} rows in both; {changed} differ by more than "
          f"{a.threshold:.0%} (ratios to same-run ceilings; for times lower is better)")


if __name__ == "__main__":
    main()
