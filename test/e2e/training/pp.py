"""train_e2e.py --pp: training through pipeline stages (GPipe, 1F1B, with ZeRO
inside the stages' replicas) against the 1-rank training, the order of each
rank's work against DeepSpeed's TrainSchedule, and 1F1B's activation peak per
stage against GPipe's.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from zerokit import mpi

from .common import Fail, log, read_log, read_train_ref, run, step_gaps


def deepspeed_train_schedule(micro_batches, stages, stage_id):
    """The order of work on `stage_id` in DeepSpeed's TrainSchedule (1F1B), as its
    _step_to_micro_batch walks 2 (M + S - 1) steps: forwards on steps of the stage's
    parity, backwards on the others, micro-batch ids shifted by the stage."""
    out = []
    for step in range(2 * (micro_batches + stages - 1)):
        even_step, even_stage = step % 2 == 0, stage_id % 2 == 0
        if even_step and even_stage:
            mb, fwd = step // 2 - stage_id // 2, True
        elif not even_step and not even_stage:
            mb, fwd = (step - 1) // 2 - stage_id // 2, True
        elif even_step:
            mb, fwd = step // 2 - stages + (stage_id + 1) // 2, False
        else:
            mb, fwd = (step - 1) // 2 - stages + 1 + stage_id // 2, False
        if 0 <= mb < micro_batches:
            out.append(("F" if fwd else "B") + str(mb))
    return out


def mode_pp(a, tools, name, work):
    """Training through pipeline stages equals the 1-rank training of the same global
    batch. Each configuration SCHEDULE:STAGES:M (schedule gpipe or 1f1b, M
    micro-batches = gradient_accumulation_steps) compiles the stored reference's
    optimizer settings (AdamW, clipping, WarmupLR) with --zero-pipeline "pp=STAGES
    micro-batches=M schedule=SCHEDULE", trains --pp-steps steps of its data under
    mpirun -np STAGES and is compared with the 1-rank run over the same micro-batches
    (accumulation M): losses and grad norms rtol --dp-loss-rtol, weights and optimizer
    state rtol --dp-w-rtol + atol --dp-w-atol. With :DP:ZERO (pp x dp, DeepSpeed's
    pipe-major topology: stage s on ranks [s*DP, (s+1)*DP)) the ZeRO stage runs inside
    each stage's replicas and the 1-rank run accumulates all DP x M micro-batches. Both schedules backpropagate the
    micro-batches in order and sum a tied parameter's gradient once, so the run is
    expected to be bit-identical to the 1-rank one; that is reported, not required.
    SCHEDULE/KEY=VALUE adds a --zero-pipeline option: tied-grads=step (DeepSpeed's
    reduction of tied gradients: each stage accumulates its part, the parts are
    summed once per step) rounds that sum differently: within the tolerances, not
    bit-identical; prefetch=N moves each stage's gathers ahead of its compute.
    A tied parameter's copies (GPT-2's wte / lm_head on the first and last stage) are
    compared by zero-run --save itself, which fails when the stages' copies differ.
    Memory, from the runtime's own counters (--report-json: peak live bytes of the
    activations arena per rank), at --pp-memory-scale times the batch and sequence
    (where activations set the peak): for every S and M >= S with both schedules
    given, 1F1B's peak on stage s is below GPipe's where S - s < M (1F1B keeps S - s
    micro-batches in flight there, GPipe M) and never above it. A stage marked
    --pp-memory-xfail S:M:STAGE is a known failure of that comparison: reported XFAIL
    where it fails, a failure of the run where it holds (XPASS) or was not run."""
    stored = read_train_ref(a.models, name)
    cfg0, data = stored["config"], stored["data"]
    steps = min(a.pp_steps, stored["steps"])
    rows = next(iter(data.values())).shape[1]
    data_path = work / "batches.safetensors"
    save_file({k: np.ascontiguousarray(v) for k, v in data.items()}, str(data_path))
    log(f"== train-pp {name}: {steps} steps of a global batch of {rows} rows, "
        f"configurations {a.pp_configs}")

    def compile_(tag, micro, accum, zopts, zero_stage=None):
        cfg = {k: v for k, v in cfg0.items() if k not in ("train_batch_size",
               "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")}
        cfg.update(train_batch_size=rows, train_micro_batch_size_per_gpu=micro,
                   gradient_accumulation_steps=accum)
        if zero_stage is not None:
            cfg["zero_optimization"] = {"stage": zero_stage}
            if zero_stage == 3:  # every parameter partitioned (as --dp does)
                cfg["zero_optimization"].update(stage3_param_persistence_threshold=0,
                                                stage3_max_reuse_distance=0)
        cp = work / f"ds_{tag}.json"
        cp.write_text(json.dumps(cfg, indent=1) + "\n")
        shapes = {k: (micro,) + v.shape[2:] for k, v in data.items()}
        zrt, w = work / f"{tag}.zrt", work / f"init_{tag}.safetensors"
        extra = ["--config", str(cp)] + (["--zero-pipeline", zopts] if zopts else [])
        tools.compile(Path(a.models) / f"{name}_loss.onnx", shapes, extra, zrt, w)
        return zrt, w

    def train(tag, zrt, weights, ranks):
        lp, sp = work / f"log_{tag}.json", work / f"final_{tag}.safetensors"
        rp = work / f"report_{tag}.json"
        cmd = [tools.zero_run, str(zrt), "--weights", str(weights), "--data", str(data_path),
               "--steps", str(steps), "--log-json", str(lp), "--save", str(sp),
               "--report-json", str(rp),
               "--save-optimizer", str(work / f"opt_{tag}.safetensors")]
        if ranks > 1:
            cmd = mpi.mpirun(ranks, cmd + ["--trace", str(work / f"trace_{tag}.json")])
        run(cmd, "zero-run")
        if ranks > 1:
            trace = json.loads((work / f"trace_{tag}.json").read_text())
            events = trace["traceEvents"] if isinstance(trace, dict) else trace
            schedules[tag] = {r: [e["name"] for e in events if e.get("cat") == "schedule"
                                  and e["pid"] == r and e["name"][0] in "FB"]
                              for r in range(ranks)}
        report = json.loads(rp.read_text())
        ranks = sorted(report["ranks"], key=lambda r: r["rank"])
        if len(ranks) > 1:
            bubbles[tag] = (ranks, schedule_bubbles(events, [r["wall_time_s"] for r in ranks]))
        peaks = [next(x["peak_live_bytes"] for x in r["arenas"] if x["name"] == "activations")
                 for r in ranks]
        resident[tag] = [r["param_bytes_resident"] for r in ranks]
        # A stage's mean point-to-point message: what one send still in flight
        # keeps live (how long depends on the communication stream's timing).
        message[tag] = [r["bytes_sent"]["Send"] // max(1, r["collective_calls"]["Send"])
                        for r in ranks]
        return read_log(lp, steps), load_file(str(sp)), \
            load_file(str(work / f"opt_{tag}.safetensors")), peaks

    def schedule_bubbles(events, walls):
        """Per rank, the schedule's bubble re-derived from the trace and the step's
        wall time (walls[r], the report's wall_time_s): of the step less the
        compute-stream instructions of its other steps (prologue, optimizer;
        receives there excepted: they wait for another stage), the fraction with no
        kernel of a forward / backward step (F<k>, B<k>)."""
        out = {}
        for r, wall in enumerate(walls):
            compute = next(e["tid"] for e in events if e.get("ph") == "M" and e["pid"] == r
                           and e["name"] == "thread_name" and e["args"]["name"] == "compute")
            busy = outside = 0.0
            scheduled_any = False
            for e in events:
                if e["pid"] != r or e.get("ph") != "X" or e["tid"] != compute:
                    continue
                step = e.get("args", {}).get("step", "")
                if len(step) > 1 and step[0] in "FB" and step[1].isdigit():
                    scheduled_any = True
                    busy += e["dur"] if e["cat"] == "kernel" else 0.0
                elif step and e["name"] != "Recv":
                    outside += e["dur"]
            span = wall * 1e6 - outside
            out[r] = 1 - busy / span if scheduled_any and span > 0 else None
        return out

    failures, refs, peaks, resident, zero_runs, schedules = [], {}, {}, {}, {}, {}
    message = {}
    bubbles = {}
    for spec in a.pp_configs.split(","):
        fields = spec.split(":")
        # SCHEDULE/KEY=VALUE/...: more --zero-pipeline options.
        schedule, *extra = fields[0].split("/")
        tied = next((e.split("=", 1)[1] for e in extra if e.startswith("tied-grads=")), "")
        stages, m = int(fields[1]), int(fields[2])
        dp = int(fields[3]) if len(fields) > 3 else 1
        zero_stage = int(fields[4]) if len(fields) > 4 else None
        micros = m * dp  # the 1-rank run's accumulation: every replica's micro-batches
        if rows % micros:
            raise Fail(f"--pp-configs {spec}: the stored global batch of {rows} rows does "
                       f"not split into {micros} micro-batches; give configurations it "
                       "splits into")
        micro = rows // micros
        if micros not in refs:
            zrt, w = compile_(f"one_m{micros}", micro, micros, "")
            refs[micros] = train(f"one_m{micros}", zrt, w, 1)
        ref_rows, ref_w, ref_opt, _ = refs[micros]
        tag = f"{schedule}_s{stages}_m{m}" + (f"_dp{dp}_z{zero_stage}" if dp > 1 else "") \
            + "".join("_" + e.replace("=", "") for e in extra)
        zrt, w = compile_(tag, micro, m, f"pp={stages} micro-batches={m} schedule={schedule}"
                          + "".join(" " + e for e in extra), zero_stage)
        got_rows, got_w, got_opt, got_peaks = train(tag, zrt, w, stages * dp)
        if dp == 1 and not extra:
            peaks[(schedule, stages, m)] = got_peaks
        elif not extra:
            zero_runs[(stages, m, dp, zero_stage)] = tag
        bad = []
        # The order each rank ran its steps in (zero-run --trace's schedule track)
        # against DeepSpeed's TrainSchedule, or GPipe's all-forwards-then-backwards.
        for r, got_order in schedules[tag].items():
            st = r // dp
            want = deepspeed_train_schedule(m, stages, st) if schedule == "1f1b" else \
                [f"F{k}" for k in range(m)] + [f"B{k}" for k in range(m)]
            if got_order != want:
                bad.append(f"rank {r} ran {' '.join(got_order)}, the {schedule} order is "
                           f"{' '.join(want)}")
        # zero-run's report per rank: its stage, the predicted bubble
        # (S-1)/(M+S-1), and the schedule's measured bubble, which must be the
        # one the trace shows.
        rank_reports, derived = bubbles[tag]
        for rk in rank_reports:
            r = rk["rank"]
            want_pred = (stages - 1) / (m + stages - 1)
            if rk.get("pipeline_stage") != r // dp:
                bad.append(f"rank {r}: report says stage {rk.get('pipeline_stage')}, "
                           f"expected {r // dp}")
            if abs(rk.get("pipeline_predicted_bubble", -1) - want_pred) > 1e-12:
                bad.append(f"rank {r}: predicted bubble {rk.get('pipeline_predicted_bubble')}"
                           f", (S-1)/(M+S-1) = {want_pred}")
            got_b = rk.get("pipeline_schedule_bubble")
            if got_b is None or derived[r] is None or abs(got_b - derived[r]) > 1e-3:
                bad.append(f"rank {r}: schedule bubble {got_b}, the trace shows {derived[r]}")
            # Every step's bubble, the last one the trace's.
            per_step = rk.get("iteration_schedule_bubble", [])
            if len(per_step) != steps or (per_step and per_step[-1] != got_b):
                bad.append(f"rank {r}: per-step schedule bubbles {per_step}, expected "
                           f"{steps} ending in {got_b}")
        lrel, grel, gaps = step_gaps(a, got_rows, ref_rows)
        bad += gaps
        if set(got_w) != set(ref_w):
            bad.append(f"parameter set {sorted(set(got_w) ^ set(ref_w))}")
        if set(got_opt) != set(ref_opt):
            bad.append(f"optimizer state names {sorted(set(got_opt) ^ set(ref_opt))}")
        werr, identical = 0.0, True
        for want, got in ((ref_w, got_w), (ref_opt, got_opt)):
            for k in want:
                if k not in got:
                    continue
                identical &= want[k].tobytes() == got[k].tobytes()
                if want[k].dtype.kind != "f" or not want[k].size:
                    if not np.array_equal(want[k], got[k]):
                        bad.append(f"{k} differs")
                    continue
                d = np.abs(got[k].astype(np.float64) - want[k])
                tol = a.dp_w_rtol * np.abs(want[k]) + a.dp_w_atol
                werr = max(werr, float(np.max(d / tol)))
        if not werr <= 1:
            bad.append(f"weights/optimizer state error/tolerance {werr:.3g}")
        identical &= all(x["loss"] == y["loss"] for x, y in zip(got_rows, ref_rows))
        log(f"  {'FAIL' if bad else 'ok  '} {schedule} pp={stages} micro-batches={m} "
            + "".join(e + " " for e in extra)
            + (f"x dp={dp} ZeRO-{zero_stage} " if dp > 1 else "") +
            f"(micro-batch {micro}) vs 1 rank accumulation {micros}: loss rel {lrel:.2g}, grad "
            f"norm rel {grel:.2g}, weights/state error/tolerance {werr:.3g}; "
            f"{'bit-identical' if identical else 'not bit-identical'}; peak live activation "
            f"bytes per stage {got_peaks}" + (f"   {'; '.join(bad)}" if bad else ""))
        failures += [f"{tag}: {b}" for b in bad]
    # ZeRO inside the stages, from the runtime's resident bytes per rank against the
    # paper's per-rank formulas for the stage's parameters Psi_s (AdamW: 2 Psi_s of
    # state), Psi_s read off the replicated run (ZeRO-0 holds 3 Psi_s, + 8 bytes of
    # step counter on the first stage): ZeRO-1/2 Psi_s (1 + 2/N), ZeRO-3 3 Psi_s / N;
    # within 1% (the padding of each tensor to a multiple of N).
    for (stages, m, dp, z), tag in zero_runs.items():
        base = zero_runs.get((stages, m, dp, 0))
        if z == 0 or base is None:
            continue
        for r, (got, full) in enumerate(zip(resident[tag], resident[base])):
            psi = (full - (8 if r < dp else 0)) / 3
            want = psi * (1 + 2 / dp) if z in (1, 2) else 3 * psi / dp
            ok = abs(got - want) <= 0.01 * want + 8
            log(f"  {'ok  ' if ok else 'FAIL'} pp={stages} x dp={dp} ZeRO-{z} rank {r}: "
                f"{got} bytes of parameters + optimizer state, formula {want:.0f} "
                f"(Psi_s = {psi:.0f} bytes)")
            if not ok:
                failures.append(f"{tag} rank {r}: resident {got}, formula {want:.0f}")
    # Memory at a size where activations, not the gradients and optimizer step
    # both schedules share, set the peak: the stored batches tiled --pp-memory-scale
    # times along the batch and the sequence, one step of each schedule.
    scale = a.pp_memory_scale
    xfail = {tuple(int(x) for x in mark.split(":")) for mark in a.pp_memory_xfail}
    xfail_seen = set()
    # (a sequence: the last dim of integer [step, batch, seq] inputs, token ids and
    # labels; feature dims stay as the model fixes them)
    big = {k: np.ascontiguousarray(np.tile(v[:1], (1, scale) + (
        (scale,) if v.ndim == 3 and v.dtype.kind in "iu" else (1,) * (v.ndim - 2))))
           for k, v in data.items()}
    data_path = work / "big.safetensors"
    save_file(big, str(data_path))
    rows = rows * scale
    steps = 1
    for (schedule, stages, m) in list(peaks):
        if schedule != "1f1b" or m < stages or ("gpipe", stages, m) not in peaks:
            continue
        got, weights = {}, {}
        for sch in ("gpipe", "1f1b") + (("1f1b-ckpt",) if a.pp_ckpt == "on" else ()):
            micro = rows // m
            data = big
            tag = f"mem_{sch}_s{stages}_m{m}"
            ckpt = " activation-checkpoint-interval=1" if sch.endswith("ckpt") else ""
            zrt, w = compile_(tag, micro, m, f"pp={stages} micro-batches={m} "
                              f"schedule={sch.split('-')[0]}{ckpt}")
            _, weights[sch], _, got[sch] = train(tag, zrt, w, stages)
        # Activation checkpointing (every layer recomputed in backward): the same
        # bits, and a lower activation peak on the stage that needs the most (a
        # stage holding only an embedding has nothing to drop).
        if "1f1b-ckpt" not in got:
            continue
        pc = got["1f1b-ckpt"]
        same = all(weights["1f1b"][k].tobytes() == weights["1f1b-ckpt"][k].tobytes()
                   for k in weights["1f1b"])
        lower_ck = same and max(pc) < max(got["1f1b"])
        log(f"  {'ok  ' if lower_ck else 'FAIL'} pp={stages} M={m} 1F1B with "
            f"activation-checkpoint-interval=1: weights {'bit-identical' if same else 'DIFFER'}"
            f", peak live activation bytes per stage {pc} vs {got['1f1b']} without "
            f"(largest {max(pc)} vs {max(got['1f1b'])})")
        if not lower_ck:
            failures.append(f"pp={stages} M={m}: activation checkpointing: weights "
                            f"{'same' if same else 'differ'}, peaks {pc} vs {got['1f1b']}")
        # 1F1B keeps at most S - s micro-batches in flight on stage s, GPipe all M:
        # below GPipe's where S - s < M. Where S - s >= M both keep all M, and the
        # measured peaks may differ by a send still in flight (the communication
        # stream's timing): never above GPipe's by more than one message.
        p1, pg = got["1f1b"], got["gpipe"]
        slack = message[f"mem_1f1b_s{stages}_m{m}"]
        held = [x < y if stages - st < m else x <= y + slack[st]
                for st, (x, y) in enumerate(zip(p1, pg))]
        # Stages marked --pp-memory-xfail: their failure is reported XFAIL, their
        # passing fails (XPASS: the mark is stale).
        known = {st for (s_, m_, st) in xfail if (s_, m_) == (stages, m)}
        xfail_seen.update((stages, m, st) for st in known)
        lower = all(ok for st, ok in enumerate(held) if st not in known)
        log(f"  {'ok  ' if lower else 'FAIL'} pp={stages} M={m}, micro-batch "
            f"{rows // m}x{next(iter(big.values())).shape[2:]}: 1F1B peak live activation "
            f"bytes per stage {p1} vs GPipe's {pg} (below where S - stage < M, else at most)"
            + (f"; stages {sorted(known)} marked expected to fail" if known else ""))
        if not lower:
            failures.append(f"pp={stages} M={m}: 1F1B peak {p1} not below GPipe's {pg}")
        for st in sorted(known):
            if st >= len(held):
                failures.append(f"--pp-memory-xfail {stages}:{m}:{st}: pp={stages} has no "
                                f"stage {st}")
            elif held[st]:
                log(f"  XPASS pp={stages} M={m} stage {st}: 1F1B peak {p1[st]} vs GPipe's "
                    f"{pg[st]} holds, but is marked expected to fail (--pp-memory-xfail)")
                failures.append(f"pp={stages} M={m} stage {st}: XPASS (1F1B peak {p1[st]}, "
                                f"GPipe's {pg[st]}): remove its --pp-memory-xfail mark")
            else:
                log(f"  XFAIL pp={stages} M={m} stage {st}: 1F1B peak {p1[st]} not below "
                    f"GPipe's {pg[st]} (expected to fail: --pp-memory-xfail)")
    for mark in sorted(xfail - xfail_seen):
        failures.append(f"--pp-memory-xfail {':'.join(map(str, mark))}: no 1F1B/GPipe memory "
                        "comparison at that pp and M was run")
    return failures
