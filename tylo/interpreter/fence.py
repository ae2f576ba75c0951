"""Semantics of the proxy fences (not modelled yet: the interpreter has a single memory proxy)."""
from __future__ import annotations

from .registry import not_modelled

__all__ = []

not_modelled("the interpreter has one memory proxy; a fence between proxies needs the async proxy modelled",
             "nv.fence", module=__name__)
