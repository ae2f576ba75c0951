"""mbarriers (sm_80+; transaction counts sm_90+); with the fences (``lang/fence.py``) and the
named/cluster barriers, elect and setmaxnreg (``lang/sync.py``) re-exported, as this module's API was.

These builtins take runtime values only. A barrier is a ``*shared u64`` (or
``*shared i64``) pointer value, e.g. ``tylo.shared_array(tylo.u64, (STAGES,)).ptr + i``.
tylo never inserts any of them: the kernel states its barrier protocol.

==============================  ============================================================
builtin                         PTX
==============================  ============================================================
mbarrier_init(bar, count)       ``mbarrier.init.shared::cta.b64 [bar], count``
mbarrier_arrive(bar) -> u64     ``mbarrier.arrive.shared::cta.b64 state, [bar]``
mbarrier_arrive_cluster(b, r)   ``mapa.shared::cluster.u32 a, b, r`` +
                                ``mbarrier.arrive.shared::cluster.b64 _, [a]``
mbarrier_arrive_expect_tx(b,n)  ``mbarrier.arrive.expect_tx.shared::cta.b64 state, [b], n``
mbarrier_expect_tx(bar, n)      ``mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [bar], n``
mbarrier_try_wait(b, p) -> bool ``mbarrier.try_wait.parity.shared::cta.b64 P, [b], p``
mbarrier_wait(bar, parity)      a ``try_wait.parity`` loop (spins until the phase completes)
==============================  ============================================================

Barrier addresses are passed to PTX as 32-bit shared-window addresses
(``ptrtoint`` of the ``addrspace(3)`` pointer, constraint ``r``).
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.core import Value
from ..ir.types import PointerType
from .base import LangError, builtin
from .fence import fence_acq_rel, fence_mbarrier_init, fence_proxy_async, fence_sc, fence_view_async_shared  # noqa: F401 - re-exported
from .hw_args import i32_operand, require_sm
from .sync import (  # noqa: F401
    cluster_arrive,
    cluster_ctarank,
    cluster_size,
    cluster_sync,
    cluster_wait,
    elect_one,
    named_barrier_arrive,
    named_barrier_sync,
    setmaxnreg_dec,
    setmaxnreg_inc,
    warpgroup_idx,
)

__all__ = [
    "cluster_ctarank", "cluster_size", "cluster_arrive", "cluster_wait", "cluster_sync",
    "mbarrier_init", "mbarrier_arrive", "mbarrier_arrive_cluster", "mbarrier_arrive_expect_tx", "mbarrier_expect_tx",
    "mbarrier_try_wait", "mbarrier_wait", "fence_acq_rel", "fence_sc", "fence_proxy_async", "fence_view_async_shared",
    "fence_mbarrier_init", "named_barrier_sync", "named_barrier_arrive", "elect_one",
    "warpgroup_idx", "setmaxnreg_inc", "setmaxnreg_dec",
]
# fences (lang/fence.py) and named/cluster barriers, elect, setmaxnreg (lang/sync.py) are their own
# modules; this module re-exports them, so tylo.lang.mbarrier keeps its former API.


def barrier_operand(bar, what: str) -> Value:
    """``bar`` checked as an mbarrier operand (a ``*shared u64``/``i64`` pointer value) for builtin ``what``."""
    if not (isinstance(bar, Value) and isinstance(bar.type, PointerType) and bar.type.space == "shared"
            and bar.type.elem in (T.u64, T.i64)):
        got = bar.type if isinstance(bar, Value) else repr(bar)
        raise LangError(f"{what}: the barrier must be a *shared u64 pointer (e.g. "
                        f"tylo.shared_array(tylo.u64, (n,)).ptr + i), got {got}")
    return bar


@builtin
def mbarrier_init(bar, count, *, _ctx):
    """Initialise the barrier for ``count`` arrivals per phase (phase 0, no pending tx)."""
    require_sm(_ctx, 80, "mbarrier_init")
    if isinstance(count, int) and not 1 <= count < (1 << 20):
        raise LangError(f"mbarrier_init: the arrival count must be in 1..2^20-1, got {count}")
    _ctx.builder.create("nv.mbarrier.init",
                        [barrier_operand(bar, "mbarrier_init"), i32_operand(_ctx, count, "the count")])


@builtin
def mbarrier_arrive(bar, *, _ctx):
    """Arrive once (release, CTA scope); returns the opaque u64 phase state."""
    require_sm(_ctx, 80, "mbarrier_arrive")
    return _ctx.builder.value("nv.mbarrier.arrive", [barrier_operand(bar, "mbarrier_arrive")], T.u64)


@builtin
def mbarrier_arrive_cluster(bar, cta_rank, *, _ctx):
    """Arrive once (release, cluster scope) on the barrier at ``bar``'s shared offset in CTA ``cta_rank``
    of this thread's cluster (``mapa`` to its ``shared::cluster`` address; this CTA's own rank works
    too). For a buffer that other CTAs of the cluster fill (TMA multicast): their producer waits until
    every CTA it writes into released it. No arrival state is returned (PTX has none for a remote arrive)."""
    require_sm(_ctx, 90, "mbarrier_arrive_cluster")
    b = barrier_operand(bar, "mbarrier_arrive_cluster")
    _ctx.builder.create("nv.mbarrier.arrive_cluster", [b, i32_operand(_ctx, cta_rank, "the CTA rank")])


@builtin
def mbarrier_arrive_expect_tx(bar, tx_bytes, *, _ctx):
    """Add ``tx_bytes`` to the expected transaction count, then arrive; returns the state."""
    require_sm(_ctx, 90, "mbarrier_arrive_expect_tx")
    b = barrier_operand(bar, "mbarrier_arrive_expect_tx")
    return _ctx.builder.value("nv.mbarrier.arrive_expect_tx", [b, i32_operand(_ctx, tx_bytes, "tx_bytes")], T.u64)


@builtin
def mbarrier_expect_tx(bar, tx_bytes, *, _ctx):
    """Add ``tx_bytes`` to the expected transaction count without arriving."""
    require_sm(_ctx, 90, "mbarrier_expect_tx")
    b = barrier_operand(bar, "mbarrier_expect_tx")
    _ctx.builder.create("nv.mbarrier.expect_tx", [b, i32_operand(_ctx, tx_bytes, "tx_bytes")])


@builtin
def mbarrier_try_wait(bar, parity, *, _ctx):
    """True when the phase with ``parity`` (0/1) has completed (may wait a bounded time)."""
    require_sm(_ctx, 90, "mbarrier_try_wait")
    b = barrier_operand(bar, "mbarrier_try_wait")
    return _ctx.builder.value("nv.mbarrier.try_wait", [b, i32_operand(_ctx, parity, "parity")], T.bool_)


@builtin
def mbarrier_wait(bar, parity, *, _ctx):
    """Spin (in PTX) until the phase with ``parity`` has completed (acquire, CTA scope)."""
    require_sm(_ctx, 90, "mbarrier_wait")
    b = barrier_operand(bar, "mbarrier_wait")
    _ctx.builder.create("nv.mbarrier.wait", [b, i32_operand(_ctx, parity, "parity")])


