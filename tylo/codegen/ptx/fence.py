"""Inline PTX for the proxy fences (``nv.fence``): one instruction per kind, a memory clobber."""
from __future__ import annotations

from ..asm import MEMORY_CLOBBER
from ..registry import lowering

__all__ = []

_MEM = MEMORY_CLOBBER

_FENCE = {
    "proxy_async": "fence.proxy.async;",
    "proxy_async_shared": "fence.proxy.async.shared::cta;",
    "mbarrier_init": "fence.mbarrier_init.release.cluster;",
}


@lowering("nv.fence")
def _fence(lw, op):
    lw.asm(_FENCE[op.attrs["kind"]], _MEM, (), (), side_effects=True)
