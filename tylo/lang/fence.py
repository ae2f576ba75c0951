"""Fences (PTX ISA 9.7.13.4): memory-ordering fences between threads (sm_70+) and the proxy fences
that order generic-proxy memory accesses with the async proxy (TMA, WGMMA, tcgen05; sm_90+).

==============================  ============================================================
builtin                         PTX
==============================  ============================================================
fence_acq_rel(scope="gpu")      ``fence.acq_rel.<scope>`` (scope: cta, cluster, gpu, sys)
fence_sc(scope="gpu")           ``fence.sc.<scope>``
fence_proxy_async()             ``fence.proxy.async`` (all state spaces)
fence_view_async_shared()       ``fence.proxy.async.shared::cta``
fence_mbarrier_init()           ``fence.mbarrier_init.release.cluster``
==============================  ============================================================

``fence_acq_rel`` with a strong (atomic) access at the same scope forms the memory model's release
and acquire patterns: a writer's ``stores; fence_acq_rel("gpu"); atomic_add(counter, 1)`` is
observed by a reader's ``atomic_add(counter, ...)`` (reading the writer's increment) ``;
fence_acq_rel("gpu"); loads``, which then see the stores. tylo's atomics are relaxed (``atom`` at
gpu scope), so the fences carry the ordering. Across the threads of a CTA, ``sync_threads`` /
``named_barrier_sync`` order the others' accesses with the fencing thread's.

tylo never inserts one: the kernel states its memory ordering.
"""
from __future__ import annotations

from .base import LangError, builtin
from .hw_args import require_sm

__all__ = ["fence_acq_rel", "fence_sc", "fence_proxy_async", "fence_view_async_shared", "fence_mbarrier_init"]

# the scopes of fence.{acq_rel,sc}, and the first target with each (.cluster came with sm_90)
SCOPES = {"cta": 70, "cluster": 90, "gpu": 70, "sys": 70}


def _fence(ctx, kind: str, what: str, sm: int = 90):
    """An ``nv.fence`` of ``kind`` (codegen/ptx/fence.py spells the PTX)."""
    require_sm(ctx, sm, what)
    ctx.builder.create("nv.fence", [], [], {"kind": kind})


def _ordering_fence(ctx, sem: str, scope, what: str):
    if not isinstance(scope, str) or scope not in SCOPES:
        raise LangError(f"{what}: scope must be one of {', '.join(repr(s) for s in SCOPES)} (a compile-time "
                        f"string), got {scope!r}")
    _fence(ctx, f"{sem}.{scope}", f"{what}(scope={scope!r})", SCOPES[scope])


@builtin
def fence_acq_rel(scope="gpu", *, _ctx):
    """``fence.acq_rel.<scope>``: a release and acquire fence between the threads of ``scope``
    (``"cta"``, ``"cluster"``, ``"gpu"``, ``"sys"``); with an atomic it publishes this thread's earlier
    writes / acquires another thread's (module docstring)."""
    _ordering_fence(_ctx, "acq_rel", scope, "fence_acq_rel")


@builtin
def fence_sc(scope="gpu", *, _ctx):
    """``fence.sc.<scope>``: a sequentially consistent fence (``fence_acq_rel`` plus a total order of
    the sc fences of ``scope``)."""
    _ordering_fence(_ctx, "sc", scope, "fence_sc")


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
