"""Driver layer on a machine without a GPU: no crash, clear NoGPUError."""

import pytest

from tylo import runtime as rt
from tylo.runtime import driver
from tylo.runtime.errors import CudaError, NoGPUError

no_gpu = pytest.mark.skipif(rt.gpu_available(), reason="this machine has a GPU")


def test_import_makes_no_driver_call_and_queries_never_raise():
    assert isinstance(rt.gpu_available(), bool)
    if not rt.gpu_available():
        assert rt.driver_version() is None
        assert rt.devices() == []
        assert rt.device_count() == 0


@no_gpu
@pytest.mark.parametrize("call", [
    lambda: rt.ensure_context(0),
    lambda: rt.compute_capability(0),
    lambda: rt.mem_alloc(256),
    lambda: rt.load_module(b"\x7fELF..."),
    lambda: rt.synchronize(),
    lambda: rt.memset_d8(0, 0, 16),
])
def test_driver_calls_raise_no_gpu_error(call):
    with pytest.raises(NoGPUError) as info:
        call()
    e = info.value
    assert isinstance(e, CudaError) and isinstance(e, RuntimeError)
    assert isinstance(e.code, int) and e.name and e.call
    msg = str(e)
    assert "failed" in msg and "GPU" in msg and "driver" in msg


@no_gpu
def test_no_gpu_error_is_cached_and_repeatable():
    for _ in range(2):
        with pytest.raises(NoGPUError):
            rt.current_context()
    assert rt.gpu_available() is False


@no_gpu
def test_launcher_without_gpu_raises_no_gpu_error():
    import ctypes
    with pytest.raises(NoGPUError):
        rt.Launcher(0, [ctypes.c_uint64])


def test_cuda_error_message_format():
    e = CudaError(1, "CUDA_ERROR_INVALID_VALUE", "cuLaunchKernel", "invalid argument")
    assert str(e) == "cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE (invalid argument)"
    assert (e.code, e.name, e.call) == (1, "CUDA_ERROR_INVALID_VALUE", "cuLaunchKernel")
    # the name is found from the code without a driver
    e2 = CudaError(2, call="cuMemAlloc")
    assert e2.name == "CUDA_ERROR_OUT_OF_MEMORY"
    assert str(e2).startswith("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY")


def test_cuda_error_pickles():
    import pickle
    e = pickle.loads(pickle.dumps(CudaError(201, None, "cuCtxSynchronize", "bad ctx")))
    assert e.code == 201 and e.call == "cuCtxSynchronize" and e.name == "CUDA_ERROR_INVALID_CONTEXT"


def test_host_address_helper_checks_buffers():
    import numpy as np
    a = np.arange(8, dtype=np.float32)
    addr, n, _ = driver._host_address(a, writable=True)
    assert addr == a.ctypes.data and n == 32
    addr, n, _ = driver._host_address(b"abcd", writable=False)
    assert n == 4
    with pytest.raises(ValueError, match="C-contiguous"):
        driver._host_address(np.zeros((4, 4))[:, 1], writable=False)
    ro = np.zeros(4)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        driver._host_address(ro, writable=True)


def test_sm_count_is_the_device_list_entry_and_follows_the_interpreter_mode(monkeypatch):
    """``driver.sm_count`` (cached for launch paths) reports ``devices()``'s entry; under TYLO_INTERPRET=1
    without a GPU that is the interpreter's pseudo-device, and switching the mode is not served stale."""
    monkeypatch.setenv("TYLO_INTERPRET", "1")
    assert driver.sm_count() == driver.devices()[0]["sm_count"]
    if not driver.gpu_available():
        assert driver.sm_count() == driver.INTERPRETER_DEVICE["sm_count"]
        monkeypatch.setenv("TYLO_INTERPRET", "0")
        with pytest.raises(IndexError):
            driver.sm_count()
