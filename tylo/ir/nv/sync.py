"""Synchronisation beyond the CTA barrier: named and cluster barriers, elect, setmaxnreg (sm_90+), all
collectives (``convergent``: every participating thread executes them together); and one thread's wait on a
counter in global memory (``nv.wait_at_least``), the consumer's half of a flag between CTAs; and programmatic
dependent launch (``nv.griddepcontrol``): waiting for the grids a launch may overlap, letting the next start early.
"""
from __future__ import annotations

from ..opdef import Attr, OpDef, one_of
from ..ops import define_ops
from ..types import PointerType

__all__ = ["DEFINITIONS", "is_counter_pointer"]

_RW = dict(memory="read_write")


def is_counter_pointer(t) -> bool:
    """Whether ``nv.wait_at_least`` can wait on a pointer of type ``t``: an i32 in global memory (or generic)."""
    return isinstance(t, PointerType) and t.space in ("global", "generic") and t.elem.name == "i32"


def _wait_at_least(op):
    ptr, value = op.operands
    if not is_counter_pointer(ptr.type):
        return f"waits on a global *i32, got {ptr.type}"
    if value.type.name != "i32":
        return f"compares with an i32, got {value.type}"
    if op.attrs["polls"] < 0:
        return f"polls is a count (0: no bound), got {op.attrs['polls']}"
    if op.results[0].type.name != "bool":
        return "returns whether the value was reached (bool)"
    return None


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
    OpDef("nv.wait_at_least", 2, 1, False, _wait_at_least, (Attr("polls", (int,)),),
          doc="ptr, value -> bool: spin (ld.relaxed.gpu) until the i32 at ptr is at least value in serial-number "
              "order (the wrapping difference is non-negative): true; or, with polls > 0, false after that many "
              "loads without (polls = 0: no bound)", **_RW),
    OpDef("nv.griddepcontrol", 0, 0, False, one_of("kind", ("wait", "launch_dependents")), (Attr("kind", (str,)),),
          doc="griddepcontrol.wait (the prerequisite grids have completed and their memory is visible) / "
              "griddepcontrol.launch_dependents (the dependent grid may be scheduled)", **_RW),
)
