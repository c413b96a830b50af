"""ds_configs read as DeepSpeed 0.19 reads them, held to DeepSpeed's own runs
(deepspeed-configs.test).

deepspeed_oracle.py's CONFIGS (its "config" cases: each key where zero-opt and
DeepSpeed once differed, and public templates of DeepSpeedExamples, DeepSpeed-Chat,
OpenRLHF, LLaMA-Factory and Megatron-DeepSpeed) were run by DeepSpeed 0.19's engine on
the GPT-2 loss fixture and byte tokens of the GPL-3; what it did is stored in
deepspeed_oracle.ref.json. For each case this driver:
  - where DeepSpeed refused the config: zero-opt must refuse it too (non-zero exit);
  - else compiles the fixture with zero-opt --config (the micro-batch DeepSpeed
    resolved as the input shape, --zero-pipeline dp=WORLD, the case's zero-opt
    arguments) and trains it with zero-run --tokens over the same world and steps:
    every step's lr equal to DeepSpeed's, the loss and gradient norm within
    train_configs.TOLERANCE of the precision, and (fp16) the loss scale and the
    skipped steps exactly.
--live also reruns DeepSpeed on each case where it is installed.

KNOWN names the cases where zero-run is known to differ, each with why: such a
case must fail its check (an expected failure, printed as XFAIL); one that passes
fails the driver (XPASS), as does any other failure.
"""
import argparse
import json
import os
import sys
import tempfile

from zerokit import mpi
from zerokit.data import gpl3_split
from zerokit.tools import call, zero_opt

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_configs  # noqa: E402
from train_configs import against_deepspeed, oracle_cases  # noqa: E402


# Known differences from DeepSpeed 0.19, each with why (see the module docstring).
KNOWN = {}


def precision_of(cfg):
    for key, name in (("fp16", "fp16"), ("bf16", "bf16"), ("bfloat16", "bf16")):
        block = cfg.get(key)
        if isinstance(block, dict) and block.get("enabled") is True:
            if key == "bfloat16" and isinstance(cfg.get("bf16"), dict):
                continue
            return name
    return "fp32"


def first_error(text):
    lines = [ln for ln in text.splitlines() if "error" in ln.lower()]
    return (lines or text.strip().splitlines() or [""])[0].strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zero-opt", required=True)
    ap.add_argument("--zero-run", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--oracle", default=train_configs.ORACLE)
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--live", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    split = gpl3_split(a.work)
    if not split:
        print("UNSUPPORTED: the GPL-3 text is missing (Debian's base-files ships it)")
        return
    tokens_path = split[2]
    model = os.path.join(a.models, "gpt2_loss.onnx")
    stored = oracle_cases(a.oracle, model)
    import deepspeed_oracle
    cases = {k: c for k, c in deepspeed_oracle.cases().items() if c["kind"] == "config"}
    live = None
    if a.live:
        try:
            import deepspeed  # noqa: F401
            live = split[0]
        except ImportError:
            print("live: UNSUPPORTED: DeepSpeed is not installed (scripts/setup-pyenv.sh "
                  "deepspeed)")
    failures, checked, xfails = [], 0, []

    def fail(name, text):
        if name in KNOWN:
            xfails.append(name)
            print(f"XFAIL {name}: {text}\n  known: {KNOWN[name]}")
        else:
            failures.append(name)
            print(f"FAIL {text}" if not text.startswith("FAIL") else text)

    for name, case in cases.items():
        if a.only and name not in a.only:
            continue
        checked += 1
        ds = stored.get(name)
        if ds is None or ds.get("config") != case["config"]:
            failures.append(name)
            print(f"FAIL {name}: {os.path.basename(a.oracle)} has no DeepSpeed run of this "
                  "config: regenerate it (build/pyenv/bin/python test/e2e/deepspeed_oracle.py "
                  "--write)")
            continue
        runs = [(os.path.basename(a.oracle), ds)]
        if live is not None:
            runs.append(("live", dict(config=case["config"],
                                      **deepspeed_oracle.run_case(name, case, live))))
        w, world = os.path.join(a.work, name), case["world"]
        os.makedirs(w, exist_ok=True)
        cfg_path = os.path.join(w, "ds_config.json")
        with open(cfg_path, "w") as f:
            json.dump(case["config"], f)
        micro = (ds.get("resolved") or {}).get("micro_batch") or \
            case["config"].get("train_micro_batch_size_per_gpu")
        if not isinstance(micro, int):
            micro = deepspeed_oracle.GLOBAL_BATCH // world
        seq = deepspeed_oracle.SEQ
        prog, init = os.path.join(w, "p.zrt"), os.path.join(w, "init.safetensors")
        compiled = call(zero_opt(a.zero_opt, model, {"input_ids": (micro, seq),
                                                     "labels": (micro, seq)},
                                 ["--train", "--config", cfg_path, "--zero-pipeline",
                                  f"dp={world}", *case["zero_opt"]], prog, init))
        for source, d in runs:
            if "error" in d:
                if compiled.returncode != 0 and name in KNOWN:
                    failures.append(name)
                    print(f"XPASS {name}: refused as DeepSpeed, but KNOWN says: {KNOWN[name]}")
                elif compiled.returncode == 0:
                    fail(name, f"{name}: DeepSpeed refuses the config ({source}: "
                               f"{first_error(d['error'])}); zero-opt compiled it")
                else:
                    print(f"{name}: refused, as DeepSpeed ({source}): "
                          f"{first_error(d['error'])[:110]} | zero-opt: "
                          f"{first_error(compiled.stderr)[:150]}")
                continue
            if compiled.returncode != 0:
                fail(name, f"{name}: DeepSpeed trains it, zero-opt refuses: "
                           f"{first_error(compiled.stderr)}")
                continue
            log = os.path.join(w, "log.json")
            if not os.path.exists(log):
                cmd = [a.zero_run, prog, "--weights", init, "--tokens", tokens_path, "--seed",
                       str(deepspeed_oracle.SEED), "--steps", str(case["steps"]), "--threads",
                       "1", "--log-json", log]
                r = call(mpi.mpirun(world, cmd) if world > 1 else cmd, mpi.env(root=True))
                if r.returncode != 0:
                    fail(name, f"{name}: zero-run: {first_error(r.stdout + r.stderr)}")
                    break
            records = [r for r in json.load(open(log)) if "loss" in r]
            try:
                said = against_deepspeed(name, case["config"], precision_of(case["config"]),
                                         records, d, source)
            except SystemExit as e:
                fail(name, str(e))
                continue
            if name in KNOWN:
                failures.append(name)
                print(f"XPASS {name}: agrees with DeepSpeed, but KNOWN says: {KNOWN[name]}")
                continue
            print(f"{name}: ok over {world} rank(s), {precision_of(case['config'])}: {said}")
    print(f"{checked - len(set(failures)) - len(set(xfails))} of {checked} configs as "
          f"DeepSpeed 0.19, {len(set(xfails))} known "
          f"difference{'' if len(set(xfails)) == 1 else 's'}")
    if failures:
        sys.exit(f"FAIL: {len(set(failures))} configs differ from DeepSpeed: "
                 f"{' '.join(sorted(set(failures)))}")


if __name__ == "__main__":
    main()
