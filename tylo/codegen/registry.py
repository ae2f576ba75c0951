"""The lowerings of hardware ops: ``@lowering("nv.mma.sync")`` registers ``fn(lw, op)``.

Filled by the feature modules of ``tylo.codegen.ptx`` (one per feature, named as in
``tylo/ir/nv``); read by the emitter in ``tylo.codegen.llvm``. It lives outside the emitter so
the feature modules and the emitter both import it and neither imports the other.
"""
from __future__ import annotations

from ..ir.registry import Registry

__all__ = ["LOWERINGS", "lowering"]

LOWERINGS = Registry("LLVM lowering")


def lowering(op_name: str):
    """Register ``fn(lowering, op)`` as the LLVM lowering of IR op ``op_name``."""
    return LOWERINGS.register(op_name)
