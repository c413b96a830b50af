#!/usr/bin/env python3
"""The GPU run kit's PyTorch side of the headline (kit.py runs it).

GPT-2-small (GPT2LMHeadModel's default config: 12 layers, 768 hidden, 12 heads,
50257 vocab, tied embedding, dropout 0, eager attention as the ONNX export has
it) from transformers when it imports, else a pure-torch GPT-2 with the same
parameter names and arithmetic; loads the weights file zero-run reads (the same
random weights), then either
  --mode train    AdamW (lr from --lr, torch's defaults otherwise: betas 0.9,0.999,
                  eps 1e-8, weight decay 0.01, as zero-opt's adamw) on the batches of
                  --data (input_ids, labels = input_ids; [steps, batch, seq]); each
                  step timed from forward to zero_grad, synchronised; the first
                  --warmup steps are left out of the figures
  --mode forward  logits of --ids under no_grad, --warmup untimed then --repeat timed
Writes --out (JSON): times, losses, torch.cuda.max_memory_allocated / reserved (or
peak RSS on the CPU). Exit status 3 (with a message) when torch is not importable.
ZRT_KIT_NO_TRANSFORMERS=1 takes the pure-torch model even where transformers is.
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time

import numpy as np


def read_arrays(path):
    """The integer and float32 arrays of a safetensors file (json + numpy)."""
    kinds = {"I64": np.int64, "I32": np.int32, "F32": np.float32}
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        blob = f.read()
    return {name: np.frombuffer(blob[i["data_offsets"][0]:i["data_offsets"][1]],
                                kinds[i["dtype"]]).reshape(i["shape"]).copy()
            for name, i in header.items() if name != "__metadata__"}


def stats_ms(times):
    return {"mean_ms": round(1e3 * statistics.mean(times), 3),
            "median_ms": round(1e3 * statistics.median(times), 3),
            "min_ms": round(1e3 * min(times), 3), "max_ms": round(1e3 * max(times), 3),
            "timed": len(times)}


def mini_gpt2(torch, n_layer=12, n_embd=768, n_head=12, vocab=50257, n_pos=1024):
    """GPT-2 in plain torch, named as transformers names it."""
    nn, F = torch.nn, torch.nn.functional

    class Conv1D(nn.Module):  # y = x W + b, W [in, out]
        def __init__(self, nin, nout):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(nin, nout))
            self.bias = nn.Parameter(torch.zeros(nout))

        def forward(self, x):
            return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight) \
                .reshape(*x.shape[:-1], -1)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn, self.c_proj = Conv1D(n_embd, 3 * n_embd), Conv1D(n_embd, n_embd)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            q, k, v = (t.view(b, s, n_head, -1).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, torch.finfo(att.dtype).min).softmax(-1)
            return self.c_proj((att @ v).transpose(1, 2).reshape(b, s, n_embd))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc, self.c_proj = Conv1D(n_embd, 4 * n_embd), Conv1D(4 * n_embd, n_embd)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(n_embd), Attention()
            self.ln_2, self.mlp = nn.LayerNorm(n_embd), MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(n_pos, n_embd)
            self.h = nn.ModuleList(Block() for _ in range(n_layer))
            self.ln_f = nn.LayerNorm(n_embd)

    class Output:
        def __init__(self, logits, loss):
            self.logits, self.loss = logits, loss

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = Transformer()
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)
            self.lm_head.weight = self.transformer.wte.weight

        def forward(self, input_ids, labels=None):
            t = self.transformer
            pos = torch.arange(input_ids.shape[1], device=input_ids.device)
            x = t.wte(input_ids) + t.wpe(pos)
            for block in t.h:
                x = block(x)
            logits = self.lm_head(t.ln_f(x))
            loss = None
            if labels is not None:
                loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocab),
                                       labels[:, 1:].reshape(-1))
            return Output(logits, loss)

    return GPT2()


def build_model(torch):
    try:
        if os.environ.get("ZRT_KIT_NO_TRANSFORMERS") == "1":
            raise ImportError("ZRT_KIT_NO_TRANSFORMERS=1")
        import transformers as tf
        cfg = tf.GPT2Config(attn_implementation="eager", use_cache=False, resid_pdrop=0.0,
                            embd_pdrop=0.0, attn_pdrop=0.0)
        model = tf.GPT2LMHeadModel(cfg)
        return model, f"transformers {tf.__version__} GPT2LMHeadModel (eager attention)"
    except Exception as e:  # no transformers, or another API
        why = f"{type(e).__name__}: {str(e)[:120]}"
        return mini_gpt2(torch), f"pure-torch GPT-2 of the same shapes (transformers: {why})"


def load_weights(torch, model, path, device):
    params = dict(model.named_parameters(remove_duplicate=False))
    if "lm_head.weight" in params and "transformer.wte.weight" in params:
        if params["lm_head.weight"] is not params["transformer.wte.weight"]:
            sys.exit("the model's embedding and LM head are not tied")
        del params["transformer.wte.weight"]  # one initializer, lm_head.weight
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        base = 8 + n
        done = set()
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if name not in params:
                sys.exit(f"the weights file has {name}, not a parameter of the PyTorch model")
            p = params[name]
            if info["dtype"] != "F32" or list(p.shape) != info["shape"]:
                sys.exit(f"{name}: file {info['dtype']} {info['shape']}, model {list(p.shape)}")
            lo, hi = info["data_offsets"]
            f.seek(base + lo)
            a = np.fromfile(f, dtype=np.float32, count=(hi - lo) // 4).reshape(info["shape"])
            with torch.no_grad():
                p.copy_(torch.from_numpy(a))
            done.add(name)
    missing = set(params) - done
    if missing:
        sys.exit(f"the weights file lacks {sorted(missing)[:5]}")
    return model.to(device)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["train", "forward"], required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--weights", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--data")
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--ids")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"error: torch is not importable ({e}): no PyTorch figures", file=sys.stderr)
        return 3
    cuda = a.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print("error: torch sees no CUDA device", file=sys.stderr)
        return 1
    # float32 throughout, as zero-run computes (cuBLAS's default math, no TF32).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    t0 = time.perf_counter()
    model, impl = build_model(torch)
    model = load_weights(torch, model, a.weights, a.device)
    load_s = time.perf_counter() - t0

    def sync():
        if cuda:
            torch.cuda.synchronize()

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    out = {"impl": impl, "torch": torch.__version__, "device": a.device, "load_s": round(load_s, 1)}
    if a.mode == "train":
        data = read_arrays(a.data)
        ids_all = torch.from_numpy(data["input_ids"]).to(a.device)
        labels_all = torch.from_numpy(data["labels"]).to(a.device)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr)  # torch's defaults otherwise
        times, losses = [], []
        for s in range(min(a.steps, ids_all.shape[0])):
            sync()
            t = time.perf_counter()
            loss = model(input_ids=ids_all[s], labels=labels_all[s]).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            sync()
            times.append(time.perf_counter() - t)
            losses.append(loss.item())
            print(f"torch step {s + 1}: loss {losses[-1]:.6f} {times[-1] * 1e3:.1f} ms",
                  file=sys.stderr, flush=True)
        out.update(stats_ms(times[a.warmup:] or times[-1:]))
        out["losses"] = losses
        out["adamw"] = f"torch.optim.AdamW(lr={a.lr:g}) defaults (foreach where supported)"
    else:
        ids = torch.from_numpy(np.load(a.ids)).to(a.device)
        model.eval()
        times = []
        with torch.no_grad():
            for r in range(a.warmup + a.repeat):
                sync()
                t = time.perf_counter()
                model(input_ids=ids).logits
                sync()
                if r >= a.warmup:
                    times.append(time.perf_counter() - t)
        out.update(stats_ms(times))
    if cuda:
        out["max_memory_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        out["max_memory_reserved_mib"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
