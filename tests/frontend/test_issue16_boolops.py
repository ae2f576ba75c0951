"""Issue 16 item 10: ``and``/``or`` on runtime values have Python's semantics: the value of the operand
that decides, typed (promoted like a select), and a right operand with effects runs only when it decides."""
import numpy as np
import pytest

import tylo
from tylo.interpreter import run
from tylo.ir.printer import print_kernel


@tylo.jit
def boolops(out, x, k, n, m):
    out[0] = k and True
    out[1] = k or 7
    out[2] = n and m
    out[3] = n or m
    out[4] = (n > 0) and (m > 0)
    i = n - 3
    out[5] = i >= 0 and x[i]  # x[i] is loaded only when i >= 0
    out[6] = 0 and n
    out[7] = 5 and n
    out[8] = (n > 0) and True
    out[9] = (n > 0) or m
    out[10] = k and n and m
    out[11] = k or n or m


def python_boolops(x, k, n, m):
    i = n - 3
    return [k and True, k or 7, n and m, n or m, (n > 0) and (m > 0), i >= 0 and x[i], 0 and n, 5 and n,
            (n > 0) and True, (n > 0) or m, k and n and m, k or n or m]


@pytest.mark.parametrize("k,n,m", [(0, 0, 4), (2, 3, 0), (5, 5, 6), (1, 4, 2), (0, 6, 0), (-3, 0, 0)])
def test_and_or_on_runtime_values_match_python(k, n, m):
    x = np.array([10, 20, 30, 40], np.int32)
    out = np.full(12, -99, np.int32)
    run(boolops.lower(signature="*i32, *i32, i32, i32, i32"), [out, x, k, n, m], block=(1,))
    assert out.tolist() == [int(v) for v in python_boolops(x, k, n, m)]


@tylo.jit
def float_or(out, a, b):
    out[0] = a or b  # f32 or i32: the deciding operand's value, as f32


@pytest.mark.parametrize("a,b", [(0.0, 3), (2.5, 3), (0.0, 0)])
def test_or_promotes_the_result_type(a, b):
    out = np.full(1, -1, np.float32)
    run(float_or.lower(signature="*f32, f32, i32"), [out, a, b], block=(1,))
    assert out[0] == np.float32(a or b)


@tylo.jit
def guarded_load(out, x, i):
    if i < 4 and x[i] > 0:
        out[0] = 1


def test_right_operand_with_a_load_is_a_branch_not_a_select():
    text = tylo_ir(guarded_load, "*i32, *i32, i32")
    assert "scf.if" in text and "arith.select" not in text
    out = np.zeros(1, np.int32)
    run(guarded_load.lower(signature="*i32, *i32, i32"), [out, np.array([1, 2, 3, 4], np.int32), 9], block=(1,))
    assert out[0] == 0


def tylo_ir(kernel, signature):
    return print_kernel(kernel.lower(signature=signature))
