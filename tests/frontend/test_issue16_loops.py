"""Issue 16, frontend control flow: nested breaking loops, early return before a while, and the
value of a for loop's target after a runtime loop (run in the reference interpreter)."""
import numpy as np
import pytest

import tylo
from tylo.interpreter import run


@tylo.jit
def nested_breaks(out, n, m):
    total = 0
    for i in range(n):
        if i > 4:
            break
        for j in range(m):
            if j > 2:
                break
            total += 1
    out[0] = total


@tylo.jit
def return_in_loop_then_while(out, n):
    x = 0
    for i in range(n):
        if i > 5:
            return
        j = 0
        while j < i:
            j += 1
        out[i] = j
        while x < i:
            x += 1
    out[15] = x


def python_nested_breaks(n, m):
    total = 0
    for i in range(n):
        if i > 4:
            break
        for j in range(m):
            if j > 2:
                break
            total += 1
    return total


@pytest.mark.parametrize("n,m", [(0, 5), (3, 2), (10, 10), (6, 1)])
def test_nested_runtime_loops_that_both_break(n, m):
    out = np.full(1, -1, np.int32)
    run(nested_breaks.lower(signature="*i32, i32, i32"), [out, n, m], block=(1,))
    assert out[0] == python_nested_breaks(n, m)


@pytest.mark.parametrize("n", [0, 3, 6, 9])
def test_return_inside_range_loop_followed_by_while(n):
    out = np.full(16, -1, np.int32)
    run(return_in_loop_then_while.lower(signature="*i32, i32"), [out, n], block=(1,))
    expect = np.full(16, -1, np.int32)
    x = 0
    for i in range(n):
        if i > 5:
            break
        expect[i] = i
        x = max(x, i)
    else:
        expect[15] = x
    np.testing.assert_array_equal(out, expect)


@tylo.jit
def target_after_loop(out, n, step):
    i = 7
    for i in range(n):
        pass
    out[0] = i
    k = 3
    for k in range(2, n, step):
        if k > 10:
            break
    out[1] = k
    j = -1
    for j in range(n):
        j = j * 2  # the body's last value, not the induction variable, is what Python keeps
    out[2] = j


def python_target_after_loop(n, step):
    i = 7
    for i in range(n):
        pass
    k = 3
    for k in range(2, n, step):
        if k > 10:
            break
    j = -1
    for j in range(n):
        j = j * 2
    return [i, k, j]


@pytest.mark.parametrize("n,step", [(0, 3), (1, 3), (2, 1), (5, 3), (20, 3), (9, 4)])
def test_for_target_keeps_pythons_value_after_a_runtime_loop(n, step):
    out = np.full(3, -100, np.int32)
    run(target_after_loop.lower(signature="*i32, i32, i32"), [out, n, step], block=(1,))
    assert out.tolist() == python_target_after_loop(n, step)


@tylo.jit
def target_after_loop_i64(out, n):
    i = 5
    for i in range(n):
        pass
    out[0] = i


@pytest.mark.parametrize("n", [0, 3])
def test_for_target_takes_the_induction_type(n):
    out = np.full(1, -100, np.int64)
    run(target_after_loop_i64.lower(signature="*i64, i64"), [out, n], block=(1,))
    assert out[0] == (n - 1 if n else 5)


@tylo.jit
def float_before_int_loop(out, n):
    i = 0.5
    for i in range(n):
        pass
    out[0] = i


def test_for_target_of_another_type_before_the_loop_is_a_clear_error():
    with pytest.raises(tylo.CompileError) as info:
        float_before_int_loop.compile(signature="*f32, i32", arch="sm_90a")
    assert "'i'" in info.value.reason and "f32" in info.value.reason and "i32" in info.value.reason, info.value.reason
