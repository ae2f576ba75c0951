"""Semantics of ``nv.shared_address``: a shared pointer's byte address in its CTA's shared memory (the
interpreter lays the CTA's shared arrays out in one byte array, ``machine.CTA``), with the CTA's cluster
rank in the high bits as the hardware gives it."""
from __future__ import annotations

from .core import SharedBytes
from .errors import InterpreterError
from .registry import THREAD_SEMANTICS

__all__ = []


#: In a cluster launch the hardware's shared-window address of a CTA's own shared memory carries the CTA's
#: rank in the cluster from this bit up (rank 0, and every CTA launched without a cluster, has none), as
#: ``cvta.to.shared`` returns it on sm_90. Modelled so that code which builds addresses or descriptors
#: from it without the ISA's masks reads the wrong bytes here as on the GPU.
CLUSTER_RANK_SHIFT = 24


def _shared_address(th, op, ins, t):
    p = ins[0]
    if not isinstance(p.buffer, SharedBytes):
        raise InterpreterError(f"{op.loc}: nv.shared_address of a pointer that is not into shared memory")
    return (th.cta.rank << CLUSTER_RANK_SHIFT) | (p.offset * p.elem.itemsize)


THREAD_SEMANTICS.add("nv.shared_address", _shared_address)
