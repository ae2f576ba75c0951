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
