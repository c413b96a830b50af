#!/usr/bin/env python3
"""The pipeline bubble against its prediction on a model whose stages are equal.

(S-1)/(M+S-1) assumes S stages that each take the same time per micro-batch and
transfers that cost nothing. This benchmark builds such a model in the work
folder: a token embedding (V x H), L identical blocks (Linear H x H + GELU,
exported by torch.onnx with their module paths layers.0 .. layers.L-1) and a
small classifier head, trained with cross-entropy and AdamW. The embedding
makes the first stage's first block compute its input's gradient as every other
block does (a data input needs none, which would leave the first stage one
product short in every backward); the embedding's lookup and the head's small
product then weigh about the same. zero-opt cuts it at pp=2 with partition-method=
type:layers (DeepSpeed's type: balancing, L/2 blocks a stage, the head with the
last) for each schedule and M, zero-run trains it on 2
ranks x 1 thread, and its report gives each stage's measured schedule bubble
(`iteration_schedule_bubble`, per step: of the step less the stage's own
optimizer work, the fraction with no kernel of a forward or backward step
running; the median over the steps after the first) next to the prediction.
Also printed: the last step's whole idle fraction (`pipeline_bubble`, optimizer
included). The final
weights are checked bit-identical to the 1-rank run of the same micro-batches
(accumulation M). Nothing is asserted about time.

Usage: build/pyenv/bin/python bench/pipeline_bubble.py [--layers 8] [--hidden 1024] [--vocab 512]
       [--rows 256] [--micro 2,4,8] [--steps 6] [--schedules 1f1b,gpipe]
"""
import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from pipeline import train_run
from zerokit import mpi


def export(path, layers, hidden, classes, rows, vocab):
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(hidden, hidden)

        def forward(self, x):
            return torch.nn.functional.gelu(self.fc(x))

    class Deep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, hidden)
            self.layers = torch.nn.ModuleList([Block() for _ in range(layers)])
            self.head = torch.nn.Linear(hidden, classes)

        def forward(self, ids):
            x = self.embed(ids)
            for block in self.layers:
                x = block(x)
            return self.head(x)

    torch.manual_seed(0)
    model = Deep().eval()
    torch.onnx.export(model, (torch.randint(0, vocab, (rows,)),), path, input_names=["ids"],
                      output_names=["logits"], opset_version=17, dynamo=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--classes", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--rows", type=int, default=256, help="rows per micro-batch")
    ap.add_argument("--micro", default="2,4,8")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--schedules", default="1f1b,gpipe")
    a = ap.parse_args()
    work = a.work or os.path.join(a.build, "bench", "pipeline-bubble")
    os.makedirs(work, exist_ok=True)
    zero_opt = os.path.join(a.build, "bin", "zero-opt")
    zero_run = os.path.join(a.build, "bin", "zero-run")
    env = mpi.env(root=True, oversubscribe=True, yield_when_idle=True)
    from safetensors.numpy import load_file, save_file

    model = os.path.join(work, f"deep{a.layers}x{a.hidden}v{a.vocab}.onnx")
    export(model, a.layers, a.hidden, a.classes, a.rows, a.vocab)
    rng = np.random.default_rng(0)
    rows = []
    for m in [int(x) for x in a.micro.split(",")]:
        data = os.path.join(work, f"data_m{m}.safetensors")
        save_file({"ids": rng.integers(0, a.vocab, (a.steps, m * a.rows), dtype=np.int64),
                   "labels": rng.integers(0, a.classes, (a.steps, m * a.rows),
                                          dtype=np.int64)}, data)

        def run(tag, pipeline, np_, threads):
            return train_run(zero_opt, zero_run, work, tag, model,
                             {"ids": (a.rows,)}, "cross-entropy:labels",
                             m, pipeline, np_, threads, data, a.steps, env)

        base, _, base_w = run(f"np1_m{m}", "", 1, 1)
        ref = load_file(base_w)
        for sch in a.schedules.split(","):
            t, report, saved = run(f"pp2_{sch}_m{m}",
                                   f"pp=2 micro-batches={m} schedule={sch} "
                                   "partition-method=type:layers", 2, 1)
            got = load_file(saved)
            if any(got[k].tobytes() != ref[k].tobytes() for k in ref):
                sys.exit(f"FAIL: pp=2 {sch} M={m}: final weights differ from the 1-rank run")
            pred = report[0]["pipeline_predicted_bubble"]
            # Each stage's bubble per step (the report's iteration_schedule_bubble),
            # the median over the steps after the first.
            sched = [float(np.median(r["iteration_schedule_bubble"][1:])) for r in report]
            step = [r["pipeline_bubble"] for r in report]
            rows.append((sch, m, t, base, step, sched, pred))
            print(f"pp=2 {sch} M={m}: {t:.3f} s/step (1 rank x 1 thread {base:.3f}), schedule "
                  f"bubble {['%.3f' % b for b in sched]}, predicted {pred:.3f}", flush=True)
    print(f"\nembedding {a.vocab}x{a.hidden}, {a.layers} blocks of Linear {a.hidden}x{a.hidden} "
          f"+ GELU, {a.rows} rows per "
          f"micro-batch, AdamW; pp=2 (type:layers), 2 ranks x 1 thread; median of steps "
          f"2-{a.steps}")
    # The whole pipeline's bubble: the stages' idle time over their time, the
    # mean of the stages' bubbles (their windows are the same step).
    print("| schedule | M | s/step | vs 1 rank x 1 thread | idle per stage (last step) | "
          "bubble per stage (schedule) | (S-1)/(M+S-1) | schedule bubble / predicted | "
          "pipeline (mean) / predicted |")
    print("|---|---|---|---|---|---|---|---|---|")
    for sch, m, t, base, step, sched, pred in rows:
        print(f"| {sch} | {m} | {t:.3f} | {t / base:.2f}x | "
              f"{' / '.join('%.3f' % b for b in step)} | "
              f"{' / '.join('%.3f' % b for b in sched)} | {pred:.3f} | "
              f"{' / '.join('%.2f' % (b / pred) for b in sched)} | "
              f"{np.mean(sched) / pred:.2f} |")


if __name__ == "__main__":
    main()
