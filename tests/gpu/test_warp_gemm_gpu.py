"""The warp-MMA GEMM on random ragged shapes against a float64 product."""
import ml_dtypes
import numpy as np
import pytest
import warp_gemm

import tylo

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("M,N,K", [(128, 128, 32), (256, 384, 64), (300, 200, 77), (1, 1, 1), (129, 255, 33),
                                   (1000, 1000, 1000), (64, 1000, 513)])
def test_warp_gemm_matches_float64(M, N, K):
    rng = np.random.default_rng()
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    c = tylo.to_device(np.full((M, N), np.nan, dtype=ml_dtypes.bfloat16))
    warp_gemm.launch(c, tylo.to_device(a), tylo.to_device(b), M, N, K, alpha=0.5)
    ref = 0.5 * a.astype(np.float64) @ b.astype(np.float64)
    got = c.to_host().astype(np.float64)
    assert not np.isnan(got).any()
    rel = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)
    assert rel < 1e-2, rel
