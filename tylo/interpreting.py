"""``TYLO_INTERPRET=1`` / ``tylo.jit(interpret=True)``: ``kernel[grid, block](...)`` runs the kernel's IR in
the CPU interpreter (``tylo.interpreter``) instead of on a GPU, as Triton's ``TRITON_INTERPRET=1`` does.

Arguments: numpy arrays (ml_dtypes for bf16 and fp8) for pointers, written in place; TMA bindings of
numpy arrays (``prepare_tma(plan, array)``); ints, floats and bools. The kernel is specialised as a
launch would be (integers equal to 1 or divisible by 16, 16-byte aligned arrays), lowered once per
specialisation and block, and interpreted. ``TYLO_INTERPRET_SEED`` picks the scheduler's interleaving
(default 0); ``TYLO_INTERPRET_HAZARDS=0`` turns the hazard checker off.
"""
from __future__ import annotations

import os

import numpy as np

from . import knobs
from .ir import types as T
from .ir.types import PointerType
from .specialization import BlobSpec, ConstexprSpec, IntSpec, PointerSpec, ScalarSpec

__all__ = ["interpret_launch", "interpreting"]


def interpreting() -> bool:
    return os.environ.get("TYLO_INTERPRET") == "1"


def _argument(kernel, p, v):
    """``(record, runtime value)`` of one non-constexpr argument."""
    ann = p.annotation
    if isinstance(v, np.ndarray):
        from .runtime.arrays import dtype_name
        try:
            name = dtype_name(v.dtype)
        except (TypeError, KeyError, ValueError):
            raise TypeError(f"{kernel}: argument '{p.name}': numpy dtype {v.dtype} is not a tylo type") from None
        if ann is not None and (not isinstance(ann, PointerType) or ann.elem.name != name):
            raise TypeError(f"{kernel}: argument '{p.name}' is annotated {ann} but got an array of {name}")
        return PointerSpec(name, v.ctypes.data % 16 == 0), v
    if hasattr(v, "plan") and hasattr(v, "rank") and hasattr(v, "__tylo_param__"):
        return BlobSpec("tma", (v.plan, v.rank), 128), v
    if isinstance(v, bool):
        return ScalarSpec(ann.name if ann is not None else "bool"), v
    if isinstance(v, int):
        if ann is not None:
            return ScalarSpec(ann.name), v
        ty = "i32" if -2147483648 <= v <= 2147483647 else T.int_type_for(v).name
        return IntSpec(ty, v == 1, v % 16 == 0 and v != 1), v
    if isinstance(v, float):
        return ScalarSpec(ann.name if ann is not None else "f32"), v
    raise TypeError(f"{kernel}: argument '{p.name}' is a {type(v).__qualname__}; the interpreter takes numpy "
                    f"arrays, TMA bindings of numpy arrays (prepare_tma), ints, floats and bools")


def interpret_launch(fn, grid, block, cluster, args, kwargs) -> None:
    """Run JIT kernel ``fn`` in the interpreter (``fn._launch`` calls this when interpreting)."""
    from .frontend import generate_kernel
    from .interpreter import run
    from .ir import run_passes

    full = fn._bind(args, kwargs)
    spec, values = [], []
    for p, v in zip(fn.params, full):
        if p.constexpr:
            spec.append(ConstexprSpec(v))
        else:
            record, value = _argument(fn.__name__, p, v)
            spec.append(record)
            values.append(value)
    debug = knobs.debug_enabled(fn.options.get("debug"))      # device asserts, as in the GPU build
    key = (tuple(block), tuple(spec), debug)
    cache = fn.__dict__.setdefault("_interpreted", {})
    kernel = cache.get(key)
    if kernel is None:
        arch = fn.options.get("arch") or "sm_90a"
        params = [(p.name, ("constexpr", s.value) if isinstance(s, ConstexprSpec) else s.binding())
                  for p, s in zip(fn.params, spec)]
        kernel = cache[key] = run_passes(generate_kernel(fn.fn, fn.fn.__name__, params, arch, tuple(block),
                                                              debug=debug))
    seed = int(os.environ.get("TYLO_INTERPRET_SEED", "0"))
    hazards = os.environ.get("TYLO_INTERPRET_HAZARDS", "1") != "0"
    run(kernel, values, grid, block, cluster or (1, 1, 1), seed=seed, hazards=hazards)
