"""Semantics of the TMA bulk tensor copies (not modelled yet).

A model needs the tensor map (the host descriptor's dims, strides, box and swizzle) reachable from
its address, and mbarrier transaction counts for the load's completion.
"""
from __future__ import annotations

from .registry import not_modelled

__all__ = []

not_modelled("tensor maps (host descriptors) and mbarrier transaction counts are not modelled",
             "nv.tma.load", "nv.tma.store", "nv.tma.prefetch", module=__name__)
not_modelled("bulk async-groups are not modelled (they complete the TMA stores, which are not either)",
             "nv.tma.commit", "nv.tma.wait", module=__name__)
