"""Lowering of ``nv.assert`` (debug compiles only): a branch to a cold block that prints the
location, block, thread and message with ``vprintf`` and executes ``trap;``."""
from __future__ import annotations

from ..registry import lowering

__all__ = []

_SREGS = ("ctaid.x", "ctaid.y", "ctaid.z", "tid.x", "tid.y", "tid.z")


@lowering("nv.assert")
def _assert(lw, op):
    loc = op.loc
    message = op.attrs["message"].replace("%", "%%")  # the message is text, never a format
    fmt = (f"{loc.line()}: block [%d,%d,%d], thread [%d,%d,%d]: device assertion failed"
           + (f": {message}" if message else "") + "\n")
    ok, fail = lw.label(), lw.label()
    lw.emit(f"br i1 {lw.ref(op.operands[0])}, label %{ok}, label %{fail}")
    lw.start_block(fail)
    ids = []
    for sreg in _SREGS:
        fn = f"llvm.nvvm.read.ptx.sreg.{sreg}"
        lw.declare(f"declare i32 @{fn}()")
        name = lw.fresh()
        lw.emit(f"{name} = call i32 @{fn}()")
        ids.append(("i32", name))
    lw.vprintf(fmt, ids)
    lw.asm("trap;", "", side_effects=True)  # aborts the kernel: the launch fails with a CUDA error
    lw.emit("unreachable")
    lw.start_block(ok)
