"""Semantics of the tcgen05 MMA ops (not modelled yet).

A model needs tensor memory (``interpreter/tmem.py``), the shared-memory and instruction
descriptors, and mbarrier arrivals for commit.
"""
from __future__ import annotations

from .registry import not_modelled

__all__ = []

not_modelled("tcgen05 fences order the tensor-core proxy, which is not modelled",
             "nv.tcgen05.fence_before", "nv.tcgen05.fence_after", module=__name__)
not_modelled("tcgen05.mma needs tensor memory, matrix descriptors and mbarrier arrivals, none modelled yet",
             "nv.tcgen05.mma", "nv.tcgen05.commit", "nv.tcgen05.commit_multicast", module=__name__)
