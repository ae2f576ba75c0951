"""A GPU hold: a one-thread kernel that keeps a stream busy for a while, so the host can queue timed work
behind it and the GPU then runs that work back to back (``do_bench`` without an L2 flush; torch's
``torch.cuda._sleep`` does this for torch users). It touches no memory, so it leaves the L2 as it was."""
from __future__ import annotations

import functools

from ..ir.types import f32, i32
from ..jit import jit
from ..runtime.arrays import empty

CYCLES_PER_ITERATION = 8       # a dependent multiply and add, four cycles each (no FMA contraction in tylo)
CLOCK_HZ = 2.0e9               # an upper bound of SM clocks: a hold is at least as long as asked


@jit
def tylo_hold(sink, iterations: i32, sentinel: f32):
    # a chain ptxas cannot shorten; the store never happens (sentinel is NaN) but keeps the chain alive
    x = sentinel * 0.5
    for _ in range(iterations):
        x = x * 0.9999 + 0.5
    if x == sentinel:
        sink[0] = x


@functools.lru_cache(maxsize=None)
def _sink(device: int):
    """A 4-byte array per device the hold never writes (kept for the process)."""
    return empty((1,), "float32")


def hold(ms: float, stream: int, device: int) -> None:
    """Queue at least ``ms`` milliseconds of GPU time on ``stream`` (a raw handle) of the current ``device``."""
    iterations = max(1, min(2**31 - 1, int(ms * 1e-3 * CLOCK_HZ / CYCLES_PER_ITERATION)))
    tylo_hold[(1,), 32](_sink(device), iterations, float("nan"), stream=stream)
