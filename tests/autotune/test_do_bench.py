"""do_bench on a simulated clock: budgets become counts, the L2 flush precedes every timed call,
the statistics are those of the measured calls; without a GPU and without a timer, a clear error."""
import numpy as np
import pytest
from fakes import FakeClock, FakeTimer

from tylo.runtime import driver
from tylo.runtime.errors import NoGPUError
from tylo.testing import BenchResult, do_bench
from tylo.testing.bench import ESTIMATE_RUNS, HOLD_PER_CALL_MS, MAX_REPS


def _constant(clock, ms):
    calls = []

    def fn():
        calls.append(clock.now_ms)
        clock.advance(ms)
    return fn, calls


def test_budgets_in_milliseconds_become_counts():
    clock = FakeClock()
    timer = FakeTimer(clock)
    fn, calls = _constant(clock, 0.5)
    r = do_bench(fn, warmup=10, rep=40, timer=timer)
    # 1 untimed first call + 5 estimate calls + 10/0.5 warmup + 40/0.5 timed
    assert len(calls) == 1 + ESTIMATE_RUNS + 20 + 80
    assert r.n == 80
    assert r.median_ms == pytest.approx(0.5) and r.min_ms == pytest.approx(0.5)
    assert r.quantiles == pytest.approx((0.5, 0.5, 0.5))
    assert isinstance(r, BenchResult)
    with pytest.raises(AttributeError):
        r.n = 3   # frozen


def test_at_least_one_call_and_at_most_max_reps():
    clock = FakeClock()
    fn, _ = _constant(clock, 50.0)
    assert do_bench(fn, warmup=1, rep=1, timer=FakeTimer(clock)).n == 1
    fn, _ = _constant(clock, 0.0)     # instantaneous: the count is capped, never a division by 0
    assert do_bench(fn, warmup=0, rep=100, timer=FakeTimer(clock)).n == MAX_REPS


def test_flush_precedes_every_timed_call_and_is_outside_the_marks():
    clock = FakeClock()
    timer = FakeTimer(clock, flush_cost_ms=7.0)
    fn, _ = _constant(clock, 1.0)
    r = do_bench(fn, warmup=2, rep=10, timer=timer)
    assert timer.flushes == ESTIMATE_RUNS + r.n
    timed = [e for e in timer.events]
    assert timed[:3] == ["flush", "mark", "mark"]
    assert r.median_ms == pytest.approx(1.0)        # the 7 ms flushes are not timed
    timer = FakeTimer(clock, flush_cost_ms=7.0)
    do_bench(fn, warmup=2, rep=10, flush_l2=False, timer=timer)
    assert timer.flushes == 0


def test_statistics_of_the_measured_calls():
    rng = np.random.default_rng(5)
    costs = rng.uniform(0.5, 2.0, size=10_000)
    clock = FakeClock()
    it = iter(costs)
    seen = []

    def fn():
        c = next(it)
        seen.append(c)
        clock.advance(c)
    r = do_bench(fn, warmup=5, rep=60, quantiles=(0.1, 0.5, 0.9), timer=FakeTimer(clock))
    timed = np.array(seen[-r.n:])
    assert r.median_ms == pytest.approx(np.median(timed))
    assert r.mean_ms == pytest.approx(timed.mean())
    assert r.min_ms == pytest.approx(timed.min())
    assert r.quantiles == pytest.approx(tuple(np.quantile(timed, [0.1, 0.5, 0.9])))
    assert r.quantiles[1] == pytest.approx(r.median_ms)


@pytest.mark.parametrize("kwargs", [{"warmup": -1}, {"rep": "100"}, {"quantiles": (0.5, 1.5)}])
def test_bad_arguments(kwargs):
    clock = FakeClock()
    with pytest.raises(ValueError):
        do_bench(lambda: None, timer=FakeTimer(clock), **kwargs)
    with pytest.raises(TypeError):
        do_bench(42, timer=FakeTimer(clock))


@pytest.mark.skipif(driver.gpu_available(), reason="checks the message on a machine without a GPU")
def test_without_gpu_a_clear_error():
    with pytest.raises(NoGPUError) as info:
        do_bench(lambda: None)
    text = str(info.value)
    assert "do_bench" in text and "timer=" in text


def test_batches_time_back_to_back_calls_between_one_pair_of_marks():
    clock = FakeClock()
    timer = FakeTimer(clock, flush_cost_ms=7.0)
    fn, calls = _constant(clock, 0.5)
    r = do_bench(fn, warmup=1, rep=20, flush_l2=False, timer=timer, batch=4)
    assert r.median_ms == pytest.approx(0.5) and r.n == 40 // 4      # 40 calls fit the budget: 10 samples of 4
    assert timer.flushes == 0 and timer.marks == 2 * (ESTIMATE_RUNS + r.n)
    # without a flush, a hold of the GPU for the batch's launches precedes each sample's first mark
    assert timer.events[:3] == ["hold", "mark", "mark"] and timer.holds == [4 * HOLD_PER_CALL_MS] * (ESTIMATE_RUNS + r.n)
    with pytest.raises(ValueError, match="batch is a count"):
        do_bench(fn, batch=0, timer=timer)


def test_the_hold_kernel_keeps_its_multiply_add_chain():
    # the chain's result feeds a store under a runtime condition, so no stage may drop the loop
    from tylo.testing.hold import tylo_hold
    ptx = tylo_hold.compile(signature=["*f32", "i32", "f32"], arch="sm_90a").ptx
    assert "mul.rn.f32" in ptx and "add.rn.f32" in ptx and "st.global" in ptx
    assert "fma" not in ptx      # CYCLES_PER_ITERATION counts a separate multiply and add
