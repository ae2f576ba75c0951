"""``nv.shared_address``: the u32 shared-window address of a ``*shared`` pointer.

Matrix descriptors (wgmma, tcgen05) and TMEM allocation take shared addresses as 32-bit
integers; this op is the one way a kernel gets one from a pointer. In a cluster launch the address
carries the CTA's rank in the cluster from bit ``CLUSTER_RANK_SHIFT`` up (0 without clusters), as
``cvta.to.shared`` gives it on sm_90: what the interpreter models and WGMMA descriptors drop.
"""
from __future__ import annotations

from .. import types as T
from ..opdef import OpDef
from ..ops import define_ops

__all__ = ["CLUSTER_RANK_SHIFT", "DEFINITIONS"]

CLUSTER_RANK_SHIFT = 24


def _shared_address_check(op):
    p = op.operands[0]
    if not (hasattr(p.type, "space") and p.type.space == "shared"):
        return f"expects a *shared pointer, got {p.type}"
    return None if op.results[0].type == T.u32 else "the result is u32"


DEFINITIONS = define_ops(
    OpDef("nv.shared_address", 1, 1, True, _shared_address_check, doc="*shared ptr -> u32 shared-window address"),
)
