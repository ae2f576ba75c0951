"""CuTe's published worked examples (by value) and brute-force properties."""

import pytest
from _layout_helpers import injective_layouts, layouts, table
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tylo.layouts import (
    ComposedLayout,
    Layout,
    Swizzle,
    blocked_product,
    coalesce,
    complement,
    compose,
    flat_divide,
    left_inverse,
    logical_divide,
    logical_product,
    make_layout,
    raked_product,
    right_inverse,
    tile,
    tiled_divide,
    zipped_divide,
)

L = Layout
PROPS = settings(max_examples=120, deadline=None)

# ---- worked examples from the CuTe layout-algebra documentation --------------


@pytest.mark.parametrize(
    "a,b,expected",
    [
        (L((6, 2), (8, 2)), L((4, 3), (3, 1)), "((2,2),3):((24,2),8)"),
        (L(20, 2), L((5, 4), (4, 1)), "(5,4):(8,2)"),
        (L((10, 2), (16, 4)), L((5, 4), (1, 5)), "(5,(2,2)):(16,(80,4))"),
    ],
)
def test_compose_examples(a, b, expected):
    r = compose(a, b)
    assert repr(r) == expected
    assert table(r) == [a(b(i)) for i in range(b.size)]


def test_compose_by_mode_tiler():
    a = L((12, (4, 8)), (59, (13, 1)))
    r = compose(a, (L(3, 4), L(8, 2)))
    assert repr(r) == "(3,(2,4)):(236,(26,1))"


@pytest.mark.parametrize(
    "a,m,expected",
    [
        (L(4, 1), 24, "6:4"),
        (L(6, 4), 24, "4:1"),
        (L((4, 6), (1, 4)), 24, "1:0"),
        (L(4, 2), 24, "(2,3):(1,8)"),
        (L((2, 4), (1, 6)), 24, "3:2"),
        (L((2, 2), (1, 6)), 24, "(3,2):(2,12)"),
    ],
)
def test_complement_examples(a, m, expected):
    assert repr(complement(a, m)) == expected


def test_coalesce_examples():
    a = L((2, (1, 6)), (1, (6, 2)))
    assert repr(coalesce(a)) == "12:1"
    assert repr(coalesce(a, (1, 1))) == "(2,6):(1,2)"


def test_divide_examples():
    assert repr(logical_divide(L((4, 2, 3), (2, 1, 8)), L(4, 2))) == "((2,2),(2,3)):((4,1),(2,8))"
    a = L((9, (4, 8)), (59, (13, 1)))
    t = (L(3, 3), L((2, 4), (1, 8)))
    assert repr(logical_divide(a, t)) == "((3,3),((2,4),(2,2))):((177,59),((13,2),(26,1)))"
    assert repr(zipped_divide(a, t)) == "((3,(2,4)),(3,(2,2))):((177,(13,2)),(59,(26,1)))"
    assert repr(tiled_divide(a, t)) == "((3,(2,4)),3,(2,2)):((177,(13,2)),59,(26,1))"
    assert repr(flat_divide(a, t)) == "(3,(2,4),3,(2,2)):(177,(13,2),59,(26,1))"


def test_product_examples():
    a = L((2, 2), (4, 1))
    assert repr(logical_product(a, L(6, 1))) == "((2,2),(2,3)):((4,1),(2,8))"
    assert repr(logical_product(a, L(6, 2))) == "((2,2),6):((4,1),8)"
    assert repr(logical_product(a, L((4, 2), (2, 1)))) == "((2,2),(4,2)):((4,1),(8,2))"
    assert repr(logical_product(a, L((4, 2), (1, 4)))) == "((2,2),((2,2),2)):((4,1),((2,8),16))"
    b = L((2, 5), (5, 1))
    c = L((3, 4), (1, 3))
    assert repr(blocked_product(b, c)) == "((2,3),(5,4)):((5,10),(1,30))"
    assert repr(raked_product(b, c)) == "((3,2),(4,5)):((10,5),(30,1))"


def test_inverse_examples():
    a = L((4, 8), (8, 1))
    assert repr(right_inverse(a)) == "(8,4):(4,1)"
    assert repr(left_inverse(a)) == "(8,4):(4,1)"
    assert repr(right_inverse(L((2, 4), (1, 4)))) == "2:1"


def test_tile():
    r = tile(L((8, 6)), (4, 3))
    assert repr(r) == "((4,2),(3,2)):((1,4),(8,24))"
    # coordinate ((i, ti), (j, tj)) is element (ti*4 + i, tj*3 + j)
    for ti in range(2):
        for i in range(4):
            for tj in range(2):
                for j in range(3):
                    assert r(((i, ti), (j, tj))) == L((8, 6))((ti * 4 + i, tj * 3 + j))


@pytest.mark.parametrize(
    "call,rule",
    [
        (lambda: tile(L((8, 6)), (3, 3)), "does not divide"),
        (lambda: tile(L((8, 6)), (4,)), "one extent per mode"),
        (lambda: logical_divide(L(24, 1), L(5, 1)), "does not divide"),
        (lambda: compose(L((6, 2), (1, 10)), L(3, 4)), "stride divisibility"),
        (lambda: compose(L((4, 3), (1, 100)), L(6, 1)), "shape divisibility"),
        (lambda: complement(L((2, 2), (1, 1))), "overlap"),
        (lambda: compose(L(4, 1), Swizzle(1, 0, 1)), "not representable"),
        (lambda: compose(Swizzle(1, 0, 1), ComposedLayout(Swizzle(1, 0, 2), L(8))), "not representable"),
        (lambda: compose(L((4, 3), (1, 4)), L(2, -1)), "negative"),
        (lambda: complement(L(4, 1), 0), "positive"),
    ],
)
def test_algebra_errors(call, rule):
    with pytest.raises(ValueError, match=rule):
        call()


def test_swizzle_composition():
    sw = Swizzle(3, 3, 3)
    base = L((128, 64), (64, 1))
    c = compose(sw, base)
    assert isinstance(c, ComposedLayout) and c((1, 0)) == 72
    # composing a swizzled layout with a layout composes the inner layout
    d = compose(c, L((8, 8), (1, 128)))
    assert [d(i) for i in range(64)] == [c((i % 8) + (i // 8) * 128) for i in range(64)]


# ---- properties ----------------------------------------------------------------


@st.composite
def composable(draw):
    a = draw(layouts(max_size=64))
    b = draw(layouts(max_size=32, max_stride=8))
    return a, b


@PROPS
@given(composable())
def test_compose_is_function_composition(ab):
    a, b = ab
    assume(max(table(b)) < a.size)  # inside a's domain (past it, a extends along its last mode)
    try:
        r = compose(a, b)
    except ValueError as e:
        assert "not representable" in str(e) or "negative" in str(e)
        assume(False)
        return
    assert r.size == b.size
    assert table(r) == [a(b(i)) for i in range(b.size)]


@PROPS
@given(injective_layouts(max_size=48), st.integers(1, 4))
def test_complement_disjoint_and_covering(a, k):
    m = a.cosize * k
    c = complement(a, m)
    both = make_layout(a, c)
    image = table(both)
    assert len(set(image)) == len(image), "layout and complement overlap"
    assert set(range(m)) <= set(image), "complement does not cover the codomain"
    assert table(c) == sorted(table(c))  # ordered


@PROPS
@given(layouts(max_size=64))
def test_right_inverse(a):
    r = right_inverse(a)
    for i in range(r.size):
        assert a(r(i)) == i
    if all(x >= 0 for x in table(a)):
        img = set(table(a))
        # the inverse covers the contiguous prefix of the image
        n = 0
        while n in img:
            n += 1
        assert r.size >= 1 and (r.size == n or n == 0 or r.size <= n)


@PROPS
@given(injective_layouts(max_size=64))
def test_left_inverse(a):
    li = left_inverse(a)
    for i in range(a.size):
        assert li(a(i)) == i


@PROPS
@given(injective_layouts(max_size=24), injective_layouts(max_size=8, max_rank=1))
def test_logical_divide_definition(a, b):
    assume(a.size % b.size == 0)
    try:
        d = logical_divide(a, b)
    except ValueError as e:
        assert any(w in str(e) for w in ("not representable", "admissible", "evenly"))
        assume(False)
        return
    ref = make_layout(b, complement(b, a.size))
    assert d.size == ref.size
    assert table(d) == [a(ref(i)) for i in range(ref.size)]


@PROPS
@given(injective_layouts(max_size=24), injective_layouts(max_size=8))
def test_logical_product_definition(a, b):
    try:
        p = logical_product(a, b)
    except ValueError as e:
        assert "not representable" in str(e)
        assume(False)
        return
    c = complement(a, a.size * b.cosize)
    assert table(p[0]) == table(a)
    assert table(p[1]) == [c(b(i)) for i in range(b.size)]
    assert p.size == a.size * b.size


@PROPS
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3))
def test_blocked_and_raked_products(m, n, p, q):
    a = L((m, n), (n, 1))
    b = L((p, q), (1, p))
    bl = blocked_product(a, b)
    rk = raked_product(a, b)
    lp = logical_product(a, b)
    # both are rearrangements of the logical product: the same set of offsets
    assert sorted(table(bl)) == sorted(table(lp)) == sorted(table(rk))
    # blocked: coordinate ((i, bi), (j, bj)) = a(i, j) + block offset
    for i in range(m):
        for j in range(n):
            for bi in range(p):
                for bj in range(q):
                    assert bl(((i, bi), (j, bj))) == lp(((i, j), (bi, bj)))
                    assert rk(((bi, i), (bj, j))) == lp(((i, j), (bi, bj)))


@PROPS
@given(st.sampled_from([(8, 6), (16, 4), (12, 12)]), st.data())
def test_zipped_tiled_flat_divide_agree(shape, data):
    M, N = shape
    a = L((M, N), (1, M)) if data.draw(st.booleans()) else L((M, N), (N, 1))
    tm = data.draw(st.sampled_from([d for d in range(1, M + 1) if M % d == 0]))
    tn = data.draw(st.sampled_from([d for d in range(1, N + 1) if N % d == 0]))
    z = zipped_divide(a, (tm, tn))
    t = tiled_divide(a, (tm, tn))
    f = flat_divide(a, (tm, tn))
    for i in range(tm):
        for j in range(tn):
            for bi in range(M // tm):
                for bj in range(N // tn):
                    v = a((bi * tm + i, bj * tn + j))
                    assert z(((i, j), (bi, bj))) == v
                    assert t(((i, j), bi, bj)) == v
                    assert f((i, j, bi, bj)) == v
