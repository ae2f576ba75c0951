import pytest

from tylo.layouts import (
    ComposedLayout,
    Layout,
    Swizzle,
    SwizzledStructure,
    affine_reason,
    axis_strides,
    contiguity,
    is_affine,
    permutedims,
    swizzled_structure,
    swizzled_structure_reason,
    tmem_band,
    tmem_band_reason,
    window,
)


def _sw(swb, eb):
    T = 16 // eb
    return Swizzle((swb // 16).bit_length() - 1, T.bit_length() - 1, 3)


@pytest.mark.parametrize("eb", [1, 2, 4])
@pytest.mark.parametrize("swb", [32, 64, 128])
def test_k_major_swizzled(eb, swb):
    W = swb // eb
    L = ComposedLayout(_sw(swb, eb), Layout(((8, 8), W), ((W, 8 * W), 1)))
    s = swizzled_structure(L, eb)
    assert s == SwizzledStructure("K", swb, None, 8 * swb, W)
    # a dense row-major TMA tile is the same map
    assert swizzled_structure(ComposedLayout(_sw(swb, eb), Layout((64, W), (W, 1))), eb) == s


@pytest.mark.parametrize("eb", [1, 2, 4])
@pytest.mark.parametrize("swb", [32, 64, 128])
def test_mn_major_swizzled(eb, swb):
    W = swb // eb
    # two atoms along MN: LBO is the distance between them
    L = ComposedLayout(_sw(swb, eb), Layout(((W, 2), (8, 4)), ((1, 32 * W), (W, 8 * W))))
    s = swizzled_structure(L, eb)
    assert s == SwizzledStructure("MN", swb, 32 * W * eb, 8 * W * eb, W)


@pytest.mark.parametrize("eb", [1, 2, 4])
def test_interleaved(eb):
    T = 16 // eb
    K = Layout(((8, 2), (T, 2)), ((T, 16 * T), (1, 8 * T)))
    assert swizzled_structure(K, eb) == SwizzledStructure("K", 0, 128, 256, T)
    M = Layout(((T, 2), (8, 2)), ((1, 8 * T), (T, 16 * T)))
    assert swizzled_structure(M, eb) == SwizzledStructure("MN", 0, 256, 128, T)


def test_seed_tma_tile_and_rejections():
    a = ComposedLayout(Swizzle(3, 3, 3), Layout((128, 64), (64, 1)))
    s = swizzled_structure(a, 2)
    assert (s.major, s.swizzle_bytes, s.stride_byte_offset, s.row_elements) == ("K", 128, 1024, 64)
    assert "K-major 128B" in str(s)
    # wrong element size for this swizzle: no canonical match
    assert swizzled_structure(a, 4) is None
    assert "matches no canonical" in swizzled_structure_reason(a, 4)
    # a plain row-major tile with 128-byte rows is not an interleaved encoding
    assert swizzled_structure(Layout((64, 64), (64, 1)), 2) is None
    assert swizzled_structure_reason(Layout((64, 64, 2)), 2).startswith("the operand must be 2-D")
    assert swizzled_structure_reason(Layout((8, 8), (8, 1)), 3).startswith("element size")
    assert swizzled_structure(a, 2) == swizzled_structure(permutedims(permutedims(a)), 2)
    assert swizzled_structure_reason(a, 2) is None


def test_affine_and_contiguity():
    assert axis_strides(Layout((128, 128), (1, 128))) == (1, 128)
    assert axis_strides(Layout((4, (2, 4)), (2, (1, 8)))) is None
    assert "mode 1" in affine_reason(Layout((4, (2, 4)), (2, (1, 8))))
    sw = ComposedLayout(Swizzle(3, 3, 3), Layout((128, 64), (64, 1)))
    assert not is_affine(sw) and "swizzle" in affine_reason(sw)
    assert is_affine(ComposedLayout(Swizzle(1, 8, 4), Layout((4, 4))))  # swizzle bits unused
    assert contiguity(sw, 1) == 8 and contiguity(sw, 0) == 1
    assert contiguity(Layout((8, 4), (1, 8)), 0) == 8
    assert contiguity(Layout((6, 4), (1, 6)), 0) == 6
    assert contiguity(Layout(((2, 3), 4), ((1, 8), 2)), 0) == 2
    assert axis_strides(window(Layout((128, 128), (1, 128)), (3, 4), (8, 8))) == (1, 128)


def test_tmem_band():
    tile = Layout((128, 128), (1, 128))
    b = tmem_band(window(tile, (64, 32), (32, 64)))
    assert (b.lane_axis, b.lane_base, b.values, b.position_base, b.position_stride) == (0, 64, 64, 32, 1)
    pb = tmem_band(permutedims(window(tile, (64, 32), (32, 64))))
    assert (pb.lane_axis, pb.lane_base, pb.value_axis) == (1, 64, 0)
    assert tmem_band(window(tile, (48, 0), (32, 64))) is None
    assert "lane 48" in tmem_band_reason(window(tile, (48, 0), (32, 64)))
    # lanes along axis 1 with strides (128, 1)
    t2 = Layout((64, 128), (128, 1))
    b2 = tmem_band(window(t2, (0, 32), (64, 32)))
    assert (b2.lane_axis, b2.lane_base, b2.values) == (1, 32, 64)
    from _layout_helpers import Sym

    assert "runtime" in tmem_band_reason(window(tile, (Sym("r"), 0), (32, 64)))
    assert tmem_band(ComposedLayout(Swizzle(2, 0, 3), Layout((32, 4), (1, 128)))) is None
