"""Semantics of mbarriers, fences, named and cluster barriers, elect and setmaxnreg (not modelled yet).

An mbarrier needs phase and transaction-count state, and the scheduler a way to suspend a thread
on a phase; named barriers need barrier ids and counts in the scheduler; fences order proxies the
interpreter does not have. Until then each op is listed with its reason.
"""
from __future__ import annotations

from .registry import not_modelled

__all__ = []

not_modelled("mbarrier phase and transaction-count state is not modelled",
             "nv.mbarrier.init", "nv.mbarrier.arrive", "nv.mbarrier.arrive_expect_tx", "nv.mbarrier.expect_tx",
             "nv.mbarrier.try_wait", "nv.mbarrier.wait", module=__name__)
not_modelled("the interpreter has one memory proxy; a fence between proxies needs the async proxy modelled",
             "nv.fence", module=__name__)
not_modelled("the scheduler knows only the CTA-wide barrier 0, not numbered barriers with thread counts",
             "nv.named_barrier", module=__name__)
not_modelled("elect.sync needs the warp's active mask at the call (a warp collective with a choice of lane)",
             "nv.elect_one", module=__name__)
not_modelled("register allocation does not exist in the interpreter; setmaxnreg's only effect would be a check",
             "nv.setmaxnreg", module=__name__)
not_modelled("clusters (several CTAs run together) are not modelled", "nv.cluster.barrier", module=__name__)
