"""Semantics of Hopper WGMMA (not modelled yet).

A model needs warpgroup collectives in the scheduler (128 threads), shared-memory matrix
descriptors decoded back to addresses and layouts, and the accumulator fragment of m64nN.
"""
from __future__ import annotations

from .registry import not_modelled

__all__ = []

not_modelled("warpgroup collectives and shared-memory matrix descriptors are not modelled",
             "nv.wgmma.fence", "nv.wgmma.mma_async", "nv.wgmma.mma_async_rs", "nv.wgmma.commit_group",
             "nv.wgmma.wait_group", module=__name__)
