"""Inline PTX for the scalar subset: fp8 conversions and the f32 special functions.

Each function returns an LLVM inline-asm call expression (text) given the
operand names; ``tylo.codegen.llvm`` places it. The special functions use the
MUFU approximations (about 2 ulp at f32), see docs/language.md.
"""
from __future__ import annotations

__all__ = ["f32_to_fp8", "fp8_to_f16", "approx_f32", "fast_div_f32"]

_FP8 = {"f8e4m3": "e4m3", "f8e5m2": "e5m2"}


def f32_to_fp8(dtype: str, x: str) -> str:
    """An i16 whose low byte is ``x`` rounded to fp8 (saturating to the finite range)."""
    return (f'call i16 asm "cvt.rn.satfinite.{_FP8[dtype]}x2.f32 $0, $1, $2;", "=h,f,f"'
            f"(float 0.0, float {x})")


def fp8_to_f16(dtype: str, x16: str) -> str:
    """An i32 holding two f16 values: the low one converted from the low byte of ``x16``."""
    return f'call i32 asm "cvt.rn.f16x2.{_FP8[dtype]}x2 $0, $1;", "=r,h"(i16 {x16})'


_APPROX = {"exp2": "ex2.approx.f32", "log2": "lg2.approx.f32", "sin": "sin.approx.f32",
           "cos": "cos.approx.f32", "rsqrt": "rsqrt.approx.f32", "tanh": "tanh.approx.f32",
           # the user's fast forms (tylo.exp2(x, fast=True), tylo.rcp(x, fast=True)): subnormals flush to zero
           "exp2_fast": "ex2.approx.ftz.f32", "rcp_fast": "rcp.approx.ftz.f32"}


def approx_f32(fn: str, x: str) -> str:
    return f'call float asm "{_APPROX[fn]} $0, $1;", "=f,f"(float {x})'


def fast_div_f32(a: str, b: str) -> str:
    """``a / b`` by ``div.full.ftz.f32`` (2 ulp over the full range; tylo.fdiv(a, b, fast=True))."""
    return f'call float asm "div.full.ftz.f32 $0, $1, $2;", "=f,f,f"(float {a}, float {b})'
