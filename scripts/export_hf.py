#!/usr/bin/env python3
"""Exports a Hugging Face model to the ONNX graph zero-opt trains.

    build/pyenv/bin/python scripts/export_hf.py MODEL -o model.onnx
        [--task causal-lm|sequence-classification] [--loss]
        [--set KEY=VALUE ...] [--num-labels N] [--batch 2 --seq 16]
        [--train-dropout] [--exporter dynamo|torchscript] [--no-weights]

MODEL is a local folder (config.json, and its weights when present) or a
model type transformers knows ("gpt2", "llama", "bert", ...), built from its
default config with random weights: nothing is downloaded. --set overrides
config keys (--set n_layer=2 --set n_embd=64: a tiny model for a first run).

What is written:
  - the model in fp32, eager attention, no KV cache, initializer names = the
    PyTorch parameter names (what zero-run --save and the checkpoints use);
  - dynamic batch and sequence (--batch/--seq only size the example inputs);
  - the graph as exported (the dynamo exporter's optimize=False: no folding
    that would merge or rename parameters);
  - by default the logits model (inputs input_ids[, attention_mask] ->
    logits): compile it with zero-opt --train --loss causal-lm:labels (or
    cross-entropy:labels for a classifier); with --loss, the loss model
    (inputs ..., labels -> loss, Hugging Face's own loss: causal LMs shift
    the labels inside, so zero-run --tokens' default --labels same fits);
  - dropout: the model in eval mode (no dropout) unless --train-dropout,
    which exports it in training mode with the config's probabilities
    (ONNX Dropout with training_mode, which zero-run samples per step).
With --no-weights (dynamo exporter) the model is built on PyTorch's meta
device and no weight is ever made: each parameter is written as an ONNX
external-data reference (its dims, type, offset and length) to MODEL.onnx.data,
a file that is not created. Any size exports in seconds (a 70B Llama: 276 GB of
weights that exist nowhere); compile it with zero-opt --no-weights and
simulate it (docs/simulate.md). Such a model cannot be trained or run.
Prints the inputs, the parameter count and the next commands.
"""
import argparse
import os
import sys
import warnings


def parse_value(text):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def save_without_weights(prog, path, data_name):
    """Saves ONNX program PROG to PATH with every initializer an external-data
    reference to DATA_NAME (next to PATH), which is not written."""
    import onnx
    from onnx import TensorProto
    prog.save(path, include_initializers=False)
    model = onnx.load(path, load_external_data=False)
    inits, offset = [], 0
    for name, value in prog.model.graph.initializers.items():
        dims = [int(d) for d in value.shape]
        dtype = int(value.dtype.value if hasattr(value.dtype, "value") else value.dtype)
        t = TensorProto(name=name, dims=dims, data_type=dtype)
        t.data_location = TensorProto.EXTERNAL
        length = onnx.helper.tensor_dtype_to_np_dtype(dtype).itemsize
        for d in dims:
            length *= d
        for key, val in (("location", data_name), ("offset", offset), ("length", length)):
            entry = t.external_data.add()
            entry.key, entry.value = key, str(val)
        offset += length
        inits.append(t)
    names = {t.name for t in inits}
    inputs = [i for i in model.graph.input if i.name not in names]
    del model.graph.input[:]
    model.graph.input.extend(inputs)
    model.graph.initializer.extend(inits)
    onnx.save(model, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="a local folder or a transformers model type")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--task", default="causal-lm", choices=["causal-lm", "sequence-classification"])
    ap.add_argument("--loss", action="store_true", help="export the loss model (labels input)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--num-labels", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--train-dropout", action="store_true")
    ap.add_argument("--exporter", default="dynamo", choices=["dynamo", "torchscript"])
    ap.add_argument("--seed", type=int, default=0, help="random init's seed")
    ap.add_argument("--no-weights", action="store_true",
                    help="build on the meta device; the parameters as references to an "
                         "external-data file that is not written (for zero-opt --no-weights)")
    a = ap.parse_args()
    try:
        import torch
        import transformers as tf
    except ImportError as e:
        sys.exit(f"export_hf: {e.name} is missing; run scripts/setup-pyenv.sh full and use "
                 "build/pyenv/bin/python")

    overrides = {}
    for kv in a.set:
        if "=" not in kv:
            sys.exit(f"export_hf: --set {kv}: expected KEY=VALUE")
        k, v = kv.split("=", 1)
        overrides[k] = parse_value(v)
    local = os.path.isdir(a.model)
    if local and not os.path.isfile(os.path.join(a.model, "config.json")):
        # As transformers, a folder of that name is read before a model type.
        sys.exit(f"export_hf: {a.model}: a folder without config.json; give a model folder "
                 f"(config.json, and its weights), or run from another directory to build "
                 f"the model type {os.path.basename(os.path.normpath(a.model))!r}")
    try:
        if local:
            config = tf.AutoConfig.from_pretrained(a.model, local_files_only=True, **overrides)
        else:
            config = tf.AutoConfig.for_model(a.model, **overrides)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"export_hf: {a.model}: neither a model folder nor a model type "
                 f"transformers knows ({e})")
    config.use_cache = False
    config._attn_implementation = "eager"
    cls = (tf.AutoModelForCausalLM if a.task == "causal-lm"
           else tf.AutoModelForSequenceClassification)
    if a.task == "sequence-classification":
        config.num_labels = a.num_labels
        if getattr(config, "pad_token_id", None) is None:
            config.pad_token_id = 0
    torch.manual_seed(a.seed)
    has_weights = local and any(f.endswith((".safetensors", ".bin"))
                                for f in os.listdir(a.model))
    if a.no_weights:
        if a.exporter != "dynamo":
            sys.exit("export_hf: --no-weights needs the dynamo exporter")
        with torch.device("meta"):
            model = cls.from_config(config, torch_dtype=torch.float32,
                                    attn_implementation="eager")
    elif has_weights:
        model = cls.from_pretrained(a.model, config=config, local_files_only=True,
                                    torch_dtype=torch.float32, attn_implementation="eager")
    else:
        model = cls.from_config(config, torch_dtype=torch.float32, attn_implementation="eager")
    model = model.float()
    model.train(a.train_dropout)

    base = type(model)
    if a.loss:
        class Export(base):
            def forward(self, input_ids, labels):
                return super().forward(input_ids=input_ids, labels=labels).loss
        out_name = "loss"
    else:
        class Export(base):
            def forward(self, input_ids):
                return super().forward(input_ids=input_ids).logits
        out_name = "logits"
    model.__class__ = Export  # the same module and parameter names

    vocab = getattr(config, "vocab_size", 100)
    g = torch.Generator().manual_seed(a.seed + 1)
    inputs = {"input_ids": torch.randint(0, vocab, (a.batch, a.seq), generator=g)}
    if a.no_weights:
        inputs["input_ids"] = inputs["input_ids"].to("meta")
    if a.loss:
        inputs["labels"] = (inputs["input_ids"].clone() if a.task == "causal-lm" else
                            torch.randint(0, a.num_labels, (a.batch,), generator=g))
        if a.no_weights:
            inputs["labels"] = inputs["labels"].to("meta")
    batch = torch.export.Dim("batch", min=1)
    seq = torch.export.Dim("seq", min=2)
    dyn = {"input_ids": {0: batch, 1: seq}}
    if "labels" in inputs:
        dyn["labels"] = {0: batch, 1: seq} if a.task == "causal-lm" else {0: batch}
    tmp = a.output + ".partial"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if a.exporter == "dynamo":
            prog = torch.onnx.export(model, (), kwargs=inputs, dynamo=True, dynamic_shapes=dyn,
                                     input_names=list(inputs), output_names=[out_name],
                                     optimize=False)
            if a.no_weights:
                save_without_weights(prog, tmp, os.path.basename(a.output) + ".data")
            else:
                prog.save(tmp)
        else:
            axes = {k: {0: "batch", 1: "seq"} if v.dim() == 2 else {0: "batch"}
                    for k, v in inputs.items()}
            torch.onnx.export(model, tuple(inputs.values()), tmp, dynamo=False,
                              input_names=list(inputs), output_names=[out_name],
                              dynamic_axes=axes, opset_version=17,
                              training=torch.onnx.TrainingMode.TRAINING if a.train_dropout
                              else torch.onnx.TrainingMode.EVAL,
                              do_constant_folding=False)
    os.replace(tmp, a.output)
    params = sum(p.numel() for p in model.parameters())
    print(f"wrote {a.output}: {config.model_type} {a.task}, {params} parameters, "
          f"inputs {', '.join(f'{k}[{tuple(v.shape)}]' for k, v in inputs.items())} -> {out_name}"
          f"{', training-mode dropout' if a.train_dropout else ''}")
    shape = f"--input-shape input_ids=BxS"
    if a.no_weights:
        print(f"next: zero-opt {a.output} {shape}{' --input-shape labels=BxS' if a.loss else ''} "
              "--train --config ds_config.json --no-weights --emit=zrt -o plan.zrt; "
              "zero-run plan.zrt --simulate machines/h100-sxm-8x.json --nodes N")
        return
    if a.loss:
        print(f"next: zero-opt {a.output} {shape} --input-shape labels="
              f"{'BxS' if a.task == 'causal-lm' else 'B'} --train --config ds_config.json "
              "--emit=zrt -o train.zrt --weights-out init.safetensors")
    else:
        loss = "causal-lm" if a.task == "causal-lm" else "cross-entropy"
        print(f"next: zero-opt {a.output} {shape} --train --loss {loss}:labels --config "
              "ds_config.json --emit=zrt -o train.zrt --weights-out init.safetensors")


if __name__ == "__main__":
    main()
