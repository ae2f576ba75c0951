"""do_bench and the autotuner on a real GPU: CUDA events, the L2 flush, real launches of every
configuration, results checked against numpy on fresh random data, reset_to_zero and restore_value."""
import numpy as np
import pytest
import tuned_kernels as tk

import tylo
from tylo.autotuner import Config, autotune
from tylo.testing import do_bench
from tylo.tuning_store import list_tuned

pytestmark = pytest.mark.gpu

rng = np.random.default_rng()


def cdiv(a, b):
    return -(-a // b)


def doubling(n):
    """(x, out, run): fresh random x, a NaN-filled out, and a launch of out = 2 x."""
    x = tylo.to_device(rng.standard_normal(n).astype(np.float32))
    out = tylo.to_device(np.full(n, np.nan, np.float32))

    def run():
        tk.staged_scale[cdiv(n, 256), 256](out, x, n, 256, 256)
    return x, out, run


def test_do_bench_times_a_kernel_with_events():
    x, out, run = doubling(1 << 24)
    cold = do_bench(run, warmup=5, rep=50)
    warm = do_bench(run, warmup=5, rep=50, flush_l2=False, quantiles=(0.5,))
    for r in (cold, warm):
        assert r.n >= 1 and 0 < r.min_ms <= r.median_ms and r.mean_ms > 0
    assert cold.quantiles[0] <= cold.median_ms <= cold.quantiles[2]
    assert warm.quantiles == (warm.median_ms,)
    # 128 MiB moved per call: well over 1 us, well under a second on any supported GPU
    assert 1e-3 < cold.median_ms < 1e3
    np.testing.assert_array_equal(out.to_host(), 2 * x.to_host())


def test_warm_batches_behind_a_hold_time_the_kernel_not_the_launch_path():
    # a kernel much shorter than the host's launch path: without the hold, each warm sample would be the
    # launch path's length; with it, ten calls run back to back and the figure is the kernel's
    from tylo.testing.bench import CudaEventTimer
    x, out, run = doubling(1 << 10)
    run()
    warm = do_bench(run, warmup=5, rep=20, flush_l2=False, batch=10)
    timer = CudaEventTimer()
    try:
        start = timer.mark()
        timer.hold(0.2)
        end = timer.mark()
        timer.synchronize()
        held = timer.elapsed_ms(start, end)
    finally:
        timer.close()
    assert 0.15 < held < 5.0, held                 # at least what was asked at the SM's top clock
    assert warm.median_ms < 0.006, warm            # an empty-ish launch: a few us, not the ~12 us launch path
    np.testing.assert_array_equal(out.to_host(), 2 * x.to_host())


def test_autotune_picks_a_config_and_computes_right():
    n = 1_000_003
    cfgs = [Config(constexprs={"BLOCK": b, "SMEM": b}, block=b) for b in (128, 256, 512)]
    tuned = autotune(configs=cfgs, key=["n"], warmup=5, rep=20)(tk.staged_scale)
    x_host = rng.standard_normal(n).astype(np.float32)
    x = tylo.to_device(x_host)
    out = tylo.to_device(np.full(n, np.nan, np.float32))
    tuned[lambda meta: (cdiv(meta["n"], meta["BLOCK"]),)](out, x, n)
    np.testing.assert_array_equal(out.to_host(), x_host.astype(np.float64) * 2)
    best = tuned.best_config(out, x, n)
    assert best in cfgs
    (record,) = list_tuned()
    assert record.best == repr(best) and all(t.status == "ok" and t.median_ms > 0 for t in record.timings)
    assert record.device != "no GPU" and record.arch.startswith("sm_")
    # every configuration computes the same result
    for c in cfgs:
        out2 = tylo.to_device(np.full(n, np.nan, np.float32))
        tk.staged_scale[cdiv(n, c.constexprs["BLOCK"]), c.block](out2, x, n, **c.constexprs)
        np.testing.assert_array_equal(out2.to_host(), x_host * 2)
    # a second tuner over the same kernel and configs reuses the stored choice without timing
    again = autotune(configs=cfgs, key=["n"], timer=object())(tk.staged_scale)
    assert again.best_config(out, x, n) == best


def test_restore_value_keeps_tuning_runs_out_of_an_in_place_update():
    n = 100_000
    x0 = rng.standard_normal(n).astype(np.float32)
    x = tylo.to_device(x0)
    cfgs = [Config(constexprs={"BLOCK": b}, block=b) for b in (128, 256)]
    tuned = autotune(configs=cfgs, key=["n"], warmup=1, rep=5, restore_value=["x"])(tk.add_one)
    tuned[lambda meta: (cdiv(meta["n"], meta["BLOCK"]),)](x, n)
    np.testing.assert_array_equal(x.to_host(), x0 + np.float32(1))


def test_reset_to_zero_clears_an_accumulator_before_each_timed_run():
    n = 50_000
    values = rng.integers(-1000, 1000, n).astype(np.int32)
    x = tylo.to_device(values)
    total = tylo.to_device(np.array([123456], np.int32))
    cfgs = [Config(constexprs={"BLOCK": b}, block=b) for b in (128, 256)]
    tuned = autotune(configs=cfgs, key=["n"], warmup=1, rep=5, reset_to_zero=["total"])(tk.atomic_total)
    tuned[lambda meta: (cdiv(meta["n"], meta["BLOCK"]),)](total, x, n)
    # timed runs started from zero and were undone: the call added once to the caller's value
    assert int(total.to_host()[0]) == 123456 + int(values.astype(np.int64).sum())
