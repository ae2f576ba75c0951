"""Helpers every inline-PTX lowering uses, whatever its feature.

``lw`` is the emitter's lowering state (``tylo.codegen.llvm``): ``lw.asm`` emits an inline-asm
call, ``lw.address`` turns a pointer into the integer address PTX takes.
"""
from __future__ import annotations

__all__ = ["MEMORY_CLOBBER", "convergent_asm", "bind_flag"]

# Ops with an effect on memory or other threads clobber memory, so LLVM moves no load or store across them.
MEMORY_CLOBBER = "~{memory}"


def convergent_asm(lw, *args, **kwargs):
    """``lw.asm(...)`` for ``.sync.aligned``/``elect``/``bar`` instructions, marked ``convergent``
    so LLVM never duplicates it into divergent paths."""
    return lw.asm(*args, convergent=True, **kwargs)


def bind_flag(lw, op, flag):
    """Bind ``op``'s bool result to ``flag``, the i32 an asm block set from a predicate (``selp.u32 $0, 1, 0, p``):
    inline asm cannot return an ``i1``."""
    b = lw.fresh()
    lw.emit(f"{b} = icmp ne i32 {flag}, 0")
    lw.bind(op.results[0], b)
