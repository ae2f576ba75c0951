import numpy as np
import pytest

from tylo.layouts import (
    BroadcastPlan,
    ComposedLayout,
    Layout,
    Ownership,
    ReductionPlan,
    Swizzle,
    broadcast_plan,
    is_complete,
    is_injective,
    ownership_table,
    permutedims,
    reduction_plan,
    register_window,
    relayout_plan,
    replication,
    same_distribution,
    vector_access_plan,
    window,
)


def wgmma_ref(n):
    """The m64nNk16 D fragment, straight from the PTX ISA figure."""
    tab = np.zeros((128, n // 2, 2), dtype=int)
    for t in range(128):
        w, l = divmod(t, 32)
        for j in range(n // 8):
            for h in range(2):
                for b in range(2):
                    tab[t, 4 * j + 2 * h + b] = (16 * w + l // 4 + 8 * h, 8 * j + 2 * (l % 4) + b)
    return tab


@pytest.mark.parametrize("n", [8, 64, 256])
def test_wgmma_accumulator_matches_ptx(n):
    o = Ownership.wgmma_accumulator(n)
    assert np.array_equal(ownership_table(o), wgmma_ref(n))
    assert is_complete(o) and is_injective(o) and replication(o) == 1


def test_families():
    lo = Ownership.local((4, 8), axis=1)
    tab = ownership_table(lo)
    assert tab.shape == (4, 8, 2) and all((tab[t, v] == (t, v)).all() for t in range(4) for v in range(8))
    lo0 = Ownership.local((4, 8), axis=0)
    assert ownership_table(lo0)[5, 3].tolist() == [3, 5]
    st = Ownership.striped((2, 64), axis=1)
    assert st.threads == 64 and st.values == 2
    assert ownership_table(st)[33, 1].tolist() == [1, 33]
    st0 = Ownership.striped((64, 2), axis=0)
    assert ownership_table(st0)[33, 1].tolist() == [33, 1]
    for o in (lo, lo0, st, st0):
        assert is_complete(o) and is_injective(o)
    with pytest.raises(ValueError, match="multiple of 32"):
        Ownership.striped((4, 48), axis=1)
    with pytest.raises(ValueError, match="outside"):
        Ownership((4, 4), Layout((4, 8), (1, 4)))
    with pytest.raises(ValueError, match="two modes"):
        Ownership((4, 4), Layout(16))


def test_replication_and_distribution():
    rep = Ownership((4, 8), Layout(((4, 2), 8), ((1, 0), 4)))
    assert replication(rep) == 2 and not is_injective(rep) and is_complete(rep)
    partial = Ownership((4, 8), Layout((4, 4), (1, 4)))
    assert not is_complete(partial) and replication(partial) is None
    a = Ownership.local((4, 8), axis=1)
    b = Ownership((4, 8), Layout((4, (2, 4)), (1, (16, 4))))
    assert not same_distribution(a, b) and same_distribution(a, b, slot_order=False)
    assert same_distribution(a, Ownership((4, 8), Layout((4, 8), (1, 4))))
    assert a == Ownership((4, 8), Layout((4, 8), (1, 4)))


def test_permutedims_ownership():
    o = Ownership.wgmma_accumulator(64)
    p = permutedims(o)
    assert p.shape == (64, 64)
    assert np.array_equal(ownership_table(p), ownership_table(o)[:, :, ::-1])


def test_reduction_plan_wgmma():
    o = Ownership.wgmma_accumulator(256)
    p = reduction_plan(o, axis=1)
    assert isinstance(p, ReductionPlan)
    assert p.shuffle_masks == (1, 2)
    assert len(p.groups) == 2 and all(len(g) == 64 for g in p.groups)
    assert p.groups[0][:4] == (0, 1, 4, 5) and p.groups[1][:4] == (2, 3, 6, 7)
    assert len(p.tree) == 6 and sum(len(r) for r in p.tree) == 126
    r = p.result
    assert r.shape == (64, 1) and replication(r) == 4 and is_complete(r)
    rt = ownership_table(r)
    for t in range(128):
        w, l = divmod(t, 32)
        assert rt[t].tolist() == [[16 * w + l // 4, 0], [16 * w + l // 4 + 8, 0]]
    # plans are comparable data
    assert p == reduction_plan(Ownership.wgmma_accumulator(256), axis=1)
    assert "xor 1, xor 2" in str(p)
    # the transposed fragment reduces along axis 0 the same way
    q = reduction_plan(permutedims(o), axis=0)
    assert q.shuffle_masks == (1, 2) and q.groups == p.groups


def test_reduction_plan_tree_is_a_pairwise_reduction():
    o = Ownership.local((4, 6), axis=1)
    p = reduction_plan(o, 1)
    assert p.groups == ((0, 1, 2, 3, 4, 5),) and p.shuffle_masks == ()
    vals = {v: {v} for v in range(6)}
    for rnd in p.tree:
        for d, s in rnd:
            vals[d] |= vals.pop(s)
    assert vals == {0: set(range(6))}
    # along the thread axis of a local fragment the values span lanes 0..3
    q = reduction_plan(o, 0)
    assert q.shuffle_masks == (1, 2) and q.groups == tuple((v,) for v in range(6))
    assert q.result.shape == (1, 6) and replication(q.result) == 4


def test_reduction_errors():
    o = Ownership.wgmma_accumulator(64)
    with pytest.raises(ValueError, match=r"axis 0 of wgmma_accumulator\(64x64\) spans warps"):
        reduction_plan(o, 0)
    s = Ownership.striped((2, 64), axis=1)
    assert reduction_plan(s, 1).shuffle_masks == (1, 2, 4, 8, 16)
    with pytest.raises(ValueError, match="spans warps"):
        reduction_plan(s, 0)
    partial = Ownership((4, 8), Layout((4, 4), (1, 4)))
    with pytest.raises(ValueError, match="every coordinate|all values"):
        reduction_plan(partial, 1)
    rep = Ownership((4, 8), Layout(((2, 2), 8), ((1, 0), 4)), "rep")
    rep2 = Ownership((2, 8), Layout(((2, 2), 8), ((1, 0), 2)), "rep2")
    assert replication(rep2) == 2
    p = reduction_plan(rep2, 0)  # lane bit 1 is a replication bit, bit 0 reduces
    assert p.shuffle_masks == (1,)
    with pytest.raises(ValueError, match="axis"):
        reduction_plan(rep, 2)


def test_broadcast_plan():
    o = Ownership.wgmma_accumulator(16)
    b = broadcast_plan(o, axis=1)
    assert isinstance(b, BroadcastPlan) and b.sources == (0, 0, 1, 1) * 2
    r = reduction_plan(o, 1).result
    assert broadcast_plan(o, r, axis=1) == b
    with pytest.raises(ValueError, match="shape"):
        broadcast_plan(o, o, axis=1)
    # a reduced fragment that lives in other threads cannot be broadcast without moves
    other = Ownership((64, 1), Layout(((4, 8, 4), 2), ((0, 2, 16), 1)))
    with pytest.raises(ValueError, match="move between threads|different slot"):
        broadcast_plan(o, other, axis=1)


def test_register_window():
    o = Ownership.wgmma_accumulator(64)
    w = register_window(o, (0, 16), (64, 16))
    assert w.slots == tuple(range(8, 16))
    tab = ownership_table(w.result)
    assert np.array_equal(tab, ownership_table(o)[:, 8:16] - np.array([0, 16]))
    assert window(o, (0, 16), (64, 16)) == w.result
    with pytest.raises(ValueError, match="same registers"):
        register_window(o, (0, 0), (32, 64))
    with pytest.raises(ValueError, match="outside"):
        register_window(o, (0, 60), (64, 8))
    lo = Ownership.local((4, 8), axis=1)
    assert register_window(lo, (0, 2), (4, 4)).slots == (2, 3, 4, 5)


def test_relayout_plan():
    a = Ownership.local((4, 8), axis=1)
    b = Ownership((4, 8), Layout((4, (2, 4)), (1, (16, 4))))
    p = relayout_plan(a, b)
    assert p.sources == (0, 4, 1, 5, 2, 6, 3, 7)
    ta, tb = ownership_table(a), ownership_table(b)
    assert all((ta[t, list(p.sources)] == tb[t]).all() for t in range(4))
    with pytest.raises(ValueError, match="move between threads"):
        relayout_plan(a, Ownership((4, 8), Layout(((2, 2), 8), ((2, 1), 4))))


def test_vector_access_plans():
    lo = Ownership.local((4, 8), axis=1)
    p = vector_access_plan(lo, Layout((4, 8), (8, 1)), 4)
    assert p.widths == (16, 16) and p.accesses[0].slots == (0, 1, 2, 3)
    # 8-byte base alignment caps the width
    assert vector_access_plan(lo, Layout((4, 8), (8, 1)), 4, align_bytes=8).widths == (8,) * 4
    # column-major storage: nothing contiguous within a thread
    assert vector_access_plan(lo, Layout((4, 8), (1, 4)), 4).widths == (4,) * 8
    # row pitch 6 floats: threads start at 24-byte offsets, so 16 bytes is not
    # aligned in every thread; 8 bytes is
    assert vector_access_plan(lo, Layout((4, 8), (10, 1)), 4).widths == (8,) * 4
    # bf16: 8 elements per 16 bytes
    assert vector_access_plan(lo, Layout((4, 8), (8, 1)), 2).widths == (16,)
    # WGMMA accumulator pairs of columns
    w = Ownership.wgmma_accumulator(64)
    assert set(vector_access_plan(w, Layout((64, 64), (64, 1)), 4).widths) == {8}
    # through a swizzled storage the runs stop at 16-byte chunks
    sw = ComposedLayout(Swizzle(3, 3, 3), Layout((4, 64), (64, 1)))
    wide = Ownership.local((4, 64), axis=1)
    assert vector_access_plan(wide, sw, 2).widths == (16,) * 8
    with pytest.raises(ValueError, match="extents"):
        vector_access_plan(lo, Layout((8, 4)), 4)
    assert "16B[0,1,2,3]" in str(p)
