"""Fragment loads that tylo upgrades to ldmatrix (.trans) give the words scalar loads give."""
import re

import ml_dtypes
import numpy as np
import pytest

import tylo
from tylo import Layout
from tylo.lang.mma import MMAAtom, TiledMMA

pytestmark = pytest.mark.gpu

PLAN = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16, tylo.bf16, tylo.f32), warps=(2, 2), repeats=(2, 4))


@tylo.jit
def both_ways(out_ld, out_scalar, x, OWN: tylo.constexpr, R: tylo.constexpr, C: tylo.constexpr):
    s = tylo.shared_array(tylo.bf16, (R * C,), align=128)
    src = tylo.GlobalTile(x, Layout((R, C), (C, 1)))
    t = tylo.thread_idx.x
    for i in range(t, R * C, 128):
        s[i] = x[i]
    tylo.sync_threads()
    via_ldmatrix = tylo.load(tylo.SharedTile(s.ptr, Layout((R, C), (C, 1))), OWN)   # shared: ldmatrix
    via_scalars = tylo.load(src, OWN)                                               # global: plain loads
    tylo.store(tylo.GlobalTile(out_ld, Layout((128, OWN.values), (OWN.values, 1))),
               tylo.fragment(tylo.bf16, tylo.Ownership.local((128, OWN.values), axis=1), via_ldmatrix.values))
    tylo.store(tylo.GlobalTile(out_scalar, Layout((128, OWN.values), (OWN.values, 1))),
               tylo.fragment(tylo.bf16, tylo.Ownership.local((128, OWN.values), axis=1), via_scalars.values))


@pytest.mark.parametrize("own,shape", [(PLAN.a_ownership, (64, 16)), (PLAN.b_ownership, (16, 64))])
def test_ldmatrix_words_equal_scalar_load_words(own, shape):
    R, C = shape
    ck = both_ways.compile(signature="*bf16:16, *bf16:16, *bf16:16", arch="sm_90a",
                           constexprs={"OWN": own, "R": R, "C": C})
    assert "ldmatrix" in ck.ptx
    x = np.random.default_rng().standard_normal(R * C).astype(ml_dtypes.bfloat16)
    a = tylo.to_device(np.full((128, own.values), np.nan, ml_dtypes.bfloat16))
    b = tylo.to_device(np.full((128, own.values), np.nan, ml_dtypes.bfloat16))
    both_ways[1, 128](a, b, tylo.to_device(x), OWN=own, R=R, C=C)
    np.testing.assert_array_equal(a.to_host().view(np.uint16), b.to_host().view(np.uint16))


@tylo.jit
def stmatrix_probe(out, x, OWN: tylo.constexpr, STRIDES: tylo.constexpr):
    """Scalar loads from global by OWN, a store into shared (stmatrix), shared copied out linearly."""
    s = tylo.shared_array(tylo.bf16, (64 * 64,), align=128)
    f = tylo.load(tylo.GlobalTile(x, Layout((64, 64), (64, 1))), OWN)
    tylo.store(tylo.SharedTile(s.ptr, Layout((64, 64), STRIDES)), f)
    tylo.sync_threads()
    for i in range(tylo.thread_idx.x, 64 * 64, 128):
        out[i] = s[i]


@pytest.mark.parametrize("strides,trans", [((64, 1), False), ((1, 64), True)], ids=["row-major", "transposed"])
def test_stmatrix_stores_the_words_scalar_stores_would(strides, trans):
    own = PLAN.c_ownership                   # the 64 x 64 accumulator distribution, as bf16
    ck = stmatrix_probe.compile(signature="*bf16:16, *bf16:16", arch="sm_90a",
                                constexprs={"OWN": own, "STRIDES": strides})
    ops = re.findall(r"stmatrix\.sync\.aligned\.m8n8\.x\d(\.trans)?\.shared\.b16", ck.ptx)
    assert ops and all(bool(t) == trans for t in ops)
    x = np.random.default_rng().standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    out = tylo.to_device(np.full(64 * 64, np.nan, ml_dtypes.bfloat16))
    stmatrix_probe[1, 128](out, tylo.to_device(x), OWN=own, STRIDES=strides)
    want = x if not trans else x.T          # shared offset r*64+c (row-major) or c*64+r (transposed)
    np.testing.assert_array_equal(out.to_host().view(np.uint16), np.ascontiguousarray(want).reshape(-1).view(np.uint16))
