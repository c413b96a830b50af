#!/usr/bin/env python3
"""The GPU run kit's driver (run.sh runs it; docs/gpu-kit.md).

Unpacks the kit's zero-run (CUDA build) and the libraries bundled with it,
finds CUDA's libraries on this machine, runs every case of cases.json with
`--backend cuda` (ZRT_KIT_BACKEND=cpu: `--backend cpu`, a dry run) under a
per-case timeout, compares each result with the CPU backend's stored outputs
(rtol 1e-4, atol 1e-5), then the headline: GPT-2-small's training step and
forward with zero-run and with PyTorch on the same device. Writes
OUT/gpu-check.json (after every case, so a run cut short still reports) and
OUT/gpu-check.log. Needs only the Python standard library for the cases (numpy
when present); the headline needs numpy, its PyTorch side torch.
"""
import argparse
import glob
import json
import math
import os
import platform
import re
import shutil
import site
import statistics
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

try:
    import numpy as np
except ImportError:  # the comparator works without it
    np = None

CUDA_LIBS = ["libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13"]
OPTIONAL_CUDA_LIBS = ["libnccl.so.2"]  # dlopened by zero-run only for several ranks
# Variables by which zero-run would take itself to be started by an MPI launcher
# (it then initialises MPI, which needs Open MPI's runtime): never passed on.
MPI_VARS = re.compile(r"^(OMPI_|PMI_|PMIX_|MPI_LOCALNRANKS$|MPI_LOCALRANKID$)")
STOP_MARKERS = ("no usable CUDA device", "error while loading shared libraries",
                "cannot open shared object file", "version `GLIBC")


class Log:
    def __init__(self, path):
        self.f = open(path, "w")

    def __call__(self, text=""):
        self.f.write(text + "\n")
        self.f.flush()
        print(text, flush=True)

    def quiet(self, text):
        self.f.write(text + "\n")
        self.f.flush()


# ---------------------------------------------------------------------------
# safetensors, without the safetensors package
# ---------------------------------------------------------------------------

DTYPES = {"F64": ("d", 8), "F32": ("f", 4), "F16": ("e", 2), "BF16": ("bf16", 2),
          "I64": ("q", 8), "I32": ("i", 4), "I16": ("h", 2), "I8": ("b", 1),
          "U8": ("B", 1), "BOOL": ("?", 1), "U16": ("H", 2), "U32": ("I", 4),
          "U64": ("Q", 8)}
FLOATS = {"F64", "F32", "F16", "BF16"}
# A 16-bit output is its f32 value rounded once more, and a 16-bit model rounds
# every intermediate too: the backends' f32 sums in other orders round to
# neighbouring 16-bit values, and such a flip carries on through the layers, as
# an absolute error on the scale of the values it was computed from. So a
# 16-bit output is compared within 8 units in the last place of each value
# (2^-7 relative for f16's 10 stored mantissa bits, 2^-4 for bf16's 7) or 1
# unit of the tensor's largest value, whatever the case's rtol and atol.
# (GPT-2 in f16 on an H200: 5 units at most; one logit near 0 off by 1/10 unit
# of the largest.)
HALF_RTOL = {"F16": 2.0 ** -7, "BF16": 2.0 ** -4}


def read_safetensors(path):
    """{name: (dtype, shape, values)}: values a flat numpy array (float64 for
    floats) or, without numpy, a list."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape = info["dtype"], info["shape"]
        lo, hi = info["data_offsets"]
        raw = blob[lo:hi]
        code, size = DTYPES[dtype]
        count = (hi - lo) // size
        if np is not None:
            if dtype == "BF16":
                vals = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
            elif dtype == "BOOL":
                vals = np.frombuffer(raw, np.uint8).astype(bool)
            else:
                vals = np.frombuffer(raw, "<" + code)
            if dtype in FLOATS:
                vals = vals.astype(np.float64)
        elif dtype == "BF16":
            vals = [struct.unpack("<f", b"\0\0" + raw[2 * i:2 * i + 2])[0] for i in range(count)]
        else:
            vals = list(struct.unpack(f"<{count}{code}", raw))
        out[name] = (dtype, list(shape), vals)
    return out


def raw_safetensors(path):
    """{name: (dtype, shape, the tensor's bytes)}, for bit-for-bit comparisons."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    return {name: (info["dtype"], info["shape"],
                   blob[info["data_offsets"][0]:info["data_offsets"][1]])
            for name, info in header.items() if name != "__metadata__"}


def max_abs(values):
    """The largest |value| that is not NaN (0.0 for none)."""
    if np is not None:
        finite = values[~np.isnan(values)]
        return float(np.abs(finite).max()) if finite.size else 0.0
    return max((abs(v) for v in values if not math.isnan(v)), default=0.0)


def compare_tensor(got, want, rtol, atol):
    """(ok, max_abs_err, why) for one tensor: floats within atol + rtol·|want|
    (NaN only where want is NaN), others equal."""
    gd, gs, gv = got
    wd, ws, wv = want
    if gs != ws:
        return False, None, f"shape {gs}, reference {ws}"
    if gd != wd:
        return False, None, f"dtype {gd}, reference {wd}"
    if len(wv) == 0:
        return True, 0.0, ""
    if wd in HALF_RTOL:
        rtol = max(rtol, HALF_RTOL[wd])
        atol = max(atol, HALF_RTOL[wd] / 8 * max_abs(wv))
    if wd not in FLOATS:
        if np is not None:
            bad = int(np.count_nonzero(gv != wv))
        else:
            bad = sum(1 for g, w in zip(gv, wv) if g != w)
        return bad == 0, float(bad > 0), f"{bad} elements differ" if bad else ""
    if np is not None:
        gnan, wnan = np.isnan(gv), np.isnan(wv)
        nan_bad = int(np.count_nonzero(gnan != wnan))
        both = ~(gnan | wnan)
        diff = np.abs(gv[both] - wv[both])
        err = float(diff.max()) if diff.size else 0.0
        tol = atol + rtol * np.abs(wv[both])
        bad = int(np.count_nonzero(~(diff <= tol)))
        worst = int(np.argmax(diff - tol)) if diff.size else 0
        at = ((float(gv[both][worst]), float(wv[both][worst])) if diff.size else None)
    else:
        nan_bad, bad, err, at, excess = 0, 0, 0.0, None, -1.0
        for g, w in zip(gv, wv):
            if math.isnan(g) or math.isnan(w):
                nan_bad += math.isnan(g) != math.isnan(w)
                continue
            d = abs(g - w)
            err = max(err, d)
            if not d <= atol + rtol * abs(w):
                bad += 1
            if d - (atol + rtol * abs(w)) > excess:
                excess, at = d - (atol + rtol * abs(w)), (g, w)
    if nan_bad:
        return False, err, f"{nan_bad} elements NaN on one side only"
    if bad:
        return False, err, (f"{bad} of {len(wv)} elements outside rtol {rtol:g} atol {atol:g} "
                            f"(max abs err {err:.3g}; worst {at[0]:.8g} vs {at[1]:.8g})")
    return True, err, ""


def compare_files(got_path, ref_path, rtol, atol):
    """(ok, max_abs_err, message) over every tensor of the reference."""
    try:
        got = read_safetensors(got_path)
    except (OSError, ValueError, KeyError, struct.error) as e:
        return False, None, f"cannot read {os.path.basename(got_path)}: {e}"
    ref = read_safetensors(ref_path)
    worst, errs = 0.0, []
    for name, want in sorted(ref.items()):
        if name not in got:
            errs.append(f"{name}: missing")
            continue
        ok, err, why = compare_tensor(got[name], want, rtol, atol)
        if err is not None:
            worst = max(worst, err)
        if not ok:
            errs.append(f"{name}: {why}")
    if errs:
        return False, worst, f"{len(errs)} of {len(ref)} tensors differ: " + "; ".join(errs[:3])
    return True, worst, f"{len(ref)} tensors within rtol {rtol:g} atol {atol:g}"


# ---------------------------------------------------------------------------
# The machine: zero-run, CUDA's libraries, the device
# ---------------------------------------------------------------------------

def unpack(kit, dest, log):
    """Unpacks the kit's zero-run and libraries into dest (bin/, lib/): a
    scratch folder of this run, so the kit itself stays small (and may be
    read-only)."""
    pack = os.path.join(kit, "zero-run-cuda.tar.gz")
    t = time.perf_counter()
    with tarfile.open(pack) as tf:
        for m in tf.getmembers():
            if m.name.startswith("/") or ".." in m.name.split("/"):
                raise SystemExit(f"kit.py: unsafe path {m.name} in {pack}")
        if hasattr(tarfile, "data_filter"):
            tf.extractall(dest, filter="data")
        else:
            tf.extractall(dest)
    log.quiet(f"unpacked {pack} into {dest} in {time.perf_counter() - t:.1f} s")
    return dest


def site_dirs():
    dirs = []
    try:
        dirs += site.getsitepackages()
    except AttributeError:
        pass
    try:
        dirs.append(site.getusersitepackages())
    except AttributeError:
        pass
    dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    seen, out = set(), []
    for d in dirs:
        if d and os.path.isdir(d) and d not in seen:
            seen.add(d)
            out.append(d)
    return out


def cuda_lib_dirs(log):
    """{library: folder} for CUDA's libraries: ZRT_KIT_CUDA_LIBS, then python3's
    nvidia-* wheels (site-packages/nvidia/*/lib: cuda_runtime, cublas, nccl; CUDA
    13's wheels put them in nvidia/cu13/lib), then CUDA toolkits."""
    cands = [d for d in os.environ.get("ZRT_KIT_CUDA_LIBS", "").split(":") if d]
    for sp in site_dirs():
        for pattern in ("nvidia/*/lib", "nvidia/*/lib64", "nvidia/*/*/lib"):
            cands += sorted(glob.glob(os.path.join(sp, pattern)))
    for root in ["/usr/local/cuda"] + sorted(glob.glob("/usr/local/cuda-*"), reverse=True):
        cands += [os.path.join(root, d) for d in ("lib64", "lib", "targets/x86_64-linux/lib")]
    cands += ["/usr/lib/x86_64-linux-gnu", "/usr/lib64"]
    cands = [d for d in dict.fromkeys(os.path.realpath(c) for c in cands) if os.path.isdir(d)]
    found = {}
    for lib in CUDA_LIBS + OPTIONAL_CUDA_LIBS:
        for d in cands:
            if os.path.exists(os.path.join(d, lib)):
                found[lib] = d
                break
    # cuBLAS and cuBLASLt from one release.
    if "libcublas.so.13" in found and os.path.exists(
            os.path.join(found["libcublas.so.13"], "libcublasLt.so.13")):
        found["libcublasLt.so.13"] = found["libcublas.so.13"]
    log.quiet("searched for CUDA's libraries in: " + " ".join(cands))
    return found


def driver_dirs():
    """Folders with libcuda.so.1 that the dynamic linker would not search."""
    try:
        known = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    except OSError:
        known = ""
    if "libcuda.so.1" in known:
        return []
    for d in ["/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/x86_64-linux-gnu",
              "/usr/lib64", "/usr/lib/wsl/lib"]:
        if os.path.exists(os.path.join(d, "libcuda.so.1")):
            return [d]
    return []


def nvidia_smi(log):
    if not shutil.which("nvidia-smi"):
        return None
    r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                        "--format=csv,noheader"], capture_output=True, text=True)
    log.quiet("nvidia-smi: " + (r.stdout + r.stderr).strip())
    if r.returncode != 0 or not r.stdout.strip():
        return None
    parts = [p.strip() for p in r.stdout.strip().splitlines()[0].split(",")]
    return {"device": parts[0], "driver": parts[1] if len(parts) > 1 else "unknown",
            "memory": parts[2] if len(parts) > 2 else None}


def glibc_version():
    lib, ver = platform.libc_ver()
    return ver if lib == "glibc" else None


def version_tuple(v):
    return tuple(int(x) for x in re.findall(r"\d+", v or "0"))


class MemorySampler:
    """Peak GPU memory in use (whole device, MiB) while a process runs, sampled
    every 20 ms through NVML (pynvml) or, without it, nvidia-smi; minus the
    reading just before the process starts."""

    def __init__(self):
        self.nvml = None
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nvml = (pynvml, pynvml.nvmlDeviceGetHandleByIndex(
                int(os.environ.get("ZRT_CUDA_DEVICE", "0"))))
        except Exception:
            self.nvml = None
        self.smi = shutil.which("nvidia-smi")

    def read(self):
        if self.nvml:
            pynvml, h = self.nvml
            return pynvml.nvmlDeviceGetMemoryInfo(h).used / 2**20
        if self.smi:
            r = subprocess.run([self.smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                                "-i", os.environ.get("ZRT_CUDA_DEVICE", "0")],
                               capture_output=True, text=True)
            try:
                return float(r.stdout.split()[0])
            except (ValueError, IndexError):
                return None
        return None

    def available(self):
        return self.read() is not None

    def run(self, fn):
        """fn() under sampling: (fn's result, peak MiB above the baseline or None)."""
        base = self.read()
        if base is None:
            return fn(), None
        peak = [base]
        stop = threading.Event()

        def loop():
            while not stop.is_set():
                v = self.read()
                if v is not None:
                    peak[0] = max(peak[0], v)
                stop.wait(0.02)
        t = threading.Thread(target=loop, daemon=True)
        t.start()
        try:
            res = fn()
        finally:
            stop.set()
            t.join()
        return res, round(peak[0] - base, 1)


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------

def run_proc(cmd, env, timeout, log, cwd=None):
    """(returncode or None on timeout, seconds, combined output)."""
    log.quiet("$ " + " ".join(cmd))
    t = time.perf_counter()
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)
        code, text = r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired as e:
        code = None
        text = ((e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes)
                else (e.stdout or "")) + ((e.stderr or b"").decode(errors="replace")
                                          if isinstance(e.stderr, bytes) else (e.stderr or ""))
    secs = time.perf_counter() - t
    if text.strip():
        log.quiet("\n".join("    " + line for line in text.strip().splitlines()[-40:]))
    log.quiet(f"    -> {'timeout' if code is None else 'exit ' + str(code)} in {secs:.2f} s")
    return code, secs, text


def last_error(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if "error" in line.lower() or "fail" in line.lower():
            return line.strip()[:500]
    return (lines[-1].strip()[:500] if lines else "no output")


def run_case(case, kit, work, zr, env, backend, rtol, atol, timeout, log):
    # A case may carry its own tolerance (a bf16 training: the backends' f32
    # kernels sum in other orders, and bf16 rounding turns that into ulps).
    rtol, atol = case.get("rtol", rtol), case.get("atol", atol)
    d = os.path.join(kit, case["dir"])
    tag = case["name"]
    cmd = [zr, os.path.join(d, case["program"]), "--weights", os.path.join(d, case["weights"]),
           "--backend", backend]
    out = os.path.join(work, f"{tag}.out.safetensors")
    if case["kind"] == "forward":
        cmd += ["--input", os.path.join(d, case["inputs"]), "--output", out]
    else:
        log_json = os.path.join(work, f"{tag}.log.json")
        cmd += ["--data", os.path.join(d, case["data"]), "--steps", str(case["steps"]),
                "--log-json", log_json, "--save", out]
    code, secs, text = run_proc(cmd, env, timeout, log)
    rec = {"name": tag, "kind": case["kind"], "status": "error", "max_abs_err": None,
           "seconds": round(secs, 3), "message": ""}
    if code is None:
        rec["message"] = f"timed out after {timeout:.0f} s"
        return rec, text
    if code != 0:
        rec["message"] = f"zero-run exit {code}: {last_error(text)}"
        return rec, text
    if case["kind"] == "forward":
        ok, err, msg = compare_files(out, os.path.join(d, case["ref"]), rtol, atol)
    else:
        try:
            with open(log_json) as f:
                got = [s["loss"] for s in json.load(f)]
        except (OSError, ValueError, KeyError, TypeError) as e:
            rec["message"] = f"no training log: {e}"
            return rec, text
        with open(os.path.join(d, case["ref_log"])) as f:
            want = [s["loss"] for s in json.load(f)]
        errs = [abs(g - w) for g, w in zip(got, want)]
        bad = [i + 1 for i, (g, w) in enumerate(zip(got, want))
               if not abs(g - w) <= atol + rtol * abs(w)]
        ok = len(got) == len(want) and not bad
        err = max(errs) if errs else None
        # The weights after the steps, for information: AdamW's first steps move
        # each weight by about lr·sign(gradient), so a gradient within rounding
        # of 0 may move either way: not a criterion, but NaN or a missing
        # tensor is.
        wok, werr, wmsg = compare_files(out, os.path.join(d, case["ref"]), rtol, atol)
        broken = "NaN" in wmsg or "missing" in wmsg or "shape" in wmsg or "cannot read" in wmsg
        msg = (f"losses {['%.7g' % x for x in got]} vs CPU {['%.7g' % x for x in want]}"
               + (f"; steps {bad} outside rtol {rtol:g} atol {atol:g}" if bad else
                  (f"; {len(got)} of {len(want)} steps logged" if len(got) != len(want) else
                   f" within rtol {rtol:g} atol {atol:g}"))
               + f"; weights after {case['steps']} steps: max abs err "
               + (f"{werr:.3g}" if werr is not None else "n/a")
               + ("" if wok else f" ({wmsg})"))
        if broken:
            ok = False
        # Offload moves bytes, not arithmetic: the same losses and weights as
        # the named case's run on this device, bit for bit.
        other = case.get("same_bits_as")
        if other and ok:
            try:
                with open(os.path.join(work, f"{other}.log.json")) as f:
                    base = [s["loss"] for s in json.load(f)]
                mine, theirs = (raw_safetensors(out),
                                raw_safetensors(os.path.join(work, f"{other}.out.safetensors")))
                differ = sorted(n for n in theirs if mine.get(n) != theirs[n])
                same = base == got and not differ and sorted(mine) == sorted(theirs)
                msg += (f"; bit-identical to {other} on this device (losses and "
                        f"{len(theirs)} weights)" if same else
                        f"; NOT bit-identical to {other} on this device: losses {base} vs "
                        f"{got}, weights differ: {differ[:3]}")
                ok = same
            except (OSError, ValueError, KeyError, TypeError, struct.error) as e:
                msg += f"; {other}'s run on this device is missing for the bit check ({e})"
                ok = False
    rec["status"] = "ok" if ok else "fail"
    rec["max_abs_err"] = err
    rec["message"] = msg
    return rec, text


# ---------------------------------------------------------------------------
# Headline: GPT-2-small, zero-run and PyTorch on the same device
# ---------------------------------------------------------------------------

def write_random_weights(spec, path, seed):
    """A safetensors file with the names, dtypes and shapes the program reads:
    N(0, 0.02) for matrices, zeros for biases, ones for 1-D norm weights
    (GPT-2's own initialisation, up to its scaled residual projections)."""
    rng = np.random.default_rng(seed)
    header, offset, arrays = {}, 0, []
    for name in sorted(spec):
        info = spec[name]
        if info["dtype"] != "F32":
            raise SystemExit(f"kit.py: weight {name} is {info['dtype']}; only F32 is generated")
        shape = info["shape"]
        if name.endswith(".bias"):
            a = np.zeros(shape, np.float32)
        elif len(shape) == 1:
            a = np.ones(shape, np.float32)
        else:
            a = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
        header[name] = {"dtype": "F32", "shape": shape,
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        arrays.append(a)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for a in arrays:
            a.tofile(f)


def write_safetensors(arrays, path):
    header, offset = {}, 0
    code = {np.dtype(np.int64): "I64", np.dtype(np.float32): "F32"}
    for name, a in arrays.items():
        header[name] = {"dtype": code[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for a in arrays.values():
            np.ascontiguousarray(a).tofile(f)


def stats_ms(times):
    return {"mean_ms": round(1e3 * statistics.mean(times), 3),
            "median_ms": round(1e3 * statistics.median(times), 3),
            "min_ms": round(1e3 * min(times), 3), "max_ms": round(1e3 * max(times), 3),
            "timed": len(times)}


def headline(kit, work, zr, env, backend, python, log, deadline):
    """The headline figures (a dict; "status": "ok", "partial" or "skipped")."""
    meta_path = os.path.join(kit, "headline", "weights.json")
    default = "1" if backend == "cuda" else "0"
    if os.environ.get("ZRT_KIT_HEADLINE", default) != "1":
        return {"status": "skipped", "message": (
            "the CPU dry run leaves the headline out (ZRT_KIT_HEADLINE=1 runs it)"
            if backend == "cpu" else "ZRT_KIT_HEADLINE=0")}
    if not os.path.exists(meta_path):
        return {"status": "skipped", "message": (
            "this kit has no GPT-2-small programs: scripts/gpu-kit.sh found no "
            "build/bench/gpt2_small.onnx (bench/make_gpt2_small.sh makes it)")}
    if np is None:
        return {"status": "skipped", "message": "numpy is not importable: no weights can be written"}
    with open(meta_path) as f:
        meta = json.load(f)
    progs = meta["programs"]
    tr, fw = progs["train"], progs["forward"]
    warm, timed = int(os.environ.get("ZRT_KIT_HEADLINE_WARMUP", "2")), \
        int(os.environ.get("ZRT_KIT_HEADLINE_STEPS", "5"))
    steps = warm + timed
    timeout = float(os.environ.get("ZRT_KIT_HEADLINE_TIMEOUT", "240"))
    res = {"status": "ok", "model": meta["model"], "device_backend": backend,
           "memory_measure": None,
           "train": {"batch": tr["batch"], "seq": tr["seq"], "optimizer": tr["optimizer"],
                     "steps": steps, "warmup_steps": warm},
           "forward": {"batch": fw["batch"], "seq": fw["seq"]}}
    hdir = os.path.join(kit, "headline")
    t = time.perf_counter()
    wpath = os.path.join(work, "gpt2_small.train.safetensors")
    write_random_weights(tr["weights"], wpath, seed=0)
    fwpath = wpath
    if fw["weights"] != tr["weights"]:
        fwpath = os.path.join(work, "gpt2_small.forward.safetensors")
        write_random_weights(fw["weights"], fwpath, seed=0)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, meta["vocab"], size=(steps, tr["batch"], tr["seq"]), dtype=np.int64)
    data = os.path.join(work, "gpt2_small.data.safetensors")
    write_safetensors({"input_ids": ids, "labels": ids.copy()}, data)
    fids = rng.integers(0, meta["vocab"], size=(fw["batch"], fw["seq"]), dtype=np.int64)
    fids_path = os.path.join(work, "gpt2_small.forward_ids.npy")
    np.save(fids_path, fids)
    log(f"headline: wrote random weights ({os.path.getsize(wpath) / 2**20:.0f} MiB) and "
        f"{steps} batches in {time.perf_counter() - t:.1f} s")
    sampler = MemorySampler() if backend == "cuda" else None
    if sampler and sampler.available():
        res["memory_measure"] = ("peak_gpu_mib: the GPU's memory in use (NVML / nvidia-smi, "
                                 "every 20 ms) above its reading before the process, CUDA "
                                 "context included")
    elif backend == "cuda":
        res["memory_measure"] = "none: neither pynvml nor nvidia-smi answered"
    else:
        res["memory_measure"] = "peak_rss_mib: the process's peak resident memory"
    reps = int(os.environ.get("ZRT_KIT_HEADLINE_REPEAT", "20"))
    problems = []

    def measured(fn):
        if sampler:
            return sampler.run(fn)
        return fn(), None

    def left():
        return deadline - time.perf_counter()

    # zero-run: the training step.
    log_json, rep = os.path.join(work, "hl.train.log.json"), os.path.join(work, "hl.train.report.json")
    cmd = [zr, os.path.join(hdir, tr["program"]), "--weights", wpath, "--data", data,
           "--steps", str(steps), "--log-json", log_json, "--report-json", rep,
           "--backend", backend]
    (code, secs, text), mem = measured(lambda: run_proc(cmd, env, min(timeout, max(left(), 1)), log))
    z = {}
    if code == 0:
        with open(log_json) as f:
            slog = json.load(f)
        with open(rep) as f:
            report = json.load(f)
        r0 = report["ranks"][0]
        z = stats_ms([s["time_s"] for s in slog[warm:]] or [slog[-1]["time_s"]])
        z["losses"] = [s["loss"] for s in slog]
        z["arena_mib"] = round(sum(a["planned_bytes"] for a in r0["arenas"]) / 2**20, 1)
        z["peak_rss_mib"] = round(r0["peak_rss_bytes"] / 2**20, 1)
        if mem is not None:
            z["peak_gpu_mib"] = mem
        z["process_s"] = round(secs, 1)
    else:
        z = {"error": f"timed out after {timeout:g} s" if code is None else
             f"zero-run exit {code}: {last_error(text)}"}
        problems.append("zero-run training: " + z["error"])
    res["train"]["zero_run"] = z

    # zero-run: the forward.
    rep = os.path.join(work, "hl.forward.report.json")
    cmd = [zr, os.path.join(hdir, fw["program"]), "--weights", fwpath, "--input",
           f"input_ids={fids_path}", "--repeat", str(reps), "--warmup", "3",
           "--report-json", rep, "--backend", backend]
    (code, secs, text), mem = measured(lambda: run_proc(cmd, env, min(timeout, max(left(), 1)), log))
    if code == 0:
        with open(rep) as f:
            r0 = json.load(f)["ranks"][0]
        zf = stats_ms(r0.get("iteration_wall_s") or [r0["wall_time_s"]])
        zf["arena_mib"] = round(sum(a["planned_bytes"] for a in r0["arenas"]) / 2**20, 1)
        zf["peak_rss_mib"] = round(r0["peak_rss_bytes"] / 2**20, 1)
        if mem is not None:
            zf["peak_gpu_mib"] = mem
    else:
        zf = {"error": f"timed out after {timeout:g} s" if code is None else
              f"zero-run exit {code}: {last_error(text)}"}
        problems.append("zero-run forward: " + zf["error"])
    res["forward"]["zero_run"] = zf

    # PyTorch, same weights, same batches, same device.
    worker = os.path.join(kit, "torch_gpt2.py")
    device = "cuda" if backend == "cuda" else "cpu"
    penv = {k: v for k, v in os.environ.items() if not MPI_VARS.match(k)}
    for mode in ("train", "forward"):
        if left() < 20:
            res[mode]["pytorch"] = {"error": "not run: the kit's time budget is spent"}
            problems.append(f"pytorch {mode}: not run (time budget)")
            continue
        out = os.path.join(work, f"hl.torch.{mode}.json")
        cmd = [python, worker, "--mode", mode, "--device", device, "--out", out,
               "--weights", wpath if mode == "train" else fwpath, "--lr", tr["optimizer"].split("lr=")[1]]
        cmd += (["--data", data, "--steps", str(steps), "--warmup", str(warm)] if mode == "train"
                else ["--ids", fids_path, "--repeat", str(reps), "--warmup", "3"])
        (code, secs, text), mem = measured(
            lambda: run_proc(cmd, penv, min(timeout, max(left(), 1)), log))
        if code == 0:
            with open(out) as f:
                p = json.load(f)
            if mem is not None:
                p["peak_gpu_mib"] = mem
        elif code == 3:  # no torch: said in its output
            p = {"skipped": last_error(text)}
            problems.append(f"pytorch {mode}: {p['skipped']}")
        else:
            p = {"error": f"timed out after {timeout:g} s" if code is None else
                 f"exit {code}: {last_error(text)}"}
            problems.append(f"pytorch {mode}: {p['error']}")
        res[mode]["pytorch"] = p

    # Side by side.
    for mode in ("train", "forward"):
        z, p = res[mode].get("zero_run", {}), res[mode].get("pytorch", {})
        if "median_ms" in z and "median_ms" in p:
            res[mode]["ratio_time_zero_run_over_pytorch"] = round(z["median_ms"] / p["median_ms"], 3)
        for key in ("peak_gpu_mib", "peak_rss_mib"):
            if z.get(key) and p.get(key):
                res[mode][f"ratio_{key}_zero_run_over_pytorch"] = round(z[key] / p[key], 3)
    z, p = res["train"].get("zero_run", {}), res["train"].get("pytorch", {})
    if z.get("losses") and p.get("losses"):
        rel = abs(z["losses"][0] - p["losses"][0]) / abs(p["losses"][0])
        res["train"]["loss_step1"] = {"zero_run": z["losses"][0], "pytorch": p["losses"][0],
                                      "rel_diff": rel, "ok": rel <= 1e-3}
        if rel > 1e-3:
            problems.append(f"step-1 losses differ by {rel:.2e} (rtol 1e-3)")
    if problems:
        res["status"] = "partial"
        res["message"] = "; ".join(problems)
    return res


def summary_line(res):
    out = []
    for mode in ("train", "forward"):
        z, p = res.get(mode, {}).get("zero_run", {}), res.get(mode, {}).get("pytorch", {})
        if "median_ms" not in z:
            continue
        mem = lambda d: (f", {d['peak_gpu_mib']:.0f} MiB" if d.get("peak_gpu_mib") is not None
                         else (f", RSS {d['peak_rss_mib']:.0f} MiB" if d.get("peak_rss_mib") else ""))
        line = f"{mode} {res[mode]['batch']}x{res[mode]['seq']}: zero-run {z['median_ms']:.1f} ms{mem(z)}"
        if "median_ms" in p:
            line += f"; PyTorch {p['median_ms']:.1f} ms{mem(p)}"
        out.append(line)
    return " | ".join(out)


# ---------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kit", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    t_start = time.perf_counter()
    budget = float(os.environ.get("ZRT_KIT_BUDGET", "420"))
    deadline = t_start + budget
    backend = os.environ.get("ZRT_KIT_BACKEND", "cuda")
    if backend not in ("cuda", "cpu"):
        sys.exit(f"kit.py: ZRT_KIT_BACKEND={backend}: cuda or cpu")
    timeout = float(os.environ.get("ZRT_KIT_TIMEOUT", "60"))
    only = set(filter(None, os.environ.get("ZRT_KIT_CASES", "").split(",")))
    os.makedirs(a.out, exist_ok=True)
    log = Log(os.path.join(a.out, "gpu-check.log"))
    json_path = os.path.join(a.out, "gpu-check.json")
    with open(os.path.join(a.kit, "cases.json")) as f:
        manifest = json.load(f)
    with open(os.path.join(a.kit, "kit.json")) as f:
        kitinfo = json.load(f)
    rtol, atol = manifest["rtol"], manifest["atol"]

    smi = nvidia_smi(log)
    if smi:
        log.quiet(subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout)
    result = {"cases": [], "device": "cpu", "driver": "cpu", "backend": backend,
              "kit": {"commit": kitinfo.get("commit"), "built": kitinfo.get("built"),
                      "uncommitted_changes": kitinfo.get("uncommitted_changes")},
              "host": {"python": sys.version.split()[0], "glibc": glibc_version(),
                       "numpy": getattr(np, "__version__", None), "platform": platform.platform()}}
    if backend == "cuda" and smi:
        result["device"], result["driver"] = smi["device"], smi["driver"]
        result["gpu_memory"] = smi["memory"]

    def save():
        result["seconds"] = round(time.perf_counter() - t_start, 1)
        counts = {s: sum(c["status"] == s for c in result["cases"]) for s in ("ok", "fail", "error")}
        result["summary"] = counts
        tmp = json_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f, indent=1)
        os.replace(tmp, json_path)

    log(f"GPU run kit: backend {backend}; kit built {kitinfo.get('built')} from "
        f"{kitinfo.get('commit')}{' (+ uncommitted changes)' if kitinfo.get('uncommitted_changes') else ''}")
    log(f"device: {result['device']} (driver {result['driver']}); python {sys.version.split()[0]} "
        f"at {sys.executable}; glibc {glibc_version()}; numpy {getattr(np, '__version__', 'absent')}")

    # zero-run and the libraries it loads.
    work = tempfile.mkdtemp(prefix="zrt-kit-")
    home = unpack(a.kit, os.path.join(work, "zero-run"), log)
    zr = os.path.join(home, "bin", "zero-run")
    found = cuda_lib_dirs(log)
    result["cuda_libs"] = {lib: os.path.join(d, lib) for lib, d in found.items()}
    missing = [lib for lib in CUDA_LIBS if lib not in found]
    libpath = [os.path.join(home, "lib")] + list(dict.fromkeys(found.values())) + driver_dirs()
    env = {k: v for k, v in os.environ.items() if not MPI_VARS.match(k)}
    env["LD_LIBRARY_PATH"] = ":".join(libpath)
    log(f"LD_LIBRARY_PATH for zero-run: {env['LD_LIBRARY_PATH']}")
    stop_reason = None
    if missing:
        stop_reason = (f"CUDA's {', '.join(missing)} not found (searched python3's "
                       f"site-packages/nvidia/*/lib and /usr/local/cuda*; set ZRT_KIT_CUDA_LIBS)")
    need = kitinfo.get("glibc_needed")
    have = glibc_version()
    if need and have and version_tuple(have) < version_tuple(need):
        stop_reason = (f"this machine's glibc is {have}; the kit's zero-run needs {need} "
                       f"(build the kit on an older distribution)")
    if shutil.which("ldd"):
        r = subprocess.run(["ldd", zr], capture_output=True, text=True, env=env)
        log.quiet("ldd zero-run:\n" + r.stdout + r.stderr)
        unresolved = [line.split()[0] for line in r.stdout.splitlines() if "not found" in line]
        if unresolved and not stop_reason:
            stop_reason = f"zero-run's libraries not found: {', '.join(unresolved)}"
    if stop_reason:
        log(f"cannot run zero-run here: {stop_reason}")

    # The cases.
    try:
        cases = [c for c in manifest["cases"] if not only or c["name"] in only]
        if only and len(cases) != len(only):
            unknown = only - {c["name"] for c in cases}
            log(f"ZRT_KIT_CASES names unknown cases: {', '.join(sorted(unknown))}")
        log(f"{len(cases)} cases, --backend {backend}, timeout {timeout:g} s each, "
            f"rtol {rtol:g} atol {atol:g}")
        # The cases may take 60% of the budget; the headline has the rest.
        cases_deadline = t_start + 0.6 * budget
        timeouts = 0
        for case in cases:
            left = cases_deadline - time.perf_counter()
            if not stop_reason and left < 5:
                stop_reason = (f"the cases' share of the time budget ({0.6 * budget:.0f} s of "
                               f"ZRT_KIT_BUDGET={budget:.0f}) is spent")
            if stop_reason:
                rec = {"name": case["name"], "kind": case["kind"], "status": "error",
                       "max_abs_err": None, "seconds": 0.0, "message": "not run: " + stop_reason}
            else:
                rec, text = run_case(case, a.kit, work, zr, env, backend, rtol, atol,
                                     min(timeout, left), log)
                if rec["status"] == "error" and any(m in text for m in STOP_MARKERS):
                    stop_reason = f"{case['name']} failed with: {last_error(text)}"
                timeouts = timeouts + 1 if rec["message"].startswith("timed out") else 0
                if timeouts == 2:
                    stop_reason = "two cases in a row timed out"
            result["cases"].append(rec)
            err = "" if rec["max_abs_err"] is None else f"  max abs err {rec['max_abs_err']:.3g}"
            log(f"{rec['status']:5} {rec['name']:24} {rec['seconds']:7.2f} s{err}"
                + ("" if rec["status"] == "ok" else f"  {rec['message']}"))
            save()
        if stop_reason:
            result["headline"] = {"status": "skipped", "message": "not run: " + stop_reason}
        else:
            try:
                result["headline"] = headline(a.kit, work, zr, env, backend, sys.executable, log,
                                              deadline)
            except Exception as e:  # the cases' results must still be written
                import traceback
                log.quiet(traceback.format_exc())
                result["headline"] = {"status": "error", "message": f"{type(e).__name__}: {e}"}
        hl = result["headline"]
        log(f"headline: {hl['status']}" + (f": {hl['message']}" if hl.get("message") else "")
            + (f"\n  {summary_line(hl)}" if summary_line(hl) else ""))
    finally:
        if os.environ.get("ZRT_KIT_KEEP") == "1":
            log(f"kept the run's files in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    save()
    s = result["summary"]
    log(f"{s['ok']} ok, {s['fail']} fail, {s['error']} error of {len(result['cases'])} cases "
        f"in {result['seconds']:.0f} s; wrote {json_path}")
    return 0 if s["ok"] == len(result["cases"]) and result["cases"] else 1


if __name__ == "__main__":
    sys.exit(main())
