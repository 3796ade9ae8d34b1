#!/usr/bin/python3
"""Plots of the recorded benchmark runs (docs/benchmarks/history/).

Reads `replaydb bench --json` lines and the torch baselines in the same shape
(tools/analysis/gather_baseline.py, prio_baseline.py) and draws, into --out:

  gathers.png          payload rate of each gather row as a share of the
                       same-size copy measured in the same run (device and
                       pinned tiers), and device gathers against torch
                       index_select, with the >= 0.90 and >= 1.2x targets; one
                       series per GPU machine (its latest run);
  priorities.png       microseconds per 4096 draws or updates against n: the
                       GPU table, the CPU sum tree, torch's multinomial and
                       cumsum+searchsorted, the CPU baselines, the targets;
  vector_insert.png    microseconds per call of every row of the latest
                       vector-insert run, beside the same-run copy, with the
                       <= 20 us target;
  vector_insert_history.png
                       the 4096 x 1 KiB insert from device memory, run by run.

Without FILE arguments it picks, by file name (MACHINE-DATE[LETTER]-WHAT, see
docs/benchmarks/history/README.md), the latest run of each area in --history
and draws all four plots. With FILE arguments it reads only those files and
draws the plots whose rows they hold (a run's label comes from its file name).

Exits 1, naming the file (and line), when an input is missing or not
`replaydb bench --json` lines, when an area it needs has no rows, or when a
plot was not written. The PNGs carry no timestamp or software version, so the
same inputs give the same bytes with the same matplotlib.

usage: /usr/bin/python3 tools/analysis/plot_benchmarks.py [--history DIR] [--out DIR] [FILE...]
Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_HISTORY = os.path.join(REPO, "docs", "benchmarks", "history")
DEFAULT_OUT = os.path.join(REPO, "docs", "benchmarks")

# Targets, as tools/replaydb/bench/bench.cc and tools/analysis/gather_summary.py hold them.
GATHER_RATIO_TARGET = 0.90  # of the same-size copy, step_bytes >= 4096
GATHER_RATIO_MIN_STEP_BYTES = 4096
GATHER_TORCH_TARGET = 1.2  # x torch index_select, device tier
VECTOR_INSERT_TARGET_US = 20.0
# (bench, n) -> microseconds per call of 4096, at most.
PRIO_TARGETS_US = {
    ("prio_sample", "gpu", 10_000_000): 50.0,
    ("prio_update", "gpu", 10_000_000): 20.0,
    ("prio_sample", "gpu", 100_000_000): 500.0,
    ("prio_sample", "cpu", 1_000_000): 4096.0,
}

RUN_NAME = re.compile(r"^(?P<machine>[a-z0-9]+(?:-host)?)-(?P<date>\d{4}-\d{2}-\d{2})"
                      r"(?P<letter>[a-z]?)-(?P<what>.+)\.jsonl$")

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#7f7f7f"]


class InputError(Exception):
    pass


def run_of(path):
    """(sort key, label, what) of a run file's name; None when it does not follow the scheme."""
    m = RUN_NAME.match(os.path.basename(path))
    if not m:
        return None
    label = f"{m['machine']} {m['date']}{m['letter']}"
    return (m["date"], m["letter"], m["machine"]), label, m["what"]


def label_of(path):
    run = run_of(path)
    return run[1] if run else os.path.basename(path)


def read_rows(path):
    """The JSON objects of one file, checked for the keys the plots use."""
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file")
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError as e:
                raise InputError(f"{path}:{number}: not a JSON object ({e})") from None
            if not isinstance(r, dict):
                raise InputError(f"{path}:{number}: not a JSON object")
            for key in ("bench", "params", "value", "unit"):
                if key not in r:
                    raise InputError(f"{path}:{number}: no \"{key}\" (a replaydb bench --json line "
                                     "has bench, params, value, unit, ceiling, ceiling_name, ratio)")
            if not isinstance(r["params"], dict):
                raise InputError(f"{path}:{number}: \"params\" is not an object")
            for key in ("value", "ceiling"):
                v = r.get(key)
                if v is not None and (not isinstance(v, (int, float)) or not math.isfinite(v)):
                    raise InputError(f"{path}:{number}: \"{key}\" is {v!r}, not a number or null")
            r["_file"] = path
            rows.append(r)
    if not rows:
        raise InputError(f"{path}: no rows")
    return rows


def latest(history, what, machine=None):
    """The newest file of `history` named MACHINE-DATE[LETTER]-WHAT.jsonl."""
    found = []
    for name in os.listdir(history):
        run = run_of(name)
        if run and run[2] == what and (machine is None or run[0][2] == machine):
            found.append((run[0], os.path.join(history, name)))
    return max(found)[1] if found else None


def same_run(path, what):
    """The file of the same run as `path` whose WHAT is `what`."""
    m = RUN_NAME.match(os.path.basename(path))
    other = os.path.join(os.path.dirname(path),
                         f"{m['machine']}-{m['date']}{m['letter']}-{what}.jsonl")
    if not os.path.isfile(other):
        raise InputError(f"{other}: no such file (the run of {path} needs it)")
    return other


def pick_default_inputs(history):
    """Per plot, the files it reads: the latest run of each area."""
    if not os.path.isdir(history):
        raise InputError(f"{history}: no such directory")
    picks = {}
    gather = []
    for machine in ("h100", "h200"):
        bench = latest(history, "gather-bench", machine)
        if bench:
            gather.append([bench, same_run(bench, "gather-baseline")])
    if not gather:
        raise InputError(f"{history}: no *-gather-bench.jsonl")
    picks["gathers"] = gather
    prio = latest(history, "prio-bench")
    if not prio:
        raise InputError(f"{history}: no *-prio-bench.jsonl")
    picks["priorities"] = [[prio, same_run(prio, "prio-baseline")]]
    insert = latest(history, "vector-insert")
    if not insert:
        raise InputError(f"{history}: no *-vector-insert.jsonl")
    picks["vector_insert"] = [[insert]]
    runs = []
    for name in os.listdir(history):
        run = run_of(name)
        if run and run[2].startswith("vector-insert"):
            runs.append((run[0], os.path.join(history, name)))
    picks["vector_insert_history"] = [[p] for _, p in sorted(runs)]
    return picks


def pick_given_inputs(paths):
    """Given files: every run is the files of one name stem; plots take what they find."""
    groups = {}
    for p in paths:
        run = run_of(p)
        key = run[1] if run else os.path.basename(p)
        groups.setdefault(key, []).append(p)
    runs = sorted(groups.items(), key=lambda kv: (run_of(kv[1][0]) or ((kv[0],),))[0])
    every = [files for _, files in runs]
    return {"gathers": every, "priorities": every, "vector_insert": every,
            "vector_insert_history": every}


def load_group(files):
    rows = []
    for f in files:
        rows.extend(read_rows(f))
    return rows


# ------------------------------------------------------------------ gathers

def shape_label(step_bytes, L):
    size = {256: "256 B", 4096: "4 KiB", 65536: "64 KiB"}.get(step_bytes, f"{step_bytes} B")
    return f"{size}\nx {L}"


def gather_series(rows):
    gather, torch = {}, {}
    for r in rows:
        p = r["params"]
        if r["bench"] == "gather":
            gather[(p.get("tier"), p.get("step_bytes"), p.get("L"))] = r
        elif r["bench"] == "gather_baseline" and p.get("method") == "torch_index_select":
            torch[(p.get("step_bytes"), p.get("L"))] = r["value"]
    return gather, torch


def plot_gathers(plt, groups, out):
    series = []
    for files in groups:
        rows = load_group(files)
        gather, torch = gather_series(rows)
        if gather:
            used = [r["_file"] for r in rows if r["bench"] in ("gather", "gather_baseline")]
            series.append((label_of(files[0]), gather, torch, used))
    if not series:
        return None
    shapes = sorted({(k[1], k[2]) for _, g, _, _ in series for k in g})
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    width = 0.8 / len(series)
    x = list(range(len(shapes)))
    for panel, tier in ((0, "device"), (1, "pinned")):
        ax = axes[panel]
        for i, (label, gather, torch, _) in enumerate(series):
            xs, ys, tx, ty = [], [], [], []
            for j, (sb, L) in enumerate(shapes):
                r = gather.get((tier, sb, L))
                if r is None or r.get("ratio") is None:
                    continue
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(r["ratio"])
                t = torch.get((sb, L))
                if tier == "device" and t and r.get("ceiling"):
                    tx.append(xs[-1])
                    ty.append(t / r["ceiling"])
            ax.bar(xs, ys, width * 0.9, color=COLORS[i % len(COLORS)], label=f"ours, {label}")
            if tx:
                ax.plot(tx, ty, "x", color="black", markersize=7, linestyle="none",
                        label="torch index_select, same run" if i == 0 else None)
                ax.plot(tx, [GATHER_TORCH_TARGET * v for v in ty], "_", color="red",
                        markersize=12, markeredgewidth=2, linestyle="none",
                        label=f"{GATHER_TORCH_TARGET} x torch (what its target asks)"
                        if i == 0 else None)
        ax.axhline(GATHER_RATIO_TARGET, color="red", linestyle="--", linewidth=1,
                   label=f"target >= {GATHER_RATIO_TARGET:.2f} (rows >= 4 KiB)")
        ax.axhline(1.0, color="grey", linewidth=0.6)
        ax.set_xticks(x, [shape_label(*s) for s in shapes])
        ax.set_ylabel("payload rate / same-size copy (same run)")
        copy = "device-to-device copy / 2" if tier == "device" else "pinned host-to-device copy"
        ax.set_title(f"{tier} tier: share of a {copy}", fontsize=10)
        ax.set_ylim(0, 1.55)
        ax.legend(fontsize=7, loc="upper center", ncol=2)
    ax = axes[2]
    for i, (label, gather, torch, _) in enumerate(series):
        xs, ys = [], []
        for j, (sb, L) in enumerate(shapes):
            r = gather.get(("device", sb, L))
            t = torch.get((sb, L))
            if r is None or not t:
                continue
            xs.append(j - 0.4 + width * (i + 0.5))
            ys.append(r["value"] / t)
        ax.bar(xs, ys, width * 0.9, color=COLORS[i % len(COLORS)], label=f"ours, {label}")
    ax.axhline(GATHER_TORCH_TARGET, color="red", linestyle="--", linewidth=1,
               label=f"target >= {GATHER_TORCH_TARGET}x torch")
    ax.axhline(1.0, color="grey", linewidth=0.6)
    ax.set_xticks(x, [shape_label(*s) for s in shapes])
    ax.set_ylabel("ours / torch index_select (GB/s over GB/s)")
    ax.set_title("device tier: against torch index_select (eager)", fontsize=10)
    ax.set_ylim(0, 3.0)
    ax.legend(fontsize=7, loc="upper right")
    fig.suptitle("Window gathers, batch 256, row size x window length L "
                 "(replaydb bench --filter gather; tools/analysis/gather_baseline.py)", fontsize=11)
    return save(fig, out, "gathers.png", [f for s in series for f in s[3]])


# --------------------------------------------------------------- priorities

def plot_priorities(plt, groups, out):
    rows, files_used = [], []
    for files in groups:
        got = [r for r in load_group(files) if r["bench"].startswith("prio_")]
        if got:  # the last group holding any: the latest
            rows, files_used = got, [r["_file"] for r in got]
    if not rows:
        return None
    series = {}
    ceilings = {}
    for r in rows:
        p = r["params"]
        n = p.get("n")
        if r["bench"] in ("prio_sample", "prio_update"):
            series.setdefault((r["bench"], p.get("device")), {})[n] = r["value"]
            if r.get("ceiling") is not None:
                ceilings.setdefault((r["bench"], r["ceiling_name"]), {})[n] = r["ceiling"]
        elif r["bench"] == "prio_sample_baseline":
            series.setdefault(("prio_sample", p.get("method")), {})[n] = r["value"]
    names = {
        "gpu": "GPU table (ours)", "cpu": "CPU sum tree (ours)",
        "torch_multinomial": "torch.multinomial", "torch_cumsum_searchsorted":
        "torch cumsum + searchsorted",
    }
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for ax, bench, title in ((axes[0], "prio_sample", "sample 4096 items"),
                             (axes[1], "prio_update", "update 4096 priorities")):
        i = 0
        for (b, who), points in sorted(series.items()):
            if b != bench:
                continue
            ns = sorted(n for n, v in points.items() if v is not None)
            ax.plot(ns, [points[n] for n in ns], "o-", color=COLORS[i % len(COLORS)],
                    label=names.get(who, who))
            i += 1
        for (b, name), points in sorted(ceilings.items()):
            if b != bench:
                continue
            ns = sorted(points)
            ax.plot(ns, [points[n] for n in ns], "s:", color="grey",
                    label=f"{name} (CPU baseline, same run)")
        tx, ty = [], []
        for (b, device, n), us in PRIO_TARGETS_US.items():
            if b == bench:
                tx.append(n)
                ty.append(us)
                ax.annotate(f"{device} <= {us:g} us", (n, us), textcoords="offset points",
                            xytext=(8, -3), fontsize=7, color="red")
        if bench == "prio_sample" and ("prio_sample", "torch_multinomial") in series:
            points = series[("prio_sample", "torch_multinomial")]
            for n, v in points.items():
                if v is None:
                    ax.annotate("torch.multinomial: no result\n(at most 2^24 categories)",
                                (n, 35), fontsize=7, ha="right", color=COLORS[3])
        ax.plot(tx, ty, "v", color="red", markersize=9, linestyle="none",
                label="target (at most)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("n (priorities in the table)")
        ax.set_ylabel("microseconds per call (log)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", linewidth=0.4)
        ax.legend(fontsize=7)
    fig.suptitle(f"Priority tables, {label_of(files_used[0])} "
                 "(replaydb bench --big --filter prio; tools/analysis/prio_baseline.py)",
                 fontsize=11)
    return save(fig, out, "priorities.png", files_used)


# ------------------------------------------------------------ vector insert

def insert_label(r):
    p = r["params"]
    if r["bench"] == "vector_insert_host":
        return (f"per-env table in host memory, {p.get('step_bytes')} B rows\n"
                "(vector_insert_host: no GPU needed)")
    table = {"vector": "vector table", "per_env": "per-env table"}.get(p.get("table"),
                                                                     "per-env table")
    parts = [table, f"from {p.get('from', 'device')}"]
    if p.get("threads") not in (None, "auto"):
        parts.append(f"{p['threads']} thread")
    if p.get("wal") == "on":
        parts.append("log on")
    return ", ".join(parts)


def is_target_row(r):
    p = r["params"]
    return (r["bench"] == "vector_insert" and p.get("table") == "vector"
            and p.get("from", "device") == "device" and p.get("wal", "off") == "off")


def plot_vector_insert(plt, groups, out):
    rows, files_used = [], []
    for files in groups:
        got = [r for r in load_group(files)
               if r["bench"] in ("vector_insert", "vector_insert_host")]
        if got:
            rows, files_used = got, [r["_file"] for r in got]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(11, 0.55 * len(rows) + 1.8))
    y = list(range(len(rows)))[::-1]
    values = [r["value"] for r in rows]
    colors = [COLORS[2] if is_target_row(r) else COLORS[0] for r in rows]
    ax.barh(y, values, 0.6, color=colors, label="us per call (ours)")
    cy = [yy for yy, r in zip(y, rows) if r.get("ceiling") is not None]
    cv = [r["ceiling"] for r in rows if r.get("ceiling") is not None]
    ax.plot(cv, cy, "|", color="black", markersize=18, markeredgewidth=2,
            label="same-run copy of the same bytes (ceiling)")
    for yy, r in zip(y, rows):
        ax.text(1.12, yy, f"{r['value']:.1f} us", va="center", fontsize=8, color="white",
                fontweight="bold")
    ax.axvline(VECTOR_INSERT_TARGET_US, color="red", linestyle="--", linewidth=1,
               label=f"target <= {VECTOR_INSERT_TARGET_US:.0f} us (vector table from device)")
    ax.set_yticks(y, [insert_label(r) for r in rows], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(1, max(values) * 3)
    ax.set_xlabel("microseconds per call, 4096 environments x 1 KiB (4 B where marked); log")
    ax.set_title(f"Vector inserts, {label_of(files_used[0])} "
                 "(replaydb bench --filter vector_insert); green: the row held to the target",
                 fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    return save(fig, out, "vector_insert.png", files_used)


def plot_vector_insert_history(plt, groups, out):
    per_env, vector, used = [], [], []
    for files in groups:
        rows = [r for r in load_group(files) if r["bench"] == "vector_insert"]
        if not rows:
            continue
        label = label_of(files[0])
        for r in rows:
            p = r["params"]
            if p.get("step_bytes") != 1024 or p.get("from", "device") != "device":
                continue
            if p.get("wal", "off") != "off" or p.get("threads", "auto") != "auto":
                continue
            (vector if p.get("table") == "vector" else per_env).append((label, r["value"]))
            used.append(r["_file"])
    if not per_env and not vector:
        return None
    labels = []
    for label, _ in per_env + vector:
        if label not in labels:
            labels.append(label)
    index = {label: i for i, label in enumerate(labels)}
    fig, ax = plt.subplots(figsize=(12, 4.8))
    for points, name, color in ((per_env, "per-environment table (one trajectory each)",
                                 COLORS[0]),
                                (vector, "vector table (TableSpec::lanes = 4096)", COLORS[2])):
        if points:
            ax.plot([index[l] for l, _ in points], [v for _, v in points], "o-", color=color,
                    label=name)
    ax.axhline(VECTOR_INSERT_TARGET_US, color="red", linestyle="--", linewidth=1,
               label=f"target <= {VECTOR_INSERT_TARGET_US:.0f} us")
    ax.set_yscale("log")
    ticks = [t for t in (5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
             if t <= 2 * max(v for _, v in per_env + vector)]
    ax.set_yticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("microseconds per call (log)")
    ax.set_xlabel("run (machine, date and letter; docs/benchmarks/history/)")
    ax.set_title("Vector insert of 4096 environments x 1 KiB from device memory, log off, "
                 "default writer threads, run by run", fontsize=10)
    ax.grid(True, which="major", axis="y", linewidth=0.4)
    ax.legend(fontsize=8)
    return save(fig, out, "vector_insert_history.png", used)


# -------------------------------------------------------------------- main

def save(fig, out, name, files):
    path = os.path.join(out, name)
    fig.tight_layout()
    # No "Software" (matplotlib's version) and no date: the bytes depend on
    # the inputs alone.
    fig.savefig(path, dpi=100, metadata={"Software": None})
    import matplotlib.pyplot as plt
    plt.close(fig)
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        raise InputError(f"{path}: not written")
    shown = ", ".join(os.path.relpath(f, REPO) if f.startswith(REPO) else f
                      for f in dict.fromkeys(files))
    print(f"{path}: from {shown}")
    return path


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--history", default=DEFAULT_HISTORY,
                        help="folder of recorded runs (default: docs/benchmarks/history)")
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help="folder the PNGs go into (default: docs/benchmarks)")
    parser.add_argument("files", nargs="*", help="read only these files")
    args = parser.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"plot_benchmarks: needs matplotlib (Debian: python3-matplotlib): {e}",
              file=sys.stderr)
        return 1
    plt.rcParams.update({"font.size": 9})
    try:
        os.makedirs(args.out, exist_ok=True)
        picks = pick_given_inputs(args.files) if args.files else \
            pick_default_inputs(args.history)
        plots = (("gathers", plot_gathers), ("priorities", plot_priorities),
                 ("vector_insert", plot_vector_insert),
                 ("vector_insert_history", plot_vector_insert_history))
        written, missing = [], []
        for name, plot in plots:
            path = plot(plt, picks[name], args.out)
            (written if path else missing).append(name)
        if missing and not args.files:
            raise InputError(f"{args.history}: no rows for {', '.join(missing)}")
        if not written:
            raise InputError(f"{', '.join(args.files)}: no rows that any plot draws")
        for name in missing:
            print(f"plot_benchmarks: {name}.png skipped: no such rows in the files given")
    except InputError as e:
        print(f"plot_benchmarks: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
