"""Semantics of the proxy fences (``nv.fence``), PTX ISA 9.7.13.4 (membar/fence) and the memory
consistency model's proxies.

The interpreter's memory holds one copy of every byte, so a fence changes no value; it tells the
hazard checker that the thread's generic-proxy writes so far are visible to the async proxy
(``proxy_async``, ``proxy_async_shared``: TMA stores and WGMMA may read them, ``hazards.py``) or
that its mbarrier initialisations are (``mbarrier_init``). The ordering fences (``acq_rel.<scope>``,
``sc.<scope>``) only start a new epoch: the interpreter runs the CTAs of a grid one after another (or, for
a kernel that waits on a counter, all at once) and keeps one copy of memory, so every write of an earlier
CTA is visible to a later one; it does not check that cross-CTA global accesses are fenced.
"""
from __future__ import annotations

from ..ir.nv.fence import PROXY_FENCE_KINDS
from .registry import THREAD_SEMANTICS

__all__ = []


def _fence(th, op, ins, t):
    epoch = int(th.clock[th.index])
    kind = op.attrs["kind"]
    if kind in ("proxy_async", "proxy_async_shared"):
        th.fenced = epoch
    if kind in PROXY_FENCE_KINDS:
        # each proxy fence makes this thread's earlier mbarrier.init visible to the async proxy (TMA complete_tx)
        th.init_fenced = epoch
    if kind == "mbarrier_init":
        # fence.mbarrier_init.release.cluster with the thread's next barrier.cluster.arrive.relaxed is a release
        # pattern for its mbarrier.init (PTX ISA: the fence pairs with a relaxed cluster arrival); the arrival
        # publishes this clock (and with it the thread's earlier writes: a little more than the fence orders)
        th.init_release = (th.clock.copy(), set(th.seen))
    th.clock[th.index] += 1     # accesses after the fence belong to a later epoch


THREAD_SEMANTICS.add("nv.fence", _fence)
