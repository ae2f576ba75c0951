"""The example Hopper GEMM (TMA ring, mbarriers, WGMMA, named barriers, TMA stores) in the interpreter."""
import numpy as np
import pytest

from tylo.interpreter import run

from hopper_support import gemm_args, gemm_ir, gemm_operands, relative_error


@pytest.mark.parametrize("seed", [0, 1])
def test_gemm_one_persistent_cta_matches_float64(seed):
    # one CTA walks the 2 x 2 output tiles of a ragged shape; K = 136 is 3 K steps, the last partial
    a, b, c = gemm_operands(200, 264, 136, seed)
    run(gemm_ir(), gemm_args(a, b, c), grid=(1,), block=(384,), seed=seed)
    # bf16 output: its rounding (2^-9 relative) dominates; fp32 accumulation is far below it
    assert relative_error(a, b, c) < 4e-3


def test_gemm_two_stage_ring_wraps_around():
    # K = 320: 5 K steps through a 2-stage ring, so the producer waits for the consumers' releases
    a, b, c = gemm_operands(128, 256, 320, 3)
    run(gemm_ir(stages=2), gemm_args(a, b, c), grid=(1,), block=(384,), seed=5)
    assert relative_error(a, b, c) < 4e-3


def test_gemm_is_exact_on_small_integers():
    # products and sums of small integers are exact in fp32 and bf16: the result must be bit-exact
    rng = np.random.default_rng(7)
    a, b, c = gemm_operands(128, 256, 64)
    a[...] = rng.integers(-3, 4, a.shape)
    b[...] = rng.integers(-3, 4, b.shape)
    run(gemm_ir(), gemm_args(a, b, c), grid=(1,), block=(384,))
    assert np.array_equal(c.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64))
