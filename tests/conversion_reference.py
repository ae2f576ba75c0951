"""An independent model of docs/language.md's conversions, for the conversion tests.

It does not use tylo.ir.scalars (exact rationals): ints and floats are first rounded to odd at
53 bits (integer arithmetic), or at 24 bits for formats narrower than f32, then numpy/ml_dtypes
round once more to nearest even from float64/float32, which they do correctly. Rounding to odd
with two or more spare bits and then to nearest is one correct rounding; the same argument is
what the sm_80 int -> bf16 and f64 -> fp8 code relies on (cvt.rz.f32 + sticky bit, then cvt.rn).
"""
import math

import ml_dtypes
import numpy as np

SCALARS = ["bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
           "f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2"]
NP = {"bool": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
      "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
      "f32": np.float32, "f64": np.float64, "f8e4m3": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2}
FP8_MAX = {"f8e4m3": 448.0, "f8e5m2": 57344.0}
FLOATS = {"f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2"}


def is_int(t):
    return t[0] in "iu"


def int_range(t):
    bits = int(t[1:])
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if t[0] == "i" else (0, (1 << bits) - 1)


def wrap(x, t):
    bits = int(t[1:])
    x &= (1 << bits) - 1
    return x - (1 << bits) if t[0] == "i" and x >> (bits - 1) else x


def int_to_odd_f64(x: int) -> float:
    """``x`` truncated to 53 significant bits with the last bit set when inexact (round to odd)."""
    if x == 0:
        return 0.0
    sign, m = (-1 if x < 0 else 1), abs(x)
    drop = max(0, m.bit_length() - 53)
    kept = m >> drop
    if kept << drop != m:
        kept |= 1
    return sign * math.ldexp(kept, drop)


def f64_to_odd_f32(x: float) -> np.float32:
    """``x`` rounded to f32 toward zero, the last bit set when inexact (round to odd); numpy only."""
    if math.isnan(x) or math.isinf(x) or x == 0:
        return np.float32(x)
    with np.errstate(over="ignore"):
        f = np.float32(x)  # nearest
    if math.isinf(f) or abs(float(f)) > abs(x):
        f = np.nextafter(f, np.float32(0.0))
    if float(f) != x:
        f = (np.array([f]).view(np.uint32) | np.uint32(1)).view(np.float32)[0]
    return f


def to_float(x: float, d: str):
    """A float64 value rounded once to float type ``d`` (fp8 saturates), as a float."""
    if d == "f64":
        return x
    with np.errstate(over="ignore"):
        if d in ("f32", "f16"):
            return float(NP[d](x))  # numpy rounds float64 -> f32/f16 once
        f = f64_to_odd_f32(x)
        if d in FP8_MAX and not math.isnan(f):
            f = np.float32(min(max(float(f), -FP8_MAX[d]), FP8_MAX[d]))  # satfinite
        return float(NP[d](f))


def convert(x, s: str, d: str):
    """The documented conversion of the value ``x`` (a Python bool/int/float) of type s to d."""
    if d == "bool":
        return bool(x != 0)
    if s == "bool" or is_int(s):
        x = int(x)
        if is_int(d):
            return wrap(x, d)
        return float(x) if d == "f64" else to_float(int_to_odd_f64(x), d)  # Python's int -> float rounds once
    x = float(x)
    if is_int(d):
        lo, hi = int_range(d)
        if math.isnan(x):
            return 0
        if math.isinf(x):
            return hi if x > 0 else lo
        return min(max(math.trunc(x), lo), hi)
    return to_float(x, d)


def same(a, b) -> bool:
    """Equal values, with signed zeros told apart and NaN equal to NaN."""
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return a == b


INT_VALUES = [0, 1, -1, 2, 7, -7, 127, -128, 255, 448, 464, 480, 65504, 65519, 65520, 57344, 61440,
              2**24 - 1, 2**24 + 1, 2**24 + 3, 16842753, 2**24 + 2**16, -16842753, 2**31 - 1, -2**31,
              2**31 - 65, 2**32 - 1, 2**53 + 1, 2**60 + 2**36 + 1, 2**63 - 1, -2**63, 2**63 + 2**39 + 1,
              2**64 - 1, 0x0101_0000_0000_0001, 33554435, 2**40 + 2**32 + 1]
FLOAT_VALUES = [0.0, -0.0, 1.0, -1.0, 0.1, -0.7, 1 / 3, 0.5, 1.5, 2.5, -2.5, 127.9, -128.9, 255.5, 448.0, 464.0,
                479.9, 480.0, 57344.0, 61439.0, 61440.0, 65504.0, 65519.99, 65520.0, 1 + 2**-8 + 2**-30,
                1 + 2**-11 + 2**-40, 1 + 2**-24 + 2**-60, 2.0**31, -2.0**31 - 1, 2.0**32, 2.0**63, -2.0**63,
                2.0**64, 1e10, -1e19, 3.4e38, 3.4028235677973366e38, 3.3961e38, 1e39, -1e300, 1e-5, 6e-8,
                2.0**-25, 2.0**-24 * 1.5, 1e-40, 1.4e-45, 1e-300, math.inf, -math.inf, math.nan]


def values_of(t: str) -> np.ndarray:
    """Tricky values representable in ``t`` (as an array of that dtype), deduplicated."""
    if t == "bool":
        return np.array([False, True, True], np.bool_)
    if is_int(t):
        return np.array(sorted({wrap(v, t) for v in INT_VALUES}), NP[t])
    with np.errstate(over="ignore", invalid="ignore"):
        xs = [to_float(v, t) for v in FLOAT_VALUES]
    return np.array(xs, np.float64).astype(NP[t])
