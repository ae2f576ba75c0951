"""The native launcher on a real GPU: hand-written PTX kernels (those of test_runtime_gpu.py) launched
through it for every parameter kind, and @tylo.jit kernels launched through the C ``Bound``; outputs
poisoned first and compared to numpy references. The module must load here (build it with
``python scripts/build_native.py``, or tylo builds it on first use): these tests fail otherwise."""
import ctypes

import numpy as np
import pytest
from test_runtime_gpu import PTX, run_in_threads  # the PTX kernels (tests/runtime is on sys.path under pytest)

import tylo
from tylo import runtime as rt
from tylo.runtime import native
from tylo.runtime.errors import CudaError
from tylo.runtime.launch import make_launcher

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not rt.gpu_available(), reason="needs an NVIDIA GPU")]

PTR, I32, F32 = ctypes.c_uint64, ctypes.c_int32, ctypes.c_float


@pytest.fixture(scope="module")
def mod():
    m = native.load()
    assert m is not None, f"the native launcher did not load: {native.status()}"
    return m


@pytest.fixture(scope="module")
def module():
    return rt.load_module(PTX.encode())


def _rng():
    return np.random.default_rng(4321)


def test_axpb_through_the_native_launcher(mod, module):
    L = make_launcher(mod, rt.get_function(module, "axpb"), [PTR, PTR, I32, F32])
    assert type(L) is mod.Launcher
    n = 1000
    x = _rng().standard_normal(n).astype(np.float32)
    dx = rt.to_device(x)
    out = rt.empty(n, "f32").fill_bytes(0xFF)
    for s in (0.5, -2.0, 3):
        out.fill_bytes(0xFF)
        L.launch((n + 127) // 128, 1, 1, 128, 1, 1, 0, (out.ptr, dx.ptr, n, s))
        rt.synchronize()
        np.testing.assert_allclose(out.to_host(), x * s + n, rtol=1e-6)


def test_every_scalar_kind_and_the_blob(mod, module):
    L = make_launcher(mod, rt.get_function(module, "scalars"),
                      [PTR, ctypes.c_int8, ctypes.c_uint8, ctypes.c_int16, ctypes.c_uint16, ctypes.c_int64,
                       ctypes.c_uint32, ctypes.c_double])
    out = rt.empty(7, "i64").fill_bytes(0xCD)
    vals = (-100, 250, -30000, 60000, -(2**40) - 3, 4_000_000_000, -1.0e-300)
    L.launch(1, 1, 1, 1, 1, 1, 0, (out.ptr, *vals))
    rt.synchronize()
    got = out.to_host()
    assert list(got[:6]) == list(vals[:6]) and got[6:].view(np.float64)[0] == vals[6]
    B = make_launcher(mod, rt.get_function(module, "blob"), [PTR, ctypes.c_uint8 * 128, ctypes.c_uint32])
    out = rt.empty(17, "u64").fill_bytes(0xEE)
    desc = _rng().integers(0, 256, 128, dtype=np.uint8).tobytes()
    B.launch(1, 1, 1, 1, 1, 1, 0, (out.ptr, desc, 0xC0FFEE))
    rt.synchronize()
    got = out.to_host()
    assert got[:16].tobytes() == desc and got[16] == 0xC0FFEE


def test_cluster_launch_and_cuda_errors(mod, module):
    L = make_launcher(mod, rt.get_function(module, "axpb"), [PTR, PTR, I32, F32])
    with pytest.raises(CudaError) as info:
        L.launch(1, 1, 1, 4096, 1, 1, 0, (0, 0, 0, 1.0))   # too many threads per block
    assert info.value.name == "CUDA_ERROR_INVALID_VALUE" and info.value.call == "cuLaunchKernel"
    with pytest.raises(TypeError, match="takes 4 parameters"):
        L.launch(1, 1, 1, 32, 1, 1, 0, (0, 0, 0))
    if rt.compute_capability(0)[0] < 9:
        return
    C = make_launcher(mod, rt.get_function(module, "clus"), [PTR])
    out = rt.empty((8, 2), "u32").fill_bytes(0xFF)
    C.launch_cluster((8, 1, 1), (32, 1, 1), (2, 1, 1), 0, (out.ptr,))
    rt.synchronize()
    got = out.to_host()
    assert (got[:, 0] == 2).all() and list(got[:, 1]) == [0, 1] * 4
    with pytest.raises(CudaError):
        C.launch_cluster((7, 1, 1), (32, 1, 1), (2, 1, 1), 0, (out.ptr,))  # 7 % 2 != 0
    rt.synchronize()


@tylo.jit
def axpy(out, x, y, n, a):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] * a + y[i]


@tylo.jit
def scalars(out: tylo.Ptr[tylo.f64], a: tylo.i64, b: tylo.f64, c: tylo.bool_, d: tylo.f32, e: tylo.u32,
            f: tylo.i8):
    if tylo.thread_idx.x == 0:
        out[0] = tylo.f64(a)
        out[1] = b
        out[2] = tylo.f64(1.0) if c else tylo.f64(-1.0)
        out[3] = tylo.f64(d)
        out[4] = tylo.f64(e)
        out[5] = tylo.f64(f)


def test_jit_kernels_launch_through_the_c_bound(mod):
    assert type(axpy[1, 128]) is mod.Bound
    rng = _rng()
    for dtype, n in (("f32", 1000), ("f32", 1), ("f32", 4096), ("f64", 777), ("i32", 300)):
        x = rng.standard_normal(n) * 10
        y = rng.standard_normal(n) * 10
        hx, hy = (v.astype(rt.numpy_dtype(dtype)) for v in (x, y))
        dx, dy = rt.to_device(hx), rt.to_device(hy)
        out = rt.empty(n, dtype).fill_bytes(0xFF)
        a = 3 if dtype == "i32" else 0.5
        for _ in range(3):            # the first launch compiles; the others are C-only hits
            out.fill_bytes(0xFF)
            axpy[(n + 127) // 128, 128](out, dx, dy, n, a)
            rt.synchronize()
            np.testing.assert_allclose(out.to_host(), hx * a + hy, rtol=1e-6)
    assert all(type(v) is mod.Launcher for v in axpy._launchers.values())


def test_scalar_parameters_through_the_c_bound(mod):
    out = rt.empty(6, "f64").fill_bytes(0xFF)
    for args in ((-(2**40) - 3, -1.0e-300, True, 1.5, 4_000_000_000, -100),
                 (7, 2.0, False, -0.25, 0, 127)):
        scalars[1, 32](out, *args)
        rt.synchronize()
        a, b, c, d, e, f = args
        np.testing.assert_array_equal(out.to_host(), [a, b, 1.0 if c else -1.0, d, e, f])
    with pytest.raises(TypeError, match="'f' = 128 does not fit in i8"):
        scalars[1, 32](out, 0, 0.0, True, 0.0, 0, 128)


def test_launches_from_threads_without_a_context(mod):
    n = 256
    x = np.arange(n, dtype=np.float32)
    dx = rt.to_device(x)
    outs = [rt.empty(n, "f32").fill_bytes(0xFF) for _ in range(4)]
    launch = axpy[2, 128]
    launch(outs[0], dx, dx, n, 1.0)
    rt.synchronize()

    def work(i):
        for _ in range(50):
            launch(outs[i], dx, dx, n, float(i))
        rt.synchronize()

    run_in_threads(work, 4)
    for i, o in enumerate(outs):
        np.testing.assert_allclose(o.to_host(), x * i + x)


def test_torch_tensors_and_streams(mod):
    torch = pytest.importorskip("torch")
    n = 5000
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    s = torch.cuda.Stream()
    launch = axpy[(n + 127) // 128, 128]
    with torch.cuda.stream(s):        # no stream=: torch's current stream
        for _ in range(3):
            launch(out, x, y, n, 2.0)
    s.synchronize()
    torch.testing.assert_close(out, x * 2.0 + y)
    out.fill_(float("nan"))
    launch(out, x, y, n, -1.0, stream=s.cuda_stream)
    s.synchronize()
    torch.testing.assert_close(out, -x + y)
    with pytest.raises(TypeError, match="in host memory|device 'cpu'"):
        launch(out.cpu(), x, y, n, 1.0)
