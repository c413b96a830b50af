"""What plot_log.py and plot_memory.py share: matplotlib without a display, and
a figure written atomically (to a temporary name beside it, then renamed)."""
import os
import sys
import tempfile


def pyplot(tool):
    """matplotlib.pyplot on the Agg backend; `tool` names the caller in the
    message when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit(f"{tool}: matplotlib is missing; run scripts/setup-pyenv.sh and use "
                 "build/pyenv/bin/python")
    return plt


def save_png(fig, out):
    """Writes `fig` to `out` as a PNG: a temporary file in its folder, renamed."""
    fd, tmp = tempfile.mkstemp(suffix=".png", dir=os.path.dirname(os.path.abspath(out)))
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=100)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
