#!/usr/bin/env python
"""Run generated valid kernels on the GPU, in the interpreter and in the model; report mismatches.

    PYTHONPATH=$PWD python scripts/fuzz_gpu.py --count 300 --out $OUT [--seed S] [--arch sm_90a]

``--count`` kernels that compile are run (seeds that do not compile on today's tylo are counted as
``compile_failed`` and skipped). For each seed: generate the kernel (tests/fuzz/kernelgen.py), compile it for the local GPU, launch
it on one thread with ``tylo.to_device`` arrays (outputs poisoned first), run the same IR in the
interpreter, and compare GPU vs model and GPU vs interpreter element by element (exact, NaN == NaN,
+0 == -0; the approximate math functions with the documented tolerance). This is what finds code
generation bugs that the interpreter cannot see (issue 16 item 8: i32 -> bf16 rounding twice on
sm_80). Writes ``summary.json`` (counts, every failing seed with its details) and the source of each
failing kernel under ``--out``. Exits 2 with a message when there is no GPU.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "fuzz"))


def gpu_arch():
    """The local GPU's target name, or None without a GPU."""
    from tylo.runtime import driver

    if not driver.gpu_available():
        return None
    major, minor = driver.compute_capability()
    table = {(8, 0): "sm_80", (8, 6): "sm_86", (8, 9): "sm_89", (9, 0): "sm_90a", (10, 0): "sm_100a"}
    return table.get((major, minor), "sm_90a" if major == 9 else "sm_80")


def launch_on_gpu(kernel, case):
    """Run the case's kernel on the GPU; the host copies of its arrays afterwards."""
    import tylo
    from tylo.runtime import driver

    host = case.numpy_args()
    device, args = [], []
    it = iter(host)
    for p in case.params:
        if p.kind in ("out", "in"):
            d = tylo.to_device(next(it))
            device.append(d)
            args.append(d)
        elif p.kind in ("n", "scalar"):
            args.append(next(it))
        else:
            args.append(p.value)
    kernel[1, 1](*args)
    driver.synchronize()
    return [d.to_host() for d in device]


def compare(case, got, reference, approx_ok):
    """Differences between two runs' arrays (``reference`` is a list of model values or arrays)."""
    from semantics import FP8_TYPES, approx_close, same_value

    problems = []
    names = case.array_names()
    for name, g_arr, r_arr in zip(names, got, reference):
        if name not in case.expected:
            continue
        t = next(p.ty for p in case.params if p.name == name)
        approx = case.approx.get(name, {})
        for i, (g, w) in enumerate(zip(g_arr, r_arr)):
            isfloat = t in ("f16", "bf16", "f32", "f64") or t in FP8_TYPES
            g = float(g) if isfloat else int(g)
            w = float(w) if isfloat else int(w)
            if i in approx:
                fn, arg, at = approx[i]
                ok = approx_close(fn, arg, at, w, g) if approx_ok else True
            else:
                ok = same_value(t, w, g)
            if not ok:
                problems.append(f"{name}[{i}]: expected {w!r}, got {g!r}")
    return problems


def check_seed(seed, folder, arch, gpu_runner=launch_on_gpu):
    """One case: compile for ``arch``, run with ``gpu_runner``, the interpreter and the model."""
    from kernelgen import generate
    from valid_check import load_kernel, run_interpreter

    case = generate(seed)
    result = {"seed": seed, "arch": arch, "status": "ok", "detail": ""}
    try:
        kernel, path = load_kernel(case, folder)
        result["path"] = path
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kernel.compile(signature=case.signature, arch=arch, constexprs=case.constexprs, block=(1,))
            interp = run_interpreter(kernel, case)
    except Exception as exc:  # noqa: BLE001 - compile failures are the CPU fuzzer's business; record them
        result.update(status="compile_failed", detail=f"{type(exc).__name__}: {exc}"[:400])
        return result
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = gpu_runner(kernel, case)
    except Exception as exc:  # noqa: BLE001
        result.update(status="launch_failed", detail=f"{type(exc).__name__}: {exc}"[:400],
                      traceback=traceback.format_exc(limit=-4))
        return result
    model = [case.expected[n] if n in case.expected else None for n in case.array_names()]
    vs_model = compare(case, got, model, approx_ok=True)
    vs_interp = compare(case, got, interp, approx_ok=False)
    if vs_model or vs_interp:
        result.update(status="mismatch", vs_model=vs_model[:8], vs_interpreter=vs_interp[:8],
                      detail="; ".join((vs_model or vs_interp)[:4]))
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="folder for summary.json and the failing kernels")
    ap.add_argument("--arch", help="target (default: the local GPU's)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    arch = gpu_arch()
    if arch is None:
        msg = "fuzz_gpu.py: no NVIDIA GPU (or no CUDA driver) on this machine; run it where one is"
        print(msg, file=sys.stderr)
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump({"error": msg}, f, indent=2)
        return 2
    arch = args.arch or arch
    folder = tempfile.mkdtemp(prefix="tylo-fuzz-gpu-")
    os.environ.setdefault("TYLO_CACHE_DIR", os.path.join(folder, "cache"))
    kernels_out = os.path.join(args.out, "kernels")
    os.makedirs(kernels_out, exist_ok=True)
    t0 = time.time()
    results = []
    # --count kernels that compile and run: seeds whose kernel does not compile on today's tylo
    # (the CPU fuzzer's findings) are recorded and skipped, up to four times --count seeds in all
    ran = 0
    for seed in range(args.seed, args.seed + 4 * args.count):
        if ran == args.count:
            break
        r = check_seed(seed, folder, arch, gpu_runner=launch_on_gpu)
        results.append(r)
        ran += r["status"] != "compile_failed"
        if r["status"] not in ("ok", "compile_failed"):
            print(f"seed {seed}: {r['status']}: {r['detail'][:300]}", flush=True)
            if r.get("path") and os.path.exists(r["path"]):
                shutil.copy(r["path"], kernels_out)
    shutil.rmtree(folder, ignore_errors=True)   # failing kernels were copied to --out
    counts = collections.Counter(r["status"] for r in results)
    summary = {"arch": arch, "count": len(results), "ran": ran, "first_seed": args.seed, "seconds": round(time.time() - t0, 1),
               "counts": dict(counts), "failures": [r for r in results if r["status"] != "ok"]}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2, default=str)
    print(f"\n== fuzz_gpu on {arch}: {ran} kernels run ({len(results)} generated) in {summary['seconds']} s ==")
    for status, n in sorted(counts.items()):
        print(f"  {status}: {n}")
    print(f"mismatches (GPU vs model or interpreter): {counts['mismatch']}; summary: "
          f"{os.path.join(args.out, 'summary.json')}")
    return 1 if counts["mismatch"] or counts["launch_failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
