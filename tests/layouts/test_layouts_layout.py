import numpy as np
import pytest
from _layout_helpers import Sym, ev, layouts, table
from hypothesis import given, settings

from tylo.layouts import ComposedLayout, Layout, Swizzle, coalesce, coalesce_modes, make_layout, same_map

FAST = settings(max_examples=80, deadline=None)


def test_repr_and_properties():
    L = Layout((128, 128), (1, 128))
    assert repr(L) == "(128,128):(1,128)"
    assert (L.size, L.cosize, L.rank, L.depth) == (16384, 16384, 2, 1)
    N = Layout(((2, 2), 3), ((24, 2), 8))
    assert repr(N) == "((2,2),3):((24,2),8)"
    assert N.depth == 2 and N.rank == 2 and N.size == 12
    assert N.cosize == 24 + 2 + 16 + 1
    assert repr(Layout(8)) == "8:1"
    assert repr(N.flatten()) == "(2,2,3):(24,2,8)"
    assert repr(N[0]) == "(2,2):(24,2)"


def test_constructors():
    assert Layout.col_major((4, 8)) == Layout((4, 8), (1, 4))
    assert Layout.row_major((4, 8)) == Layout((4, 8), (8, 1))
    assert Layout.row_major(((2, 2), 3)) == Layout(((2, 2), 3), ((6, 3), 1))
    assert Layout((4, (2, 3))) == Layout((4, (2, 3)), (1, (4, 8)))
    assert make_layout(Layout(4, 2), 3) == Layout((4, 3), (2, 1))


def test_evaluation_forms():
    L = Layout((4, (2, 3)), (1, (4, 8)))
    # hierarchical, partially flat, 1-D index, separate args
    assert L((1, (1, 2))) == L((1, 5)) == L(21) == L(1, 5) == 1 + 4 + 16
    assert Layout((4, 8))((1, 2)) == 9
    # 1-D index decomposes first-mode-fastest
    assert [Layout((2, 3), (3, 1))(i) for i in range(6)] == [0, 3, 1, 4, 2, 5]


def test_structural_vs_functional_equality():
    a = Layout((2, (1, 6)), (1, (6, 2)))
    b = Layout(12, 1)
    assert a != b
    assert a.same_map(b) and same_map(a, b)
    assert not Layout((2, 2), (1, 2)).same_map(Layout((2, 2), (2, 1)))
    assert Layout((4, 8)) == Layout((4, 8), (1, 4))
    assert hash(Layout((4, 8))) == hash(Layout((4, 8), (1, 4)))
    assert len({Layout(4, 1), Layout(4, 1), Layout(4, 2)}) == 2


@pytest.mark.parametrize(
    "shape,stride,rule",
    [
        ((4, 8), (1,), "congruent"),
        ((4, (2, 2)), (1, 4), "congruent"),
        ((4, 0), (1, 4), "positive"),
        ((4, -2), (1, 4), "positive"),
        ((4, 2.0), (1, 4), "integers"),
        ((4, 2), (1, "a"), "integers"),
        ((4, True), (1, 4), "integers"),
        ((), (), "empty"),
    ],
)
def test_bad_layouts(shape, stride, rule):
    with pytest.raises(ValueError, match=rule):
        Layout(shape, stride)


def test_numpy_integers_are_normalised():
    L = Layout((np.int64(4), 8), (1, np.int32(4)))
    assert type(L.shape[0]) is int and type(L.stride[1]) is int


def test_dynamic_coordinates_use_only_operators_and_fold_constants():
    L = Layout((128, 128), (1, 128))
    r, c = Sym("r"), Sym("c")
    e = L((r, c))
    assert e.text == "(r + (c * 128))"
    assert ev(e, r=3, c=5) == L((3, 5))
    # stride 0 and extent 1 disappear; static zero coordinates vanish
    assert Layout((4, 1, 8), (0, 7, 1))((r, 0, c)).text == "c"
    assert Layout((4, 8), (1, 4))((0, c)).text == "(c * 4)"
    # hierarchical mode with a runtime index
    H = Layout((4, (2, 3)), (1, (4, 8)))
    e = H((r, c))
    for rv in range(4):
        for cv in range(6):
            assert ev(e, r=rv, c=cv) == H((rv, cv))
    # 1-D runtime index
    i = Sym("i")
    e = H(i)
    assert all(ev(e, i=k) == H(k) for k in range(24))


def test_dynamic_leaves_in_shape_and_stride():
    M = Sym("M")
    L = Layout((4, 8), (1, M))
    e = L((Sym("r"), Sym("c")))
    assert ev(e, r=2, c=3, M=100) == 302
    C = Layout.col_major((4, M))
    assert C.stride[1] == 4
    R = Layout.row_major((M, 8))
    assert R.stride == (8, 1)
    assert ev(Layout.row_major((4, M)).stride[0], M=9) == 9
    assert "M" in repr(L)


def test_swizzle_composed_dynamic():
    C = ComposedLayout(Swizzle(3, 3, 3), Layout((128, 64), (64, 1)))
    e = C((Sym("r"), Sym("k")))
    for r in range(0, 128, 7):
        for k in range(0, 64, 5):
            assert ev(e, r=r, k=k) == C((r, k)) == 64 * r + (k ^ (8 * (r % 8)))


def test_numpy_vectorised_evaluation():
    L = Layout((4, (2, 3)), (1, (4, 8)))
    i = np.arange(24)
    assert list(L(i)) == table(L)
    assert list(L.offsets()) == table(L)


@FAST
@given(layouts())
def test_coalesce_preserves_map(L):
    c = coalesce(L)
    assert c.size == L.size
    assert c.depth <= 1
    assert table(c) == table(L)
    assert L.same_map(c)


@FAST
@given(layouts(max_rank=3))
def test_flatten_and_by_mode_coalesce_preserve_map(L):
    assert table(L.flatten()) == table(L)
    if isinstance(L.shape, tuple):
        c = coalesce_modes(L)
        assert c.rank == L.rank
        for i in range(L.rank):
            assert table(c[i]) == table(L[i])
        assert table(c) == table(L)


@FAST
@given(layouts())
def test_hierarchical_flat_and_index_coordinates_agree(L):
    from tylo.layouts.inttuple import flatten

    shapes = flatten(L.shape)
    strides = flatten(L.stride)
    for i in range(L.size):
        # brute force: mixed radix over leaves, first leaf fastest
        rem, off = i, 0
        for s, d in zip(shapes, strides):
            off += (rem % s) * d
            rem //= s
        assert L(i) == off
