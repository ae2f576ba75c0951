"""examples/hopper_gemm.py on an sm_90 GPU: ragged shapes in all four operand layouts against a
float64 product, repeated launches, and cached TMA descriptors reused after the data changes."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import hopper_gemm as hg  # noqa: E402

pytestmark = pytest.mark.gpu


def _torch_sm90():
    from tylo.runtime import compute_capability
    if compute_capability() < (9, 0):
        pytest.skip("needs sm_90")
    return pytest.importorskip("torch")      # transposed (column-major) views


def _operand(torch, gen, rows, cols, major):
    if major == "r":
        return torch.randn(rows, cols, generator=gen, device="cuda").to(torch.bfloat16)
    return torch.randn(cols, rows, generator=gen, device="cuda").to(torch.bfloat16).T


def _rel_error(c, a, b):
    ref = a.double() @ b.double()
    return float((c.double() - ref).norm() / ref.norm())


# TMA rows are 16-byte aligned: a column-major A needs M % 8 == 0, so odd M runs with row-major A only
SHAPES = [(M, N, K, lay) for M, N, K in [(128, 256, 64), (296, 200, 136), (136, 264, 72), (1000, 520, 1000),
                                          (64, 8, 8), (1536, 776, 4104)] for lay in ("rr", "rc", "cr", "cc")]
SHAPES += [(129, 264, 72, "rr"), (301, 200, 136, "rc"), (1, 8, 8, "rr")]


@pytest.mark.parametrize("M,N,K,layout", SHAPES)
def test_gemm_ragged_shapes_every_layout(M, N, K, layout):
    torch = _torch_sm90()
    gen = torch.Generator(device="cuda").manual_seed(M * 7 + N * 3 + K + ord(layout[0]) + 2 * ord(layout[1]))
    a = _operand(torch, gen, M, K, layout[0])
    b = _operand(torch, gen, K, N, layout[1])
    if a.shape[0] > 1:
        assert (a.stride(1) == 1) == (layout[0] == "r") and (b.stride(1) == 1) == (layout[1] == "r")
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    hg.launch(c, a, b, M, N, K)
    torch.cuda.synchronize()
    assert bool(torch.isfinite(c).all()), "unwritten outputs"
    assert _rel_error(c, a, b) < 1e-2


def test_repeated_launches_and_descriptor_reuse_after_the_data_changes():
    torch = _torch_sm90()
    gen = torch.Generator(device="cuda").manual_seed(5)
    M, N, K = 520, 776, 328
    a = _operand(torch, gen, M, K, "r")
    b = _operand(torch, gen, K, N, "c")
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    hg.launch(c, a, b, M, N, K)
    first = c.clone()
    assert _rel_error(c, a, b) < 1e-2
    bindings = len(hg._BINDINGS)
    for _ in range(5):                               # same inputs: bit-identical outputs
        c.fill_(float("nan"))
        hg.launch(c, a, b, M, N, K)
        torch.cuda.synchronize()
        assert torch.equal(c, first)
    a.copy_(torch.randn(M, K, generator=gen, device="cuda").to(torch.bfloat16))   # same address, new data
    b.copy_(torch.randn(K, N, generator=gen, device="cuda").to(torch.bfloat16))
    c.fill_(float("nan"))
    hg.launch(c, a, b, M, N, K)
    torch.cuda.synchronize()
    assert len(hg._BINDINGS) == bindings, "the cached descriptors were reused, not re-encoded"
    assert not torch.equal(c, first)
    assert _rel_error(c, a, b) < 1e-2


def test_gemm_on_tylo_device_arrays_and_numpy_reference():
    _torch_sm90()
    import ml_dtypes

    import tylo
    rng = np.random.default_rng()
    M, N, K = 257, 136, 200
    a = rng.integers(-2, 3, size=(M, K)).astype(ml_dtypes.bfloat16)   # exact in fp32, and in bf16 out
    b = rng.integers(-2, 3, size=(K, N)).astype(ml_dtypes.bfloat16)
    c = tylo.to_device(np.full((M, N), np.nan, dtype=ml_dtypes.bfloat16))
    hg.launch(c, tylo.to_device(a), tylo.to_device(b), M, N, K)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(ref).max() < 256                    # every result is a bf16-exact integer
    np.testing.assert_array_equal(c.to_host().astype(np.float64), ref)


@pytest.mark.parametrize("M,N,K", [(128, 256, 128), (300, 200, 144), (1000, 520, 1008), (129, 264, 80)])
@pytest.mark.parametrize("fp8", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_gemm_ragged_shapes(M, N, K, fp8):
    torch = _torch_sm90()
    dt = getattr(torch, fp8)
    gen = torch.Generator(device="cuda").manual_seed(M + 3 * N + 7 * K)
    a = torch.randn(M, K, generator=gen, device="cuda").to(dt)               # row-major: K-major A
    b = torch.randn(N, K, generator=gen, device="cuda").to(dt).T             # column-major: K-major B
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    hg.launch(c, a, b, M, N, K)
    torch.cuda.synchronize()
    assert bool(torch.isfinite(c).all()), "unwritten outputs"
    assert _rel_error(c, a, b) < 1e-2


def test_fp8_operands_must_be_k_major():
    torch = _torch_sm90()
    a = torch.randn(64, 64, device="cuda").to(torch.float8_e4m3fn)
    c = torch.empty(64, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="fp8 operands must be K-major"):
        hg.launch(c, a, a, 64, 64, 64)          # B row-major: N-major
    with pytest.raises(ValueError, match="both must have one type"):
        hg.launch(c, a, torch.randn(64, 64, device="cuda").to(torch.bfloat16), 64, 64, 64)
    a72 = torch.randn(64, 72, device="cuda").to(torch.float8_e4m3fn)       # 72-byte rows
    with pytest.raises(ValueError, match="must be a multiple of 16 for f8e4m3"):
        hg.launch(c, a72, a72.T, 64, 64, 72)
