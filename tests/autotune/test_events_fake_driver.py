"""do_bench's CUDA-event path against a stand-in libcuda.so.1 (tests/fake_libcuda.c) on a
machine without a GPU: symbol names and ctypes signatures of runtime/events.py (64-bit event and
stream handles), the flush buffer's size and stream, events read only after synchronising, every
event destroyed, and the statistics of the simulated kernel times."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_do_bench_through_the_driver_layer(fake_libcuda):
    env = dict(os.environ, PYTHONPATH=str(ROOT),
               LD_LIBRARY_PATH=fake_libcuda + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""))
    code = textwrap.dedent("""
        import ctypes
        from tylo.runtime import events
        from tylo.testing import do_bench

        lib = ctypes.CDLL("libcuda.so.1")
        lib.fake_advance.argtypes = [ctypes.c_double]
        for f in ("fake_memsets", "fake_memset_bytes", "fake_memset_stream", "fake_record_stream", "fake_syncs"):
            getattr(lib, f).restype = ctypes.c_ulonglong
        stream = 0x5EED00000000
        lengths = iter([0.25] * 6 + [0.5] * 4 + [0.25, 0.75] * 10_000)
        r = do_bench(lambda: lib.fake_advance(next(lengths)), warmup=1, rep=10, stream=stream)
        # estimate: 5 x 0.25 ms -> 4 warmup calls, 40 timed calls alternating 0.25 / 0.75 ms
        assert r.n == 40, r
        assert r.median_ms == 0.5 and r.min_ms == 0.25 and r.mean_ms == 0.5, r
        assert r.quantiles == (0.25, 0.5, 0.75), r
        assert lib.fake_memsets() == 5 + 40
        assert lib.fake_memset_bytes() == 2 * 1024 == 2 * events.l2_cache_bytes(0)
        assert lib.fake_memset_stream() == stream and lib.fake_record_stream() == stream
        assert lib.fake_events_alive() == 0
        assert lib.fake_syncs() == 3     # after the first call, after the estimate, after the timed calls
        lib.fake_record.restype = ctypes.c_ulonglong
        launches = lib.fake_record(12)
        r = do_bench(lambda: lib.fake_advance(0.25), warmup=0, rep=1, flush_l2=False)
        assert r.n == 4 and r.median_ms == 0.25 and lib.fake_memsets() == 45
        # no flush: a hold kernel launched before each of the 5 estimate and 4 timed samples
        assert lib.fake_record(12) - launches == 9, lib.fake_record(12) - launches
        assert lib.fake_record_stream() == 0 and lib.fake_events_alive() == 0
        # an event read before it is synchronised is the driver's error, named
        a, b = events.event_create(), events.event_create()
        events.event_record(a); events.event_record(b)
        try:
            events.event_elapsed_ms(a, b)
        except events.driver.CudaError as e:
            assert e.name == "CUDA_ERROR_NOT_READY" and e.call == "cuEventElapsedTime", e
        else:
            raise AssertionError("expected CUDA_ERROR_NOT_READY")
        events.event_synchronize(b)
        assert events.event_elapsed_ms(a, b) == 0.0
        events.event_destroy(a); events.event_destroy(b)
        assert lib.fake_events_alive() == 0
        print("OK")
        """)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def test_tuning_through_the_driver_layer_restores_and_zeroes(fake_libcuda, tmp_path):
    """The whole tuning path with real events, flushes, copies and memsets of the stand-in driver
    (device memory is host memory there): the launches are Python stand-ins of the kernels that
    update the arrays and take simulated time. restore_value and reset_to_zero leave exactly one
    launch's effect; the cheaper config wins; the saved copies are freed."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests' / 'autotune'}",
               TYLO_CACHE_DIR=str(tmp_path / "cache"),
               LD_LIBRARY_PATH=fake_libcuda + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""))
    code = textwrap.dedent("""
        import ctypes
        import numpy as np
        import tylo
        import tuned_kernels as tk
        from tylo.autotuner import Config, autotune
        from tylo.tuning_store import list_tuned

        lib = ctypes.CDLL("libcuda.so.1")
        lib.fake_advance.argtypes = [ctypes.c_double]
        cost = {128: 0.3, 256: 0.2}

        def view(a):   # the stand-in's device memory is host memory
            return np.frombuffer((ctypes.c_char * a.nbytes).from_address(a.ptr), dtype=a.dtype)

        def add_one(x, n, *, grid, block, stream=None, cluster=None, BLOCK):
            assert grid == (-(-n // BLOCK),) and block == (BLOCK, 1, 1)
            view(x)[:n] += 1
            lib.fake_advance(cost[BLOCK])

        seen = []

        def atomic_total(total, x, n, *, grid, block, stream=None, cluster=None, BLOCK):
            seen.append(int(view(total)[0]))
            view(total)[0] += view(x)[:n].sum()
            lib.fake_advance(cost[BLOCK])

        tk.add_one.launch, tk.atomic_total.launch = add_one, atomic_total
        cfgs = [Config(constexprs={"BLOCK": b}, block=b) for b in (128, 256)]
        grid = lambda meta: (-(-meta["n"] // meta["BLOCK"]),)
        rng = np.random.default_rng(7)

        n = 1000
        x0 = rng.standard_normal(n).astype(np.float32)
        x = tylo.to_device(x0)
        alive = lib.fake_allocs_alive()
        tuned = autotune(configs=cfgs, key=["n"], warmup=1, rep=5, restore_value=["x"])(tk.add_one)
        tuned[grid](x, n)
        np.testing.assert_array_equal(x.to_host(), x0 + np.float32(1))
        assert tuned.best_config(x, n).constexprs["BLOCK"] == 256
        (record,) = list_tuned()
        assert [round(t.median_ms, 4) for t in record.timings] == [0.3, 0.2], record.timings
        assert lib.fake_allocs_alive() == alive + 1, "the saved copy is freed; the flush buffer stays"

        values = rng.integers(-1000, 1000, n).astype(np.int32)
        xs = tylo.to_device(values)
        total = tylo.to_device(np.array([123456], np.int32))
        tuned = autotune(configs=cfgs, key=["n"], warmup=1, rep=5, reset_to_zero=["total"])(tk.atomic_total)
        tuned[grid](total, xs, n)
        assert int(total.to_host()[0]) == 123456 + int(values.sum())
        assert len(seen) > 2 and set(seen[:-1]) == {0} and seen[-1] == 123456, seen
        print("OK")
        """)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
