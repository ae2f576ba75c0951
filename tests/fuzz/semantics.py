"""An independent model of docs/language.md's scalar semantics (not tylo's implementation).

Values are Python ints (integers and bools, already wrapped to their type) and Python floats
holding a number exactly representable in their type. Float arithmetic is exact rational
arithmetic rounded once to the result type (round to nearest even), which is what the documented
IEEE rules mean; f16/bf16 "compute in f32 and round once" gives the same result for + - * / sqrt
because f32 has more than twice their precision.

``Undefined`` is raised for what the document calls undefined (integer division by zero,
INT_MIN // -1, shifts by the width or more): the generator rejects such kernels.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import ml_dtypes
import numpy as np


class Undefined(Exception):
    """The documented semantics leave this case undefined."""


@dataclass(frozen=True)
class Ty:
    name: str
    kind: str      # bool int uint float fp8
    bits: int


TYPES = {t.name: t for t in [
    Ty("bool", "bool", 1),
    Ty("i8", "int", 8), Ty("i16", "int", 16), Ty("i32", "int", 32), Ty("i64", "int", 64),
    Ty("u8", "uint", 8), Ty("u16", "uint", 16), Ty("u32", "uint", 32), Ty("u64", "uint", 64),
    Ty("f16", "float", 16), Ty("bf16", "float", 16), Ty("f32", "float", 32), Ty("f64", "float", 64),
    Ty("f8e4m3", "fp8", 8), Ty("f8e5m2", "fp8", 8),
]}
INT_TYPES = [n for n, t in TYPES.items() if t.kind in ("int", "uint")]
FLOAT_TYPES = ["f16", "bf16", "f32", "f64"]
FP8_TYPES = ["f8e4m3", "f8e5m2"]
ALL_TYPES = list(TYPES)

NP_DTYPE = {
    "bool": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
    "f8e4m3": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2,
}


def is_int(t): return TYPES[t].kind in ("int", "uint")
def is_float(t): return TYPES[t].kind == "float"
def is_signed(t): return TYPES[t].kind == "int"


# -- float formats -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fmt:
    p: int            # precision (with the implicit bit)
    emin: int         # exponent of the smallest normal
    maxval: float     # largest finite value
    has_inf: bool     # overflow gives inf (IEEE) or saturates (fp8 conversions are satfinite)


def _ieee(p, emin, emax):
    return Fmt(p, emin, float((2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax), True)


FORMATS = {
    "f64": _ieee(53, -1022, 1023), "f32": _ieee(24, -126, 127), "f16": _ieee(11, -14, 15),
    "bf16": _ieee(8, -126, 127), "f8e4m3": Fmt(4, -6, 448.0, False), "f8e5m2": Fmt(3, -14, 57344.0, False),
}


def round_exact(x: Fraction, t: str) -> float:
    """The rational ``x`` rounded once (to nearest, ties to even) into float type ``t``."""
    f = FORMATS[t]
    if x == 0:
        return 0.0
    sign = -1 if x < 0 else 1
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, f.emin)
    q = Fraction(2) ** (e - f.p + 1)
    m = round(a / q)  # Fraction rounding is half to even
    r = m * q
    if r > Fraction(f.maxval):
        if f.has_inf:
            return sign * math.inf
        return sign * f.maxval
    out = float(r)
    return out if sign > 0 else -out


def round_float(x: float, t: str) -> float:
    """A Python float (maybe inf/nan) converted to float type ``t`` with one rounding."""
    if math.isnan(x):
        return math.nan
    if math.isinf(x):
        return x if FORMATS[t].has_inf else math.copysign(FORMATS[t].maxval, x)
    if x == 0:
        return x  # keeps the sign of zero
    return round_exact(Fraction(x), t)


def wrap(v: int, t: str) -> int:
    ty = TYPES[t]
    if ty.kind == "bool":
        return 1 if v else 0
    v &= (1 << ty.bits) - 1
    if ty.kind == "int" and v >> (ty.bits - 1):
        v -= 1 << ty.bits
    return v


def int_range(t: str):
    ty = TYPES[t]
    if ty.kind == "int":
        return -(1 << (ty.bits - 1)), (1 << (ty.bits - 1)) - 1
    return 0, (1 << ty.bits) - 1


def fits(v: int, t: str) -> bool:
    if TYPES[t].kind == "bool":
        return v in (0, 1)
    lo, hi = int_range(t)
    return lo <= v <= hi


def default_int_type(v: int) -> str:
    if fits(v, "i32"):
        return "i32"
    if fits(v, "i64"):
        return "i64"
    if fits(v, "u64"):
        return "u64"
    raise Undefined(f"integer literal {v} fits no type")


def promote(a: str, b: str) -> str:
    """docs/language.md, 'Two runtime scalars promote'."""
    if a == b:
        return a
    if a == "bool":
        return b
    if b == "bool":
        return a
    ta, tb = TYPES[a], TYPES[b]
    if ta.kind == "float" and tb.kind == "float":
        if ta.bits == tb.bits:
            return "f32"
        return a if ta.bits > tb.bits else b
    if ta.kind == "float":
        return a
    if tb.kind == "float":
        return b
    if ta.bits != tb.bits:
        return a if ta.bits > tb.bits else b
    return a if ta.kind == "uint" else b


def literal_type(py, other: str) -> str:
    """The type a weak Python literal takes next to a runtime value of type ``other``."""
    if isinstance(py, bool):
        return other
    if isinstance(py, int):
        if is_float(other):
            return other
        return other if fits(py, other) else default_int_type(py)
    # a float literal
    if is_float(other):
        return other if abs(py) <= FORMATS[other].maxval or not math.isfinite(py) else "f32"
    return "f32"


# -- conversions -----------------------------------------------------------------------------------
def convert(v, src: str, dst: str):
    """``v`` of type ``src`` (or 'py' for a Python scalar) converted to ``dst`` with C rules."""
    if src == dst:
        return v
    k = TYPES[dst].kind
    if k == "bool":
        return 1 if v != 0 else 0  # NaN != 0: true, as in C
    if k in ("int", "uint"):
        if isinstance(v, float):
            if math.isnan(v):
                return 0
            lo, hi = int_range(dst)
            if math.isinf(v):
                return hi if v > 0 else lo
            return max(lo, min(hi, math.trunc(v)))
        return wrap(int(v), dst)
    # to a float type
    if isinstance(v, float):
        return round_float(v, dst)
    return round_exact(Fraction(int(v)), dst)


# -- arithmetic ------------------------------------------------------------------------------------
def _f64op(op, a, b):
    with np.errstate(all="ignore"):
        x, y = np.float64(a), np.float64(b)
        return float({"+": x + y, "-": x - y, "*": x * y, "/": x / y}[op])


def float_binary(op, a: float, b: float, t: str) -> float:
    if op in ("+", "-", "*", "/"):
        if not (math.isfinite(a) and math.isfinite(b)) or (op == "/" and b == 0):
            return round_float(_f64op(op, a, b), t)
        fa, fb = Fraction(a), Fraction(b)
        exact = {"+": fa + fb, "-": fa - fb, "*": fa * fb, "/": fa / fb if op == "/" else None}[op]
        if exact == 0:
            return _f64op(op, a, b)  # an exact zero: IEEE's sign rules (float64 computes it exactly)
        return round_exact(exact, t)
    if op == "//":
        return float(math.floor(float_binary("/", a, b, t))) if math.isfinite(float_binary("/", a, b, t)) \
            else float_binary("/", a, b, t)
    if op == "%":
        with np.errstate(all="ignore"):
            return float(np.fmod(np.float64(a), np.float64(b)))  # fmod is exact
    raise AssertionError(op)


def int_binary(op, a: int, b: int, t: str) -> int:
    if op in ("+", "-", "*", "&", "|", "^"):
        return wrap({"+": a + b, "-": a - b, "*": a * b, "&": a & b, "|": a | b, "^": a ^ b}[op], t)
    if op in ("//", "%"):
        if b == 0:
            raise Undefined("integer division by zero")
        if is_signed(t) and a == int_range(t)[0] and b == -1:
            raise Undefined("INT_MIN // -1")
        q = abs(a) // abs(b)
        q = q if (a < 0) == (b < 0) else -q
        return wrap(q if op == "//" else a - q * b, t)
    raise AssertionError(op)


def shift(op, a: int, ta: str, s: int) -> int:
    bits = TYPES[ta].bits
    if not 0 <= s < bits:
        raise Undefined(f"shift by {s} of a {bits}-bit value")
    if op == "<<":
        return wrap(a << s, ta)
    return a >> s  # arithmetic for signed values, logical for non-negative unsigned ones


def floor_ceil(fn, v: float) -> float:
    if not math.isfinite(v) or v == 0:
        return v
    r = float(math.floor(v) if fn == "floor" else math.ceil(v))
    return math.copysign(r, v) if r == 0 else r


def sqrt_float(v: float, t: str) -> float:
    if math.isnan(v) or v < 0:
        return math.nan
    if v == 0 or math.isinf(v):
        return v
    fr = Fraction(v)
    k = 2 * (FORMATS[t].p + 80)  # far more bits than the format holds: the sticky bit decides ties
    scaled = fr.numerator * (1 << k) // fr.denominator
    r = math.isqrt(scaled)
    exact = r * r == scaled and fr.numerator * (1 << k) % fr.denominator == 0
    num = r if exact else 2 * r + 1
    den = (1 << (k // 2)) if exact else (1 << (k // 2 + 1))
    return round_exact(Fraction(num, den), t)


def fma_float(a, b, c, t):
    if not all(math.isfinite(x) for x in (a, b, c)):
        with np.errstate(all="ignore"):
            return round_float(float(np.float64(a) * np.float64(b) + np.float64(c)), t)
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        with np.errstate(all="ignore"):
            return float(np.float64(a) * np.float64(b) + np.float64(c))
    return round_exact(exact, t)


def min_max(fn, a, b, t):
    if is_float(t):
        if math.isnan(a):
            return b
        if math.isnan(b):
            return a
    return min(a, b) if fn == "min" else max(a, b)


APPROX = ("exp", "exp2", "log", "log2", "rsqrt", "sin", "cos", "tanh")


def approx_reference(fn: str, v: float, t: str) -> float:
    """The exact function (float64) of an approximated math call, rounded to ``t``: compared with a
    tolerance (docs: about 2 ulp on f32; f16/bf16 compute in f32 and round once)."""
    with np.errstate(all="ignore"):
        x = np.float64(v)
        r = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "rsqrt": lambda y: 1 / np.sqrt(y),
             "sin": np.sin, "cos": np.cos, "tanh": np.tanh}[fn](x)
    return round_float(float(r), t)


FUNC_REL = {"exp": 2.0 ** -20, "exp2": 2.0 ** -21, "log": 2.0 ** -20, "log2": 2.0 ** -21, "rsqrt": 2.0 ** -21,
            "sin": 2.0 ** -20, "cos": 2.0 ** -20, "tanh": 2.0 ** -10}


def approx_close(fn: str, arg: float, t: str, expected: float, got: float) -> bool:
    if math.isnan(expected) or math.isnan(got):
        return math.isnan(expected) and math.isnan(got)
    f = FORMATS[t]
    if math.isinf(expected) or math.isinf(got):
        if expected == got:
            return True
        finite = got if math.isinf(expected) else expected
        return math.copysign(1, expected) == math.copysign(1, got) and abs(finite) > f.maxval / 2
    eps = 2.0 ** (1 - f.p)
    rel = max(4 * eps, 2 * FUNC_REL[fn])
    tol = rel * abs(expected) + 4 * 2.0 ** f.emin
    if fn in ("sin", "cos"):
        tol += FUNC_REL[fn] * max(1.0, abs(arg))
    if fn in ("log", "log2"):
        tol += FUNC_REL[fn]
    return abs(expected - got) <= tol


def same_value(t: str, expected, got) -> bool:
    """Exact comparison of one output element (NaN equals NaN, +0 equals -0)."""
    if is_float(t) or t in FP8_TYPES:
        e, g = float(expected), float(got)
        if math.isnan(e) or math.isnan(g):
            return math.isnan(e) and math.isnan(g)
        return e == g
    return int(expected) == int(got)
