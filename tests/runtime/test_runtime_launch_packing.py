"""The launch buffer, checked on a CPU machine through ArgPacker (the same
buffer, void* array and pack_into statements Launcher.launch uses)."""

import ctypes

import pytest

from tylo.runtime.launch import (
    CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
    ArgPacker,
    CUlaunchAttribute,
    CUlaunchConfig,
    _pack_cost_ns,
)

PTR, I32, F32 = ctypes.c_uint64, ctypes.c_int32, ctypes.c_float


def test_cuda_h_struct_layout():
    assert ctypes.sizeof(CUlaunchConfig) == 56
    assert ctypes.sizeof(CUlaunchAttribute) == 72
    assert CUlaunchConfig.sharedMemBytes.offset == 24
    assert CUlaunchConfig.hStream.offset == 32
    assert CUlaunchConfig.attrs.offset == 40
    assert CUlaunchConfig.numAttrs.offset == 48
    assert CUlaunchAttribute.value.offset == 8


def test_scalar_params_land_in_their_slots():
    p = ArgPacker([PTR, PTR, I32, F32])
    vals = (0x7F00_0000_1000, 0x7F00_0000_2000, -5, 1.5)
    p.pack(vals, grid=(3, 2, 1), block=(128, 1, 1), stream=0x5000)
    assert [p.read_param(i) for i in range(4)] == list(vals)
    ptrs = p.param_pointers()
    assert len(set(ptrs)) == 4
    for ptr, t in zip(ptrs, [PTR, PTR, I32, F32]):
        assert ptr % ctypes.alignment(t) == 0
    cfg = p.config()
    assert (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ) == (3, 2, 1)
    assert (cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ) == (128, 1, 1)
    assert cfg.sharedMemBytes == 0 and cfg.hStream == 0x5000
    assert cfg.numAttrs == 0 and not cfg.attrs


def test_repacking_overwrites_in_place():
    p = ArgPacker([PTR, I32])
    before = p.param_pointers()
    p.pack((1, 2))
    p.pack((3, 4))
    assert p.param_pointers() == before
    assert (p.read_param(0), p.read_param(1)) == (3, 4)


def test_every_scalar_kind():
    types = [ctypes.c_int8, ctypes.c_uint8, ctypes.c_int16, ctypes.c_uint16, ctypes.c_int32,
             ctypes.c_uint32, ctypes.c_int64, ctypes.c_uint64, ctypes.c_float, ctypes.c_double,
             ctypes.c_bool, ctypes.c_void_p]
    vals = (-128, 255, -32768, 0x3C00, -(2**31), 2**32 - 1, -(2**63), 2**64 - 1, 0.25,
            -1e300, True, 0xDEAD_BEEF_0000)
    p = ArgPacker(types)
    p.pack(vals)
    got = [p.read_param(i) for i in range(len(types))]
    assert got == list(vals)


def test_odd_sizes_are_aligned():
    p = ArgPacker([ctypes.c_int8, ctypes.c_double, ctypes.c_int16, ctypes.c_int64])
    assert p.offsets == [0, 8, 16, 24]
    p.pack((1, 2.0, 3, 4))
    assert [p.read_param(i) for i in range(4)] == [1, 2.0, 3, 4]


def test_f16_bits_as_uint16():
    import numpy as np
    bits = int(np.float16(1.5).view(np.uint16))
    p = ArgPacker([ctypes.c_uint16])
    p.pack((bits,))
    assert np.uint16(p.read_param(0)).view(np.float16) == np.float16(1.5)


def test_byte_blob_parameter():
    blob_t = ctypes.c_uint8 * 128
    p = ArgPacker([PTR, blob_t, I32])
    desc = bytes(range(128))
    p.pack((0x1000, desc, 77))
    assert p.read_param(1) == desc
    assert p.read_param(0) == 0x1000 and p.read_param(2) == 77
    assert p.param_pointers()[1] % 64 == 0           # grid-constant blobs are 64-aligned
    with pytest.raises(TypeError, match="128 bytes"):
        p.pack((0x1000, desc[:100], 77))
    with pytest.raises(TypeError, match="128 bytes"):
        p.pack((0x1000, "x" * 128, 77))


def test_cluster_attribute():
    p = ArgPacker([PTR])
    p.pack((0x10,), grid=(8, 1, 1), block=(64, 1, 1), stream=3, shared_bytes=1024,
           cluster=(2, 1, 1))
    cfg = p.config()
    assert cfg.numAttrs == 1
    assert ctypes.addressof(cfg.attrs.contents) == ctypes.addressof(p.attribute())
    a = cfg.attrs[0]
    assert a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION == 4
    assert (a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z) == (2, 1, 1)
    assert cfg.sharedMemBytes == 1024 and cfg.hStream == 3
    # a plain pack afterwards turns the attribute off again
    p.pack((0x10,))
    assert p.config().numAttrs == 0


def test_wrong_count_is_type_error():
    p = ArgPacker([PTR, I32], names=["out", "n"])
    with pytest.raises(TypeError, match="takes 2 parameters, got 3"):
        p.pack((1, 2, 3))
    with pytest.raises(TypeError, match="takes 2 parameters, got 1"):
        p.pack((1,))


def test_wrong_type_and_range_name_the_parameter():
    p = ArgPacker([PTR, I32, F32], names=["out", "n", "alpha"])
    with pytest.raises(TypeError, match=r"parameter n: expected a i32 value, got float"):
        p.pack((1, 2.5, 1.0))
    with pytest.raises(ValueError, match=r"parameter n: .*does not fit in i32"):
        p.pack((1, 2**40, 1.0))                   # a ctypes slot would wrap silently
    with pytest.raises(TypeError, match=r"parameter alpha"):
        p.pack((1, 2, "x"))
    with pytest.raises(ValueError, match=r"parameter out"):
        p.pack((-1, 2, 1.0))


def test_bad_grid_is_value_error():
    p = ArgPacker([I32])
    with pytest.raises(ValueError, match="grid x"):
        p.pack((1,), grid=(-1, 1, 1))
    with pytest.raises(ValueError, match="stream"):
        p.pack((1,), stream=-3)


def test_unsupported_param_types():
    with pytest.raises(TypeError):
        ArgPacker([ctypes.c_uint16 * 4])
    with pytest.raises(TypeError):
        ArgPacker([int])


def test_zero_params():
    p = ArgPacker([])
    p.pack(())
    assert p.config().gridDimX == 1


def test_pack_cost_measurement_runs():
    r = _pack_cost_ns(n_calls=2000, repeat=1)
    assert r["struct_pack_into_ns"] > 0 and r["ctypes_slots_ns"] > 0
