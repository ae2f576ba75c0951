"""Recognisers used by the hardware plans.

Each recogniser is exact: it returns a result that holds for the whole map
(checked by enumerating the static layout) or ``None``; the companion
``*_reason`` function returns ``None`` when the recogniser succeeds and a
sentence saying why not otherwise.  Nothing here guesses.

Shared-memory matrix encodings (``swizzled_structure``)
-------------------------------------------------------

The operand is the logical 2-D tile with coordinates ``(mn, k)``; offsets
are in elements of ``elem_bytes`` bytes, relative to an allocation aligned
to the swizzle pattern (``8 * swizzle_bytes`` bytes).  With ``T = 16 /
elem_bytes`` elements per 16-byte chunk and ``W = swizzle_bytes /
elem_bytes`` elements per swizzle row, the canonical encodings of the PTX
ISA ("Shared Memory Matrix Layout" of wgmma / tcgen05; written as CuTe
layouts, LBO and SBO in elements) are

=========  ===========  ==========================================================
major      swizzle      layout of ``(mn, k)`` before the swizzle
=========  ===========  ==========================================================
K          none         ``((8,m),(T,k)) : ((T,SBO),(1,LBO))``
K          32/64/128 B  ``((8,m),K) : ((W,SBO),1)``, ``K <= W``; LBO unused
MN         none         ``((T,m),(8,k)) : ((1,SBO),(T,LBO))``
MN         32/64/128 B  ``((W,m),(8,k)) : ((1,LBO),(W,SBO))``
=========  ===========  ==========================================================

followed by ``Swizzle(log2(swizzle_bytes/16), log2(T), 3)`` for the swizzled
modes (the 16-byte chunk index XORed with the row index within 8 rows).  So
for K-major tiles SBO is the distance between 8-row groups along MN and
LBO the distance between core matrices along K (interleaved mode only); for
MN-major swizzled tiles LBO is the distance between swizzle atoms along MN
and SBO between 8-row groups along K, and for MN-major interleaved tiles
the two exchange (SBO along MN, LBO along K).  A byte offset that the tile
does not determine (a single group in that direction) or the hardware does
not read is reported as ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import inttuple as it
from .affine import mode_stride
from .layout import ComposedLayout, Layout, Swizzle
from .window import View

__all__ = [
    "axis_strides",
    "is_affine",
    "affine_reason",
    "contiguity",
    "SwizzledStructure",
    "swizzled_structure",
    "swizzled_structure_reason",
    "TmemBand",
    "tmem_band",
    "tmem_band_reason",
    "offsets_table",
]


def _extents(x: Any) -> tuple:
    shape = x.shape
    if type(shape) is not tuple:
        return (shape,)
    return tuple(it.product(s) for s in shape)


def offsets_table(x: Any) -> np.ndarray:
    """numpy array of offsets indexed by the top-level coordinates of a static
    Layout, ComposedLayout or View."""
    if not x.is_static:
        raise ValueError(f"offsets_table: needs a static layout, got {x!r}")
    return x.offsets().reshape(_extents(x), order="F")


def _affine(x: Any) -> tuple[tuple | None, str | None]:
    if isinstance(x, Layout):
        out = []
        for i in range(x.rank):
            m = x[i] if type(x.shape) is tuple else x
            e = m.size
            d = mode_stride(m, None, e if type(e) is int else 2)
            if d is None:
                return None, f"mode {i} ({m!r}) is not affine in its index"
            out.append(d)
        return tuple(out), None
    if isinstance(x, View):
        a = x.affine()
        if a is None:
            return None, f"{x!r} is not affine along every axis over its window"
        return tuple(a[1].stride), None
    if isinstance(x, ComposedLayout):
        if x.swizzle.is_identity:
            return _affine(x.layout)
        if not x.is_static:
            return None, f"{x!r} has a swizzle and runtime leaves"
        t = offsets_table(x)
        ext = t.shape
        strides = []
        for i, e in enumerate(ext):
            idx = [0] * len(ext)
            idx[i] = 1 if e > 1 else 0
            strides.append(int(t[tuple(idx)] - t[(0,) * len(ext)]) if e > 1 else 0)
        grids = np.indices(ext)
        expect = t.flat[0] + sum(g * d for g, d in zip(grids, strides))
        if np.array_equal(expect, t):
            return tuple(strides), None
        return None, f"the swizzle {x.swizzle!r} is not linear over {x.layout!r}"
    return None, f"{type(x).__name__} is not a layout"


def axis_strides(x: Any) -> tuple | None:
    """Per top-level axis, the stride when ``x`` is affine along every axis
    (``x(c) == x(0) + sum(c_i * d_i)``), else None.

    >>> axis_strides(Layout((4, (2, 4)), (2, (1, 8))))
    >>> axis_strides(Layout((4, (2, 4)), (1, (4, 8))))
    (1, 4)
    """
    return _affine(x)[0]


def is_affine(x: Any) -> bool:
    return _affine(x)[0] is not None


def affine_reason(x: Any) -> str | None:
    return _affine(x)[1]


def contiguity(x: Any, axis: int) -> int:
    """Largest ``n`` dividing the extent of ``axis`` such that every aligned
    run of ``n`` coordinates along ``axis`` maps to ``n`` consecutive offsets.

    >>> contiguity(Layout((8, 4), (1, 8)), 0), contiguity(Layout((8, 4), (1, 8)), 1)
    (8, 1)
    """
    t = offsets_table(x)
    if not 0 <= axis < t.ndim:
        raise ValueError(f"contiguity: axis {axis} out of range for rank {t.ndim}")
    t = np.moveaxis(t, axis, -1)
    e = t.shape[-1]
    rows = t.reshape(-1, e)
    for n in range(e, 0, -1):
        if e % n:
            continue
        blk = rows.reshape(rows.shape[0], e // n, n)
        if np.array_equal(blk - blk[:, :, :1], np.broadcast_to(np.arange(n), blk.shape)):
            return n
    return 1


# --------------------------------------------------------------------------


@dataclass(frozen=True)
class SwizzledStructure:
    """A canonical WGMMA/UMMA shared-memory encoding (see module doc).

    ``major``: ``'K'`` or ``'MN'``; ``swizzle_bytes``: 0 (interleaved, no
    swizzle), 32, 64 or 128; ``leading_byte_offset`` / ``stride_byte_offset``:
    LBO / SBO in bytes or None when not determined / not read;
    ``row_elements``: elements per row of the pattern (16 bytes' worth when
    interleaved, ``swizzle_bytes`` worth otherwise).
    """

    major: str
    swizzle_bytes: int
    leading_byte_offset: int | None
    stride_byte_offset: int | None
    row_elements: int

    def __str__(self) -> str:
        sw = "interleave" if self.swizzle_bytes == 0 else f"{self.swizzle_bytes}B"
        return (
            f"{self.major}-major {sw}: LBO={self.leading_byte_offset} "
            f"SBO={self.stride_byte_offset} row={self.row_elements} elements"
        )


def _swizzled(x: Any, elem_bytes: int) -> tuple[SwizzledStructure | None, str | None]:
    if elem_bytes not in (1, 2, 4):
        return None, f"element size {elem_bytes} bytes is not 1, 2 or 4"
    if not isinstance(x, (Layout, ComposedLayout)):
        return None, f"{type(x).__name__} is not a Layout or ComposedLayout"
    if x.rank != 2:
        return None, f"the operand must be 2-D (mn, k); {x!r} has rank {x.rank}"
    if not x.is_static:
        return None, f"{x!r} has runtime leaves"
    tab = offsets_table(x)
    MN, K = tab.shape
    if tab[0, 0] != 0:
        return None, "the tile does not start at offset 0 of the swizzle pattern"
    T = 16 // elem_bytes
    tbits = T.bit_length() - 1
    mn = np.arange(MN)[:, None]
    k = np.arange(K)[None, :]
    reasons = []

    def finish(major, swb, lbo_e, sbo_e, row):
        for name, v in (("LBO", lbo_e), ("SBO", sbo_e)):
            if v is None:
                continue
            b = v * elem_bytes
            if b <= 0 or b % 16 or b >= (1 << 18):
                reasons.append(f"{major}-major {swb}B: {name} = {b} bytes is not a positive multiple of 16 below 2^18")
                return None
        return SwizzledStructure(
            major,
            swb,
            None if lbo_e is None else lbo_e * elem_bytes,
            None if sbo_e is None else sbo_e * elem_bytes,
            row,
        )

    for swb in (128, 64, 32, 0):
        if swb:
            W = swb // elem_bytes
            sw = Swizzle((swb // 16).bit_length() - 1, tbits, 3)
            pre = sw(tab)
        else:
            W = T
            pre = tab
        # K-major
        if MN % 8 == 0 and K % T == 0 and (swb == 0 or K <= W):
            sbo = int(pre[8, 0]) if MN > 8 else None
            s_ = sbo or 0
            if swb:
                exp = (mn % 8) * W + (mn // 8) * s_ + k
                lbo = None
            else:
                lbo = int(pre[0, T]) if K > T else None
                exp = (mn % 8) * T + (mn // 8) * s_ + (k % T) + (k // T) * (lbo or 0)
            if np.array_equal(np.broadcast_to(exp, tab.shape), pre):
                r = finish("K", swb, lbo, sbo, W)
                if r is not None:
                    return r, None
        # MN-major
        if K % 8 == 0 and MN % T == 0 and (swb == 0 or MN <= W or MN % W == 0):
            if swb:
                lbo = int(pre[W, 0]) if MN > W else None
                sbo = int(pre[0, 8]) if K > 8 else None
                exp = (mn % W) + (k % 8) * W + (mn // W) * (lbo or 0) + (k // 8) * (sbo or 0)
            else:
                sbo = int(pre[T, 0]) if MN > T else None
                lbo = int(pre[0, 8]) if K > 8 else None
                exp = (mn % T) + (k % 8) * T + (mn // T) * (sbo or 0) + (k // 8) * (lbo or 0)
            if np.array_equal(np.broadcast_to(exp, tab.shape), pre):
                r = finish("MN", swb, lbo, sbo, W)
                if r is not None:
                    return r, None
    if reasons:
        return None, reasons[0]
    return None, (
        f"{x!r} ({MN}x{K}, {elem_bytes}-byte elements) matches no canonical K-major or "
        "MN-major encoding (interleaved, 32B, 64B or 128B swizzle)"
    )


def swizzled_structure(x: Any, elem_bytes: int) -> SwizzledStructure | None:
    """Recognise a canonical shared-memory operand encoding (module doc).

    >>> swizzled_structure(ComposedLayout(Swizzle(3, 3, 3), Layout((128, 64), (64, 1))), 2)
    SwizzledStructure(major='K', swizzle_bytes=128, leading_byte_offset=None, stride_byte_offset=1024, row_elements=64)
    """
    return _swizzled(x, elem_bytes)[0]


def swizzled_structure_reason(x: Any, elem_bytes: int) -> str | None:
    return _swizzled(x, elem_bytes)[1]


# --------------------------------------------------------------------------


@dataclass(frozen=True)
class TmemBand:
    """A 2-D TMEM view that one warp can move with a ``.32x32b`` transfer.

    TMEM offsets count typed slots column-major over 128 lanes: lane
    ``i % 128``, position ``i // 128`` along the lane.  ``lane_axis`` maps
    ``lanes`` consecutive lanes from ``lane_base`` (a multiple of ``lanes``);
    ``value_axis`` maps ``values`` positions ``position_base +
    j * position_stride`` in every lane.
    """

    lane_axis: int
    lane_base: int
    lanes: int
    value_axis: int
    values: int
    position_base: int
    position_stride: int

    def __str__(self) -> str:
        return (
            f"lanes {self.lane_base}..{self.lane_base + self.lanes - 1} along axis {self.lane_axis}, "
            f"{self.values} values along axis {self.value_axis} at {self.position_base}"
            f"+{self.position_stride}*j"
        )


def _band(x: Any, lanes: int) -> tuple[TmemBand | None, str | None]:
    if not hasattr(x, "offsets") or getattr(x, "rank", 0) != 2:
        return None, f"{x!r} is not a 2-D layout or view"
    if not x.is_static:
        return None, f"{x!r} has a runtime origin or leaves; the lane band must be static"
    tab = offsets_table(x)
    lane = tab % 128
    pos = tab // 128
    why = []
    for la in (0, 1):
        va = 1 - la
        L = np.moveaxis(lane, la, 0)
        P = np.moveaxis(pos, la, 0)
        if L.shape[0] != lanes:
            why.append(f"axis {la} has extent {L.shape[0]}, not {lanes} lanes")
            continue
        base = int(L[0, 0])
        if not np.array_equal(L, np.broadcast_to((base + np.arange(lanes))[:, None], L.shape)):
            why.append(f"axis {la} does not map to consecutive lanes")
            continue
        if base % lanes:
            why.append(f"the band starts at lane {base}, not a multiple of {lanes}")
            continue
        if base + lanes > 128:
            why.append(f"the band {base}..{base + lanes - 1} leaves the 128 lanes")
            continue
        if not np.array_equal(P, np.broadcast_to(P[:1, :], P.shape)):
            why.append(f"positions along axis {va} differ between lanes")
            continue
        p = P[0]
        n = p.shape[0]
        st = int(p[1] - p[0]) if n > 1 else 1
        if not np.array_equal(p, p[0] + st * np.arange(n)):
            why.append(f"positions along axis {va} are not affine")
            continue
        return TmemBand(la, base, lanes, va, n, int(p[0]), st), None
    return None, "; ".join(why)


def tmem_band(x: Any, lanes: int = 32) -> TmemBand | None:
    """Recognise a ``lanes``-lane aligned TMEM band (see :class:`TmemBand`).

    >>> from tylo.layouts import window
    >>> tmem_band(window(Layout((128, 128), (1, 128)), (64, 32), (32, 64)))
    TmemBand(lane_axis=0, lane_base=64, lanes=32, value_axis=1, values=64, position_base=32, position_stride=1)
    """
    return _band(x, lanes)[0]


def tmem_band_reason(x: Any, lanes: int = 32) -> str | None:
    return _band(x, lanes)[1]
