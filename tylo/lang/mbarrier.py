"""mbarriers, proxy fences, named barriers and warpgroup helpers (sm_90+).

These builtins take runtime values only. A barrier is a ``*shared u64`` (or
``*shared i64``) pointer value, e.g. ``tylo.shared_array(tylo.u64, (STAGES,)).ptr + i``.
tylo never inserts any of them: the kernel states its barrier protocol.

==============================  ============================================================
builtin                         PTX
==============================  ============================================================
mbarrier_init(bar, count)       ``mbarrier.init.shared::cta.b64 [bar], count``
mbarrier_arrive(bar) -> u64     ``mbarrier.arrive.shared::cta.b64 state, [bar]``
mbarrier_arrive_expect_tx(b,n)  ``mbarrier.arrive.expect_tx.shared::cta.b64 state, [b], n``
mbarrier_expect_tx(bar, n)      ``mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [bar], n``
mbarrier_try_wait(b, p) -> bool ``mbarrier.try_wait.parity.shared::cta.b64 P, [b], p``
mbarrier_wait(bar, parity)      a ``try_wait.parity`` loop (spins until the phase completes)
fence_proxy_async()             ``fence.proxy.async`` (all state spaces)
fence_view_async_shared()       ``fence.proxy.async.shared::cta``
fence_mbarrier_init()           ``fence.mbarrier_init.release.cluster``
named_barrier_sync(id, count)   ``bar.sync id, count``
named_barrier_arrive(id, count) ``bar.arrive id, count``
elect_one() -> bool             ``elect.sync _|P, 0xffffffff`` (one lane of the warp)
warpgroup_idx() -> i32          linear thread index // 128
setmaxnreg_inc(n)/_dec(n)       ``setmaxnreg.{inc,dec}.sync.aligned.u32 n``
==============================  ============================================================

Barrier addresses are passed to PTX as 32-bit shared-window addresses
(``ptrtoint`` of the ``addrspace(3)`` pointer, constraint ``r``).
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.core import Value
from ..ir.types import PointerType
from .base import LangError, builtin

__all__ = [
    "cluster_ctarank", "cluster_size", "cluster_arrive", "cluster_wait", "cluster_sync",
    "mbarrier_init", "mbarrier_arrive", "mbarrier_arrive_expect_tx", "mbarrier_expect_tx",
    "mbarrier_try_wait", "mbarrier_wait", "fence_proxy_async", "fence_view_async_shared",
    "fence_mbarrier_init", "named_barrier_sync", "named_barrier_arrive", "elect_one",
    "warpgroup_idx", "setmaxnreg_inc", "setmaxnreg_dec",
]





def _need(ctx, sm: int, what: str):
    if ctx.sm < sm:
        raise LangError(f"{what} needs sm_{sm} or newer (target {ctx.arch})")


def barrier_operand(bar, what: str) -> Value:
    """``bar`` checked as an mbarrier operand (a ``*shared u64``/``i64`` pointer value) for builtin ``what``."""
    if not (isinstance(bar, Value) and isinstance(bar.type, PointerType) and bar.type.space == "shared"
            and bar.type.elem in (T.u64, T.i64)):
        got = bar.type if isinstance(bar, Value) else repr(bar)
        raise LangError(f"{what}: the barrier must be a *shared u64 pointer (e.g. "
                        f"tylo.shared_array(tylo.u64, (n,)).ptr + i), got {got}")
    return bar


def _i32(ctx, x, what: str) -> Value:
    from .core import cast, to_value

    if isinstance(x, Value):
        if not (isinstance(x.type, T.ScalarType) and (x.type.is_int or x.type.is_bool)):
            raise LangError(f"{what} must be an integer, got {x.type}")
        return cast(x, T.i32, _ctx=ctx)
    if not isinstance(x, int):
        raise LangError(f"{what} must be an integer, got {x!r}")
    return to_value(ctx, x, T.i32)


@builtin
def mbarrier_init(bar, count, *, _ctx):
    """Initialise the barrier for ``count`` arrivals per phase (phase 0, no pending tx)."""
    _need(_ctx, 80, "mbarrier_init")
    if isinstance(count, int) and not 1 <= count < (1 << 20):
        raise LangError(f"mbarrier_init: the arrival count must be in 1..2^20-1, got {count}")
    _ctx.builder.create("nv.mbarrier.init", [barrier_operand(bar, "mbarrier_init"), _i32(_ctx, count, "the count")])


@builtin
def mbarrier_arrive(bar, *, _ctx):
    """Arrive once (release, CTA scope); returns the opaque u64 phase state."""
    _need(_ctx, 80, "mbarrier_arrive")
    return _ctx.builder.value("nv.mbarrier.arrive", [barrier_operand(bar, "mbarrier_arrive")], T.u64)


@builtin
def mbarrier_arrive_expect_tx(bar, tx_bytes, *, _ctx):
    """Add ``tx_bytes`` to the expected transaction count, then arrive; returns the state."""
    _need(_ctx, 90, "mbarrier_arrive_expect_tx")
    b = barrier_operand(bar, "mbarrier_arrive_expect_tx")
    return _ctx.builder.value("nv.mbarrier.arrive_expect_tx", [b, _i32(_ctx, tx_bytes, "tx_bytes")], T.u64)


@builtin
def mbarrier_expect_tx(bar, tx_bytes, *, _ctx):
    """Add ``tx_bytes`` to the expected transaction count without arriving."""
    _need(_ctx, 90, "mbarrier_expect_tx")
    b = barrier_operand(bar, "mbarrier_expect_tx")
    _ctx.builder.create("nv.mbarrier.expect_tx", [b, _i32(_ctx, tx_bytes, "tx_bytes")])


@builtin
def mbarrier_try_wait(bar, parity, *, _ctx):
    """True when the phase with ``parity`` (0/1) has completed (may wait a bounded time)."""
    _need(_ctx, 90, "mbarrier_try_wait")
    b = barrier_operand(bar, "mbarrier_try_wait")
    return _ctx.builder.value("nv.mbarrier.try_wait", [b, _i32(_ctx, parity, "parity")], T.bool_)


@builtin
def mbarrier_wait(bar, parity, *, _ctx):
    """Spin (in PTX) until the phase with ``parity`` has completed (acquire, CTA scope)."""
    _need(_ctx, 90, "mbarrier_wait")
    b = barrier_operand(bar, "mbarrier_wait")
    _ctx.builder.create("nv.mbarrier.wait", [b, _i32(_ctx, parity, "parity")])


def _fence(ctx, kind: str, what: str):
    """An ``nv.fence`` of ``kind`` (codegen/ptx/mbarrier.py spells the PTX)."""
    _need(ctx, 90, what)
    ctx.builder.create("nv.fence", [], [], {"kind": kind})


@builtin
def fence_proxy_async(*, _ctx):
    """``fence.proxy.async``: order generic-proxy accesses with async-proxy ones (all spaces)."""
    _fence(_ctx, "proxy_async", "fence_proxy_async")


@builtin
def fence_view_async_shared(*, _ctx):
    """``fence.proxy.async.shared::cta``: make generic shared writes visible to TMA/WGMMA
    (and publish mbarrier initialisation to the async proxy)."""
    _fence(_ctx, "proxy_async_shared", "fence_view_async_shared")


@builtin
def fence_mbarrier_init(*, _ctx):
    """``fence.mbarrier_init.release.cluster``: publish prior mbarrier.init to the cluster."""
    _fence(_ctx, "mbarrier_init", "fence_mbarrier_init")


def _named(ctx, kind, barrier_id, count):
    if isinstance(barrier_id, int) and not 0 <= barrier_id < 16:
        raise LangError(f"named barrier id must be in 0..15, got {barrier_id}")
    if isinstance(count, int) and (count <= 0 or count % 32):
        raise LangError(f"named barrier thread count must be a positive multiple of 32, got {count}")
    ctx.builder.create("nv.named_barrier", [_i32(ctx, barrier_id, "the barrier id"), _i32(ctx, count, "the count")],
                       [], {"kind": kind})


@builtin
def named_barrier_sync(barrier_id, count, *, _ctx):
    """``bar.sync id, count``: wait until ``count`` threads have arrived at barrier ``id``."""
    _named(_ctx, "sync", barrier_id, count)


@builtin
def named_barrier_arrive(barrier_id, count, *, _ctx):
    """``bar.arrive id, count``: arrive at barrier ``id`` without waiting."""
    _named(_ctx, "arrive", barrier_id, count)


@builtin
def elect_one(*, _ctx):
    """True in exactly one active lane of the (fully active) warp."""
    _need(_ctx, 90, "elect_one")
    return _ctx.builder.value("nv.elect_one", [], T.bool_)


@builtin
def warpgroup_idx(*, _ctx):
    """The warpgroup of the thread: linear thread index // 128."""
    from .core import binary, warp_id

    return binary(_ctx, ">>", warp_id(_ctx=_ctx), 2)


def _setmaxnreg(ctx, action, n):
    _need(ctx, 90, f"setmaxnreg_{action}")
    if ctx.arch not in ("sm_90a", "sm_100a"):
        raise LangError(f"setmaxnreg_{action} needs an architecture-specific target (sm_90a, sm_100a), got {ctx.arch}")
    if not isinstance(n, int) or isinstance(n, bool) or not 24 <= n <= 256 or n % 8:
        raise LangError(f"setmaxnreg_{action}: the register count must be a compile-time multiple of 8 "
                        f"in 24..256, got {n!r}")
    ctx.builder.create("nv.setmaxnreg", [], [], {"action": action, "count": n})


@builtin
def setmaxnreg_inc(n, *, _ctx):
    """Raise this warpgroup's per-thread register limit to ``n``."""
    _setmaxnreg(_ctx, "inc", n)


@builtin
def setmaxnreg_dec(n, *, _ctx):
    """Lower this warpgroup's per-thread register limit to ``n``."""
    _setmaxnreg(_ctx, "dec", n)


# -- thread-block clusters (launch with kernel.launch(..., cluster=(x, y, z))) --------------------------

@builtin
def cluster_ctarank(*, _ctx):
    """This CTA's rank in its cluster (``%cluster_ctarank``)."""
    _need(_ctx, 90, "cluster_ctarank")
    return _ctx.builder.value("nv.sreg", [], T.i32, reg="cluster.ctarank")


@builtin
def cluster_size(*, _ctx):
    """The number of CTAs in the cluster (``%cluster_nctarank``)."""
    _need(_ctx, 90, "cluster_size")
    return _ctx.builder.value("nv.sreg", [], T.i32, reg="cluster.nctarank")


@builtin
def cluster_arrive(*, _ctx):
    """``barrier.cluster.arrive`` (release): this thread reached the cluster barrier."""
    _need(_ctx, 90, "cluster_arrive")
    _ctx.builder.create("nv.cluster.barrier", [], [], {"kind": "arrive"})


@builtin
def cluster_wait(*, _ctx):
    """``barrier.cluster.wait`` (acquire): wait until every thread of the cluster arrived."""
    _need(_ctx, 90, "cluster_wait")
    _ctx.builder.create("nv.cluster.barrier", [], [], {"kind": "wait"})


@builtin
def cluster_sync(*, _ctx):
    """Arrive and wait: every thread of every CTA in the cluster meets here."""
    cluster_arrive(_ctx=_ctx)
    cluster_wait(_ctx=_ctx)
