"""mbarriers, proxy fences, named and cluster barriers, elect and setmaxnreg (sm_90+).

A barrier operand is a ``*shared u64`` (or ``i64``) pointer; counts, byte counts and parities
are i32. Every op here orders memory for the threads involved, so each is ``read_write``.
"""
from __future__ import annotations

from .. import types as T
from ..opdef import Attr, OpDef
from ..ops import define_ops
from ..types import PointerType

__all__ = ["DEFINITIONS", "FENCE_KINDS"]

FENCE_KINDS = ("proxy_async", "proxy_async_shared", "mbarrier_init")


def _bar_check(op):
    p = op.operands[0]
    if not (isinstance(p.type, PointerType) and p.type.space == "shared" and p.type.elem in (T.u64, T.i64)):
        return f"the barrier must be a *shared u64 pointer, got {p.type}"
    for v in op.operands[1:]:
        if v.type != T.i32:
            return f"count/bytes/parity operands are i32, got {v.type}"
    return None


def _one_of(name, values):
    def check(op):
        v = op.attrs.get(name)
        return None if v in values else f"attribute {name!r} must be one of {values}, got {v!r}"

    return check


def _state_check(op):
    return _bar_check(op) or (None if op.results[0].type == T.u64 else "the arrival state is u64")


def _try_wait_check(op):
    return _bar_check(op) or (None if op.results[0].type == T.bool_ else "try_wait returns bool")


_RW = dict(memory="read_write")

DEFINITIONS = define_ops(
    OpDef("nv.mbarrier.init", 2, 0, False, _bar_check, doc="bar, count: mbarrier.init.shared::cta.b64", **_RW),
    OpDef("nv.mbarrier.arrive", 1, 1, False, _state_check, doc="bar -> u64 state: mbarrier.arrive", **_RW),
    OpDef("nv.mbarrier.arrive_expect_tx", 2, 1, False, _state_check,
          doc="bar, tx bytes -> u64 state: mbarrier.arrive.expect_tx", **_RW),
    OpDef("nv.mbarrier.expect_tx", 2, 0, False, _bar_check, doc="bar, tx bytes: mbarrier.expect_tx", **_RW),
    OpDef("nv.mbarrier.try_wait", 2, 1, False, _try_wait_check,
          doc="bar, parity -> bool: mbarrier.try_wait.parity", **_RW),
    OpDef("nv.mbarrier.wait", 2, 0, False, _bar_check, doc="bar, parity: try_wait.parity until the phase completes",
          **_RW),
    OpDef("nv.fence", 0, 0, False, _one_of("kind", FENCE_KINDS), (Attr("kind", (str,)),),
          doc="a proxy fence: fence.proxy.async[.shared::cta] or fence.mbarrier_init", **_RW),
    OpDef("nv.named_barrier", 2, 0, False, _one_of("kind", ("sync", "arrive")), (Attr("kind", (str,)),),
          convergent=True, doc="id, count: bar.sync / bar.arrive", **_RW),
    OpDef("nv.elect_one", 0, 1, False, convergent=True, doc="-> bool, true in one lane: elect.sync"),
    OpDef("nv.setmaxnreg", 0, 0, False, _one_of("action", ("inc", "dec")),
          (Attr("action", (str,)), Attr("count", (int,))), convergent=True,
          doc="setmaxnreg.{action}.sync.aligned.u32 count", **_RW),
    OpDef("nv.cluster.barrier", 0, 0, False, _one_of("kind", ("arrive", "wait")), (Attr("kind", (str,)),),
          convergent=True, doc="barrier.cluster.arrive.release / wait.acquire", **_RW),
)
