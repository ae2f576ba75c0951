"""mbarriers (sm_80+; transaction counts sm_90+): ``nv.mbarrier.*``.

A barrier operand is a ``*shared u64`` (or ``i64``) pointer; counts, byte counts and parities
are i32. Every op here orders memory for the threads involved, so each is ``read_write``.
"""
from __future__ import annotations

from .. import types as T
from ..opdef import OpDef
from ..ops import define_ops
from ..types import PointerType

__all__ = ["DEFINITIONS"]

def _bar_check(op):
    p = op.operands[0]
    if not (isinstance(p.type, PointerType) and p.type.space == "shared" and p.type.elem in (T.u64, T.i64)):
        return f"the barrier must be a *shared u64 pointer, got {p.type}"
    for v in op.operands[1:]:
        if v.type != T.i32:
            return f"count/bytes/parity operands are i32, got {v.type}"
    return None


def _state_check(op):
    return _bar_check(op) or (None if op.results[0].type == T.u64 else "the arrival state is u64")


def _try_wait_check(op):
    return _bar_check(op) or (None if op.results[0].type == T.bool_ else "try_wait returns bool")


_RW = dict(memory="read_write")

DEFINITIONS = define_ops(
    OpDef("nv.mbarrier.init", 2, 0, False, _bar_check, doc="bar, count: mbarrier.init.shared::cta.b64", **_RW),
    OpDef("nv.mbarrier.arrive", 1, 1, False, _state_check, doc="bar -> u64 state: mbarrier.arrive", **_RW),
    OpDef("nv.mbarrier.arrive_cluster", 2, 0, False, _bar_check,
          doc="bar, CTA rank: mapa + mbarrier.arrive.shared::cluster on that CTA's barrier", **_RW),
    OpDef("nv.mbarrier.arrive_expect_tx", 2, 1, False, _state_check,
          doc="bar, tx bytes -> u64 state: mbarrier.arrive.expect_tx", **_RW),
    OpDef("nv.mbarrier.expect_tx", 2, 0, False, _bar_check, doc="bar, tx bytes: mbarrier.expect_tx", **_RW),
    OpDef("nv.mbarrier.try_wait", 2, 1, False, _try_wait_check,
          doc="bar, parity -> bool: mbarrier.try_wait.parity", **_RW),
    OpDef("nv.mbarrier.wait", 2, 0, False, _bar_check, doc="bar, parity: try_wait.parity until the phase completes",
          **_RW),
)
