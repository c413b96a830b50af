"""train_e2e.py --bf16 and --fp16: 16-bit training against the stored PyTorch
references (NAME_loss.bf16.ref.safetensors, NAME_loss.fp16.ref.safetensors), the
model states per rank against ZeRO's formulas, data_types.grad_accum_dtype.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from zerokit import mpi

from .common import Fail, log, run


def read_precision_ref(a, name, kind, work):
    """The stored PyTorch reference of 16-bit training, NAME_loss.KIND.ref.safetensors
    (train_reference.py --write-KIND-ref): its ds_config, its step.* arrays, and its
    batches written to work/batches.safetensors for zero-run --data."""
    from safetensors import safe_open
    path = Path(a.models) / f"{name}_loss.{kind}.ref.safetensors"
    if not path.exists():
        raise Fail(f"no {path.name}: the stored reference is missing "
                   f"(train_reference.py --write-{kind}-ref {name})")
    with safe_open(str(path), "np") as f:
        meta = dict(f.metadata() or {})
        data = {k[len("data."):]: f.get_tensor(k) for k in f.keys() if k.startswith("data.")}
        steps = {k[len("step."):]: f.get_tensor(k) for k in f.keys() if k.startswith("step.")}
    data_path = work / "batches.safetensors"
    save_file({k: np.ascontiguousarray(v) for k, v in data.items()}, str(data_path))
    return json.loads(meta["ds_config"]), data, steps, data_path


def train_variant(a, tools, name, work, cfg, data, data_path, tag, ranks, stage=None, accum=1,
                  zopts=None, run_args=()):
    """Compiles NAME_loss.onnx with `cfg` set for `ranks` ranks (ZeRO `stage`, `accum`
    micro-batches; `zopts`: --zero-pipeline, whose stages all read the same rows) and
    trains it on the batches; returns zero-run's --log-json rows."""
    rows = next(iter(data.values())).shape[1]
    c = dict(cfg)
    micro = rows // (ranks * accum) if not zopts else rows // accum
    c.update(train_batch_size=rows, train_micro_batch_size_per_gpu=micro,
             gradient_accumulation_steps=accum)
    if stage is not None:
        c["zero_optimization"] = {"stage": stage, "stage3_param_persistence_threshold": 0}
    cp = work / f"ds_{tag}.json"
    cp.write_text(json.dumps(c, indent=1) + "\n")
    shapes = {k: (micro,) + v.shape[2:] for k, v in data.items()}
    zrt, w = work / f"{tag}.zrt", work / f"init_{tag}.safetensors"
    extra = ["--config", str(cp)] + ([f"--zero-pipeline={zopts}"] if zopts else [])
    tools.compile(Path(a.models) / f"{name}_loss.onnx", shapes, extra, zrt, w)
    lp = work / f"log_{tag}.json"
    cmd = [tools.zero_run, str(zrt), "--weights", str(w), "--data", str(data_path),
           "--log-json", str(lp)] + list(run_args)
    if ranks > 1:
        cmd = mpi.mpirun(ranks, cmd)
    run(cmd, "zero-run")
    return json.loads(lp.read_text())


def check_model_states(a, tools, name, work, tag, data, report, opt_path, ranks, stage,
                       sizes, accum=1):
    """The report's model_state_bytes on every rank against ZeRO's formulas (Table 1 of
    the ZeRO paper), with DeepSpeed's per-parameter padding to a multiple of N: `sizes`
    = (parameter, gradient, optimizer) bytes per element, e.g. (2, 2, 12) for bf16 with
    fp32 masters and moments, (4, 4, 8) for fp32 AdamW. The parameters are those whose
    exp_avg --save-optimizer wrote (opt_path). Stage 0: whole, whole, whole; 1: whole,
    whole, shard; 2: whole, shard, shard; 3: shard, shard, shard. Also against zero-opt
    --estimate-memory on the same model and config (the formulas unpadded): its
    "bytes per rank" row of the stage equals the report within the padding. Returns
    failures."""
    opt = load_file(str(opt_path))
    numels = [v.size for k, v in opt.items() if k.endswith(".exp_avg")]
    n = ranks
    whole, shard = sum(numels), sum(-(-x // n) for x in numels)
    s = stage or 0
    pb, gb, kb = sizes
    want = {"parameters": pb * (shard if n > 1 and s == 3 else whole),
            "gradients": gb * (shard if n > 1 and s >= 2 else whole),
            "optimizer": kb * (shard if n > 1 and s >= 1 else whole)}
    failures = []
    for r in report["ranks"]:
        got = r.get("model_state_bytes")
        if got is None or any(got[k] != v for k, v in want.items()) or \
                got["total"] != sum(want.values()):
            failures.append(f"{tag}: rank {r['rank']} model_state_bytes {got}, ZeRO's "
                            f"formula {want}")
    # zero-opt --estimate-memory on the model, compiled with the same config (its
    # formulas know 2 + 2 + 12 and 4 + 4 + 8 bytes only).
    if sizes not in ((2, 2, 12), (4, 4, 8)):
        log(f"  {'ok  ' if not failures else 'FAIL'} {tag}: model_state_bytes per rank "
            f"{want} = ZeRO stage {s} over {n} rank(s) (Psi {whole})")
        return failures
    rows = next(iter(data.values())).shape[1]
    micro = rows // (ranks * accum)
    cmd = [tools.zero_opt, str(Path(a.models) / f"{name}_loss.onnx")]
    for k, v in data.items():
        cmd += ["--input-shape", f"{k}=" + "x".join(str(d) for d in (micro,) + v.shape[2:])]
    cmd += ["--train", "--config", str(work / f"ds_{tag}.json"), "--estimate-memory", ""]
    out = run(cmd, "zero-opt --estimate-memory")[0].stdout
    line = [ln for ln in out.splitlines() if ln.startswith(f"{s} (")][-1].split()
    est = dict(zip(("parameters", "gradients", "optimizer", "total"), map(int, line[-4:])))
    total = sum(want.values())
    slack = (pb + gb + kb) * len(numels)  # under one padding element per parameter
    if not (f"Psi = {whole} parameters, N = {n} ranks" in out and
            est["total"] <= total <= est["total"] + slack):
        failures.append(f"{tag}: --estimate-memory stage {s}: {est} against the report's "
                        f"{total}")
    log(f"  {'ok  ' if not failures else 'FAIL'} {tag}: model_state_bytes per rank {want} "
        f"= ZeRO stage {s} over {n} rank(s) (Psi {whole}); --estimate-memory "
        f"{est['total']} (unpadded)")
    return failures


def check_grad_accum(a, tools, name, work, cfg, data):
    """data_types.grad_accum_dtype against the 1-rank gradients of each micro-batch
    alone (--optimizer none: the step's gradients are its outputs). A step of 2
    micro-batches seeds each backward with 1/2, which scales every bf16 gradient by
    exactly 1/2; so with "fp32" the step's f32 gradient is bit for bit
    f32(g0/2) + f32(g1/2) of the two 1-micro-batch runs (numpy's f32 add), and with
    the default (bf16) that sum rounded once to bf16. Embedding tables (a Gather's
    data) are left out: their rows are scatter-added, repeated rows in another
    order. Returns failures."""
    import onnx
    from half_forward import as_f32, bf16_bits, read_st
    model = onnx.load(str(Path(a.models) / f"{name}_loss.onnx"), load_external_data=False)
    tables = {n.input[0] for n in model.graph.node if n.op_type == "Gather"}
    batch = {k: np.ascontiguousarray(v[0]) for k, v in data.items()}  # step 0's rows
    rows = next(iter(batch.values())).shape[0]
    half = rows // 2

    def grads(tag, accum, acc_dtype, inputs):
        c = {k: v for k, v in cfg.items() if k not in ("optimizer", "scheduler",
                                                      "gradient_clipping")}
        micro = rows // accum if accum > 1 else half
        c.update(train_batch_size=micro * accum, train_micro_batch_size_per_gpu=micro,
                 gradient_accumulation_steps=accum)
        if acc_dtype:
            c["data_types"] = {"grad_accum_dtype": acc_dtype}
        cp = work / f"ds_{tag}.json"
        cp.write_text(json.dumps(c) + "\n")
        zrt, w = work / f"{tag}.zrt", work / f"init_{tag}.safetensors"
        if not zrt.exists():
            tools.compile(Path(a.models) / f"{name}_loss.onnx",
                          {k: (micro,) + v.shape[1:] for k, v in batch.items()},
                          ["--config", str(cp), "--optimizer", "none"], zrt, w)
        outs = []
        for i, x in enumerate(inputs):
            ip, op = work / f"in_{tag}_{i}.safetensors", work / f"out_{tag}_{i}.safetensors"
            save_file(x, str(ip))
            run([tools.zero_run, str(zrt), "--weights", str(w), "--input", str(ip),
                 "--output", str(op)], "zero-run")
            outs.append({k[len("grad."):]: v for k, v in read_st(op).items()
                         if k.startswith("grad.")})
        return outs

    g0, g1 = grads("acc_k1", 1, None, [{k: v[:half] for k, v in batch.items()},
                                       {k: v[half:] for k, v in batch.items()}])
    (f32,) = grads("acc_fp32", 2, "fp32", [batch])
    (b16,) = grads("acc_bf16", 2, None, [batch])
    failures = []
    names = [k for k in g0 if k not in tables]
    for k in names:
        want = as_f32(*g0[k]) * np.float32(0.5) + as_f32(*g1[k]) * np.float32(0.5)
        if f32[k][0] != "F32" or f32[k][1].tobytes() != want.astype(np.float32).tobytes():
            failures.append(f"grad_accum_dtype fp32: {k} ({f32[k][0]}) is not f32(g0/2) + "
                            f"f32(g1/2)")
        if b16[k][0] != "BF16" or b16[k][1].tobytes() != bf16_bits(want).tobytes():
            failures.append(f"grad_accum_dtype bf16: {k} ({b16[k][0]}) is not bf16(g0/2 + g1/2)")
    # Some element must tell the two apart (else the check proves nothing).
    differ = sum(int(np.any(as_f32(*f32[k]) != as_f32(*b16[k]))) for k in names)
    if not differ:
        failures.append("grad_accum_dtype: fp32 and bf16 sums are equal everywhere")
    log(f"  {'ok  ' if not failures else 'FAIL'} grad_accum_dtype: over 2 micro-batches, "
        f"{len(names)} gradients (embedding tables aside) are f32(g0/2) + f32(g1/2) with "
        f"\"fp32\" and that sum rounded to bf16 by default, bit for bit ({differ} of them "
        f"differ between the two)")
    return failures


def mode_bf16(a, tools, name, work):
    """bf16 training (zero-opt's zero-mixed-precision: a bf16 forward and backward, fp32
    master weights and AdamW state) against the stored PyTorch reference
    NAME_loss.bf16.ref.safetensors (train_reference.py --write-bf16-ref: DeepSpeed's bf16
    optimizer emulated in PyTorch, and fp32 training, on the same data and config).
    PyTorch's own bf16 error is spread = max over steps |torch bf16 - torch fp32|; every
    run's losses must stay within 3 x spread of torch's fp32 losses, and (so that an fp32
    run cannot pass) at least 0.1 x spread away from zero-run's own fp32 losses on some
    step: at 1 rank, ZeRO stages 1, 2, 3 over 2 ranks and stage 3 over 4 ranks; --save
    writes the fp32 masters; and pp=2 pipeline stages give the bits of the 1-rank run
    accumulating the same micro-batches."""
    cfg, data, ref, data_path = read_precision_ref(a, name, "bf16", work)
    t16, t32 = ref["loss_bf16"], ref["loss_fp32"]
    steps = t16.shape[0]
    spread = float(np.abs(t16 - t32).max())
    log(f"== train-bf16 {name}: {steps} steps; PyTorch's bf16 vs fp32 losses differ by up to "
        f"{spread:.3g}")
    failures = []

    def train(tag, ranks, stage=None, bf16=True, accum=1, zopts=None, comm=None, acc32=False):
        c = dict(cfg)
        if not bf16:
            c.pop("bf16")
        if comm:
            c["communication_data_type"] = comm
        if acc32:
            c["data_types"] = {"grad_accum_dtype": "fp32"}
        rp = work / f"report_{tag}.json"
        rows_ = train_variant(a, tools, name, work, c, data, data_path, tag, ranks, stage, accum,
                              zopts, ["--report-json", str(rp),
                                      "--save", str(work / f"final_{tag}.safetensors"),
                                      "--save-optimizer", str(work / f"opt_{tag}.safetensors"),
                                      "--save-dir", str(work / f"ck_{tag}")])
        report = json.loads(rp.read_text())
        # What each rank holds of the model states: 2-byte parameters and gradients
        # and 12 bytes of fp32 master and moments (fp32: 4 + 4 + 8), by the stage;
        # with communication_data_type fp32 the reduced gradient shards are fp32.
        # grad_accum_dtype fp32: the gradients a rank sums over its micro-batches
        # (stages 0-1) are fp32.
        sizes = (2, 4 if (comm == "fp32" and (stage or 0) >= 2) or acc32 else 2, 12) \
            if bf16 else (4, 4, 8)
        if not zopts:
            failures.extend(check_model_states(a, tools, name, work, tag, data, report,
                                               work / f"opt_{tag}.safetensors", ranks,
                                               stage, sizes, accum))
        return np.array([r["loss"] for r in rows_]), report

    failures.extend(check_grad_accum(a, tools, name, work, cfg, data))
    z32, _ = train("fp32", 1, bf16=False)
    _, report32 = train("z3n2_fp32", 2, 3, bf16=False)
    train("z2n2_fp32", 2, 2, bf16=False)
    train("z2n2k2", 2, 2, accum=2)  # ZeRO-2 reduce-scatters every micro-step's gradient
    # grad_accum_dtype fp32: the micro-batches' gradients summed in fp32 reach the
    # optimizer unrounded on one rank (other losses than the bf16-summed run's); over
    # ranks they are reduce-scattered in bf16 (DeepSpeed's communication_data_type
    # default): the bf16-summed run's bytes (with 2 micro-batches, rounding the fp32
    # sum for the collective gives the bf16 sum's bits but for the embedding rows'
    # order). At ZeRO stage 1, as DeepSpeed 0.19 refuses the mix at stage 0.
    runs = [("k2", 1, 1), ("z1n2k2", 2, 1)]
    for tag, ranks, stage in runs:
        got16, rep16 = train(tag, ranks, stage, accum=2)
        got, rep = train(tag + "_acc32", ranks, stage, accum=2, acc32=True)
        err = float(np.abs(got - t32).max())
        same = [r["bytes_sent"] for r in rep["ranks"]] == [r["bytes_sent"] for r in rep16["ranks"]]
        moved = got.tobytes() != got16.tobytes()
        ok = err <= 3 * spread and same and (moved or ranks > 1)
        log(f"  {'ok  ' if ok else 'FAIL'} bf16 {tag}, grad_accum_dtype fp32: |loss - torch "
            f"fp32| <= {err:.3g} ({err / spread:.2f} x spread); bytes sent "
            f"{'equal to' if same else 'differ from'} the bf16-summed run's; losses "
            f"{'differ from' if moved else 'equal to'} it")
        if not ok:
            failures.append(f"bf16 {tag} grad_accum_dtype fp32")
    for tag, ranks, stage in (("n1", 1, None), ("z0n2", 2, 0), ("z1n2", 2, 1), ("z2n2", 2, 2),
                              ("z3n2", 2, 3), ("z3n4", 4, 3)):
        got, report = train(tag, ranks, stage)
        if tag == "z3n2":
            report_z3 = report
            # ZeRO-3's collectives carry bf16: the all-gathers of the parameters and the
            # reduce-scatters of the gradients send half of fp32's bytes on every rank.
            # The model states a rank keeps (the report's resident globals, beside the
            # 8-byte step counter) are the ZeRO formula's per parameter of its shard:
            # fp32 4 (parameter) + 8 (moments) = 12, bf16 2 + 12 (master, moments) = 14.
            for r16, r32 in zip(report["ranks"], report32["ranks"]):
                for kind in ("AllGather", "ReduceScatter"):
                    b16, b32 = r16["bytes_sent"][kind], r32["bytes_sent"][kind]
                    if not (b32 > 0 and 2 * b16 == b32):
                        failures.append(f"bf16 z3n2: {kind} bytes {b16} vs fp32 {b32}")
                if name != "gpt2":
                    continue  # llama's rotary buffer (never trained, no master) adds a term
                shard, rest = divmod(r32["param_bytes_resident"] - 8, 12)
                if rest or r16["param_bytes_resident"] != 8 + 14 * shard:
                    failures.append(f"bf16 z3n2: model states {r16['param_bytes_resident']} "
                                    f"bytes, not 14/12 of fp32's {r32['param_bytes_resident']}")
            log(f"  ok   bf16 z3n2: all-gather and reduce-scatter bytes per rank "
                f"{report['ranks'][0]['bytes_sent']['AllGather']} + "
                f"{report['ranks'][0]['bytes_sent']['ReduceScatter']}, half of fp32's "
                f"{report32['ranks'][0]['bytes_sent']['AllGather']} + "
                f"{report32['ranks'][0]['bytes_sent']['ReduceScatter']}" +
                (f"; model states {report['ranks'][0]['param_bytes_resident']} bytes = 14/12 "
                 f"of fp32's {report32['ranks'][0]['param_bytes_resident']} (+ the step "
                 f"counter)" if name == "gpt2" else "")
                if not any("z3n2:" in f for f in failures) else
                "  FAIL bf16 z3n2: collective or model-state bytes off the formula")
        err = float(np.abs(got - t32).max())
        moved = float(np.abs(got - z32).max())
        ok = err <= 3 * spread and moved >= 0.1 * spread
        log(f"  {'ok  ' if ok else 'FAIL'} bf16 {tag}: |loss - torch fp32| <= {err:.3g} "
            f"({err / spread:.2f} x spread), |loss - zero-run fp32| up to {moved:.3g}")
        if not ok:
            failures.append(f"bf16 {tag}")
        # --save writes the fp32 masters (the trained parameters), not their bf16 copies.
        saved = load_file(str(work / f"final_{tag}.safetensors"))
        opt = load_file(str(work / f"opt_{tag}.safetensors"))
        same = all(saved[k].dtype == np.float32 and np.array_equal(saved[k], opt[k + ".master"])
                   for k in saved)
        finer = any(np.any((saved[k].view(np.uint32) & 0xFFFF) != 0) for k in saved)
        if not (same and finer):
            failures.append(f"bf16 {tag}: --save is not the fp32 masters")
            log(f"  FAIL bf16 {tag}: --save equal to --save-optimizer's masters: {same}, "
                f"finer than bf16: {finer}")
    # communication_data_type "fp32": the gradients' reduce-scatters carry fp32 (the
    # fp32 run's bytes), the parameters' all-gathers still bf16; the losses still within
    # the bound.
    got, rep = train("z3n2_comm32", 2, 3, comm="fp32")
    err = float(np.abs(got - t32).max())
    r, r16 = rep["ranks"][0]["bytes_sent"], report_z3["ranks"][0]["bytes_sent"]
    r32 = report32["ranks"][0]["bytes_sent"]
    ok = (r["ReduceScatter"] == r32["ReduceScatter"] and r["AllGather"] == r16["AllGather"]
          and err <= 3 * spread)
    log(f"  {'ok  ' if ok else 'FAIL'} bf16 z3n2, communication_data_type fp32: reduce-scatter "
        f"bytes {r['ReduceScatter']} (fp32's {r32['ReduceScatter']}), all-gather "
        f"{r['AllGather']} (bf16's {r16['AllGather']}); |loss - torch fp32| <= {err:.3g}")
    if not ok:
        failures.append("bf16 communication_data_type fp32")
    # zero-ckpt consolidate of the 1-rank run's checkpoint: the fp32 masters by default
    # (equal to --save), and --dtype bf16 their rounding to nearest even (numpy here).
    from half_forward import bf16_bits, read_st  # BF16 as uint16 bits, numpy has no bf16
    zero_ckpt = str(Path(tools.zero_run).with_name("zero-ckpt"))
    saved = load_file(str(work / "final_n1.safetensors"))
    for dt in ("", "bf16"):
        out = work / f"cons_{dt or 'default'}.safetensors"
        run([zero_ckpt, "consolidate", str(work / "ck_n1"), "-o", str(out)] +
            (["--dtype", dt] if dt else []), "zero-ckpt")
        got = read_st(out)
        if dt:
            want = {k: bf16_bits(v) for k, v in saved.items()}
        else:
            want = {k: v for k, v in saved.items()}
        same = set(got) == set(want) and all(
            got[k][1].tobytes() == np.ascontiguousarray(want[k]).tobytes() for k in want)
        log(f"  {'ok  ' if same else 'FAIL'} zero-ckpt consolidate {('--dtype ' + dt) if dt else ''}"
            f": {'the fp32 masters, equal to --save' if not dt else 'the masters rounded to bf16'}")
        if not same:
            failures.append(f"bf16 consolidate {dt or 'default'}")
    # Pipeline stages: pp=2 over 2 micro-batches (1F1B) gives the bits of the 1-rank
    # bf16 run accumulating the same 2 micro-batches (a cut moves bytes, the tied
    # embedding's stages sum in the same order).
    for suffix in ("", "_acc32"):
        one = np.array([r["loss"] for r in
                        json.loads((work / f"log_k2{suffix}.json").read_text())])
        pp, _ = train("pp2" + suffix, 2, 1, accum=2, zopts="pp=2 micro-batches=2",
                      acc32=bool(suffix))
        ok = one.tobytes() == pp.tobytes()
        log(f"  {'ok  ' if ok else 'FAIL'} bf16 pp=2 (1F1B, 2 micro-batches"
            f"{', grad_accum_dtype fp32' if suffix else ''}): losses "
            f"{'bit-identical to' if ok else 'differ from'} the 1-rank run accumulating them")
        if not ok:
            failures.append("bf16 pp=2" + suffix)
    return failures


def mode_fp16(a, tools, name, work):
    """fp16 training with DeepSpeed's dynamic loss scaler against the stored PyTorch
    reference NAME_loss.fp16.ref.safetensors (train_reference.py --write-fp16-ref): the
    scaler starts at 2^20, where the fixtures' gradients overflow, so the run skips steps,
    spends the hysteresis, halves the scale and doubles it after clean windows. Every
    step's loss scale and skipped flag (zero-run --log-json) must equal PyTorch's, step
    for step, at 1 rank and under ZeRO 1, 2, 3 over 2 ranks (against PyTorch's 2-rank
    emulation: each rank's fp16 gradients, summed in fp16); the losses must stay within
    3 x PyTorch's own fp16 spread (max over steps |torch fp16 - torch fp32|) of the fp32
    losses."""
    cfg, data, ref, data_path = read_precision_ref(a, name, "fp16", work)
    t16, t32 = ref["loss_fp16"], ref["loss_fp32"]
    expected = {1: (ref["loss_scale"], ref["skipped"]), 2: (ref["loss_scale_n2"], ref["skipped_n2"])}
    spread = float(np.abs(t16 - t32).max())
    log(f"== train-fp16 {name}: PyTorch skips steps "
        f"{[i + 1 for i, x in enumerate(ref['skipped']) if x]}; its fp16 vs fp32 losses differ "
        f"by up to {spread:.3g}")
    failures = []
    for tag, ranks, stage in (("n1", 1, None), ("z1n2", 2, 1), ("z2n2", 2, 2), ("z3n2", 2, 3)):
        rows_ = train_variant(a, tools, name, work, cfg, data, data_path, tag, ranks, stage)
        scales, skipped = expected[ranks]
        got_scales = [r["loss_scale"] for r in rows_]
        got_skipped = [bool(r["skipped"]) for r in rows_]
        losses = np.array([r["loss"] for r in rows_])
        same = got_scales == [float(x) for x in scales] and got_skipped == [bool(x) for x in skipped]
        err = float(np.abs(losses - t32).max())
        ok = same and err <= 3 * spread
        log(f"  {'ok  ' if ok else 'FAIL'} fp16 {tag}: loss scales and skipped steps "
            f"{'equal to' if same else 'differ from'} PyTorch's; |loss - torch fp32| <= "
            f"{err:.3g} ({err / spread:.2f} x spread)")
        if not same:
            log(f"       zero-run scales {got_scales}\n       torch    scales {list(scales)}\n"
                f"       zero-run skipped {got_skipped}\n       torch    skipped {list(skipped)}")
        if not ok:
            failures.append(f"fp16 {tag}")
    # Pipeline stages: pp=2 over 2 micro-batches (1F1B) gives the bits of the 1-rank fp16
    # run accumulating the same 2 micro-batches: every loss, loss scale and skipped flag
    # (the overflow flag and the scaler's state agree across the stages).
    def summary(rows_):
        return [(r["loss"], r["loss_scale"], bool(r["skipped"])) for r in rows_]
    one = train_variant(a, tools, name, work, cfg, data, data_path, "k2", 1, accum=2)
    pp = train_variant(a, tools, name, work, cfg, data, data_path, "pp2", 2, accum=2,
                       zopts="pp=2 micro-batches=2")
    same = np.array([x[0] for x in summary(one)]).tobytes() == \
        np.array([x[0] for x in summary(pp)]).tobytes() and \
        [x[1:] for x in summary(one)] == [x[1:] for x in summary(pp)]
    skips = sum(x[2] for x in summary(one))
    log(f"  {'ok  ' if same and skips else 'FAIL'} fp16 pp=2 (1F1B, 2 micro-batches): losses, "
        f"loss scales and skipped steps ({skips} skipped) "
        f"{'bit-identical to' if same else 'differ from'} the 1-rank run accumulating them")
    if not (same and skips):
        failures.append("fp16 pp=2")
    return failures
