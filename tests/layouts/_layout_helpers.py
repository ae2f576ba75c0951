"""Shared strategies and helpers for the layout tests."""

import itertools

import numpy as np
from hypothesis import strategies as st

from tylo.layouts import Layout


class Sym:
    """A stand-in for a runtime SSA value: records expressions, refuses to be
    converted to bool/int (so no Python `if`/int() may touch it)."""

    def __init__(self, text):
        self.text = text

    def _bin(op):
        def f(self, other):
            return Sym(f"({self.text} {op} {_t(other)})")

        def r(self, other):
            return Sym(f"({_t(other)} {op} {self.text})")

        return f, r

    __add__, __radd__ = _bin("+")
    __mul__, __rmul__ = _bin("*")
    __floordiv__, __rfloordiv__ = _bin("//")
    __mod__, __rmod__ = _bin("%")
    __xor__, __rxor__ = _bin("^")
    __and__, __rand__ = _bin("&")
    __rshift__, __rrshift__ = _bin(">>")
    __lshift__, __rlshift__ = _bin("<<")
    __sub__, __rsub__ = _bin("-")

    def __bool__(self):
        raise TypeError("runtime value used as a Python bool")

    def __int__(self):
        raise TypeError("runtime value converted with int()")

    __index__ = __int__

    def __repr__(self):
        return self.text


def _t(x):
    return x.text if isinstance(x, Sym) else repr(x)


def ev(expr, **env):
    """Evaluate a Sym expression text with integer bindings."""
    return eval(expr.text if isinstance(expr, Sym) else str(expr), {}, env)


# ---- strategies -------------------------------------------------------------

leaf_extent = st.integers(1, 6)


@st.composite
def shapes(draw, max_rank=3, max_size=96):
    rank = draw(st.integers(1, max_rank))
    modes = []
    for _ in range(rank):
        if draw(st.booleans()):
            modes.append(draw(leaf_extent))
        else:
            modes.append(tuple(draw(st.lists(leaf_extent, min_size=1, max_size=3))))
    shape = tuple(modes) if rank > 1 or draw(st.booleans()) else modes[0]
    size = int(np.prod([x for x in _leaves(shape)]))
    if size > max_size:
        return draw(st.integers(1, 8))
    return shape


def _leaves(t):
    if isinstance(t, tuple):
        for e in t:
            yield from _leaves(e)
    else:
        yield t


def unflatten(flat, profile):
    it_ = iter(flat)

    def b(p):
        return tuple(b(e) for e in p) if isinstance(p, tuple) else next(it_)

    return b(profile)


@st.composite
def layouts(draw, max_rank=3, max_size=96, max_stride=24):
    shape = draw(shapes(max_rank, max_size))
    n = len(list(_leaves(shape)))
    strides = draw(st.lists(st.integers(0, max_stride), min_size=n, max_size=n))
    return Layout(shape, unflatten(tuple(strides), shape))


@st.composite
def injective_layouts(draw, max_rank=3, max_size=96):
    """Layouts whose modes are a permutation of a compact layout, with gaps."""
    shape = draw(shapes(max_rank, max_size))
    flat = list(_leaves(shape))
    order = draw(st.permutations(range(len(flat))))
    strides = [0] * len(flat)
    cur = draw(st.sampled_from([1, 1, 2, 3]))
    for i in order:
        strides[i] = cur
        cur *= flat[i] * draw(st.sampled_from([1, 1, 1, 2]))
    return Layout(shape, unflatten(tuple(strides), shape))


def table(layout):
    return [layout(i) for i in range(layout.size)]


def all_coords(extents):
    return itertools.product(*[range(e) for e in extents])
