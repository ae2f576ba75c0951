"""Fences: ``nv.fence``, memory ordering between threads and between the generic and async proxies.

``kind``: ``proxy_async`` (fence.proxy.async), ``proxy_async_shared`` (fence.proxy.async.shared::cta),
``mbarrier_init`` (fence.mbarrier_init.release.cluster), ``acq_rel.<scope>`` / ``sc.<scope>``
(fence.acq_rel / fence.sc at scope cta, cluster, gpu or sys).
"""
from __future__ import annotations

from ..opdef import Attr, OpDef, one_of
from ..ops import define_ops

__all__ = ["DEFINITIONS", "FENCE_KINDS", "PROXY_FENCE_KINDS", "ORDERING_FENCE_KINDS"]

PROXY_FENCE_KINDS = ("proxy_async", "proxy_async_shared", "mbarrier_init")
ORDERING_FENCE_KINDS = tuple(f"{sem}.{scope}" for sem in ("acq_rel", "sc")
                             for scope in ("cta", "cluster", "gpu", "sys"))
FENCE_KINDS = PROXY_FENCE_KINDS + ORDERING_FENCE_KINDS

DEFINITIONS = define_ops(
    OpDef("nv.fence", 0, 0, False, one_of("kind", FENCE_KINDS), (Attr("kind", (str,)),), memory="read_write",
          doc="a fence: fence.acq_rel/sc.<scope>, fence.proxy.async[.shared::cta] or fence.mbarrier_init"),
)
