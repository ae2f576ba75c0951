"""``do_bench``: time a GPU callable with CUDA events, the way Triton users know it.

``warmup`` and ``rep`` are time budgets in milliseconds, not counts: ``do_bench`` first runs
``fn`` once (compiles, loads), times 5 calls to estimate one call's duration, then runs
``warmup / estimate`` untimed calls and ``rep / estimate`` timed ones (at least 1 each, at most
``MAX_REPS`` timed calls). Each timed call is bracketed by two events recorded on ``stream``;
before each, unless ``flush_l2=False``, a memset of a buffer twice the size of the L2 cache
evicts whatever the previous call left there, so every call starts cold, and keeps the GPU busy
while the host records the start event and launches ``fn`` (so small kernels are not timed
with the launch latency in front of them). With ``flush_l2=False`` a hold (``tylo.testing.hold``: a
one-thread kernel that spins ``HOLD_PER_CALL_MS`` per queued call and touches no memory) does that
second job, so warm timings of small kernels measure the kernels too. ``fn`` must queue its work on
``stream`` (the legacy default stream when None).

The device side goes through a ``Timer`` (``CudaEventTimer`` by default); tests pass a fake one
(``timer=``) that reads a simulated clock, so the counting and statistics run without a GPU.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

__all__ = ["BenchResult", "Timer", "CudaEventTimer", "do_bench", "ESTIMATE_RUNS", "MAX_REPS", "HOLD_PER_CALL_MS"]

ESTIMATE_RUNS = 5          # timed calls that estimate one call's duration
MAX_REPS = 10_000          # timed calls at most (a 1 us kernel with rep=100 would otherwise ask 100 000)
_MIN_ESTIMATE_MS = 1e-4    # below the event resolution; guards the division for instant calls
HOLD_PER_CALL_MS = 0.03    # GPU time held per queued call without a flush: more than a host launch path takes
                           # (tylo 11-19 us, torch 15-18 us, Triton 27 us on the H200's host)


@dataclass(frozen=True)
class BenchResult:
    """Timing of ``n`` calls, in milliseconds. ``quantiles`` holds one value per level asked
    for (``do_bench(quantiles=(0.2, 0.5, 0.8))`` -> the 20th, 50th and 80th percentiles)."""

    median_ms: float
    quantiles: tuple
    mean_ms: float
    min_ms: float
    n: int

    def __str__(self) -> str:
        spread = ", ".join(f"{q:.4f}" for q in self.quantiles)
        return f"{self.median_ms:.4f} ms median of {self.n} (quantiles {spread}; min {self.min_ms:.4f})"


class Timer(Protocol):
    """What ``do_bench`` needs from the device: marks around a call and their distance."""

    def flush_l2(self) -> None:
        """Queue work that evicts the L2 cache (before a timed call)."""

    def hold(self, ms: float) -> None:
        """Queue at least ``ms`` of GPU work that leaves the L2 alone (before a sample, without a flush)."""

    def mark(self) -> object:
        """Record a point in the stream's order; return a handle for ``elapsed_ms``."""

    def synchronize(self) -> None:
        """Wait until every mark recorded so far has completed."""

    def elapsed_ms(self, start, end) -> float:
        """Milliseconds between two completed marks."""

    def close(self) -> None:
        """Release what the timer holds."""


_flush_buffers: dict[int, tuple[int, int]] = {}   # device ordinal -> (pointer, bytes), kept for the process
_flush_lock = threading.Lock()


def _flush_buffer(device: int) -> tuple[int, int]:
    from ..runtime import driver, events

    buf = _flush_buffers.get(device)
    if buf is None:
        with _flush_lock:
            buf = _flush_buffers.get(device)
            if buf is None:
                l2 = events.l2_cache_bytes(device)
                nbytes = 2 * l2 if l2 > 0 else 256 << 20
                buf = _flush_buffers[device] = (driver.mem_alloc(nbytes), nbytes)
    return buf


class CudaEventTimer:
    """CUDA events on one stream, and an L2 flush by a memset of twice the L2 size."""

    def __init__(self, stream=None):
        from ..runtime import driver
        from ..runtime.errors import NoGPUError
        from ..runtime.streams import stream_handle

        try:
            self._device = driver.current_device()   # makes device 0's primary context current if none is
        except NoGPUError as exc:
            raise NoGPUError(exc.code, exc.name, "tylo.testing.do_bench",
                             "timing with CUDA events needs a GPU and its driver; without one, pass "
                             "timer= (a Timer that reads a simulated clock) to exercise the logic",
                             exc.hint) from None
        self._stream = stream_handle(stream)
        self._events: list[int] = []

    def flush_l2(self) -> None:
        from ..runtime import events

        ptr, nbytes = _flush_buffer(self._device)
        events.memset_d8_async(ptr, 0, nbytes, self._stream)

    def hold(self, ms: float) -> None:
        from .hold import hold

        hold(ms, self._stream, self._device)

    def mark(self) -> int:
        from ..runtime import events

        event = events.event_create()
        self._events.append(event)
        events.event_record(event, self._stream)
        return event

    def synchronize(self) -> None:
        from ..runtime import driver

        driver.stream_synchronize(self._stream)   # also surfaces an error of fn's first, untimed call

    def elapsed_ms(self, start: int, end: int) -> float:
        from ..runtime import events

        return events.event_elapsed_ms(start, end)

    def close(self) -> None:
        from ..runtime import events

        events_, self._events = self._events, []
        for event in events_:
            events.event_destroy(event)


def _timed_runs(fn: Callable, timer, n: int, flush_l2: bool, batch: int = 1) -> list[float]:
    """Per-call milliseconds of ``n`` samples of ``batch`` calls each."""
    marks = []
    for _ in range(n):
        if flush_l2:
            timer.flush_l2()
        else:
            timer.hold(batch * HOLD_PER_CALL_MS)
        start = timer.mark()
        for _ in range(batch):
            fn()
        marks.append((start, timer.mark()))
    timer.synchronize()
    return [timer.elapsed_ms(a, b) / batch for a, b in marks]


def _check_budget(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"do_bench: {what} is a time budget in milliseconds (a number >= 0), got {value!r}")
    return float(value)


def do_bench(fn: Callable[[], object], warmup: float = 25, rep: float = 100, *, flush_l2: bool = True,
             quantiles=(0.2, 0.5, 0.8), stream=None, timer: Timer | None = None, batch: int = 1) -> BenchResult:
    """Time ``fn()`` (which queues GPU work on ``stream``) and return a ``BenchResult``.

    ``warmup`` and ``rep`` are milliseconds (see the module doc for how they become counts).
    ``flush_l2`` clears the L2 cache before every timed call. ``batch``: calls per timed sample, back to back
    between one pair of events (a sample's figure is their mean; ``n`` counts samples): with
    ``flush_l2=False`` (behind the hold), the warm back-to-back regime of a kernel run in a loop.
    ``quantiles`` are levels in [0, 1]. ``timer`` replaces the CUDA events (tests); without it and without a GPU this
    raises ``tylo.runtime.errors.NoGPUError``.
    """
    if not callable(fn):
        raise TypeError(f"do_bench: fn must be callable, got {type(fn).__name__}")
    warmup = _check_budget(warmup, "warmup")
    rep = _check_budget(rep, "rep")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"do_bench: batch is a count of calls per timed sample (an int >= 1), got {batch!r}")
    levels = tuple(float(q) for q in quantiles)
    if any(not 0.0 <= q <= 1.0 for q in levels):
        raise ValueError(f"do_bench: quantiles are levels in [0, 1], got {quantiles!r}")
    own = timer is None
    if own:
        timer = CudaEventTimer(stream)
    try:
        fn()                       # compile, load, first-touch: never timed
        timer.synchronize()
        estimate = float(np.mean(_timed_runs(fn, timer, ESTIMATE_RUNS, flush_l2, batch)))
        per_call = max(estimate, _MIN_ESTIMATE_MS)
        n_warmup = max(1, int(warmup / per_call))
        n_rep = min(MAX_REPS, max(1, int(rep / per_call)))
        for _ in range(n_warmup):
            fn()
        samples = max(1, n_rep // batch)
        times = np.asarray(_timed_runs(fn, timer, samples, flush_l2, batch), dtype=np.float64)
    finally:
        if own:
            timer.close()
    return BenchResult(median_ms=float(np.median(times)),
                       quantiles=tuple(float(np.quantile(times, q)) for q in levels),
                       mean_ms=float(times.mean()), min_ms=float(times.min()), n=int(times.size))
