"""Fragments on the GPU against float64 references: reductions, broadcasts, pack/unpack, softmax."""
import fragment_kernels as fk
import ml_dtypes
import numpy as np
import pytest

import tylo

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()


def dev(a):
    return tylo.to_device(np.ascontiguousarray(a))


@pytest.mark.parametrize("name,own,axis", [("rows", fk.LOCAL, 1), ("cols", fk.COLUMNS, 0),
                                           ("striped", fk.STRIPED, 1), ("rows-across-lanes", fk.LOCAL, 0)])
def test_reductions_and_broadcast(name, own, axis):
    R, C = own.shape
    blocks = 64
    x = rng.standard_normal((R * blocks, C)).astype(np.float32)
    rs = (R * blocks, 1) if axis == 1 else (blocks, C)
    outs = [tylo.to_device(np.full(rs, np.nan, np.float32)) for _ in range(3)]
    dx = dev(x)
    fk.reduce_rows[blocks, own.threads](*outs, dx, OWN=own, AXIS=axis)
    tiles = x.astype(np.float64).reshape(blocks, R, C)
    red = lambda f: f(tiles, axis=1 + axis, keepdims=True)
    ref_sum, ref_max, ref_min = red(np.sum), red(np.max), red(np.min)
    np.testing.assert_allclose(outs[0].to_host().reshape(ref_sum.shape), ref_sum, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(outs[1].to_host().reshape(ref_max.shape), ref_max)
    np.testing.assert_array_equal(outs[2].to_host().reshape(ref_min.shape), ref_min)
    np.testing.assert_array_equal(dx.to_host().reshape(tiles.shape), (tiles - ref_max).astype(np.float32))


@pytest.mark.parametrize("dt,np_dt", [(tylo.bf16, ml_dtypes.bfloat16), (tylo.f16, np.float16)])
def test_pack_unpack_exhaustive(dt, np_dt):
    payloads = np.arange(65536, dtype=np.uint16).view(np_dt)
    x = payloads.astype(np.float32)  # exact
    x = np.concatenate([x, rng.standard_normal(65536).astype(np.float32) * 100])  # plus values that round
    words = tylo.to_device(np.full(x.size, 0xFFFF, np.uint16).view(np_dt))
    back = tylo.to_device(np.full(x.size, np.nan, np.float32))
    fk.pack_roundtrip[x.size // 256, 32](words, back, dev(x), DT=dt)
    want = x.astype(np_dt)
    got = words.to_host()
    nan = np.isnan(want.astype(np.float32))
    assert np.isnan(got[nan].astype(np.float32)).all()
    np.testing.assert_array_equal(got[~nan].view(np.uint16), want[~nan].view(np.uint16))
    np.testing.assert_array_equal(back.to_host()[~nan], want[~nan].astype(np.float32))


def test_loop_carried_accumulator():
    n = 37
    x = rng.standard_normal((32 * n, 8)).astype(np.float32)
    out = tylo.to_device(np.full((32, 8), np.nan, np.float32))
    fk.accumulate[1, 32](out, dev(x), n)
    ref = 0.5 * x.astype(np.float64).reshape(n, 32, 8).sum(axis=0)
    np.testing.assert_allclose(out.to_host(), ref, rtol=1e-5, atol=1e-5)


def test_softmax_examples():
    import softmax
    softmax.run()
