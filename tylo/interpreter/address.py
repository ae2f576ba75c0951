"""Semantics of ``nv.shared_address`` (not modelled yet: see the reason below)."""
from __future__ import annotations

from .registry import not_modelled

__all__ = []

not_modelled("interpreter pointers are (buffer, offset) pairs; a shared-window address needs a model of the "
             "CTA's shared memory as one address space", "nv.shared_address", module=__name__)
