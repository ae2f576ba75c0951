"""Reference semantics of the IR on the CPU: ``run(kernel.lower(...), args, grid, block)``.

One module per feature, as in ``lang/`` and ``codegen/ptx/``: ``core`` (scalars, memory, control
flow, shuffles), ``copy`` (ldmatrix/stmatrix/cp.async), ``mma`` (mma.sync).
"""
from . import copy, mma  # noqa: F401 - register the features' semantics
from .core import InterpreterError, Pointer, run

__all__ = ["run", "InterpreterError", "Pointer"]
