"""Semantics of named and cluster barriers, elect and setmaxnreg (not modelled yet)."""
from __future__ import annotations

from .registry import not_modelled

__all__ = []

not_modelled("the scheduler knows only the CTA-wide barrier 0, not numbered barriers with thread counts",
             "nv.named_barrier", module=__name__)
not_modelled("elect.sync needs the warp's active mask at the call (a warp collective with a choice of lane)",
             "nv.elect_one", module=__name__)
not_modelled("register allocation does not exist in the interpreter; setmaxnreg's only effect would be a check",
             "nv.setmaxnreg", module=__name__)
not_modelled("clusters (several CTAs run together) are not modelled", "nv.cluster.barrier", module=__name__)
