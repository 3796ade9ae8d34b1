"""Side-by-side table of the GPU hot-tier benchmarks from one GPU run.

Reads `replaydb bench --json` lines (gather and vector_insert rows, see
tools/replaydb/bench/bench_gpu.cc) and tools/analysis/gather_baseline.py lines (torch index_select on
the same rows), in any files and any order, and prints per gather row: tier,
step_bytes, L, ours (payload GB/s), the ceiling measured in the same run and
the ratio to it with the >= 0.90 target (step_bytes >= 4096), torch
index_select eager and in a CUDA graph, and the speed-up ours / torch with the
>= 1.2x target (device tier: torch gathers from device memory too, so a
pinned-tier row, bound by PCIe, is shown without a verdict); then, per row,
a call's microseconds split into host and device parts beside the same-size
copy's (from the row's note). Then the vector_insert rows: table=vector wal=off
threads=auto from=device (a vector table, docs/vector_tables.md) with its <= 20
us target; the others (from host memory, and tables of one trajectory per
environment, table=per_env) without one; and the device_append rows
(TrajectoryWriter appends of host steps into a device table, no target).
Lines that are not JSON objects are skipped.

usage: python3 gather_summary.py FILE.jsonl...
"""
import json
import os
import re
import sys

RATIO_TARGET = 0.90
RATIO_MIN_STEP_BYTES = 4096
TORCH_TARGET = 1.2
INSERT_TARGET_US = 20.0


def load(paths):
    gather, baseline, inserts, notes = {}, {}, [], {}
    for path in paths:
        if not os.path.exists(path):
            continue
        for line in open(path):
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except ValueError:
                continue
            p = r.get("params", {})
            bench = r.get("bench")
            if bench == "gather":
                key = (p.get("tier"), p.get("step_bytes"), p.get("L"))
                gather[key] = r
                if r.get("note"):
                    # The note's first part is the tier's peak copy; the
                    # rest describes that row's call alone.
                    notes.setdefault(p.get("tier"), r["note"].split("; ")[0])
            elif bench == "gather_baseline":
                if r.get("value") is None and not p:
                    notes.setdefault("torch", r.get("note", "no torch baseline"))
                    continue
                baseline[(p.get("step_bytes"), p.get("L"), p.get("method"))] = r
            elif bench in ("vector_insert", "device_append"):
                inserts.append(r)
    return gather, baseline, inserts, notes


def num(v, fmt="{:.1f}"):
    return "-" if v is None else fmt.format(v)


# The part of a gather row's note that splits a call (tools/replaydb/bench/bench_gpu.cc).
CALL_PARTS = re.compile(r"a call ([0-9.]+) us: host part ([0-9.]+) us, device part ([0-9.]+) us "
                        r"\(the copy: ([0-9.]+) us, device part ([0-9.]+) us\)")


def verdict(ok):
    return "-" if ok is None else ("met" if ok else "MISSED")


def main():
    gather, baseline, inserts, notes = load(sys.argv[1:])
    met = missed = 0
    if not gather:
        print("no gather rows (no GPU, an older replaydb, or the bench failed)")
    else:
        head = (f"{'tier':<7} {'step_bytes':>10} {'L':>3} {'ours GB/s':>10} {'ceiling':>9} "
                f"{'ratio':>6} {'>=0.90':>7} {'torch':>9} {'graph':>9} {'ours/torch':>10} "
                f"{'ours/graph':>10} {'>=1.2x':>7}")
        print(head)
        order = {"device": 0, "pinned": 1}
        for key in sorted(gather, key=lambda k: (order.get(k[0], 9), k[1] or 0, k[2] or 0)):
            tier, step_bytes, length = key
            r = gather[key]
            ours = r.get("value")
            ratio = r.get("ratio")
            ratio_ok = None
            if ratio is not None and (step_bytes or 0) >= RATIO_MIN_STEP_BYTES:
                ratio_ok = ratio >= RATIO_TARGET
            eager = baseline.get((step_bytes, length, "torch_index_select"), {}).get("value")
            graph = baseline.get((step_bytes, length, "torch_index_select_graph"), {}).get("value")
            up = ours / eager if ours and eager else None
            up_graph = ours / graph if ours and graph else None
            torch_ok = None
            if tier == "device" and up is not None:
                torch_ok = up >= TORCH_TARGET
            for ok in (ratio_ok, torch_ok):
                if ok is True:
                    met += 1
                elif ok is False:
                    missed += 1
            print(f"{tier:<7} {step_bytes:>10} {length:>3} {num(ours):>10} "
                  f"{num(r.get('ceiling')):>9} {num(ratio, '{:.2f}'):>6} "
                  f"{verdict(ratio_ok):>7} {num(eager):>9} {num(graph):>9} "
                  f"{num(up, '{:.2f}x'):>10} {num(up_graph, '{:.2f}x'):>10} "
                  f"{verdict(torch_ok):>7}")
        ceilings = sorted({(r.get("params", {}).get("tier"), r.get("ceiling_name"))
                           for r in gather.values()}, key=lambda t: order.get(t[0], 9))
        print("ceiling (same run, same payload size): " +
              ", ".join(f"{t} {c}" for t, c in ceilings))
        for tier in ("device", "pinned"):
            if tier in notes:
                print(f"{tier} peak: {notes[tier]}")
        parts = [(k, CALL_PARTS.search(gather[k].get("note", ""))) for k in
                 sorted(gather, key=lambda k: (order.get(k[0], 9), k[1] or 0, k[2] or 0))]
        if any(m for _, m in parts):
            print("microseconds per call (host part: inside the calls; device part: queued "
                  "behind a held stream)")
            print(f"{'tier':<7} {'step_bytes':>10} {'L':>3} {'call':>9} {'host':>7} "
                  f"{'device':>9} {'copy':>9} {'copy dev':>9}")
            for (tier, step_bytes, length), m in parts:
                if m:
                    call, host, device, copy, copy_device = (float(x) for x in m.groups())
                    print(f"{tier:<7} {step_bytes:>10} {length:>3} {call:>9.1f} {host:>7.1f} "
                          f"{device:>9.1f} {copy:>9.1f} {copy_device:>9.1f}")
        if "torch" in notes:
            print(f"torch: {notes['torch']}")
    for r in inserts:
        p = r.get("params", {})
        value = r.get("value")
        if r.get("bench") == "device_append":
            params = " ".join(f"{k}={v}" for k, v in p.items())
            print(f"{r['bench']} {params}: "
                  f"{num(value, '{:.2f}')} us per call from host memory; "
                  f"{r.get('ceiling_name')} "
                  f"{num(r.get('ceiling'), '{:.2f}')} us (ratio {num(r.get('ratio'), '{:.2f}')})"
                  + (f"; {r['note']}" if r.get("note") else ""))
            continue
        table = p.get("table", "per_env")
        wal = p.get("wal", "off")
        threads = p.get("threads", "auto")
        source = p.get("from", "device")
        # The target is for a vector table on the pure device path with the
        # default writer; wal=on adds the logging copy, threads=1 is the
        # one-thread baseline, from=host the upload of rows from host
        # memory, table=per_env one trajectory per environment.
        ok = (None if value is None or table != "vector" or wal == "on" or threads != "auto"
              or source != "device" else value <= INSERT_TARGET_US)
        if ok is True:
            met += 1
        elif ok is False:
            missed += 1
        print(f"vector_insert envs={p.get('envs')} step_bytes={p.get('step_bytes')} "
              f"table={table} wal={wal} threads={threads} from={source}: "
              f"{num(value, '{:.2f}')} us per call; {r.get('ceiling_name')} of the same bytes "
              f"{num(r.get('ceiling'), '{:.2f}')} us (ratio {num(r.get('ratio'), '{:.2f}')}); "
              f"<= {INSERT_TARGET_US:g} us: {verdict(ok)}"
              + (f"; {r['note']}" if r.get("note") else ""))
    if not inserts:
        print("no vector_insert row")
    print(f"targets: {met} met, {missed} missed "
          "(flashbax: 0.87 ms to add one step of 4096 x 4 KiB on the same H100)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
