"""Scratch device buffers that persist across launches, one per (name, device, stream).

For kernels that keep state between their CTAs in global memory and leave it as they found it: a
persistent kernel's work counter that its last CTA resets, a split-K fixup's arrival counters that the
last arriver resets, the partial tiles they reduce. Launches on one stream run in order, so they can share
such a buffer; launches on concurrent streams must not, hence the stream in the key. ``zero=True`` buffers
are zeroed once, when allocated (and the device synchronised, so the zeros precede a launch on any
stream); the kernels keep them zero. A request for more elements than the buffer holds replaces it with a
larger one; the old one stays alive, since a launch still queued may use it.

Under ``TYLO_INTERPRET=1`` the buffers are numpy arrays (``tylo.empty`` / ``tylo.zeros``).
"""
from __future__ import annotations

import numpy as np

from .arrays import empty, zeros

__all__ = ["stream_scratch", "scratch_buffers"]

_BUFFERS: dict = {}
_RETIRED: list = []


def stream_scratch(name: str, elems: int, dtype, device: int, stream: int, zero: bool = True):
    """At least ``elems`` elements of ``dtype`` named ``name`` for launches on raw stream handle ``stream``
    (``streams.launch_stream``) of ``device``; allocated at least 4096 elements long."""
    key = (name, device, stream, zero)
    buf = _BUFFERS.get(key)
    if buf is None or buf.shape[0] < elems:
        if buf is not None:
            _RETIRED.append(buf)
        size = max(elems, 1 << 12)
        buf = _BUFFERS[key] = zeros((size,), dtype) if zero else empty((size,), dtype)
        if zero and not isinstance(buf, np.ndarray):
            from .driver import synchronize
            synchronize()     # the zeros (legacy stream) precede launches on non-blocking streams
    return buf


def scratch_buffers(name: str) -> list:
    """The live buffers named ``name`` (tests check that kernels left them zero)."""
    return [b for (n, *_), b in _BUFFERS.items() if n == name]
