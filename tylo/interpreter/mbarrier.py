"""Semantics of mbarriers (not modelled yet).

An mbarrier needs phase and transaction-count state, and the scheduler a way to suspend a thread
on a phase. Until then each op is listed with its reason.
"""
from __future__ import annotations

from .registry import not_modelled

__all__ = []

not_modelled("mbarrier phase and transaction-count state is not modelled",
             "nv.mbarrier.init", "nv.mbarrier.arrive", "nv.mbarrier.arrive_expect_tx", "nv.mbarrier.expect_tx",
             "nv.mbarrier.try_wait", "nv.mbarrier.wait", module=__name__)
