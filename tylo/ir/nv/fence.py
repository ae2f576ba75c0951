"""Proxy fences (sm_90+): ``nv.fence``, ordering generic-proxy accesses with the async proxy.

``kind``: ``proxy_async`` (fence.proxy.async), ``proxy_async_shared`` (fence.proxy.async.shared::cta),
``mbarrier_init`` (fence.mbarrier_init.release.cluster).
"""
from __future__ import annotations

from ..opdef import Attr, OpDef, one_of
from ..ops import define_ops

__all__ = ["DEFINITIONS", "FENCE_KINDS"]

FENCE_KINDS = ("proxy_async", "proxy_async_shared", "mbarrier_init")

DEFINITIONS = define_ops(
    OpDef("nv.fence", 0, 0, False, one_of("kind", FENCE_KINDS), (Attr("kind", (str,)),), memory="read_write",
          doc="a proxy fence: fence.proxy.async[.shared::cta] or fence.mbarrier_init"),
)
