"""driver.py calls libcuda through ctypes, without cuda.bindings.

The first launch of a cached kernel in a fresh process must not import
``cuda.bindings.driver`` (~23 ms). These tests run on a machine without a GPU:
one checks the no-driver path in a fresh interpreter; the others build a
stand-in ``libcuda.so.1`` from tests/fake_libcuda.c (prototypes as in cuda.h,
only the versioned ``_v2`` symbols where cuda.h maps a name to one) and drive
the whole driver layer against it in a subprocess, which checks symbol names,
ctypes signatures (64-bit handles, pointers, sizes) and enum values.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120, cwd=str(ROOT))


def test_driver_queries_do_not_import_cuda_bindings():
    r = _run("""
        import sys
        from tylo.runtime import driver
        assert isinstance(driver.gpu_available(), bool)
        driver.device_count(); driver.devices(); driver.driver_version()
        driver.pointer_device(0x1000)
        if not driver.gpu_available():
            for f in (driver.current_context, lambda: driver.compute_capability(0),
                      lambda: driver.ensure_context(0)):
                try:
                    f()
                except driver.NoGPUError as e:
                    assert e.name and e.call
                else:
                    raise AssertionError("expected NoGPUError")
        bad = sorted(m for m in sys.modules if m.startswith("cuda.bindings.driver"))
        assert not bad, bad
        print("OK")
    """)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def _run_fake(fake_dir: str, code: str):
    ld = fake_dir + os.pathsep + os.environ.get("LD_LIBRARY_PATH", "")
    r = _run(code, {"LD_LIBRARY_PATH": ld})
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def test_driver_layer_against_stand_in_libcuda(fake_libcuda):
    _run_fake(fake_libcuda, """
        import ctypes, sys
        import numpy as np
        from tylo.runtime import driver, launch
        from tylo.runtime.errors import CudaError, NoGPUError

        fake = ctypes.CDLL("libcuda.so.1")
        fake.fake_record.restype = ctypes.c_ulonglong
        rec = fake.fake_record

        assert driver.gpu_available() and driver.device_count() == 2
        assert driver.driver_version() == 12080
        devs = driver.devices()
        assert [d["name"] for d in devs] == ["Fake H200 #0", "Fake H200 #1"], devs
        d1 = devs[1]
        assert (d1["major"], d1["minor"], d1["compute_capability"]) == (9, 1, "sm_91")
        assert d1["total_memory"] == 141 << 30
        assert (d1["sm_count"], d1["max_shared_memory_per_block_optin"],
                d1["max_threads_per_block"]) == (132, 232448, 1024)
        assert driver.compute_capability(0) == (9, 0)

        # contexts: none current -> primary context retained once, made current
        assert driver.current_context() == 0
        c0 = driver.ensure_context(0)
        assert c0 == 0x5500000000000 and driver.current_context() == c0
        assert driver.ensure_context(0) == c0 and rec(0) == 1
        assert driver.current_device() == 0
        c1 = driver.ensure_context(1)
        assert c1 == c0 + 0x100 and driver.current_device() == 1 and rec(0) == 2
        assert driver.ensure_context(0) == c0 and rec(0) == 2   # cached primary
        # a current context of the same device (made by someone else) is reused
        driver._set_current(c0 + 0x100)
        assert driver.ensure_context(1) == c0 + 0x100 and rec(0) == 2
        driver.ensure_context(0)

        # errors carry the driver's name and the API call as cuda.h spells it
        try:
            driver.compute_capability(7)
        except CudaError as e:
            assert not isinstance(e, NoGPUError)
            assert (e.code, e.name, e.call) == (101, "CUDA_ERROR_INVALID_DEVICE", "cuDeviceGet")
            assert e.description == "fake driver error text"
        else:
            raise AssertionError("expected CudaError")

        mod = driver.load_module(b"\\x7fELF fake cubin")
        assert mod == 0xABC000000000
        f = driver.get_function(mod, "kern")
        assert f == 0xF00D00000000
        try:
            driver.get_function(mod, "nope")
        except CudaError as e:
            assert (e.name, e.call) == ("CUDA_ERROR_NOT_FOUND", "cuModuleGetFunction")
        else:
            raise AssertionError("expected CudaError")
        attrs = driver.function_attributes(f)
        assert attrs == {"num_regs": 104, "shared_size_bytes": 101, "max_threads_per_block": 100,
                         "local_size_bytes": 103, "const_size_bytes": 102, "ptx_version": 105,
                         "binary_version": 106, "max_dynamic_shared_size_bytes": 108}, attrs
        driver.set_max_dynamic_shared_memory(f, 200 * 1024)
        assert (rec(2), rec(3)) == (8, 200 * 1024)

        # memory: 64-bit pointers and sizes go through unnarrowed (the stand-in's device memory is a
        # host heap above 4 GiB; it records a size before refusing it)
        fake.fake_heap_base.restype = ctypes.c_ulonglong
        heap = fake.fake_heap_base()
        assert heap > 0xFFFFFFFF
        big = (5 << 32) + 7
        try:
            driver.mem_alloc(big)
        except CudaError as e:
            assert (e.name, e.call) == ("CUDA_ERROR_OUT_OF_MEMORY", "cuMemAlloc") and rec(4) == big
        else:
            raise AssertionError("expected CudaError")
        assert driver.mem_alloc(0) == 0
        p = driver.mem_alloc(64)
        assert p == heap and rec(4) == 64
        x = np.arange(16, dtype=np.float32)
        driver.memcpy_htod(p, x)
        assert rec(6) == p
        y = np.zeros(16, dtype=np.float32)
        driver.memcpy_dtoh(y, p)
        assert (x == y).all() and rec(7) == p
        driver.memset_d8(p, 0xAB, 8)
        z = np.zeros(8, dtype=np.uint8)
        driver.memcpy_dtoh(z, p)
        assert (z == 0xAB).all()
        try:
            driver.memcpy_dtod(p + 1, p, big)
        except CudaError as e:
            assert e.name == "CUDA_ERROR_INVALID_VALUE" and (rec(8), rec(9), rec(10)) == (p + 1, p, big)
        else:
            raise AssertionError("expected CudaError")
        assert driver.pointer_device(p) == 1 and driver.pointer_device(0x10) is None
        driver.mem_free(p)
        assert rec(5) == p
        driver.synchronize()
        assert rec(1) == 1
        driver.stream_synchronize(0xDEAD00000000)
        assert rec(11) == 0xDEAD00000000
        for bad in (lambda: driver.mem_free(-1), lambda: driver.memcpy_dtod(1 << 64, 0, 4)):
            try:
                bad()
            except OverflowError:
                pass
            else:
                raise AssertionError("expected OverflowError")

        # the launch path shares the handle and makes no cuda.bindings import
        L = launch.Launcher(f, [ctypes.c_uint64, ctypes.c_int32], shared_bytes=64 * 1024)
        assert L._ctx == c0
        L.launch(1, 1, 1, 32, 1, 1, 0, (p, 3))
        assert rec(13) == 1
        assert launch._lib_state["lib"] is driver._dll()
        # no current context on this thread: the launcher makes its own current
        driver._set_current(0)
        L.launch(1, 1, 1, 32, 1, 1, 0, (p, 3))
        assert rec(13) == 2 and driver.current_context() == c0
        driver.unload_module(mod)

        bad = sorted(m for m in sys.modules if m.startswith("cuda.bindings.driver"))
        assert not bad, bad
        print("OK")
    """)


def test_no_context_error_and_missing_symbol(fake_libcuda):
    _run_fake(fake_libcuda, """
        import ctypes, threading
        from tylo.runtime import driver
        from tylo.runtime.errors import CudaError, NoGPUError

        # another thread with no context: the functions fall back to device 0
        out = []
        t = threading.Thread(target=lambda: out.append(driver.mem_alloc(16)))
        t.start(); t.join()
        fake = ctypes.CDLL("libcuda.so.1")
        fake.fake_heap_base.restype = ctypes.c_ulonglong
        assert out == [fake.fake_heap_base()]
        # a symbol the driver lacks reads as an unusable driver, naming the call
        driver._PROTOS["cuFakeMissing"] = ("cuFakeMissing_v9", [])
        try:
            driver._call("cuFakeMissing")
        except NoGPUError as e:
            assert e.call == "cuFakeMissing" and "cuFakeMissing_v9" in e.description
        else:
            raise AssertionError("expected NoGPUError")
        print("OK")
    """)
