"""Semantics of the TMEM ops (not modelled yet).

A model needs tensor memory (128 lanes x 512 columns of 32-bit cells per CTA) with allocation,
and the ld/st data-path shapes (``tylo.ir.nv.tmem.ATOMS``) over the warps' lane quarters.
"""
from __future__ import annotations

from .registry import not_modelled

__all__ = []

not_modelled("tensor memory and its allocator are not modelled",
             "nv.tcgen05.alloc", "nv.tcgen05.dealloc", "nv.tcgen05.relinquish_alloc_permit",
             "nv.tcgen05.ld", "nv.tcgen05.st", "nv.tcgen05.wait_ld", "nv.tcgen05.wait_st", module=__name__)
