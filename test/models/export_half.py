#!/usr/bin/env python3
"""16-bit exports of two fixtures, as a user exports a model trained in half precision:
the logits models of export.py's `llama` (in bfloat16) and `gpt2` (in float16), cast
with `model.to(dtype)` and exported with torch.onnx.export(dynamo=True).

Writes, next to this file:
    llama_bf16.onnx, gpt2_f16.onnx
    <name>.ref.safetensors   input.*; torch.logits (torch's own 16-bit CPU forward,
                             as f32) and torch32.logits (the fp32 model's forward),
                             whose difference is torch's own 16-bit error: the
                             yardstick test/e2e/half_forward.py --exported holds
                             zero-run to.

Usage (scripts/setup-pyenv.sh full): build/pyenv/bin/python test/models/export_half.py
"""
import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import export as ex  # noqa: E402

CASES = (("llama", torch.bfloat16, "llama_bf16"), ("gpt2", torch.float16, "gpt2_f16"))


def main():
    for name, dtype, out in CASES:
        ex.log(f"== {out}")
        logits32, _, (li, ldyn), _, cfg = ex.build(name)
        with torch.no_grad():
            t32 = logits32(**li).float().numpy()
        m = logits32.to(dtype)
        p = ex.export_dynamo(m, li, ldyn, "logits", HERE / f"{out}.onnx")
        with torch.no_grad():
            t16 = m(**li).float().numpy()
        tensors = {f"input.{k}": v for k, v in ex.np_inputs(li).items()}
        tensors["torch.logits"] = t16
        tensors["torch32.logits"] = t32
        meta = {"model": name, "dtype": str(dtype), "seed": str(ex.SEED),
                "config": json.dumps(cfg, sort_keys=True),
                "exporter": "torch.onnx.export(dynamo=True)",
                "input_shapes": ex.shape_str(li),
                **{f"version.{k}": v for k, v in ex.versions().items()}}
        ex.save_ref(HERE / f"{out}.ref.safetensors", tensors, meta)
        ex.log(f"  wrote {p.name}: torch's own {dtype} error vs fp32 "
               f"{abs(t16 - t32).max():.3g}")
    ex.log(ex.describe_markdown([HERE / f"{out}.onnx" for _, _, out in CASES]))


if __name__ == "__main__":
    main()
