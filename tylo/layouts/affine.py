"""Affine strides of layout modes: the one question both windows and the recognisers ask.

``mode_stride(m, origin, extent)`` is ``d`` when ``m(origin + i) == m(origin) + d * i`` for every
``i`` in ``[0, extent)``, else None. Kept apart from ``recognise.py`` and ``window.py`` because each
of them needs it and ``recognise`` also needs ``window.View``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .layout import Layout, coalesce

__all__ = ["mode_stride"]


def mode_stride(m: Layout, origin: int | None, extent: int) -> Any:
    """Stride of ``m`` as an affine function of its 1-D index over
    ``[origin, origin + extent)`` (whole mode when ``origin`` is None)."""
    if extent == 1:
        return 0
    if m.is_static:
        c = coalesce(m)
        if type(c.shape) is not tuple:
            return c.stride
        if origin is None:
            return None
        vals = m.offsets()[origin : origin + extent]
        d = int(vals[1] - vals[0])
        if np.array_equal(vals - vals[0], d * np.arange(extent)):
            return d
        return None
    # dynamic leaves: only a single-leaf (or all-but-one unit) mode is affine
    shapes, strides = m.flat()
    live = [(s, d) for s, d in zip(shapes, strides) if not (type(s) is int and s == 1)]
    if len(live) == 1:
        return live[0][1]
    return None
