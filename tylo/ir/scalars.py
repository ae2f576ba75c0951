"""The documented semantics of scalar values, exactly: integer wrap-around, C division, and
conversions with one correct rounding (docs/language.md, "Conversions").

Constant folding (``ir.passes``) and the reference interpreter share these functions, so a
folded program and an interpreted one compute the same bits. Floats are Python floats
holding a value that is exactly representable in their IR type (every f16, bf16, f32 and
fp8 value is a double); rounding works on exact rationals, never through an intermediate
format, because rounding twice (int -> f32 -> bf16, f64 -> f32 -> bf16) is not rounding once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from .types import ScalarType

__all__ = ["FloatFormat", "FLOAT_FORMATS", "wrap_int", "c_div", "c_rem", "round_float", "convert"]


@dataclass(frozen=True)
class FloatFormat:
    """A binary float format: ``precision`` significand bits (with the implicit one), the
    smallest normal exponent, the largest finite value, and whether conversions into it
    saturate to the finite range (fp8, ``cvt.rn.satfinite``) instead of overflowing to inf."""

    precision: int
    min_exponent: int
    max_finite: float
    saturates: bool = False


FLOAT_FORMATS = {
    "f16": FloatFormat(11, -14, 65504.0),
    "bf16": FloatFormat(8, -126, float.fromhex("0x1.fep127")),
    "f32": FloatFormat(24, -126, float.fromhex("0x1.fffffep127")),
    "f64": FloatFormat(53, -1022, float.fromhex("0x1.fffffffffffffp1023")),
    "f8e4m3": FloatFormat(4, -6, 448.0, saturates=True),
    "f8e5m2": FloatFormat(3, -14, 57344.0, saturates=True),
}


def wrap_int(value: int, t: ScalarType):
    """``value`` wrapped to the width of integer type ``t`` (two's complement); bools keep bit 0."""
    if t.is_bool:
        return bool(value & 1)
    mask = (1 << t.bits) - 1
    value &= mask
    if t.is_signed and value >> (t.bits - 1):
        value -= 1 << t.bits
    return value


def c_div(a: int, b: int) -> int:
    """C's integer quotient: truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def c_rem(a: int, b: int) -> int:
    """C's remainder: the sign of the dividend."""
    return a - c_div(a, b) * b


def _round_exact(x: Fraction, fmt: FloatFormat) -> float:
    """The nearest value of ``fmt`` to the non-zero rational ``x`` (ties to even), as a float."""
    neg = x < 0
    x = -x if neg else x
    n, d = x.numerator, x.denominator
    e = n.bit_length() - d.bit_length()  # 2**e <= x < 2**(e+2): fix it to 2**e <= x < 2**(e+1)
    if (n << max(0, -e)) < (d << max(0, e)):
        e -= 1
    quantum = max(e, fmt.min_exponent) - (fmt.precision - 1)  # the exponent of one ulp (subnormals share the last)
    num, den = (n, d << quantum) if quantum >= 0 else (n << -quantum, d)
    m, r = divmod(num, den)
    if 2 * r > den or (2 * r == den and m & 1):
        m += 1
    try:
        value = math.ldexp(m, quantum)
    except OverflowError:
        value = math.inf
    if value > fmt.max_finite:
        # IEEE: a value that rounds (with unbounded exponent) past the largest finite one is inf
        value = fmt.max_finite if fmt.saturates else math.inf
    return -value if neg else value


def round_float(x, t: ScalarType) -> float:
    """``x`` (int, float or Fraction) rounded once to float type ``t`` (round to nearest even).

    Overflow gives inf, except fp8, which saturates to its finite range (NaN stays NaN);
    signed zeros are kept.
    """
    fmt = FLOAT_FORMATS[t.name]
    if isinstance(x, bool):
        x = int(x)
    if isinstance(x, int):
        if x == 0:
            return 0.0
        if t.name == "f64" and abs(x) < 1 << 53:
            return float(x)
        return _round_exact(Fraction(x), fmt)
    if isinstance(x, Fraction):
        return 0.0 if x == 0 else _round_exact(x, fmt)
    x = float(x)
    if math.isnan(x) or t.name == "f64":
        return x
    if math.isinf(x):
        return math.copysign(fmt.max_finite, x) if fmt.saturates else x
    if x == 0.0:
        return x
    return _round_exact(Fraction(x), fmt)


def _float_to_int(f: float, d: ScalarType) -> int:
    """C conversion of a float to an integer type, truncating, saturating, NaN -> 0 (``cvt.rzi.sat``)."""
    if math.isnan(f):
        return 0
    lo, hi = (-(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1) if d.is_signed else (0, (1 << d.bits) - 1)
    if math.isinf(f):
        return hi if f > 0 else lo
    return min(max(math.trunc(f), lo), hi)


def convert(x, s: ScalarType, d: ScalarType):
    """``arith.cast`` of the value ``x`` of type ``s`` to type ``d``: a bool, an int or a float.

    bool: non-zero (and NaN) is true; int -> int wraps; float -> int truncates toward zero and
    saturates (NaN gives 0); int -> float and float narrowing round once to nearest even; to fp8
    saturates to the finite range.
    """
    if d.is_bool:
        return bool(x != 0)  # NaN != 0: true, as in C
    if s.is_bool or s.is_int:
        x = int(x)
        return wrap_int(x, d) if d.is_int else round_float(x, d)
    x = float(x)
    if d.is_int:
        return _float_to_int(x, d)
    return round_float(x, d)
