#!/usr/bin/env python3
"""Plots a zero-run --log-json file: the training loss (and eval loss, where
the log has "eval_loss" records) and the learning rate against the step, as
one PNG.

    build/pyenv/bin/python scripts/plot_log.py log.json [-o log.png] [--smooth K]

--smooth K adds the loss's moving mean over K steps. The figure is written
atomically (to a temporary name, then renamed). Prints what it plotted:
"plotted N steps (loss first -> last), E eval points, lr min .. max -> PATH".
Needs matplotlib (scripts/setup-pyenv.sh installs it in the test environment).
"""
import argparse
import json
import os
import sys

from plotting import pyplot, save_png


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", help="a zero-run --log-json file")
    ap.add_argument("-o", "--output", help="the PNG (default: LOG with .png)")
    ap.add_argument("--smooth", type=int, default=0, help="moving mean over K steps")
    a = ap.parse_args()
    try:
        records = json.load(open(a.log))
    except (OSError, ValueError) as e:
        sys.exit(f"plot_log: {a.log}: cannot read a --log-json file: {e}")
    if not isinstance(records, list):
        sys.exit(f"plot_log: {a.log}: expected a JSON array of step records (zero-run --log-json)")
    steps = [r for r in records if isinstance(r, dict) and "loss" in r and "step" in r]
    evals = [r for r in records if isinstance(r, dict) and "eval_loss" in r and "step" in r]
    if not steps:
        sys.exit(f"plot_log: {a.log}: no step records (objects with \"step\" and \"loss\")")
    plt = pyplot("plot_log")
    out = a.output or os.path.splitext(a.log)[0] + ".png"
    x = [r["step"] for r in steps]
    loss = [r["loss"] for r in steps]
    lrs = [r["lr"] for r in steps if "lr" in r]
    fig, axes = plt.subplots(2 if lrs else 1, 1, figsize=(8, 6 if lrs else 4), sharex=True,
                             squeeze=False)
    ax = axes[0][0]
    ax.plot(x, loss, lw=1, alpha=0.6 if a.smooth > 1 else 1, label="train loss")
    if a.smooth > 1 and len(loss) >= a.smooth:
        k = a.smooth
        mean = [sum(loss[i - k + 1:i + 1]) / k for i in range(k - 1, len(loss))]
        ax.plot(x[k - 1:], mean, lw=2, label=f"train loss, mean of {k}")
    if evals:
        ax.plot([r["step"] for r in evals], [r["eval_loss"] for r in evals], "o-",
                label="eval loss")
    ax.set_ylabel("loss")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(os.path.basename(a.log))
    if lrs:
        lx = [r["step"] for r in steps if "lr" in r]
        axes[1][0].plot(lx, lrs, color="tab:green")
        axes[1][0].set_ylabel("learning rate")
        axes[1][0].grid(alpha=0.3)
    axes[-1][0].set_xlabel("step")
    fig.tight_layout()
    save_png(fig, out)
    lr_text = f", lr {min(lrs):g} .. {max(lrs):g}" if lrs else ""
    print(f"plotted {len(steps)} steps (loss {loss[0]:.4f} -> {loss[-1]:.4f}), "
          f"{len(evals)} eval points{lr_text} -> {out}")


if __name__ == "__main__":
    main()
