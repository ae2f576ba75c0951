"""Integer arithmetic as a kernel does it: wrap to the type's width, divide towards zero (C).

Shared by constant folding (``ir.passes``) and the interpreter, so both compute the same values.
"""
from __future__ import annotations

from .types import ScalarType

__all__ = ["wrap_int", "cdiv"]


def wrap_int(value: int, t: ScalarType) -> int:
    """``value`` reduced to type ``t``: two's complement at ``t.bits``; bool keeps the low bit."""
    if t.is_bool:
        return bool(value & 1)
    mask = (1 << t.bits) - 1
    value &= mask
    if t.is_signed and value >> (t.bits - 1):
        value -= 1 << t.bits
    return value


def cdiv(a: int, b: int) -> int:
    """Integer division rounding towards zero (C's ``/``), not Python's floor division."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q
