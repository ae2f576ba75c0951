"""Programmatic dependent launch on the GPU: a chain of launches of a kernel that triggers its dependents first and
waits on its predecessor (``grid_dependency_wait``) before reading what the predecessor wrote; every launch of the
chain may start while the one before runs, and the result is still the serial one."""
import numpy as np
import pytest

import tylo
from tylo.lang.sync import grid_dependency_wait, launch_dependents

pytestmark = pytest.mark.gpu


@tylo.jit
def slow_step(src, dst, n, spin):
    """``dst = src + 1`` after ``spin`` dependent iterations that leave the value as it is (so each launch runs long
    enough for the next one to start beside it)."""
    launch_dependents()
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    grid_dependency_wait()
    if i < n:
        v = src[i]
        acc = v
        for _ in range(spin):
            acc = acc * 0.5 + v * 0.5
        dst[i] = acc + 1.0


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


@pytest.mark.parametrize("n, spin", [(1 << 20, 64), (1000, 4096)])   # more CTAs than SMs; a few long ones
def test_a_chain_of_dependent_launches_gives_the_serial_result(n, spin):
    torch = _torch()
    assert slow_step.compile("*f32, *f32, i32, i32", arch="sm_90a").waits_on_prior_grids
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    bufs = [x.clone(), torch.full((n,), float("nan"), device="cuda")]
    steps = 40
    for k in range(steps):
        slow_step[(n + 255) // 256, 256](bufs[k % 2], bufs[(k + 1) % 2], n, spin)
    torch.cuda.synchronize()
    want = x.cpu().numpy()
    for _ in range(steps):
        want = want + np.float32(1.0)
    np.testing.assert_array_equal(bufs[0].cpu().numpy(), want)


def test_a_dependent_launch_after_another_library_waits_for_it():
    """After a torch kernel (which does not trigger early) the dependent launch still reads its finished output."""
    torch = _torch()
    n = 1 << 22
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    out = torch.full((n,), float("nan"), device="cuda")
    for _ in range(3):
        y = x * 3.0
        slow_step[(n + 255) // 256, 256](y, out, n, 8)
        torch.cuda.synchronize()
        assert torch.equal(out, x * 3.0 + 1.0)
