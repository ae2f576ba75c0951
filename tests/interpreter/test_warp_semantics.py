"""Warp-level features on the CPU with the reference interpreter, whose ldmatrix/stmatrix/mma.sync
semantics are written from the PTX ISA text (tylo/interpreter/copy.py, mma.py), independently of the
ownership reasoning that decides the upgrades (tylo/lang/tiles.py)."""
import ml_dtypes
import numpy as np
import pytest

from tylo.interpreter import run

rng = np.random.default_rng()


def test_ldmatrix_upgrade_gives_the_scalar_load_words():
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gpu"))
    import test_ldmatrix_gpu as t
    for own, (R, C) in [(t.PLAN.a_ownership, (64, 16)), (t.PLAN.b_ownership, (16, 64))]:
        ir = t.both_ways.lower(signature="*bf16:16, *bf16:16, *bf16:16", arch="sm_90a",
                               constexprs={"OWN": own, "R": R, "C": C})
        x = rng.standard_normal(R * C).astype(ml_dtypes.bfloat16)
        a = np.full((128, own.values), np.nan, ml_dtypes.bfloat16)
        b = a.copy()
        run(ir, [a, b, x], block=(128,))
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))


def test_stmatrix_upgrade_stores_what_scalar_stores_would():
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fragments"))
    import test_fragments_ptx as t
    ir = t.stage_through_shared.lower(signature="*bf16:16, *f32:16", arch="sm_90a")
    assert any(op.name == "nv.stmatrix" for op in ir.walk())
    x = rng.standard_normal((64, 64)).astype(np.float32)
    out = np.full((64, 64), np.nan, ml_dtypes.bfloat16)
    run(ir, [out, x], block=(128,))
    np.testing.assert_array_equal(out.view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_attention_step_reuses_the_accumulator_as_the_a_operand():
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fragments"))
    import test_accumulator_reuse as t
    ir = t.attention_step.lower(signature="*f32:16, *bf16:16, *bf16:16, *bf16:16", arch="sm_80")
    q = rng.standard_normal((16, 16)).astype(ml_dtypes.bfloat16)
    k = rng.standard_normal((16, 16)).astype(ml_dtypes.bfloat16)
    v = rng.standard_normal((16, 64)).astype(ml_dtypes.bfloat16)
    o = np.full((16, 64), np.nan, np.float32)
    run(ir, [o, q, k, v], block=(32,))
    s = q.astype(np.float64) @ k.astype(np.float64).T
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p = (p / p.sum(axis=1, keepdims=True)).astype(ml_dtypes.bfloat16).astype(np.float64)
    ref = p @ v.astype(np.float64)
    np.testing.assert_allclose(o, ref, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("M,N,K,vec", [(40, 24, 40, 16), (33, 17, 19, 2)])
def test_warp_gemm_one_tile(M, N, K, vec):
    import warp_gemm as g
    ir = g.warp_gemm.lower(signature="*bf16:16, *bf16:16, *bf16:16, i32, i32, i32, f32", arch="sm_90a",
                           constexprs={"VEC": vec}, block=128)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    c = np.full((M, N), np.nan, ml_dtypes.bfloat16)
    run(ir, [c, a, b, M, N, K, 0.5], grid=(1, 1), block=(128,))
    ref = 0.5 * a.astype(np.float64) @ b.astype(np.float64)
    got = c.astype(np.float64)
    assert not np.isnan(got).any()
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-2


@pytest.mark.parametrize("block", [(128,), (32, 4), (64, 2), (16, 4, 2)])
def test_fragments_distribute_over_the_linear_thread_index_of_any_block_shape(block):
    """Ownerships count threads by linear index (x fastest), so a (32, 4) block holds the same
    fragments as a 128-thread one; with no block given at compile time the index is computed too."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fragments"))
    import test_fragments_ptx as t
    x = rng.standard_normal((64, 64)).astype(np.float32)
    for given in (block, None):
        ir = t.stage_through_shared.lower(signature="*bf16:16, *f32:16", arch="sm_90a", block=given)
        out = np.full((64, 64), np.nan, ml_dtypes.bfloat16)
        run(ir, [out, x], block=block)
        np.testing.assert_array_equal(out.view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16))
