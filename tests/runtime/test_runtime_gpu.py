"""Runtime on a real GPU: module loading, the launch fast path, DeviceArray,
torch/cupy interop. Kernels are small hand-written PTX (loaded through the
driver's JIT). Outputs are poisoned first and compared to numpy references."""

import ctypes
import threading

import numpy as np
import pytest

from tylo import runtime as rt
from tylo.runtime import driver
from tylo.runtime.arrays import array_extractor, describe_array
from tylo.runtime.errors import CudaError

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not rt.gpu_available(), reason="needs an NVIDIA GPU")]

PTR, I32, F32 = ctypes.c_uint64, ctypes.c_int32, ctypes.c_float

_BLOB_LOADS = "\n".join(
    f"    ld.param.u64 %rd2, [p_blob+{8 * i}];\n    st.global.u64 [%rd1+{8 * i}], %rd2;"
    for i in range(16))

PTX = r"""
.version 8.0
.target sm_90
.address_size 64

.extern .shared .align 16 .b8 dsmem[];

.visible .entry axpb(.param .u64 p_out, .param .u64 p_in, .param .s32 p_n, .param .f32 p_s)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [p_out];
    ld.param.u64 %rd2, [p_in];
    ld.param.u32 %r1, [p_n];
    ld.param.f32 %f1, [p_s];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.s32 %rd5, %r5, 4;
    add.s64 %rd6, %rd4, %rd5;
    ld.global.f32 %f2, [%rd6];
    cvt.rn.f32.s32 %f3, %r1;
    fma.rn.f32 %f2, %f2, %f1, %f3;
    add.s64 %rd7, %rd3, %rd5;
    st.global.f32 [%rd7], %f2;
DONE:
    ret;
}

.visible .entry scalars(.param .u64 p_out, .param .s8 p_a, .param .u8 p_b, .param .s16 p_c,
                        .param .u16 p_d, .param .s64 p_e, .param .u32 p_f, .param .f64 p_g)
{
    .reg .b16 %h<5>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<8>;
    .reg .f64 %fd<2>;
    ld.param.u64 %rd1, [p_out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.s8 %h1, [p_a];
    cvt.s64.s16 %rd2, %h1;
    st.global.u64 [%rd1], %rd2;
    ld.param.u8 %h2, [p_b];
    cvt.u64.u16 %rd3, %h2;
    st.global.u64 [%rd1+8], %rd3;
    ld.param.s16 %h3, [p_c];
    cvt.s64.s16 %rd4, %h3;
    st.global.u64 [%rd1+16], %rd4;
    ld.param.u16 %h4, [p_d];
    cvt.u64.u16 %rd5, %h4;
    st.global.u64 [%rd1+24], %rd5;
    ld.param.s64 %rd6, [p_e];
    st.global.u64 [%rd1+32], %rd6;
    ld.param.u32 %r1, [p_f];
    cvt.u64.u32 %rd7, %r1;
    st.global.u64 [%rd1+40], %rd7;
    ld.param.f64 %fd1, [p_g];
    st.global.f64 [%rd1+48], %fd1;
    ret;
}

.visible .entry blob(.param .u64 p_out, .param .align 64 .b8 p_blob[128], .param .u32 p_tail)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p_out];
    cvta.to.global.u64 %rd1, %rd1;
BLOB_LOADS
    ld.param.u32 %r1, [p_tail];
    cvt.u64.u32 %rd3, %r1;
    st.global.u64 [%rd1+128], %rd3;
    ret;
}

.visible .entry clus(.param .u64 p_out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p_out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %cluster_nctarank;
    mov.u32 %r3, %cluster_ctarank;
    mul.wide.u32 %rd2, %r1, 8;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v2.u32 [%rd3], {%r2, %r3};
    ret;
}

.visible .entry bigsmem(.param .u64 p_out, .param .u32 p_off)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [p_out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r1, [p_off];
    mov.u64 %rd2, dsmem;
    cvt.u64.u32 %rd3, %r1;
    add.s64 %rd4, %rd2, %rd3;
    mov.u32 %r2, 12345;
    st.shared.u32 [%rd4], %r2;
    bar.sync 0;
    ld.shared.u32 %r3, [%rd4];
    st.global.u32 [%rd1], %r3;
    ret;
}
""".replace("BLOB_LOADS", _BLOB_LOADS)


@pytest.fixture(scope="module")
def module():
    rt.ensure_context(0)
    mod = rt.load_module(PTX.encode())
    yield mod
    rt.unload_module(mod)


def _rng():
    return np.random.default_rng(1234)


def run_in_threads(work, count):
    """Run ``work(i)`` for i < count, each in a new thread (no CUDA context current there), and raise the
    first exception any of them raised."""
    errors = []

    def guarded(i):
        try:
            work(i)
        except Exception as e:  # pragma: no cover - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_devices_and_context():
    devs = rt.devices()
    assert devs and devs[0]["compute_capability"].startswith("sm_")
    assert devs[0]["sm_count"] > 0 and devs[0]["total_memory"] > 0
    assert rt.driver_version() > 0
    ctx = rt.ensure_context(0)
    assert ctx and rt.ensure_context(0) == ctx == rt.current_context()
    major, minor = rt.compute_capability(0)
    assert devs[0]["compute_capability"] == f"sm_{major}{minor}"


def test_function_attributes(module):
    f = rt.get_function(module, "axpb")
    attrs = rt.function_attributes(f)
    assert attrs["num_regs"] > 0 and attrs["max_threads_per_block"] >= 128
    assert attrs["shared_size_bytes"] == 0
    with pytest.raises(CudaError) as info:
        rt.get_function(module, "no_such_kernel")
    assert info.value.name == "CUDA_ERROR_NOT_FOUND"


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "i32", "u8", "f8e4m3", "f8e5m2",
                                   "f64", "bool"])
def test_device_array_round_trip(dtype):
    ndt = rt.numpy_dtype(dtype)
    host = _rng().standard_normal((7, 33)).astype(np.float32).astype(ndt)
    d = rt.to_device(host)
    assert d.shape == (7, 33) and d.dtype == ndt and d.nbytes == host.nbytes
    assert d.dtype_name == dtype
    back = d.to_host()
    assert back.dtype == ndt
    np.testing.assert_array_equal(back.view(np.uint8), host.view(np.uint8))
    d.free()
    d.free()  # idempotent


def test_device_array_poison_and_describe():
    d = rt.empty((16, 8), "f32").fill_bytes(0xAB)
    assert (d.to_host().view(np.uint8) == 0xAB).all()
    info = describe_array(d)
    assert info.ptr == d.ptr and info.shape == (16, 8) and info.strides == (8, 1)
    assert info.dtype_name == "f32" and info.device_ordinal == 0
    assert array_extractor(type(d))(d) == (d.ptr, "f32")
    cai = d.__cuda_array_interface__
    assert cai["version"] == 3 and cai["data"] == (d.ptr, False)
    with pytest.raises(ValueError):
        d.copy_from_host(np.zeros((8, 16), np.float32))


def test_zero_size_device_array():
    d = rt.empty((0, 4), "f32")
    assert d.ptr == 0 and d.to_host().shape == (0, 4)


def test_launch_axpb(module):
    fn = rt.get_function(module, "axpb")
    L = rt.Launcher(fn, [PTR, PTR, I32, F32], names=["out", "x", "n", "s"])
    n = 1000
    x = _rng().standard_normal(n).astype(np.float32)
    dx = rt.to_device(x)
    out = rt.empty(n, "f32").fill_bytes(0xFF)
    L.launch((n + 127) // 128, 1, 1, 128, 1, 1, 0, (out.ptr, dx.ptr, n, 0.5))
    rt.synchronize()
    np.testing.assert_allclose(out.to_host(), x * 0.5 + n, rtol=1e-6)
    # second launch with other values reuses the buffer
    out.fill_bytes(0xFF)
    L.launch_basic((n + 127) // 128, 1, 1, 128, 1, 1, 0, (out.ptr, dx.ptr, n, -2.0))
    rt.synchronize()
    np.testing.assert_allclose(out.to_host(), x * -2.0 + n, rtol=1e-6)


def test_launch_every_scalar_kind(module):
    fn = rt.get_function(module, "scalars")
    L = rt.Launcher(fn, [PTR, ctypes.c_int8, ctypes.c_uint8, ctypes.c_int16, ctypes.c_uint16,
                         ctypes.c_int64, ctypes.c_uint32, ctypes.c_double])
    out = rt.empty(7, "i64").fill_bytes(0xCD)
    vals = (-100, 250, -30000, 60000, -(2**40) - 3, 4_000_000_000, -1.0e-300)
    L.launch(1, 1, 1, 1, 1, 1, 0, (out.ptr, *vals))
    rt.synchronize()
    got = out.to_host()
    assert list(got[:6]) == list(vals[:6])
    assert got[6:].view(np.float64)[0] == vals[6]


def test_launch_byte_blob_param(module):
    fn = rt.get_function(module, "blob")
    L = rt.Launcher(fn, [PTR, ctypes.c_uint8 * 128, ctypes.c_uint32])
    out = rt.empty(17, "u64").fill_bytes(0xEE)
    desc = _rng().integers(0, 256, 128, dtype=np.uint8).tobytes()
    L.launch(1, 1, 1, 1, 1, 1, 0, (out.ptr, desc, 0xC0FFEE))
    rt.synchronize()
    got = out.to_host()
    assert got[:16].tobytes() == desc
    assert got[16] == 0xC0FFEE


def test_launch_cluster(module):
    if rt.compute_capability(0)[0] < 9:
        pytest.skip("clusters need sm_90+")
    fn = rt.get_function(module, "clus")
    L = rt.Launcher(fn, [PTR])
    out = rt.empty((8, 2), "u32").fill_bytes(0xFF)
    L.launch_cluster((8, 1, 1), (32, 1, 1), (2, 1, 1), 0, (out.ptr,))
    rt.synchronize()
    got = out.to_host()
    assert (got[:, 0] == 2).all()
    assert list(got[:, 1]) == [0, 1] * 4
    out.fill_bytes(0xFF)
    L.launch(8, 1, 1, 32, 1, 1, 0, (out.ptr,))   # plain launch: clusters of one
    rt.synchronize()
    assert (out.to_host()[:, 0] == 1).all()
    with pytest.raises(CudaError):
        L.launch_cluster((7, 1, 1), (32, 1, 1), (2, 1, 1), 0, (out.ptr,))  # 7 % 2 != 0


def test_max_active_clusters(module):
    # the driver's count of co-resident clusters (what a persistent grid of clusters may launch): small CTAs
    # fill many per SM; CTAs that each need most of an SM's shared memory fit at most one per SM
    if rt.compute_capability(0)[0] < 9:
        pytest.skip("clusters need sm_90+")
    from tylo.runtime.launch import max_active_clusters
    fn = rt.get_function(module, "clus")
    sms = driver.sm_count(0)
    small = max_active_clusters(fn, (32, 1, 1), 0, 2)
    assert small >= sms // 2
    big_fn = rt.get_function(module, "bigsmem")
    rt.Launcher(big_fn, [PTR, ctypes.c_uint32], shared_bytes=200 * 1024)      # opts in to the shared memory
    fours = max_active_clusters(big_fn, (32, 1, 1), 200 * 1024, 4)
    assert 1 <= fours <= sms // 4


def test_dynamic_shared_memory_above_48k(module):
    fn = rt.get_function(module, "bigsmem")
    nbytes = 100 * 1024
    L = rt.Launcher(fn, [PTR, ctypes.c_uint32], shared_bytes=nbytes)
    assert rt.function_attributes(fn)["max_dynamic_shared_size_bytes"] >= nbytes
    out = rt.empty(1, "u32").fill_bytes(0)
    L.launch(1, 1, 1, 32, 1, 1, 0, (out.ptr, nbytes - 4))
    rt.synchronize()
    assert out.to_host()[0] == 12345


def test_launch_errors(module):
    fn = rt.get_function(module, "axpb")
    L = rt.Launcher(fn, [PTR, PTR, I32, F32])
    with pytest.raises(CudaError) as info:
        L.launch(1, 1, 1, 4096, 1, 1, 0, (0, 0, 0, 1.0))   # too many threads per block
    assert info.value.name == "CUDA_ERROR_INVALID_VALUE"
    assert info.value.call == "cuLaunchKernelEx"
    with pytest.raises(TypeError):
        L.launch(1, 1, 1, 32, 1, 1, 0, (0, 0, 0))
    rt.synchronize()


def test_launch_from_thread_without_context(module):
    fn = rt.get_function(module, "axpb")
    L = rt.Launcher(fn, [PTR, PTR, I32, F32])
    n = 256
    x = np.arange(n, dtype=np.float32)
    dx = rt.to_device(x)
    outs = [rt.empty(n, "f32").fill_bytes(0xFF) for _ in range(4)]

    def work(i):
        # this thread has no current context: the launcher makes its own current
        L.launch(2, 1, 1, 128, 1, 1, 0, (outs[i].ptr, dx.ptr, n, float(i)))
        driver.synchronize()

    run_in_threads(work, 4)
    for i, o in enumerate(outs):
        np.testing.assert_allclose(o.to_host(), x * i + n)


def test_launch_cost_measurement_runs():
    r = rt.launch._launch_cost_ns(batch=16, repeat=2)
    assert all(v > 0 for v in r.values())


# ------------------------------------------------------------------ torch

def test_torch_interop(module):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    t = torch.randn(300, device="cuda")
    f = array_extractor(type(t))
    assert f(t) == (t.data_ptr(), "f32")
    assert f(t.to(torch.bfloat16))[1] == "bf16"
    assert f(t.to(torch.float16))[1] == "f16"
    if hasattr(torch, "float8_e4m3fn"):
        assert f(t.to(torch.float8_e4m3fn))[1] == "f8e4m3"
    view = t.view(20, 15)[2:, 3:]
    info = describe_array(view)
    assert info.ptr == view.data_ptr() and info.shape == (18, 12) and info.strides == (15, 1)
    assert info.device_ordinal == 0
    with pytest.raises(TypeError, match=r"host memory.*\.cuda\(\)"):
        f(torch.zeros(3))
    # DLPack path on a CUDA tensor (only the protocol visible)

    class Wrap:
        def __init__(self, x):
            self.x = x

        def __dlpack__(self, stream=None):
            return self.x.__dlpack__()

        def __dlpack_device__(self):
            return self.x.__dlpack_device__()

    w = Wrap(view)
    assert array_extractor(Wrap)(w) == (view.data_ptr(), "f32")
    dinfo = describe_array(w)
    assert dinfo.shape == (18, 12) and dinfo.strides == (15, 1) and dinfo.device_ordinal == 0
    assert array_extractor(Wrap)(Wrap(t.to(torch.bfloat16)))[1] == "bf16"
    # launch on torch tensors and a torch stream
    fn = rt.get_function(module, "axpb")
    L = rt.Launcher(fn, [PTR, PTR, I32, F32])
    out = torch.full((300,), float("nan"), device="cuda")
    s = torch.cuda.Stream()
    h = rt.stream_handle(s)
    assert h == s.cuda_stream != 0
    assert rt.stream_handle(torch.cuda.default_stream()) == 0
    torch.cuda.current_stream().synchronize()
    L.launch(3, 1, 1, 128, 1, 1, h, (f(out)[0], f(t)[0], 300, 3.0))
    s.synchronize()
    torch.testing.assert_close(out, t * 3.0 + 300)
    # a DeviceArray is consumable by torch through __cuda_array_interface__
    d = rt.to_device(np.arange(6, dtype=np.float32))
    tt = torch.as_tensor(d, device="cuda")
    assert tt.data_ptr() == d.ptr and tt.cpu().tolist() == list(range(6))


# ------------------------------------------------------------------- cupy

def test_cupy_interop(module):
    cp = pytest.importorskip("cupy")
    a = cp.arange(300, dtype=cp.float32)
    f = array_extractor(type(a))
    assert f(a) == (a.data.ptr, "f32")
    v = a.reshape(20, 15)[::2, 1:]
    info = describe_array(v)
    assert info.ptr == v.data.ptr and info.shape == (10, 14) and info.strides == (30, 1)
    s = cp.cuda.Stream(non_blocking=True)
    assert rt.stream_handle(s) == s.ptr != 0
    assert rt.stream_handle(cp.cuda.Stream.null) == 0
    fn = rt.get_function(module, "axpb")
    L = rt.Launcher(fn, [PTR, PTR, I32, F32])
    out = cp.full(300, cp.nan, dtype=cp.float32)
    L.launch(3, 1, 1, 128, 1, 1, rt.stream_handle(s), (out.data.ptr, a.data.ptr, 300, 2.0))
    s.synchronize()
    np.testing.assert_allclose(cp.asnumpy(out), np.arange(300, dtype=np.float32) * 2 + 300)
    d = rt.to_device(np.arange(5, dtype=np.int32))
    assert cp.asarray(d).data.ptr == d.ptr


def test_device_array_to_torch_and_cupy_through_dlpack():
    """torch.from_dlpack / cupy.from_dlpack wrap a DeviceArray without copying (issue 15 item 14)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    host = np.random.default_rng().standard_normal((37, 5)).astype(np.float32)
    x = rt.to_device(host)
    t = torch.from_dlpack(x)
    assert t.data_ptr() == x.ptr and tuple(t.shape) == (37, 5) and t.dtype == torch.float32
    np.testing.assert_array_equal(t.cpu().numpy(), host)
    t.mul_(2.0)                                   # the same memory: the DeviceArray sees the write
    torch.cuda.synchronize()
    np.testing.assert_array_equal(x.to_host(), host * 2)
    del t
    try:
        import cupy
    except ImportError:
        return
    c = cupy.from_dlpack(x)
    assert c.data.ptr == x.ptr
    np.testing.assert_array_equal(cupy.asnumpy(c), host * 2)
