"""Run one generated valid kernel through the real pipeline and the interpreter; compare with the model.

``check_case(seed, folder)`` writes the kernel to ``folder/fuzz_valid_<seed>.py`` (the frontend
reads source through inspect), compiles it with ``kernel.compile`` for sm_90a, sm_80 and sm_100a
(LLVM, nvJitLink), runs ``kernel.lower(...)`` in ``tylo.interpreter.run`` and compares every
output element with the model. The result is a plain dict (JSON-able) with a ``status``:

* ``ok``
* ``internal``: a CompileError saying "internal compiler error" (tylo's own bug)
* ``rejected``: another CompileError for a kernel the document says is valid
* ``exception``: any other exception out of compile/lower/run
* ``mismatch``: the interpreter's outputs differ from the model's
"""
from __future__ import annotations

import traceback

from kernelgen import generate, load_generated
from semantics import FP8_TYPES, approx_close, same_value

ARCHS = ("sm_90a", "sm_80", "sm_100a")


def load_kernel(case, folder):
    return load_generated(case.source, f"fuzz_valid_{case.seed}", case.kernel_name, folder)


def _short(exc):
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) < 600 else text[:600] + " ..."


def classify_compile_error(exc, arch, case):
    import tylo

    if isinstance(exc, tylo.CompileError):
        reason = exc.reason
        if "internal compiler error" in reason:
            return "internal"
        if arch == "sm_80" and case.uses_fp8 and ("sm_89" in reason or "fp8" in reason.lower() or "f8e" in reason):
            return None  # documented: fp8 conversions need sm_89+
        return "rejected"
    return "exception"


def compare_outputs(case, args):
    """Mismatch descriptions (empty when the interpreter agrees with the model)."""
    problems = []
    names = case.array_names()
    for name, arr in zip(names, args):
        if name not in case.expected:
            continue
        t = next(p.ty for p in case.params if p.name == name)
        got = [float(v) if arr.dtype.kind == "f" or t in FP8_TYPES or t in ("bf16",) else int(v) for v in arr]
        want = case.expected[name]
        approx = case.approx.get(name, {})
        for i, (w, g) in enumerate(zip(want, got)):
            if i in approx:
                fn, arg, at = approx[i]
                ok = approx_close(fn, arg, at, w, g)
            else:
                ok = same_value(t, w, g)
            if not ok:
                problems.append(f"{name}[{i}]: model {w!r}, got {g!r}" + (f" ({approx[i][0]})" if i in approx else ""))
    return problems


def run_interpreter(kernel, case):
    from tylo.interpreter import run

    ir = kernel.lower(signature=case.signature, constexprs=case.constexprs)
    args = case.numpy_args()
    run(ir, args, grid=(1,), block=(1,))
    return args


def check_case(seed, folder, archs=ARCHS, case=None):
    case = case or generate(seed)
    result = {"seed": seed, "status": "ok", "stage": None, "detail": "", "features": sorted(case.features)}
    try:
        kernel, path = load_kernel(case, folder)
    except Exception as exc:  # the generator wrote bad Python: a fuzzer bug, say so loudly
        result.update(status="generator", detail=_short(exc))
        return result
    result["path"] = path
    # The interpreter first: it needs only the frontend and the passes, so a kernel that a later
    # stage (LLVM, nvJitLink) cannot compile is still checked against the model.
    try:
        args = run_interpreter(kernel, case)
    except Exception as exc:  # noqa: BLE001
        status = classify_compile_error(exc, "interpreter", case)
        result.update(status=status, stage="interpreter", detail=_short(exc), traceback=traceback.format_exc(limit=-6))
        return result
    problems = compare_outputs(case, args)
    if problems:
        result.update(status="mismatch", stage="interpreter", detail="; ".join(problems[:6]))
    for arch in archs:
        try:
            kernel.compile(signature=case.signature, arch=arch, constexprs=case.constexprs, block=(1,))
        except Exception as exc:  # noqa: BLE001 - every failure is classified
            status = classify_compile_error(exc, arch, case)
            if status is None:
                continue
            if result["status"] == "mismatch":   # keep both: the mismatch is the worse news
                result["compile_failure"] = f"{status} at compile {arch}: {_short(exc)}"
                return result
            result.update(status=status, stage=f"compile {arch}", detail=_short(exc),
                          traceback=traceback.format_exc(limit=-6))
            return result
    return result
