"""``nv.shared_address``: the 32-bit shared-window address of a shared pointer (``lw.address``)."""
from __future__ import annotations

from ..registry import lowering

__all__ = []


@lowering("nv.shared_address")
def _shared_address(lw, op):
    lw.bind(op.results[0], lw.address(op.operands[0]))
