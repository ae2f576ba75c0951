"""``shared_address(ptr)``: the u32 shared-window address of a shared pointer (the ``nv.shared_address`` op).

Matrix descriptors (WGMMA, tcgen05) encode it as their start address, ``(addr & 0x3FFFF) >> 4``. In a
cluster launch the address carries the CTA's rank in the cluster from bit 24 up (as ``cvta.to.shared``
gives it on sm_90, and the interpreter models): drop it (``& 0x3FFFF``, or subtract ``cluster_ctarank << 24``
as WGMMA descriptors do) before packing it into any field.
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.core import Value
from .base import LangError, builtin

__all__ = ["shared_address"]


@builtin
def shared_address(ptr, *, _ctx):
    """The u32 shared-window address of a ``*shared`` pointer (or shared array): the
    ``start_address`` a matrix descriptor encodes (``desc | ((addr & 0x3FFFF) >> 4)``; the mask drops the
    cluster rank a cluster launch puts in bits 24 and up)."""
    p = getattr(ptr, "ptr", ptr)
    if not (isinstance(p, Value) and getattr(p.type, "space", None) == "shared"):
        raise LangError(f"shared_address: expected a *shared pointer or shared array, got {ptr!r}")
    return _ctx.builder.value("nv.shared_address", [p], T.u32)
