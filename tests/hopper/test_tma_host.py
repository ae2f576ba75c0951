"""TMA plans, their shared-memory layout and descriptor encoding rules (host only; encoding on a GPU)."""
import itertools

import numpy as np
import pytest

from tylo.ir import types as T
from tylo.ir.types import bf16, f32
from tylo.lang.tma import (
    TMALoad,
    TMATile,
    shared_layout,
    size,
    swizzle_bytes,
    tma_coordinates,
    tma_geometry,
    transfer_bytes,
)
from tylo.layouts import ComposedLayout, Swizzle, permutedims, swizzled_structure
from tylo.runtime import tma as rt
from tylo.runtime.tma_binding import TMABinding, prepare_tma

DTYPES = (T.u8, T.f8e4m3, T.bf16, T.f16, T.f32, T.i32)


def all_plans():
    for dt, sw, axis, outer in itertools.product(DTYPES, (128, 64, 32), (0, 1), (8, 16, 64, 256)):
        row = sw // dt.itemsize
        shape = (outer, row) if axis == 1 else (row, outer)
        yield TMATile(dt, shape, axis=axis, swizzle=sw)


# -- the seed ------------------------------------------------------------------------------

def test_seed_values():
    a = TMATile(bf16, (128, 64), axis=1)
    assert transfer_bytes(a) == 16384
    assert shared_layout(a)((1, 0)) == 72
    b = TMATile(f32, (16, 64), axis=0, swizzle=64)
    assert (swizzle_bytes(b), size(b)) == (64, (16, 64))
    assert TMALoad(bf16, (128, 64)) == a


def test_seed_formula_for_16_bit_128_byte_rows():
    L = shared_layout(TMATile(bf16, (128, 64), axis=1))
    assert isinstance(L, ComposedLayout) and L.swizzle == Swizzle(3, 3, 3)
    assert all(L((r, k)) == 64 * r + (k ^ (8 * (r % 8))) for r in range(128) for k in range(64))


@pytest.mark.parametrize("bad, rule", [
    (dict(dtype=T.f64, shape=(8, 16)), "1, 2 or 4 bytes"),
    (dict(dtype=T.bool_, shape=(8, 128)), "1, 2 or 4 bytes"),
    (dict(dtype=bf16, shape=(128, 32)), "exactly one swizzle row"),
    (dict(dtype=bf16, shape=(128, 32), swizzle=64, axis=0), "exactly one swizzle row"),
    (dict(dtype=bf16, shape=(12, 64)), "multiple of 8"),
    (dict(dtype=bf16, shape=(264, 64)), "at most 256"),
    (dict(dtype=bf16, shape=(128, 64), swizzle=16), "128, 64 or 32"),
    (dict(dtype=bf16, shape=(128, 64), axis=2), "must be 0 or 1"),
    (dict(dtype=bf16, shape=(128, 64, 1)), "2-tuple"),
])
def test_plan_rules(bad, rule):
    with pytest.raises(ValueError, match=rule):
        TMATile(**bad)


# -- the byte-level swizzle rule --------------------------------------------------------

def hardware_byte_offset(r: int, c: int, e: int, S: int) -> int:
    """Where TMA puts byte ``c*e`` of row ``r`` when rows are ``S`` bytes (tile aligned to the pattern).

    PTX ISA / CUDA guide: the 16-byte chunk index inside a row is XORed with the
    index of the 128-byte line holding the row, modulo the chunks per row; the
    pattern repeats every 8 x 128 bytes (1024), i.e. every 1024/512/256 bytes
    for 128/64/32-byte rows.
    """
    b = c * e
    chunk, within = divmod(b, 16)
    line = (r * S) // 128
    return r * S + 16 * (chunk ^ (line % (S // 16))) + within


@pytest.mark.parametrize("plan", list(all_plans()), ids=repr)
def test_shared_layout_is_the_hardware_swizzle(plan):
    L = shared_layout(plan)
    e, S = plan.elem_bytes, plan.swizzle
    outer_axis = 1 - plan.axis
    coords = np.indices(plan.shape).reshape(2, -1).T
    got = L((coords[:, 0], coords[:, 1]))
    want = [hardware_byte_offset(int(cd[outer_axis]), int(cd[plan.axis]), e, S) for cd in coords]
    assert (np.asarray(got) * e).tolist() == want
    assert sorted(got.tolist()) == list(range(int(np.prod(plan.shape))))  # a bijection onto the tile
    assert np.asarray(got).max() * e < transfer_bytes(plan)


@pytest.mark.parametrize("plan", list(all_plans()), ids=repr)
def test_swizzled_structure_recognises_every_plan(plan):
    L = shared_layout(plan)
    k_major = L if plan.axis == 1 else permutedims(L)
    s = swizzled_structure(k_major, plan.elem_bytes)
    assert s is not None and s.major == "K" and s.swizzle_bytes == plan.swizzle
    assert s.row_elements == plan.inner
    assert s.stride_byte_offset == (8 * plan.swizzle if plan.outer > 8 else None)
    if plan.axis == 0:  # the untransposed view is the MN-major encoding
        m = swizzled_structure(L, plan.elem_bytes)
        assert m is not None and m.major == "MN"


# -- host binding geometry -----------------------------------------------------------------

def test_geometry_2d_and_batch():
    a = TMATile(bf16, (128, 64), axis=1)
    bounds, dims, strides, box = tma_geometry(a, (512, 256), (256, 1))
    assert bounds == (512, 256) and dims == (256, 512) and strides == (512,) and box == (64, 128)
    b = TMATile(bf16, (64, 128), axis=0)       # B(K, N) with K inner: the array is (N, K) row-major
    bounds, dims, strides, box = tma_geometry(b, (8, 384, 1024), (384 * 1024, 1024, 1), bounds=(1000, 300, 8))
    assert bounds == (1000, 300, 8) and dims == (1000, 300, 8)
    assert strides == (2048, 384 * 1024 * 2) and box == (64, 128, 1)
    assert tma_coordinates(b, ("k", "n", "h")) == ("k", "n", "h")
    assert tma_coordinates(a, ("m", "k")) == ("k", "m")


def test_geometry_extent_one_takes_any_stride():
    # a (1, K) view of a (K, 1) column (row stride 1 element, what a column-major A with M = 1 is): TMA never
    # steps along the single row, so its pitch becomes the smallest legal one instead of an illegal 2 bytes
    a = TMATile(bf16, (64, 64), axis=1)
    _, dims, strides, _ = tma_geometry(a, (1, 4100), (1, 1))
    assert dims == (4100, 1) and strides == (8208,) and all(s % 16 == 0 for s in strides)
    _, _, strides, _ = tma_geometry(a, (1, 3, 40), (7, 40, 1))    # a batch of one: its stride is free too
    assert strides == (80, 240)
    _, _, strides, _ = tma_geometry(a, (2, 1, 40), (40, 1, 1))
    assert strides == (80, 80)


@pytest.mark.parametrize("shape, strides, bounds, rule", [
    ((512,), (1,), None, "2-D, or 3-D"),
    ((512, 256), (1, 512), None, "contiguous"),
    ((512, 256), (256, 1), (600, 256), "at most the array's extent"),
    ((512, 256), (256, 1), (512,), "must have 2 entries"),
    ((512, 256), (256, 1), (0, 256), "positive"),
])
def test_geometry_rules(shape, strides, bounds, rule):
    with pytest.raises(ValueError, match=rule):
        tma_geometry(TMATile(bf16, (128, 64), axis=1), shape, strides, bounds)


class FakeDeviceArray:
    """A __cuda_array_interface__ object: describe_array reads it without a GPU."""

    def __init__(self, ptr, shape, typestr="<f4"):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr,
                                         "strides": None, "version": 3}


def test_prepare_tma_checks_before_the_driver():
    with pytest.raises(ValueError, match="the array holds f32, the plan bf16"):
        prepare_tma(TMATile(bf16, (128, 64), axis=1), FakeDeviceArray(1 << 20, (256, 256)))
    with pytest.raises(ValueError, match="at most the array's extent"):
        prepare_tma(TMATile(f32, (128, 32), axis=1), FakeDeviceArray(1 << 20, (256, 256)), bounds=(300, 256))
    with pytest.raises(ValueError, match="16-byte aligned"):
        prepare_tma(TMATile(f32, (128, 32), axis=1), FakeDeviceArray((1 << 20) + 4, (256, 256)))
    with pytest.raises(ValueError, match="multiple of 16"):
        prepare_tma(TMATile(f32, (128, 32), axis=1), FakeDeviceArray(1 << 20, (256, 254)))


# -- encode_tiled validation ---------------------------------------------------------------

GOOD = dict(ptr=1 << 20, dtype_name="bf16", global_dims=(256, 512), global_strides_bytes=(512,),
            box_dims=(64, 128), swizzle_bytes=128)


@pytest.mark.parametrize("change, rule", [
    (dict(ptr=(1 << 20) + 8), "16-byte aligned"),
    (dict(ptr=0), "non-null"),
    (dict(global_strides_bytes=(520,)), "multiple of 16"),
    (dict(box_dims=(64, 257)), "1..256"),
    (dict(box_dims=(128, 128)), "must not exceed the swizzle row"),
    (dict(box_dims=(4, 128), swizzle_bytes=0), "multiple of 16 bytes"),
    (dict(global_dims=(256,), global_strides_bytes=(), box_dims=(64,)), "rank must be 2..5"),
    (dict(global_dims=(2,) * 6, global_strides_bytes=(16,) * 5, box_dims=(2,) * 6), "rank must be 2..5"),
    (dict(global_strides_bytes=()), "needs 1 global strides"),
    (dict(box_dims=(64,)), "box dims for rank 2"),
    (dict(dtype_name="c64"), "no tensor-map data type"),
    (dict(swizzle_bytes=16), "0, 32, 64 or 128"),
    (dict(global_dims=(0, 512)), "1..2\\^32"),
])
def test_encode_validation_names_the_rule(change, rule):
    with pytest.raises(ValueError, match=rule):
        rt.encode_tiled(**{**GOOD, **change})


def test_enum_values_match_cuda_bindings():
    from cuda.bindings import driver as d

    DT = d.CUtensorMapDataType
    names = {"u8": "UINT8", "u16": "UINT16", "u32": "UINT32", "i32": "INT32", "u64": "UINT64", "i64": "INT64",
             "f16": "FLOAT16", "f32": "FLOAT32", "f64": "FLOAT64", "bf16": "BFLOAT16"}
    for ours, theirs in names.items():
        assert rt.DATA_TYPES[ours] == int(getattr(DT, f"CU_TENSOR_MAP_DATA_TYPE_{theirs}"))
    SW = d.CUtensorMapSwizzle
    assert rt.SWIZZLE_MODES == {0: int(SW.CU_TENSOR_MAP_SWIZZLE_NONE), 32: int(SW.CU_TENSOR_MAP_SWIZZLE_32B),
                                64: int(SW.CU_TENSOR_MAP_SWIZZLE_64B), 128: int(SW.CU_TENSOR_MAP_SWIZZLE_128B)}
    assert rt.INTERLEAVE_NONE == int(d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE)
    assert rt.L2_PROMOTION_128B == int(d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B)
    assert rt.OOB_FILL_NONE == int(d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)


# -- on a GPU -------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("plan", [TMATile(bf16, (128, 64), axis=1), TMATile(f32, (16, 64), axis=0, swizzle=64),
                                  TMATile(T.u8, (256, 32), axis=1, swizzle=32)], ids=repr)
def test_prepare_tma_encodes_on_the_gpu(plan):
    import tylo.runtime as rtm

    rows = 3 * plan.outer
    x = rtm.empty((4, rows, 2 * plan.inner), plan.dtype.name)
    b3 = prepare_tma(plan, x)
    assert isinstance(b3, TMABinding) and len(b3.descriptor) == 128 and b3.rank == 3
    assert b3.__tylo_param__() == ("tma", plan, 3, b3.descriptor)
    y = rtm.empty((rows, 2 * plan.inner), plan.dtype.name)
    b2 = prepare_tma(plan, y, bounds=tuple(e - 1 if i == 1 - plan.axis else e
                                           for i, e in enumerate(tma_geometry(plan, (rows, 2 * plan.inner),
                                                                              (2 * plan.inner, 1))[0])))
    assert b2.rank == 2 and b2.descriptor != b3.descriptor and b2.array is y
