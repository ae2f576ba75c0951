import numpy as np
import pytest
from _layout_helpers import Sym, ev
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.layouts import ComposedLayout, Layout, Swizzle, View, permutedims, window

PROPS = settings(max_examples=60, deadline=None)


@st.composite
def swizzles(draw):
    bits = draw(st.integers(0, 4))
    base = draw(st.integers(0, 4))
    mag = draw(st.integers(max(bits, 1), 5))
    shift = mag if draw(st.booleans()) else -mag
    if bits and shift < 0 and base + mag + bits > 31:
        shift = mag
    return Swizzle(bits, base, shift)


@PROPS
@given(swizzles())
def test_swizzle_involution_and_permutation(sw):
    n = sw.period * 2
    x = np.arange(n)
    y = sw(x)
    assert np.array_equal(sw(y), x)
    # a permutation of every aligned block of `period` offsets
    for b in range(0, n, sw.period):
        assert sorted(y[b : b + sw.period].tolist()) == list(range(b, b + sw.period))
    assert all(sw(int(v)) == int(w) for v, w in zip(x[:64], y[:64]))


@pytest.mark.parametrize(
    "args,rule",
    [((3, 3, 2), "overlap"), ((2, 0, -1), "overlap"), ((3, 20, 10), "31 bits"), ((-1, 0, 1), ">= 0"), ((1.0, 0, 1), "static int")],
)
def test_swizzle_validation(args, rule):
    with pytest.raises(ValueError, match=rule):
        Swizzle(*args)


def test_hopper_128b_swizzle():
    L = ComposedLayout(Swizzle(3, 3, 3), Layout((128, 64), (64, 1)))
    assert L((1, 0)) == 72
    for r in range(128):
        for k in range(64):
            assert L((r, k)) == 64 * r + (k ^ (8 * (r % 8)))
    assert repr(L) == "Sw<3,3,3> o (128,64):(64,1)"
    assert Swizzle(0, 4, 3) == Swizzle(0, 0, 0) and Swizzle(0, 4, 3)(77) == 77


def test_negative_shift():
    sw = Swizzle(2, 0, -3)
    for x in range(64):
        assert sw(x) == x ^ ((x & 0b11) << 3)


def test_window_basics_and_errors():
    L = Layout((128, 128), (1, 128))
    v = window(L, (64, 32), (32, 64))
    assert isinstance(v, View) and v.shape == (32, 64)
    assert v((3, 4)) == L((67, 36)) and v(3 + 32 * 4) == L((67, 36))
    with pytest.raises(ValueError, match="outside"):
        window(L, (100, 0), (32, 64))
    with pytest.raises(ValueError, match="exceeds"):
        window(L, (0, Sym("k")), (32, 256))
    with pytest.raises(ValueError, match="one entry per"):
        window(L, (0,), (32, 64))
    with pytest.raises(ValueError, match="static ints"):
        window(L, (0, 0), (32, Sym("n")))
    with pytest.raises(ValueError, match="positive"):
        window(L, (0, 0), (0, 4))
    # opting out
    w = window(L, (100, 0), (32, 64), check=False)
    assert w((0, 0)) == L((100, 0))
    with pytest.raises(ValueError, match="outside"):
        window(v, (16, 0), (32, 64))


def test_window_runtime_origin_keeps_swizzle_phase():
    sw = ComposedLayout(Swizzle(3, 3, 3), Layout((128, 64), (64, 1)))
    r0 = Sym("r0")
    v = window(sw, (r0, 0), (64, 64))
    e = v((Sym("r"), Sym("k")))
    for R0 in (0, 3, 8, 61):
        for r in (0, 1, 5, 63):
            for k in (0, 7, 9, 63):
                assert ev(e, r0=R0, r=r, k=k) == sw((R0 + r, k))


@PROPS
@given(st.integers(0, 64), st.integers(0, 32), st.integers(1, 64), st.integers(1, 32), st.integers(0, 8), st.integers(0, 8))
def test_nested_windows_fold_and_match_parent(o0, o1, s0, s1, p0, p1):
    sw = ComposedLayout(Swizzle(3, 3, 3), Layout((128, (8, 8)), (64, (1, 8))))
    if o0 + s0 > 128 or o1 + s1 > 64 or p0 + 1 > s0 or p1 + 1 > s1:
        return
    v = window(sw, (o0, o1), (s0, s1))
    w = window(v, (p0, p1), (s0 - p0, s1 - p1))
    assert w.parent is sw and w.origin == (o0 + p0, o1 + p1)
    for a in range(0, s0 - p0, 5):
        for b in range(0, s1 - p1, 3):
            assert w((a, b)) == sw((o0 + p0 + a, o1 + p1 + b)) == v((p0 + a, p1 + b))


def test_view_affine():
    L = Layout((128, 128), (1, 128))
    off, A = window(L, (64, 32), (32, 64)).affine()
    assert off == 64 + 32 * 128 and A == Layout((32, 64), (1, 128))
    H = Layout(((8, 16), 4), ((1, 64), 8))
    assert window(H, (0, 0), (8, 4)).affine()[1] == Layout((8, 4), (1, 8))
    assert window(H, (4, 0), (8, 4)).affine() is None  # crosses the sub-mode boundary
    sw = ComposedLayout(Swizzle(3, 3, 3), Layout((128, 64), (64, 1)))
    assert window(sw, (0, 0), (8, 8)).affine() is None


def test_permutedims():
    L = Layout((128, 64), (64, 1))
    assert permutedims(L) == Layout((64, 128), (1, 64))
    T = Layout((2, 3, 4))
    P = permutedims(T, (2, 0, 1))
    assert P.shape == (4, 2, 3) and P((1, 0, 2)) == T((0, 2, 1))
    with pytest.raises(ValueError, match="default permutation"):
        permutedims(T)
    with pytest.raises(ValueError, match="not a permutation"):
        permutedims(T, (0, 0, 1))
    sw = ComposedLayout(Swizzle(3, 3, 3), L)
    psw = permutedims(sw)
    assert psw((5, 9)) == sw((9, 5))
    v = window(sw, (8, 16), (32, 16))
    pv = permutedims(v)
    assert pv.shape == (16, 32) and pv((3, 7)) == v((7, 3))


class FakeTile:
    """A storage object defined elsewhere that reuses window/permutedims."""

    def __init__(self, base, layout):
        self.base, self.layout = base, layout

    @property
    def shape(self):
        return self.layout.shape

    def __tylo_window__(self, origin, shape, check):
        return FakeTile(self.base, window(self.layout, origin, shape, check))

    def __tylo_permutedims__(self, perm):
        return FakeTile(self.base, permutedims(self.layout, perm))


def test_protocol_dispatch():
    t = FakeTile(1000, Layout((128, 128), (1, 128)))
    w = window(t, (64, 32), (32, 64))
    assert isinstance(w, FakeTile) and w.base == 1000 and w.layout((0, 0)) == 64 + 32 * 128
    p = permutedims(w)
    assert p.layout.shape == (64, 32) and p.layout((32, 0)) == w.layout((0, 32))
    with pytest.raises(ValueError, match="outside"):
        window(t, (120, 0), (32, 64))
    with pytest.raises(ValueError, match="__tylo_window__"):
        window(object(), (0,), (1,))
