"""Semantics of ``nv.shared_address``: a shared pointer's byte address in its CTA's shared memory (the
interpreter lays the CTA's shared arrays out in one byte array, ``machine.CTA``), with the CTA's cluster
rank in the high bits as the hardware gives it."""
from __future__ import annotations

from ..ir.nv.address import CLUSTER_RANK_SHIFT
from .core import SharedBytes
from .errors import InterpreterError
from .registry import THREAD_SEMANTICS

__all__ = []


def _shared_address(th, op, ins, t):
    p = ins[0]
    if not isinstance(p.buffer, SharedBytes):
        raise InterpreterError(f"{op.loc}: nv.shared_address of a pointer that is not into shared memory")
    # the rank bits as the GPU gives them: a descriptor built without dropping them reads the wrong bytes here too
    return (th.cta.rank << CLUSTER_RANK_SHIFT) | (p.offset * p.elem.itemsize)


THREAD_SEMANTICS.add("nv.shared_address", _shared_address)
