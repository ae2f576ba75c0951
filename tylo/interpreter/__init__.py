"""Reference semantics of the IR on the CPU: ``run(kernel.lower(...), args, grid, block)``.

One module per feature, as in ``tylo/ir/nv``, ``lang/`` and ``codegen/ptx/``: ``core`` (scalars,
memory, control flow, shuffles), ``copy`` (ldmatrix/stmatrix/cp.async), ``mma`` (mma.sync),
``address``, ``mbarrier``, ``fence``, ``sync``, ``tma``, ``wgmma``, ``tmem``, ``tcgen05``; ``machine``
(CTAs, clusters, the seeded scheduler, asynchronous units) and ``hazards`` (the checker). See
docs/interpreter.md.
"""
from . import address, copy, debug, fence, mbarrier, mma, sync, tcgen05, tma, tmem, wgmma  # noqa: F401 - register the features' semantics
from .core import InterpreterError, Pointer, has_semantics
from .errors import HazardError
from .machine import run
from .registry import NOT_MODELLED

__all__ = ["run", "InterpreterError", "HazardError", "Pointer", "NOT_MODELLED", "has_semantics"]
