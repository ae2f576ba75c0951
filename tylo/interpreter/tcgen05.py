"""Semantics of Blackwell tensor memory and tcgen05 MMA (not modelled yet).

A model needs tensor memory (128 lanes x 512 columns of 32-bit cells per CTA) with allocation,
the ld/st access shapes over warps' lane quarters, descriptors, and mbarrier arrivals for commit.
"""
from __future__ import annotations

from .registry import not_modelled

__all__ = []

not_modelled("tensor memory and its allocator are not modelled",
             "nv.tcgen05.alloc", "nv.tcgen05.dealloc", "nv.tcgen05.relinquish_alloc_permit",
             "nv.tcgen05.ld", "nv.tcgen05.st", "nv.tcgen05.wait_ld", "nv.tcgen05.wait_st", module=__name__)
not_modelled("tcgen05 fences order the tensor-core proxy, which is not modelled",
             "nv.tcgen05.fence_before", "nv.tcgen05.fence_after", module=__name__)
not_modelled("tcgen05.mma needs tensor memory, matrix descriptors and mbarrier arrivals, none modelled yet",
             "nv.tcgen05.mma", "nv.tcgen05.commit", "nv.tcgen05.commit_multicast", module=__name__)
