"""CUDA events and a stream-ordered memset: what timing on the GPU needs (``tylo.testing.do_bench``).

Each function is one driver call through ``driver.py``'s prototype table and error handling
(``CudaError`` naming the call; ``NoGPUError`` without a driver or device). Handles are plain
ints, as elsewhere in ``tylo.runtime``. Events are created with ``CU_EVENT_DEFAULT`` (timing
enabled, spin-wait synchronisation): the cheapest to record and the most precise to read.
"""
from __future__ import annotations

import ctypes

from . import driver

__all__ = ["event_create", "event_record", "event_synchronize", "event_elapsed_ms", "event_destroy",
           "memset_d8_async", "l2_cache_bytes"]

CU_EVENT_DEFAULT = 0
_DEV_L2_CACHE_SIZE = 38  # CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE


def event_create(flags: int = CU_EVENT_DEFAULT) -> int:
    """cuEventCreate in the current context (device 0's primary context when none); the CUevent as int."""
    driver._need_context()
    return driver._out_ptr("cuEventCreate", int(flags))


def event_record(event: int, stream: int = 0) -> None:
    """cuEventRecord: the event completes when the work queued on ``stream`` before it has."""
    driver._call("cuEventRecord", driver._u64(event, "CUevent"), driver._u64(stream, "CUstream"))


def event_synchronize(event: int) -> None:
    """cuEventSynchronize: wait on the host until ``event`` has completed."""
    driver._call("cuEventSynchronize", driver._u64(event, "CUevent"))


def event_elapsed_ms(start: int, end: int) -> float:
    """cuEventElapsedTime: milliseconds between two completed events (about 0.5 us resolution)."""
    out = ctypes.c_float()
    driver._call("cuEventElapsedTime", ctypes.byref(out), driver._u64(start, "CUevent"),
                 driver._u64(end, "CUevent"))
    return float(out.value)


def event_destroy(event: int) -> None:
    """cuEventDestroy; 0 does nothing."""
    if event:
        driver._call("cuEventDestroy", driver._u64(event, "CUevent"))


def memset_d8_async(ptr: int, value: int, nbytes: int, stream: int = 0) -> None:
    """cuMemsetD8Async: set ``nbytes`` bytes at ``ptr`` to ``value`` in ``stream``'s order."""
    if not 0 <= int(value) <= 255:
        raise ValueError(f"memset_d8_async: byte value {value} is not in 0..255")
    if not nbytes:
        return
    driver._need_context()
    driver._call("cuMemsetD8Async", driver._u64(ptr, "device pointer"), int(value),
                 driver._u64(nbytes, "memset size"), driver._u64(stream, "CUstream"))


def l2_cache_bytes(device: int | None = None) -> int:
    """The L2 cache size of ``device`` (the current context's device by default), in bytes."""
    ordinal = driver.current_device() if device is None else int(device)
    return driver._attr(driver._device(ordinal), _DEV_L2_CACHE_SIZE)
