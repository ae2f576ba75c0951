"""Launches without ``stream=`` go to torch's / cupy's current stream (issue 15 item 1).

A GPU sleep and an ``x * 3`` queued on a side stream come before the kernel that reads ``x * 3``:
launched on the legacy default stream (tylo's old rule) it would read the product before it exists.
"""
import numpy as np
import pytest

import tylo

pytestmark = pytest.mark.gpu


@tylo.jit
def add_streams(out, x, y, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] + y[i]


def test_torch_current_stream_orders_the_launch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    n = 1 << 22
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    side = torch.cuda.Stream()
    for _ in range(3):
        out = torch.full((n,), float("nan"), device="cuda")
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            torch.cuda._sleep(100_000_000)          # ~50 ms of GPU time before the product exists
            x3 = x * 3
            add_streams[(n + 255) // 256, 256](out, x3, y, n)   # no stream=: the current stream (side)
        side.synchronize()
        torch.cuda.synchronize()
        ref = x.double() * 3 + y.double()
        assert torch.allclose(out.double(), ref, rtol=1e-6, atol=1e-6)


def test_explicit_stream_wins_and_default_is_legacy_for_tylo_arrays():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    from tylo.runtime.streams import current_stream_getter

    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        assert current_stream_getter(torch.Tensor)() == side.cuda_stream
    assert current_stream_getter(torch.Tensor)() == torch.cuda.current_stream().cuda_stream
    assert current_stream_getter(tylo.DeviceArray) is None
    n = 1000
    rng = np.random.default_rng()
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = tylo.to_device(np.full(n, np.nan, np.float32))
    add_streams[(n + 255) // 256, 256](out, tylo.to_device(a), tylo.to_device(b), n, stream=side)
    side.synchronize()
    np.testing.assert_allclose(out.to_host(), a.astype(np.float64) + b, rtol=1e-6)
