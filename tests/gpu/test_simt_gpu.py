"""Scalar kernels on a real GPU, checked against numpy float64 references on fresh random data.

Outputs are poisoned (NaN or a sentinel) before every launch so an unwritten element fails.
"""
import numpy as np
import pytest
import simt_kernels as sk

import tylo

pytestmark = pytest.mark.gpu

rng = np.random.default_rng()


def dev(a):
    return tylo.to_device(np.ascontiguousarray(a))


def poisoned(shape, dtype):
    return tylo.to_device(np.full(shape, np.nan if np.dtype(dtype).kind == "f" else -12345, dtype=dtype))


@tylo.jit
def vadd(out, x, y, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] + y[i]


@pytest.mark.parametrize("n", [1, 31, 1000, 1 << 20, 1_234_567])
def test_vector_add(n):
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = poisoned(n, np.float32)
    vadd[(n + 127) // 128, 128](out, dev(x), dev(y), n)
    np.testing.assert_allclose(out.to_host(), x.astype(np.float64) + y, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype,rtol", [(np.float16, 2e-3), ("bfloat16", 1.6e-2), (np.float32, 1e-6),
                                        (np.float64, 1e-14)])
def test_saxpy_all_float_dtypes(dtype, rtol):
    import ml_dtypes
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    n = 100_003
    x, y = rng.standard_normal(n).astype(dt), rng.standard_normal(n).astype(dt)
    a = float(rng.uniform(0.5, 3.0))

    @tylo.jit
    def saxpy_any(out, x, y, a, n):
        i = tylo.block_idx.x * 256 + tylo.thread_idx.x
        if i < n:
            out[i] = a * x[i] + y[i]

    out = poisoned(n, dt)
    saxpy_any[(n + 255) // 256, 256](out, dev(x), dev(y), a, n)
    ref = np.float32(a).astype(np.float64) * x.astype(np.float64) + y.astype(np.float64)
    got = out.to_host().astype(np.float64)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol)


def test_annotated_saxpy_and_constexpr_block():
    n = 5000
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = poisoned(n, np.float32)
    sk.saxpy[(n + 127) // 128, 128](out, dev(x), dev(y), -1.5, n, BLOCK=128)
    np.testing.assert_allclose(out.to_host(), -1.5 * x.astype(np.float64) + y, rtol=1e-5, atol=1e-6)


def test_block_reduction_through_shared_memory():
    from block_reduction import block_sum
    n = 1 << 18
    x = rng.standard_normal(n).astype(np.float32)
    out = tylo.to_device(np.zeros(1, np.float32))
    block_sum[(n + 255) // 256, 256](out, dev(x), n, BLOCK=256)
    ref = x.astype(np.float64).sum()
    assert abs(out.to_host()[0] - ref) < 1e-4 * np.abs(x).sum()


def test_warp_shuffle_reduction():
    n = 4096
    x = rng.standard_normal(n).astype(np.float32)
    out = poisoned(n, np.float32)
    sk.helpers[n // 128, 128](out, dev(x), n)
    clipped = np.clip(x.astype(np.float64), -0.5, 0.5).reshape(-1, 32).sum(axis=1)
    np.testing.assert_allclose(out.to_host().reshape(-1, 32), np.repeat(clipped[:, None], 32, 1), rtol=1e-5,
                               atol=1e-5)


def test_atomics_global_and_shared():
    n = 10_000
    x = rng.uniform(-2.5, 2.5, n).astype(np.float32)
    counts = tylo.to_device(np.zeros(4, np.int32))
    total = tylo.to_device(np.full(1, -1, np.int32))
    sk.shared_atomics[(n + 127) // 128, 128](counts, total, dev(x), n, BLOCK=128)
    buckets = np.clip((x + 2.0).astype(np.int32), 0, 3)
    np.testing.assert_array_equal(counts.to_host(), np.bincount(buckets, minlength=4))
    assert total.to_host()[0] == buckets.max()


@tylo.jit
def cas_counter(counter, slots, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        done = False
        while not done:
            old = counter[0]
            if tylo.atomic_cas(counter, old, old + 1) == old:
                slots[i] = old
                done = True


def test_atomic_cas_loop_gives_unique_tickets():
    n = 2048
    counter = tylo.to_device(np.zeros(1, np.int32))
    slots = poisoned(n, np.int32)
    cas_counter[n // 256, 256](counter, slots, n)
    assert counter.to_host()[0] == n
    assert sorted(slots.to_host().tolist()) == list(range(n))


def test_2d_kernel_with_tuple_grid():
    rows, cols = 123, 77
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = poisoned(rows * cols, np.float32)
    sk.grid2d[((cols + 15) // 16, (rows + 15) // 16), (16, 16)](out, dev(x), rows, cols)
    np.testing.assert_array_equal(out.to_host().reshape(cols, rows), (x * 2).T)


def test_loops_with_carried_values_break_and_continue():
    n, m = 500, 37
    x = rng.uniform(-1.0, 3.0, (n, m)).astype(np.float32)
    out = poisoned(n, np.float32)
    sk.loops[(n + 63) // 64, 64](out, dev(x), n, m)
    ref = np.empty(n)
    k = 1
    while k < m:
        k *= 2
    for i in range(n):
        acc, count = 0.0, 0
        for v in x[i].astype(np.float64):
            if v < 0.0:
                continue
            if v > 2.5:
                break
            acc += np.float32(v)
            count += 1
        ref[i] = acc + count * 1000.0 + k * 1.0e6
    np.testing.assert_allclose(out.to_host(), ref, rtol=1e-6)


def test_branches_and_early_return():
    n = 3001
    x = rng.uniform(-3, 3, n).astype(np.float32)
    out = poisoned(n + 5, np.float32)
    sk.branches[(n + 127) // 128, 128](out, dev(x), n)
    got = out.to_host()
    xd = x.astype(np.float64)
    ref = np.where(xd < -1, -xd, np.where(xd < 1, xd * xd, xd + 3))
    np.testing.assert_allclose(got[:n], ref, rtol=1e-6)
    assert np.isnan(got[n:]).all()  # threads past n returned early and wrote nothing


def test_casts_and_integer_division_semantics():
    n = 4096
    x = rng.uniform(-100, 100, n).astype(np.float32)
    oi, oh = poisoned(n, np.int32), poisoned(n, np.float16)
    sk.casts[n // 256, 256](oi, oh, dev(x), n)
    i = np.arange(n)
    ref = np.trunc(x).astype(np.int64) * 8 + i // 7 - i % 7 + (i >> 1)
    np.testing.assert_array_equal(oi.to_host(), ref)
    np.testing.assert_array_equal(oh.to_host(), (x * np.float32(0.5)).astype(np.float16))


def test_torch_and_cupy_on_non_default_streams():
    torch = pytest.importorskip("torch")
    n = 1 << 16
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.randn(n, device="cuda")
        y = torch.randn(n, device="cuda")
        out = torch.full((n,), float("nan"), device="cuda")
        vadd[(n + 255) // 256, 256](out, x, y, n, stream=s)
    s.synchronize()
    torch.testing.assert_close(out, x + y)
    cupy = pytest.importorskip("cupy")
    cs = cupy.cuda.Stream(non_blocking=True)
    with cs:
        cx = cupy.random.standard_normal(n, dtype=cupy.float32)
        cy = cupy.random.standard_normal(n, dtype=cupy.float32)
        cout = cupy.full(n, cupy.nan, dtype=cupy.float32)
        vadd[(n + 255) // 256, 256](cout, cx, cy, n, stream=cs)
    cs.synchronize()
    cupy.testing.assert_allclose(cout, cx + cy)


def test_bad_launch_arguments_raise_before_the_gpu():
    n = 16
    x = dev(np.ones(n, np.float32))
    with pytest.raises(TypeError, match="'x'.*host"):
        vadd[1, 32](x, np.ones(n, np.float32), x, n)
    with pytest.raises(TypeError, match="missing argument 'n'"):
        vadd[1, 32](x, x, x)
    with pytest.raises(TypeError, match="takes 4 arguments but 5"):
        vadd[1, 32](x, x, x, n, 1)
    with pytest.raises(TypeError, match="annotated"):
        sk.saxpy[1, 32](x, x, x, 1.0, 1.5, BLOCK=32)


def test_cuda_error_names_the_driver_error():
    x = dev(np.ones(16, np.float32))
    with pytest.raises(tylo.CudaError) as info:
        vadd[1, 4096](x, x, x, 16)  # more threads per block than the hardware allows
    assert info.value.name.startswith("CUDA_ERROR_")
