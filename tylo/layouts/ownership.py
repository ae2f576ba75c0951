"""Ownership: which thread holds which value of a register fragment.

``Ownership(shape, tv_layout)`` maps ``(thread, value slot)`` to a logical
coordinate of ``shape``: ``tv_layout((t, v))`` is the column-major
(first-axis-fastest) index of that coordinate, CuTe's TV-layout
convention.  Mode 0 of ``tv_layout`` enumerates threads, mode 1 the value
slots (registers) of each thread; either may be hierarchical, and stride-0
sub-modes express replication.

Host enumeration (numpy) gives the full ownership table and the properties
the fragment lowering checks; ``plans.py`` derives the plans from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from . import inttuple as it
from .inttuple import fmt
from .layout import Layout

__all__ = [
    "Ownership",
    "ownership_table",
    "index_table",
    "is_complete",
    "is_injective",
    "replication",
    "same_distribution",
    "fit_tv_layout",
    "fit_ownership",
    "ownership_name",
    "slot_list",
    "prefix_strides",
    "RegisterWindow",
    "register_window",
]


@dataclass(frozen=True)
class Ownership:
    """A map from (thread, value slot) to a logical coordinate of ``shape``.

    >>> o = Ownership.local((4, 8), axis=1)
    >>> o
    Ownership((4,8), (4,8):(1,4))
    >>> o.coord(2, 5), o.threads, o.values
    ((2, 5), 4, 8)
    """

    shape: tuple
    tv_layout: Layout
    name: str = field(default="", compare=False)

    def __post_init__(self):
        shape = self.shape
        if type(shape) is not tuple:
            shape = tuple(shape) if isinstance(shape, list) else (shape,)
        shape = it.normalize(shape, "Ownership shape")
        if not all(type(s) is int and s > 0 for s in shape):
            raise ValueError(
                f"Ownership: shape must be positive static ints (one per logical axis), got {shape!r}"
            )
        object.__setattr__(self, "shape", shape)
        tv = self.tv_layout
        if not isinstance(tv, Layout):
            raise ValueError(f"Ownership: tv_layout must be a Layout, got {tv!r}")
        if not tv.is_static:
            raise ValueError(f"Ownership: tv_layout must be static, got {tv!r}")
        if type(tv.shape) is not tuple or len(tv.shape) != 2:
            raise ValueError(
                f"Ownership: tv_layout must have two modes (threads, values), got {tv!r}"
            )
        n = it.product(shape)
        lo = sum(min(0, (s - 1) * d) for s, d in zip(*tv.flat()))
        if lo < 0 or tv.cosize > n:
            raise ValueError(
                f"Ownership: tv_layout {tv!r} maps outside the {n} coordinates of shape {fmt(shape)}"
            )

    # -- families -------------------------------------------------------------
    @classmethod
    def local(cls, shape: tuple, axis: int) -> "Ownership":
        """Each thread holds the whole extent along ``axis`` (value slot ``v``
        is coordinate ``v`` on ``axis``); threads index the other axis."""
        shape = _shape2(shape, "Ownership.local")
        _axis(axis, 2, "Ownership.local")
        M, N = shape
        tv = Layout((M, N), (1, M)) if axis == 1 else Layout((N, M), (M, 1))
        return cls(shape, tv, f"local({M}x{N}, axis={axis})")

    @classmethod
    def striped(cls, shape: tuple, axis: int, lanes: int = 32) -> "Ownership":
        """Values along ``axis`` striped over the ``lanes`` lanes of a warp
        (lane ``l`` holds ``l, l + lanes, ...``); warps index the other axis:
        thread ``l + lanes * r`` serves index ``r`` of the other axis."""
        shape = _shape2(shape, "Ownership.striped")
        _axis(axis, 2, "Ownership.striped")
        M, N = shape
        e = shape[axis]
        if e % lanes:
            raise ValueError(
                f"Ownership.striped: extent {e} of axis {axis} is not a multiple of {lanes} lanes"
            )
        if axis == 1:
            tv = Layout(((lanes, M), N // lanes), ((M, 1), lanes * M))
        else:
            tv = Layout(((lanes, N), M // lanes), ((1, M), lanes))
        return cls(shape, tv, f"striped({M}x{N}, axis={axis}, lanes={lanes})")

    @classmethod
    def wgmma_accumulator(cls, n: int) -> "Ownership":
        """The ``m64nNk16`` WGMMA accumulator D fragment (PTX ISA): 128
        threads, warp ``w`` owns rows ``16w .. 16w+15``; lane ``l`` holds
        ``d[4j + 2h + b]`` at row ``16w + l//4 + 8h``, column
        ``8j + 2(l%4) + b``."""
        if type(n) is not int or n <= 0 or n % 8 or n > 256:
            raise ValueError(f"Ownership.wgmma_accumulator: N must be a multiple of 8 in 8..256, got {n!r}")
        tv = Layout(((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512)))
        return cls((64, n), tv, f"wgmma_accumulator(64x{n})")

    # -- queries --------------------------------------------------------------
    @property
    def threads(self) -> int:
        return self.tv_layout[0].size

    @property
    def values(self) -> int:
        return self.tv_layout[1].size

    @property
    def rank(self) -> int:
        return len(self.shape)

    def index(self, thread: int, value: int) -> int:
        return self.tv_layout((thread, value))

    def coord(self, thread: int, value: int) -> tuple:
        i = self.tv_layout((thread, value))
        out = []
        for s in self.shape:
            out.append(i % s)
            i //= s
        return tuple(out)

    def __tylo_window__(self, origin, shape, check):
        return register_window(self, origin, shape).result

    def __tylo_permutedims__(self, perm):
        shape = tuple(self.shape[p] for p in perm)
        # old index -> new index: coordinate c_i has old stride P_old[i],
        # new stride P_new[perm^-1[i]]
        new_prefix = prefix_strides(shape)
        inv = [0] * len(perm)
        for i, p in enumerate(perm):
            inv[p] = i
        idx = index_table(self)
        T, V = idx.shape
        new = np.zeros_like(idx)
        rem = idx.copy()
        for i, s in enumerate(self.shape):
            new += (rem % s) * new_prefix[inv[i]]
            rem //= s
        tv = fit_tv_layout(new)
        if tv is None:
            raise ValueError(f"permutedims: the permuted ownership of {self} is not a layout")
        nm = f"permutedims({self.name or 'ownership'}, {perm})"
        return Ownership(shape, tv, nm)

    def __str__(self) -> str:
        return self.name or repr(self)

    def __repr__(self) -> str:
        return f"Ownership({fmt(self.shape)}, {self.tv_layout!r})"


def _shape2(shape, what):
    if type(shape) is not tuple or len(shape) != 2:
        raise ValueError(f"{what}: shape must be a 2-D tuple, got {shape!r}")
    for s in shape:
        if type(s) is not int or s <= 0:
            raise ValueError(f"{what}: extents must be positive static ints, got {shape!r}")
    return shape


def _axis(axis, rank, what):
    if type(axis) is not int or not 0 <= axis < rank:
        raise ValueError(f"{what}: axis must be in range({rank}), got {axis!r}")


def prefix_strides(shape):
    """Strides of the first-axis-fastest (column-major) index over ``shape``: ``(1, s0, s0*s1, ...)``."""
    p, out = 1, []
    for s in shape:
        out.append(p)
        p *= s
    return out


@lru_cache(maxsize=512)
def _index_table_cached(o: Ownership) -> np.ndarray:
    tv = o.tv_layout
    F = tv[0].offsets()
    G = tv[1].offsets()
    out = F[:, None] + G[None, :]
    out.setflags(write=False)
    return out


def index_table(o: Ownership) -> np.ndarray:
    """``[threads, values]`` array of column-major logical indices (read-only)."""
    return _index_table_cached(o)


@lru_cache(maxsize=512)
def _table_cached(o: Ownership) -> np.ndarray:
    idx = index_table(o)
    cs = []
    for s in o.shape:
        cs.append(idx % s)
        idx = idx // s
    out = np.stack(cs, axis=-1)
    out.setflags(write=False)
    return out


def ownership_table(o: Ownership) -> np.ndarray:
    """``[threads, values, rank]`` array of logical coordinates (read-only).

    >>> ownership_table(Ownership.wgmma_accumulator(8))[5, :, :].tolist()
    [[1, 2], [1, 3], [9, 2], [9, 3]]
    """
    return _table_cached(o)


def _counts(o: Ownership) -> np.ndarray:
    return np.bincount(index_table(o).ravel(), minlength=it.product(o.shape))


def is_complete(o: Ownership) -> bool:
    """Every logical coordinate has at least one owner."""
    return bool(_counts(o).min() > 0)


def is_injective(o: Ownership) -> bool:
    """No coordinate is held by two (thread, slot) pairs."""
    return bool(_counts(o).max() <= 1)


def replication(o: Ownership) -> int | None:
    """How many (thread, slot) pairs hold each coordinate, when that number
    is the same for every coordinate; None otherwise.

    >>> replication(Ownership((2,), Layout((4, 2), (0, 1))))
    4
    """
    c = _counts(o)
    return int(c[0]) if c.min() == c.max() else None


def same_distribution(a: Ownership, b: Ownership, slot_order: bool = True) -> bool:
    """Same logical shape and every thread holds the same coordinates — in
    the same slots (default) or in any order (``slot_order=False``)."""
    if a.shape != b.shape or a.threads != b.threads or a.values != b.values:
        return False
    ia, ib = index_table(a), index_table(b)
    if slot_order:
        return bool(np.array_equal(ia, ib))
    return bool(np.array_equal(np.sort(ia, axis=1), np.sort(ib, axis=1)))


# --------------------------------------------------------------------------
# fitting a layout to a table


def _fit1d(vals: np.ndarray) -> list[tuple[int, int]] | None:
    n = vals.shape[0]
    modes: list[tuple[int, int]] = []
    p = 1
    while p < n:
        rem = n // p
        d = int(vals[p] - vals[0])
        head = vals[:p]
        j = 1
        while j < rem and np.array_equal(vals[j * p : (j + 1) * p], head + j * d):
            j += 1
        s = max((q for q in range(1, j + 1) if rem % q == 0), default=1)
        if s == 1:
            return None
        modes.append((s, d))
        p *= s
    return modes


def _mk(modes):
    if not modes:
        return 1, 0
    if len(modes) == 1:
        return modes[0]
    return tuple(m[0] for m in modes), tuple(m[1] for m in modes)


def fit_tv_layout(table: np.ndarray) -> Layout | None:
    """A ``(threads, values)`` layout whose values are ``table`` exactly
    (checked), or None when no layout reproduces it."""
    T, V = table.shape
    if table[0, 0] != 0:
        return None
    F = table[:, 0]
    G = table[0, :]
    if not np.array_equal(table, F[:, None] + G[None, :]):
        return None
    fm, gm = _fit1d(F), _fit1d(G)
    if fm is None or gm is None:
        return None
    fs, fd = _mk(fm)
    gs, gd = _mk(gm)
    L = Layout((fs, gs), (fd, gd))
    if np.array_equal(L[0].offsets(), F) and np.array_equal(L[1].offsets(), G):
        return L
    return None


# --------------------------------------------------------------------------
# naming and register windows (here because Ownership.__tylo_window__ needs them)


def ownership_name(o: Ownership) -> str:
    """How messages name an ownership: its name, else its repr."""
    return o.name or repr(o)


def slot_list(xs) -> str:
    """Slot numbers for messages, ``[0,1,...]``, shortened after eight."""
    xs = list(xs)
    if len(xs) > 8:
        return "[" + ",".join(map(str, xs[:8])) + f",... ({len(xs)} slots)]"
    return "[" + ",".join(map(str, xs)) + "]"


@dataclass(frozen=True)
class RegisterWindow:
    """A static window of a fragment: result slot ``i`` is source slot
    ``slots[i]``; ``result`` is the ownership of the window."""

    source: Ownership
    origin: tuple
    shape: tuple
    slots: tuple
    result: Ownership

    def __str__(self) -> str:
        return (
            f"RegisterWindow {ownership_name(self.source)} origin={fmt(self.origin)} "
            f"shape={fmt(self.shape)}: slots {slot_list(self.slots)}"
        )


def fit_ownership(table: np.ndarray, shape: tuple, name: str, what: str) -> Ownership:
    """The Ownership of ``shape`` whose index table is ``table``; ValueError (from ``what``) if no layout fits."""
    tv = fit_tv_layout(table)
    if tv is None:
        raise ValueError(f"{what}: the resulting ownership of {name} is not representable as a layout")
    return Ownership(shape, tv, name)


def register_window(o: Ownership, origin: Any, shape: Any) -> RegisterWindow:
    """The slots of ``o`` inside the static window ``origin``/``shape``; every
    thread must keep the same slots (and at least one).

    >>> w = register_window(Ownership.local((4, 8), axis=1), (0, 2), (4, 4))
    >>> w.slots, w.result
    ((2, 3, 4, 5), Ownership((4,4), (4,4):(1,4)))
    """
    what = "register_window"
    origin = tuple(origin) if isinstance(origin, (tuple, list)) else (origin,)
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if len(origin) != o.rank or len(shape) != o.rank:
        raise ValueError(f"{what}: origin and shape need one entry per axis (rank {o.rank})")
    for x in origin + shape:
        if type(x) is not int:
            raise ValueError(f"{what}: a register window needs a static origin and shape, got {x!r}")
    for i, (a, s, e) in enumerate(zip(origin, shape, o.shape)):
        if s <= 0 or a < 0 or a + s > e:
            raise ValueError(
                f"{what}: window [{a}, {a + s}) of axis {i} is outside [0, {e}) of {ownership_name(o)}"
            )
    tab = ownership_table(o)
    lo = np.array(origin)
    hi = lo + np.array(shape)
    inside = ((tab >= lo) & (tab < hi)).all(axis=2)
    if not (inside == inside[:1]).all():
        t = int(np.flatnonzero((inside != inside[:1]).any(axis=1))[0])
        raise ValueError(
            f"{what}: thread {t} of {ownership_name(o)} keeps different slots than thread 0; a register "
            "window must select the same registers in every thread"
        )
    slots = tuple(int(v) for v in np.flatnonzero(inside[0]))
    if not slots:
        raise ValueError(f"{what}: the window keeps no value of {ownership_name(o)}; every thread must keep some")
    sub = tab[:, list(slots), :] - lo
    pre = prefix_strides(shape)
    idx = sum(sub[:, :, i] * pre[i] for i in range(o.rank))
    name = f"{ownership_name(o)}[{fmt(origin)}+{fmt(shape)}]"
    return RegisterWindow(o, origin, shape, slots, fit_ownership(np.asarray(idx), shape, name, what))
