"""Promotion and literal typing rules (docs/language.md) and their effect on compiled kernels."""
import itertools
import re

import pytest

import tylo
from tylo.ir import types as T
from tylo.lang.core import literal_type

INTS = [T.i8, T.i16, T.i32, T.i64, T.u8, T.u16, T.u32, T.u64]
FLOATS = [T.f16, T.bf16, T.f32, T.f64]


@pytest.mark.parametrize("a,b", list(itertools.product(INTS + FLOATS + [T.bool_], repeat=2)))
def test_promote_is_symmetric_and_follows_the_table(a, b):
    r = T.promote(a, b)
    assert r == T.promote(b, a)
    if a == b:
        assert r == a
    elif a.is_bool or b.is_bool:
        assert r == (b if a.is_bool else a)
    elif a.is_float and b.is_float:
        assert r == (T.f32 if a.bits == b.bits else max(a, b, key=lambda t: t.bits))
    elif a.is_float or b.is_float:
        assert r == (a if a.is_float else b)
    elif a.bits != b.bits:
        assert r == max(a, b, key=lambda t: t.bits)
    else:
        assert not r.is_signed  # C: unsigned wins at equal width


def test_literals_are_weak():
    assert literal_type(3, T.u8) == T.u8
    assert literal_type(300, T.u8) == T.i32  # does not fit: the literal keeps its own type
    assert literal_type(2.5, T.f16) == T.f16
    assert literal_type(2.5, T.i32) == T.f32
    assert literal_type(2, T.bf16) == T.bf16
    assert literal_type(2**40, T.i32) == T.i64


def _ir(kernel, signature, **cx):
    return kernel.compile(signature=signature, arch="sm_90a", constexprs=cx).ir


@tylo.jit
def mixed(out, a, b):
    out[0] = a[0] + b[0]


@pytest.mark.parametrize("ta,tb,tr", [("i32", "i64", "i64"), ("u32", "i32", "u32"), ("f16", "f32", "f32"),
                                      ("bf16", "f16", "f32"), ("i32", "f16", "f16"), ("u8", "i16", "i16")])
def test_kernel_arithmetic_result_type(ta, tb, tr):
    ir = _ir(mixed, f"*{tr}, *{ta}, *{tb}")
    assert re.search(rf"arith\.add %\d+, %\d+ : {tr}\b", ir), ir


@tylo.jit
def divisions(out_f, out_i, a, b):
    out_f[0] = a[0] / b[0]
    out_i[0] = a[0] // b[0] + a[0] % b[0]


def test_true_division_of_ints_is_f32_and_floor_division_is_c_style():
    ir = _ir(divisions, "*f32, *i32, *i32, *i32")
    assert re.search(r"arith\.div %\d+, %\d+ : f32", ir)
    assert re.search(r"arith\.idiv %\d+, %\d+ : i32", ir) and re.search(r"arith\.irem %\d+, %\d+ : i32", ir)


@tylo.jit
def comparisons(out, a, n):
    out[0] = tylo.where(a[0] < n, 1.0, 2.0)


def test_comparison_of_float_and_int_promotes_to_float():
    ir = _ir(comparisons, "*f32, *f32, i32")
    assert re.search(r"arith\.cast %\d+ : f32", ir) and "pred = \"lt\"" in ir


@tylo.jit
def large_literal(out, a):
    out[0] = a[0] + 10_000_000_000


def test_large_literal_widens():
    ir = _ir(large_literal, "*i64, *i32")
    assert re.search(r"arith\.add %\d+, %\d+ : i64", ir)
