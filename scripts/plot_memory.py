#!/usr/bin/env python3
"""Plots memory over time from a zero-run --trace file: each rank's live bytes
per arena (the "live bytes: ARENA" counter tracks zero-run writes when memory is
tracked, i.e. with --report or --report-json) stacked against the time of the
run, one panel per rank, as one PNG beside the trace.

    build/pyenv/bin/python scripts/plot_memory.py trace.json [-o trace.memory.png]

The figure is written atomically (to a temporary name, then renamed). Prints
what it plotted: "plotted R ranks, peak P MiB (rank r) -> PATH". Needs
matplotlib (scripts/setup-pyenv.sh installs it in the test environment).
"""
import argparse
import json
import os
import sys

from plotting import pyplot, save_png

PREFIX = "live bytes: "


def series(events):
    """{rank: {arena: [(ms, bytes), ...]}} from the counter events, in time order."""
    out = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "C":
            continue
        name = e.get("name", "")
        if not name.startswith(PREFIX):
            continue
        out.setdefault(e["pid"], {}).setdefault(name[len(PREFIX):], []).append(
            (e["ts"] / 1e3, e["args"]["bytes"]))
    for arenas in out.values():
        for points in arenas.values():
            points.sort()
    return out


def step(points, times):
    """The value of a step function given by `points` at each of `times`."""
    values, k, last = [], 0, 0
    for t in times:
        while k < len(points) and points[k][0] <= t:
            last = points[k][1]
            k += 1
        values.append(last)
    return values


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="a zero-run --trace file (run with --report)")
    ap.add_argument("-o", "--output", help="the PNG (default: TRACE with .memory.png)")
    a = ap.parse_args()
    try:
        doc = json.load(open(a.trace))
    except (OSError, ValueError) as e:
        sys.exit(f"plot_memory: {a.trace}: cannot read a --trace file: {e}")
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    ranks = series(events)
    if not ranks:
        sys.exit(f"plot_memory: {a.trace}: no memory counters; run zero-run with --report "
                 "(or --report-json) beside --trace")
    plt = pyplot("plot_memory")
    out = a.output or os.path.splitext(a.trace)[0] + ".memory.png"
    fig, axes = plt.subplots(len(ranks), 1, figsize=(9, 2.6 * len(ranks)), sharex=True,
                             squeeze=False)
    peak, peak_rank = 0, None
    for ax, rank in zip((row[0] for row in axes), sorted(ranks)):
        arenas = ranks[rank]
        times = sorted({t for points in arenas.values() for t, _ in points})
        names = sorted(arenas)
        stacks = [[v / 2**20 for v in step(arenas[n], times)] for n in names]
        ax.stackplot(times, stacks, labels=names, step="post", alpha=0.8)
        total = [sum(col) for col in zip(*stacks)]
        if total and max(total) > peak:
            peak, peak_rank = max(total), rank
        ax.set_ylabel(f"rank {rank}\nMiB live")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize="small")
    axes[0][0].set_title(f"{os.path.basename(a.trace)}: live bytes per arena")
    axes[-1][0].set_xlabel("ms from the start of the run")
    fig.tight_layout()
    save_png(fig, out)
    print(f"plotted {len(ranks)} ranks, peak {peak:.2f} MiB (rank {peak_rank}) -> {out}")


if __name__ == "__main__":
    main()
