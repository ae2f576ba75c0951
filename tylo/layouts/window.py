"""Windows and mode permutations, generic over storage objects.

``window(x, origin, shape, check=True)`` and ``permutedims(x, perm=None)``
work on ``Layout``, ``ComposedLayout`` and ``View`` here, and on any object
that implements the protocol:

* ``x.__tylo_window__(origin, shape, check)`` returns the window of ``x``
  whose coordinate ``c`` is ``x``'s coordinate ``origin + c``.  ``origin``
  is a tuple of one index per top-level mode (static ints or runtime
  values), ``shape`` a tuple of positive static ints, ``check`` says whether
  out-of-range windows must raise ``ValueError``.
* ``x.__tylo_permutedims__(perm)`` returns ``x`` with its top-level modes
  reordered: mode ``i`` of the result is mode ``perm[i]`` of ``x``.  ``perm``
  is already normalised to a full tuple (the default swaps two modes).

Hardware tiles defined elsewhere (a TMEM tile, a shared tile with a base
pointer) implement the protocol by windowing / permuting their layout with
these same functions and keeping their other fields.

A ``View`` keeps the origin *inside* the parent map: ``view(c) ==
parent(origin + c)``.  A swizzled parent therefore keeps its phase, which a
re-based layout ``offset + L(c)`` could not.  Windows of windows fold their
origins.
"""

from __future__ import annotations

from typing import Any

from . import inttuple as it
from .affine import mode_stride
from .inttuple import add, fmt
from .layout import ComposedLayout, Layout

__all__ = ["View", "window", "permutedims", "normalize_perm"]


def _top_extents(parent: Any) -> tuple:
    shape = parent.shape
    if type(shape) is not tuple:
        return (shape,)
    return tuple(it.product(s) for s in shape)


class View:
    """A window of static ``shape`` at (possibly runtime) ``origin`` of
    ``parent`` (a Layout or ComposedLayout): ``view(c) = parent(origin + c)``.

    >>> v = window(Layout((128, 128), (1, 128)), (64, 32), (32, 64))
    >>> v
    window((128,128):(1,128), origin=(64,32), shape=(32,64))
    >>> v((0, 0)) == 64 + 32 * 128, v.size
    (True, 2048)
    """

    __slots__ = ("parent", "origin", "shape")

    def __init__(self, parent: Any, origin: tuple, shape: tuple):
        object.__setattr__(self, "parent", parent)
        object.__setattr__(self, "origin", origin)
        object.__setattr__(self, "shape", shape)

    def __setattr__(self, k, v):
        raise AttributeError("View is immutable")

    rank = property(lambda self: len(self.shape))
    depth = property(lambda self: 1)

    @property
    def size(self) -> int:
        return it.product(self.shape)

    @property
    def is_static(self) -> bool:
        return self.parent.is_static and it.is_static(self.origin)

    @property
    def offset(self) -> Any:
        """Offset of the window's first element (``parent(origin)``)."""
        return self.parent(self.origin)

    def __len__(self) -> int:
        return self.rank

    def __call__(self, *args: Any) -> Any:
        coord = args[0] if len(args) == 1 else args
        if type(coord) is not tuple:
            # decompose a 1-D index first-mode-fastest over the window shape
            idx = coord
            cs = []
            div = 1
            n = len(self.shape)
            for k, s in enumerate(self.shape):
                q = idx if div == 1 else idx // div
                if k < n - 1:
                    q = 0 if s == 1 else q % s
                cs.append(q)
                div *= s
            coord = tuple(cs)
        if len(coord) != len(self.shape):
            raise ValueError(
                f"coordinate {fmt(coord)} has {len(coord)} modes, window has {len(self.shape)}"
            )
        return self.parent(tuple(add(o, c) for o, c in zip(self.origin, coord)))

    def offsets(self):
        """numpy array of offsets for every 1-D index (static views only)."""
        import numpy as np

        if not self.is_static:
            raise ValueError(f"offsets: needs a static view, got {self!r}")
        return np.broadcast_to(
            np.asarray(self(np.arange(self.size, dtype=np.int64)), dtype=np.int64), (self.size,)
        ).copy()

    def affine(self) -> tuple[Any, Layout] | None:
        """``(offset, L)`` with ``view(c) == offset + L(c)`` when the parent
        is a Layout that is affine along every axis over the window, else
        None."""
        p = self.parent
        if not isinstance(p, Layout):
            return None
        strides = []
        for i, (o, s) in enumerate(zip(self.origin, self.shape)):
            m = p[i] if type(p.shape) is tuple else p
            d = mode_stride(m, o if type(o) is int else None, s)
            if d is None:
                return None
            strides.append(d)
        return self.offset, Layout(tuple(self.shape), tuple(strides))

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, View):
            return NotImplemented
        return (
            self.parent == other.parent
            and self.shape == other.shape
            and all(
                (type(a) is int and type(b) is int and a == b) or a is b
                for a, b in zip(self.origin, other.origin)
            )
        )

    def __hash__(self) -> int:
        return hash(("View", self.parent, self.shape))

    def __repr__(self) -> str:
        return f"window({self.parent!r}, origin={fmt(self.origin)}, shape={fmt(self.shape)})"


def _norm_origin_shape(extents: tuple, origin: Any, shape: Any, what: str):
    if type(origin) is not tuple:
        origin = tuple(origin) if isinstance(origin, list) else (origin,)
    if type(shape) is not tuple:
        shape = tuple(shape) if isinstance(shape, list) else (shape,)
    origin = tuple(it.normalize(o, f"{what} origin") for o in origin)
    for o in origin:
        if type(o) is tuple:
            raise ValueError(f"{what}: origin entries must be integers, got {fmt(origin)}")
    if len(origin) != len(extents) or len(shape) != len(extents):
        raise ValueError(
            f"{what}: origin {fmt(origin)} and shape {fmt(shape)} must have one entry per "
            f"mode (rank {len(extents)})"
        )
    for s in shape:
        if type(s) is not int or isinstance(s, bool):
            raise ValueError(f"{what}: window shape must be static ints, got {shape!r}")
        if s <= 0:
            raise ValueError(f"{what}: window extents must be positive, got {shape!r}")
    return origin, shape


def _check_range(extents, origin, shape, what, parent):
    for i, (e, o, s) in enumerate(zip(extents, origin, shape)):
        if type(e) is not int:
            continue
        if s > e:
            raise ValueError(
                f"{what}: window extent {s} exceeds extent {e} of mode {i} of {parent!r}"
            )
        if type(o) is int and (o < 0 or o + s > e):
            raise ValueError(
                f"{what}: window [{o}, {o + s}) of mode {i} is outside [0, {e}) of {parent!r} "
                "(pass check=False to opt out)"
            )


def window(x: Any, origin: Any, shape: Any, check: bool = True) -> Any:
    """The window of ``x`` at ``origin`` with static ``shape`` (see module doc).

    >>> from tylo.layouts import Swizzle, ComposedLayout
    >>> sw = ComposedLayout(Swizzle(3, 3, 3), Layout((128, 64), (64, 1)))
    >>> w = window(window(sw, (8, 0), (64, 64)), (1, 0), (8, 64))
    >>> w.origin, w((0, 0)) == sw((9, 0))
    ((9, 0), True)
    """
    hook = getattr(type(x), "__tylo_window__", None)
    if hook is not None:
        return hook(x, origin, shape, check)
    if isinstance(x, View):
        origin, shape = _norm_origin_shape(x.shape, origin, shape, "window")
        if check:
            _check_range(x.shape, origin, shape, "window", x)
        return View(x.parent, tuple(add(a, b) for a, b in zip(x.origin, origin)), shape)
    if isinstance(x, (Layout, ComposedLayout)):
        extents = _top_extents(x)
        origin, shape = _norm_origin_shape(extents, origin, shape, "window")
        if check:
            _check_range(extents, origin, shape, "window", x)
        return View(x, origin, shape)
    raise ValueError(
        f"window: {type(x).__name__} is neither a layout nor implements __tylo_window__"
    )


def normalize_perm(rank: int, perm: Any, what: str = "permutedims") -> tuple[int, ...]:
    if perm is None:
        if rank != 2:
            raise ValueError(
                f"{what}: the default permutation swaps two modes; give perm for rank {rank}"
            )
        return (1, 0)
    perm = tuple(perm)
    if sorted(perm) != list(range(rank)) or any(type(p) is not int for p in perm):
        raise ValueError(f"{what}: {perm!r} is not a permutation of range({rank})")
    return perm


def permutedims(x: Any, perm: Any = None) -> Any:
    """Reorder top-level modes: mode ``i`` of the result is mode ``perm[i]``.

    >>> permutedims(Layout((128, 64), (64, 1)))
    (64,128):(1,64)
    """
    hook = getattr(type(x), "__tylo_permutedims__", None)
    if hook is not None:
        rank = len(x.shape) if type(getattr(x, "shape", None)) is tuple else getattr(x, "rank", 1)
        return hook(x, normalize_perm(rank, perm))
    if isinstance(x, Layout):
        if type(x.shape) is not tuple:
            normalize_perm(1, perm)
            return x
        p = normalize_perm(x.rank, perm)
        return Layout(tuple(x.shape[i] for i in p), tuple(x.stride[i] for i in p))
    if isinstance(x, ComposedLayout):
        return ComposedLayout(x.swizzle, permutedims(x.layout, perm))
    if isinstance(x, View):
        p = normalize_perm(x.rank, perm)
        return View(
            permutedims(x.parent, p),
            tuple(x.origin[i] for i in p),
            tuple(x.shape[i] for i in p),
        )
    raise ValueError(
        f"permutedims: {type(x).__name__} is neither a layout nor implements __tylo_permutedims__"
    )

