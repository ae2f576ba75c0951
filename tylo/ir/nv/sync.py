"""Synchronisation beyond the CTA barrier (sm_90+): named and cluster barriers, elect, setmaxnreg.

All are collectives (``convergent``): every participating thread executes them together.
"""
from __future__ import annotations

from ..opdef import Attr, OpDef, one_of
from ..ops import define_ops

__all__ = ["DEFINITIONS"]

_RW = dict(memory="read_write")

DEFINITIONS = define_ops(
    OpDef("nv.named_barrier", 2, 0, False, one_of("kind", ("sync", "arrive")), (Attr("kind", (str,)),),
          convergent=True, doc="id, count: bar.sync / bar.arrive", **_RW),
    OpDef("nv.elect_one", 0, 1, False, convergent=True, doc="-> bool, true in one lane: elect.sync"),
    OpDef("nv.setmaxnreg", 0, 0, False, one_of("action", ("inc", "dec")),
          (Attr("action", (str,)), Attr("count", (int,))), convergent=True,
          doc="setmaxnreg.{action}.sync.aligned.u32 count", **_RW),
    OpDef("nv.cluster.barrier", 0, 0, False, one_of("kind", ("arrive", "arrive_relaxed", "wait")),
          (Attr("kind", (str,)),), convergent=True,
          doc="barrier.cluster.arrive.release / arrive.relaxed / wait.acquire", **_RW),
)
