"""zero-run --eval-tokens end to end (train-eval.test).

Byte tokens of a real text (the GNU GPL version 3 as Debian ships it), every
tenth 2 KiB chunk held out as the evaluation file, the rest the training
file; the GPT-2 loss fixture. Checks:
  reference  the eval loss logged after the last step is the mean, over the
             --eval-batches batches, of the loss onnxruntime computes on the
             original ONNX model with the weights zero-run saved at that step
             (--save), on the windows this script computes from the formula
             of TokenData.h (batch e = the windows of step e), rtol 1e-5;
  untouched  a run with evaluations logs the same training losses and grad
             norms as one without, bit for bit (nothing is updated, no
             counter advances, the next step's inputs are bound again);
  falls      the eval loss falls by more than 0.3 nats from the first
             evaluation (step 5) to the last (step 60);
  ranks      ZeRO-3 over 2 ranks logs the 1-rank eval losses within 1e-5 (the
             mean over ranks sums in another order); a 2-stage pipeline logs
             those of 1 rank accumulating the same 2 micro-batches bit for bit;
  dropout    a model whose loss is ReduceMean(Dropout(Gather(E, ids), 0.5,
             training_mode)) trained with SGD lr=0: each eval loss equals
             mean(E[ids]) computed here (dropout off in evaluation), while the
             training losses differ from it (dropout on in training);
  errors     --eval-every without --eval-tokens; --eval-tokens on a forward
             program.
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

from zerokit import mpi
from zerokit.data import GPL3, gpl3_split
from zerokit.tools import run, zero_opt
from train_tokens import window



def logs(path):
    records = json.load(open(path))
    steps = [(r["loss"], r["grad_norm"]) for r in records if "loss" in r]
    evals = [(r["step"], r["eval_loss"]) for r in records if "eval_loss" in r]
    return steps, evals


def windows(tokens, seed, step, rows, seq):
    n = len(tokens)
    return np.stack([tokens[o:o + seq] for o in
                     (window(seed, step, r, n - seq + 1) for r in range(rows))]).astype(np.int64)


def dropout_model(path, vocab, dim):
    rng = np.random.default_rng(3)
    e = rng.uniform(0.5, 1.5, size=(vocab, dim)).astype(np.float32)
    nodes = [helper.make_node("Gather", ["E", "input_ids"], ["h"]),
             helper.make_node("Dropout", ["h", "ratio", "training_mode"], ["d"], seed=11),
             helper.make_node("ReduceMean", ["d"], ["loss"], keepdims=0)]
    g = helper.make_graph(
        nodes, "dropout_eval",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(e, "E"),
         numpy_helper.from_array(np.array(0.5, np.float32), "ratio"),
         numpy_helper.from_array(np.array(True), "training_mode")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)
    return e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    w = a.work
    os.makedirs(w, exist_ok=True)
    split = gpl3_split(w)
    if not split:
        print(f"UNSUPPORTED: {GPL3} is missing (Debian's base-files ships it)")
        return
    import onnxruntime as ort

    trained, held, train_bin, eval_bin = split
    B, S, seed, steps, E = 8, 32, 5, 60, 6
    model = os.path.join(a.models, "gpt2_loss.onnx")
    zr = a.zero_run

    def compile_(name, batch, extra=(), onnx_model=model, inputs=("input_ids", "labels"),
                 opt="adamw lr=3e-3"):
        out = os.path.join(w, name + ".zrt")
        run(zero_opt(a.zero_opt, onnx_model, {i: (batch, S) for i in inputs},
                     ["--train", "--optimizer", opt, *extra], out,
                     os.path.join(w, name + ".init.safetensors")))
        return out

    one = compile_("one", B)
    init = os.path.join(w, "one.init.safetensors")
    data = ["--tokens", train_bin, "--steps", str(steps), "--seed", str(seed)]
    ev = ["--eval-tokens", eval_bin, "--eval-every", "5", "--eval-batches", str(E)]

    def train(prog, log, *extra, np_=1, weights=init):
        cmd = [zr, prog, "--weights", weights, "--log-json", os.path.join(w, log), *extra]
        if np_ > 1:
            cmd = mpi.mpirun(np_, cmd + ["--threads", "1"])
        run(cmd)
        return logs(os.path.join(w, log))

    saved = os.path.join(w, "final.safetensors")
    base, evals = train(one, "eval.json", *data, *ev, "--save", saved)
    if [s for s, _ in evals] != list(range(5, steps + 1, 5)):
        sys.exit(f"FAIL: evaluations at steps {[s for s, _ in evals]}, not every 5th")

    # reference: onnxruntime on the original model with the saved weights.
    m = onnx.load(model)
    weights = load_file(saved)
    for t in m.graph.initializer:
        if t.name in weights:
            t.CopyFrom(numpy_helper.from_array(
                weights[t.name].astype(numpy_helper.to_array(t).dtype), t.name))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    ref = []
    for e in range(E):
        ids = windows(held, seed, e, B, S)
        ref.append(float(sess.run(None, {"input_ids": ids, "labels": ids})[names.index("loss")]))
    got = evals[-1][1]
    if abs(got - np.mean(ref)) > 1e-5 * abs(np.mean(ref)):
        sys.exit(f"FAIL: eval loss {got} at step {steps}, onnxruntime {np.mean(ref)}")
    print(f"reference ok: eval loss {got:.6f} = onnxruntime's {np.mean(ref):.6f} "
          f"over {E} batches")

    plain, none = train(one, "plain.json", *data)
    if none or plain != base:
        sys.exit("FAIL: the run with evaluations trained differently from the one without")
    print(f"untouched ok: {steps} steps' losses and grad norms bit for bit")

    first, last = evals[0][1], evals[-1][1]
    print(f"falls: eval loss {first:.3f} (step 5) -> {last:.3f} (step {steps})")
    if not first - last > 0.3:
        sys.exit(f"FAIL: the eval loss fell by {first - last:.3f} nats, not more than 0.3")

    # ranks
    z3 = compile_("z3", B // 2, ["--zero-pipeline", "stage=3 dp=2"])
    _, dp_evals = train(z3, "z3.json", *data, *ev, np_=2)
    worst = max(abs(x[1] - y[1]) / abs(y[1]) for x, y in zip(dp_evals, evals))
    if len(dp_evals) != len(evals) or worst > 1e-5:
        sys.exit(f"FAIL: ZeRO-3 over 2 ranks: eval loss rel diff {worst:.2g} > 1e-5")
    print(f"ranks ok: ZeRO-3 dp=2 eval losses within {worst:.1e} of 1 rank")
    cfg = os.path.join(w, "acc2.json")
    with open(cfg, "w") as f:
        # No clipping, as the pipeline's --optimizer (DeepSpeed 0.19 clips at 1.0
        # when a config leaves gradient_clipping out).
        json.dump({"gradient_accumulation_steps": 2, "gradient_clipping": 0}, f)
    acc = compile_("acc2", B // 2, ["--config", cfg])
    pp = compile_("pp2", B // 2, ["--zero-pipeline", "pp=2 micro-batches=2"])
    accumulated = train(acc, "acc2-log.json", *data, *ev)
    piped = train(pp, "pp2.json", *data, *ev, np_=2)
    if piped != accumulated or not piped[1]:
        sys.exit("FAIL: the 2-stage pipeline's losses or eval losses differ from 1 rank's")
    print("ranks ok: pp=2 eval losses bit for bit")

    # dropout
    dmodel = os.path.join(w, "dropout.onnx")
    table = dropout_model(dmodel, 256, 8)
    dprog = compile_("dropout", B, onnx_model=dmodel, inputs=("input_ids",), opt="sgd lr=0")
    dsteps, devals = train(dprog, "dropout.json", "--tokens", train_bin, "--steps", "3",
                           "--seed", str(seed), "--eval-tokens", eval_bin, "--eval-every", "1",
                           "--eval-batches", "1", weights=os.path.join(w, "dropout.init.safetensors"))
    want = float(np.mean(table[windows(held, seed, 0, B, S)], dtype=np.float64))
    if any(abs(v - want) > 1e-6 * want for _, v in devals) or len(devals) != 3:
        sys.exit(f"FAIL: dropout model eval losses {devals}, want {want} (dropout off)")
    train_want = [float(np.mean(table[windows(trained, seed, s, B, S)],
                                dtype=np.float64)) for s in range(3)]
    if any(abs(l - t) < 1e-6 * t for (l, _), t in zip(dsteps, train_want)):
        sys.exit("FAIL: a training step of the dropout model equals the loss without dropout")
    print(f"dropout ok: eval losses {want:.6f} without dropout; training losses "
          f"{', '.join(f'{l:.4f}' for l, _ in dsteps)} with it")

    # errors
    r = run([zr, one, "--weights", init, *data, "--eval-every", "5"], ok=False)
    print("error:", r.stderr.strip().splitlines()[-1])
    fwd = os.path.join(w, "forward.zrt")
    run(zero_opt(a.zero_opt, model, {"input_ids": (B, S), "labels": (B, S)}, [], fwd,
                 os.path.join(w, "forward.init.safetensors")))
    r = run([zr, fwd, "--weights", os.path.join(w, "forward.init.safetensors"),
             "--eval-tokens", eval_bin], ok=False)
    print("error:", r.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
