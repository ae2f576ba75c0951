"""Inline PTX for the fences (``nv.fence``): one instruction per kind, a memory clobber."""
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


def _instruction(kind: str) -> str:
    """The PTX of a fence kind: a proxy fence from the table, an ordering fence ``sem.scope`` spelled
    ``fence.sem.scope`` (fence.acq_rel.gpu)."""
    return _FENCE.get(kind) or f"fence.{kind};"


@lowering("nv.fence")
def _fence(lw, op):
    lw.asm(_instruction(op.attrs["kind"]), _MEM, (), (), side_effects=True)
