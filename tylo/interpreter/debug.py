"""Semantics of ``nv.assert``: a thread whose condition is false stops the run with an
``InterpreterError`` naming the assert's file:line and message (the GPU prints and traps)."""
from __future__ import annotations

from .core import InterpreterError
from .registry import THREAD_SEMANTICS

__all__ = []


def _assert(thread, op, inputs, result_type):
    if not inputs[0]:
        message = op.attrs["message"]
        raise InterpreterError(f"{op.loc.line()}: device assertion failed"
                               + (f": {message}" if message else "") + f" ({_where(thread)})")
    return None


def _where(thread) -> str:
    """The failing thread's block and thread index."""
    return f"block {tuple(thread.ctaid)}, thread {tuple(thread.tid)}"


THREAD_SEMANTICS.add("nv.assert", _assert)
