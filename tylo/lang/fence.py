"""Proxy fences (sm_90+): order generic-proxy memory accesses with the async proxy (TMA, WGMMA, tcgen05).

==============================  ============================================================
builtin                         PTX
==============================  ============================================================
fence_proxy_async()             ``fence.proxy.async`` (all state spaces)
fence_view_async_shared()       ``fence.proxy.async.shared::cta``
fence_mbarrier_init()           ``fence.mbarrier_init.release.cluster``
==============================  ============================================================

tylo never inserts one: the kernel states its memory ordering.
"""
from __future__ import annotations

from .base import builtin
from .hw_args import require_sm

__all__ = ["fence_proxy_async", "fence_view_async_shared", "fence_mbarrier_init"]


def _fence(ctx, kind: str, what: str):
    """An ``nv.fence`` of ``kind`` (codegen/ptx/fence.py spells the PTX)."""
    require_sm(ctx, 90, what)
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
