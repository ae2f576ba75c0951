"""Device-side checks compiled with ``debug=True``: ``nv.assert``.

``nv.assert cond {message}``: when the bool ``cond`` is false in a thread, that thread prints the
op's source location and ``message`` and traps, which aborts the kernel (the launch, or the next
synchronisation, fails with a CUDA error). Only emitted in debug compiles; the frontend emits
nothing for a runtime assert otherwise.
"""
from __future__ import annotations

from .. import types as T
from ..opdef import Attr, OpDef
from ..ops import define_ops

__all__ = ["DEFINITIONS"]


def _check_assert(op):
    if op.operands[0].type != T.bool_:
        return f"nv.assert takes a bool condition, got {op.operands[0].type}"
    return None


DEFINITIONS = define_ops(
    # read_write: memory accesses after the check must not move above it (it guards them)
    OpDef("nv.assert", 1, 0, False, _check_assert, (Attr("message", (str,)),), memory="read_write",
          doc="cond: if false, vprintf the location and message, then trap"),
)
