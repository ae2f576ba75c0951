"""The CuTe layout algebra on static layouts.

``coalesce``, ``compose``, ``complement``, ``right_inverse``,
``left_inverse``, ``logical_divide`` / ``zipped_divide`` / ``tiled_divide`` /
``flat_divide``, ``logical_product`` / ``blocked_product`` /
``raked_product`` and ``tile``.  Every operation is exact: when the result
is not representable as a layout it raises ``ValueError`` naming the rule
that failed, it never approximates.

Admissibility rules for ``compose(A, B)`` (``A`` coalesced to flat modes
``s_k:d_k``, each leaf ``s:d`` of ``B`` handled separately):

* *stride divisibility*: walking ``A``'s modes, the remaining stride ``r``
  (initially ``d``) either is a multiple of ``s_k`` (the mode is skipped and
  ``r /= s_k``) or divides ``s_k`` (the mode is split); otherwise all ``s``
  selected indices must fall inside mode ``k``;
* *shape divisibility*: the remaining extent ``n`` (initially ``s``) either
  fits inside the current mode or is a multiple of its extent.

``A``'s last mode extends without bound, as in CuTe.
"""

from __future__ import annotations

from typing import Any

from . import inttuple as it
from .inttuple import fmt
from .layout import (
    ComposedLayout,
    Layout,
    Swizzle,
    coalesce,
    coalesce_modes,
    coalesced_modes,
    layout_from_modes,
    layout_of,
    make_layout,
    require_static,
)

__all__ = [
    "coalesce",
    "coalesce_modes",
    "compose",
    "complement",
    "right_inverse",
    "left_inverse",
    "logical_divide",
    "zipped_divide",
    "tiled_divide",
    "flat_divide",
    "logical_product",
    "blocked_product",
    "raked_product",
    "tile",
]


# --------------------------------------------------------------------------
# composition


def compose(a: Any, b: Any) -> Any:
    """``a o b``: the layout ``c -> a(b(c))`` with the shape of ``b``.

    ``a`` may be a Layout, a Swizzle or a ComposedLayout; ``b`` a Layout, an
    int ``n`` (meaning ``n:1``) or a tuple *tiler* applied mode by mode
    (entries Layout, int or ``None`` to keep a mode).

    >>> compose(Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1)))
    ((2,2),3):((24,2),8)
    """
    if isinstance(a, Swizzle):
        if isinstance(b, ComposedLayout):
            if a.is_identity:
                return b
            if b.swizzle.is_identity:
                return ComposedLayout(a, b.layout)
            raise ValueError("compose: a swizzle after a swizzled layout is not representable")
        if isinstance(b, Swizzle):
            raise ValueError("compose: the composition of two swizzles is not representable")
        return ComposedLayout(a, layout_of(b, "compose"))
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.swizzle, compose(a.layout, b))
    if not isinstance(a, Layout):
        raise ValueError(f"compose: left operand must be a Layout, Swizzle or ComposedLayout, got {a!r}")
    if isinstance(b, (Swizzle, ComposedLayout)):
        if isinstance(b, ComposedLayout) and b.swizzle.is_identity:
            return compose(a, b.layout)
        raise ValueError(
            "compose: a layout after a swizzle is not representable as a Layout or ComposedLayout"
        )
    if type(b) is tuple:
        return _by_mode(a, b, compose, "compose")
    b = layout_of(b, "compose")
    require_static(a, "compose")
    require_static(b, "compose")
    amodes = coalesced_modes(*a.flat()) or [(1, 0)]
    r = _compose(amodes, b.shape, b.stride, a, b)
    if len(b.flat()[0]) > 1:
        # mode-by-mode composition equals the function only when the modes of
        # b do not carry into each other inside a's mixed radix: check it
        import numpy as np

        ac = layout_from_modes(amodes)
        ac._compiled()
        want = np.asarray(ac._fi(b.offsets()), dtype=np.int64)
        if not np.array_equal(np.broadcast_to(want, (b.size,)), r.offsets()):
            raise ValueError(
                f"compose: {a!r} o {b!r} is not representable: the modes of the right "
                "operand interfere in the left operand's mixed radix (left distributivity fails)"
            )
    return r


def _by_mode(a: Layout, tiler: tuple, op, name: str) -> Layout:
    if len(tiler) > a.rank or type(a.shape) is not tuple and len(tiler) > 1:
        raise ValueError(f"{name}: tiler {tiler!r} has more modes than layout {a!r}")
    parts = []
    for i in range(a.rank):
        m = a[i]
        if i < len(tiler) and tiler[i] is not None:
            m = op(m, tiler[i])
        parts.append(m)
    if len(parts) == 1:
        return Layout((parts[0].shape,), (parts[0].stride,))
    return make_layout(*parts)


def _compose(amodes, bshape, bstride, a, b) -> Layout:
    if type(bshape) is tuple:
        parts = [_compose(amodes, s, d, a, b) for s, d in zip(bshape, bstride)]
        return Layout(tuple(p.shape for p in parts), tuple(p.stride for p in parts))
    s, d = bshape, bstride
    if s == 1:
        return Layout(1, 0)
    if d == 0:
        return Layout(s, 0)
    if d < 0:
        raise ValueError(f"compose: negative stride {d} in the right operand {b!r} is not supported")
    # step 1: divide out the stride
    modes = list(amodes)
    rest = d
    k = 0
    n = len(modes)
    while k < n - 1:
        sk, dk = modes[k]
        if rest % sk == 0:
            rest //= sk
            k += 1
            continue
        if sk % rest == 0:
            modes[k] = (sk // rest, dk * rest)
            rest = 1
            break
        if (s - 1) * rest < sk:  # every selected index stays inside mode k
            return Layout(s, dk * rest)
        raise ValueError(
            f"compose: {a!r} o {b!r} is not representable: stride divisibility fails "
            f"(remaining stride {rest} and extent {sk} of mode {k} do not divide each other)"
        )
    if rest != 1:
        modes[k] = (modes[k][0], modes[k][1] * rest)
    remaining = modes[k:]
    # step 2: keep the first s indices; the last mode is unbounded
    out = []
    r = s
    for j, (e, f) in enumerate(remaining):
        if j == len(remaining) - 1 or r <= e:
            out.append((r, f))
            r = 1
            break
        if r % e == 0:
            out.append((e, f))
            r //= e
            continue
        raise ValueError(
            f"compose: {a!r} o {b!r} is not representable: shape divisibility fails "
            f"(remaining extent {r} is not a multiple of mode extent {e})"
        )
    out = coalesced_modes(tuple(m[0] for m in out), tuple(m[1] for m in out))
    return layout_from_modes(out)


# --------------------------------------------------------------------------
# complement and inverses


def complement(a: Any, cotarget: Any = None) -> Layout:
    """The layout that fills the gaps of ``a`` up to ``cotarget``.

    ``(a, complement(a, M))`` is injective and its image covers ``[0, M)``.

    >>> complement(Layout(4, 2), 24)
    (2,3):(1,8)
    """
    a = layout_of(a, "complement")
    require_static(a, "complement")
    if cotarget is None:
        cotarget = a.cosize
    if isinstance(cotarget, tuple):
        cotarget = it.product(cotarget)
    if type(cotarget) is not int or cotarget <= 0:
        raise ValueError(f"complement: cotarget must be a positive static int, got {cotarget!r}")
    shapes, strides = a.flat()
    modes = [(d, s) for s, d in zip(shapes, strides) if s != 1 and d != 0]
    for d, _ in modes:
        if d < 0:
            raise ValueError(f"complement: negative stride {d} in {a!r} is not supported")
    modes.sort()
    cur = 1
    rs, rd = [], []
    for d, s in modes:
        if d % cur != 0:
            raise ValueError(
                f"complement: {a!r} is not admissible: stride {d} is not a multiple of "
                f"{cur}, the extent covered by the smaller modes (the modes overlap)"
            )
        rs.append(d // cur)
        rd.append(cur)
        cur = s * d
    rs.append(-(-cotarget // cur))
    rd.append(cur)
    return layout_from_modes(coalesced_modes(tuple(rs), tuple(rd)))


def right_inverse(a: Any) -> Layout:
    """A layout ``R`` with ``a(R(i)) == i`` for ``i < size(R)`` (largest such).

    >>> right_inverse(Layout((4, 8), (8, 1)))
    (8,4):(4,1)
    """
    a = layout_of(a, "right_inverse")
    require_static(a, "right_inverse")
    shapes, strides = a.flat()
    pos = []
    p = 1
    for s in shapes:
        pos.append(p)
        p *= s
    modes = sorted(
        (d, i) for i, (s, d) in enumerate(zip(shapes, strides)) if s != 1 and d > 0
    )
    cur = 1
    rs, rd = [], []
    for d, i in modes:
        if d != cur:
            if d < cur:
                continue
            break
        rs.append(shapes[i])
        rd.append(pos[i])
        cur = shapes[i] * d
    return layout_from_modes(coalesced_modes(tuple(rs), tuple(rd)))


def left_inverse(a: Any) -> Layout:
    """A layout ``L`` with ``L(a(i)) == i`` for every ``i < size(a)``
    (``a`` must be injective).

    >>> left_inverse(Layout((4, 8), (8, 1)))
    (8,4):(4,1)
    """
    a = layout_of(a, "left_inverse")
    c = complement(a)
    return right_inverse(make_layout(a, c))


# --------------------------------------------------------------------------
# divides and products


def logical_divide(a: Any, tiler: Any) -> Any:
    """``a o (B, complement(B, size(a)))``: mode 0 is the tile, mode 1 the
    tile index.  A tuple tiler divides mode by mode.

    >>> logical_divide(Layout((4, 2, 3), (2, 1, 8)), Layout(4, 2))
    ((2,2),(2,3)):((4,1),(2,8))
    """
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.swizzle, logical_divide(a.layout, tiler))
    a = layout_of(a, "logical_divide")
    if type(tiler) is tuple:
        return _by_mode(a, tiler, logical_divide, "logical_divide")
    b = layout_of(tiler, "logical_divide")
    require_static(a, "logical_divide")
    require_static(b, "logical_divide")
    if a.size % b.size != 0:
        raise ValueError(
            f"logical_divide: tile size {b.size} of {b!r} does not divide the size "
            f"{a.size} of {a!r}"
        )
    c = complement(b, a.size)
    if b.size * c.size != a.size:
        raise ValueError(
            f"logical_divide: tile {b!r} does not divide {a!r} evenly: the tile and its "
            f"complement cover {b.size * c.size} indices, not {a.size}"
        )
    return compose(a, make_layout(b, c))


def _split_tiled(d: Layout, n: int):
    tiles = [d[i][0] for i in range(n)]
    rests = [d[i][1] for i in range(n)]
    others = [d[i] for i in range(n, d.rank)]
    return tiles, rests, others


def zipped_divide(a: Any, tiler: Any) -> Any:
    """``((tiles...), (rests...))``.

    >>> zipped_divide(Layout((8, 8)), (2, 4))
    ((2,4),(4,2)):((1,8),(2,32))
    """
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.swizzle, zipped_divide(a.layout, tiler))
    d = logical_divide(a, tiler)
    if type(tiler) is not tuple:
        return d
    t, r, o = _split_tiled(d, len(tiler))
    return make_layout(_group(t), _group(r + o))


def tiled_divide(a: Any, tiler: Any) -> Any:
    """``((tiles...), rest0, rest1, ...)``."""
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.swizzle, tiled_divide(a.layout, tiler))
    d = logical_divide(a, tiler)
    if type(tiler) is not tuple:
        return d
    t, r, o = _split_tiled(d, len(tiler))
    return make_layout(_group(t), *(r + o))


def flat_divide(a: Any, tiler: Any) -> Any:
    """``(tile0, tile1, ..., rest0, rest1, ...)``."""
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.swizzle, flat_divide(a.layout, tiler))
    d = logical_divide(a, tiler)
    if type(tiler) is not tuple:
        return d
    t, r, o = _split_tiled(d, len(tiler))
    return make_layout(*(t + r + o))


def _group(ls: list[Layout]) -> Layout:
    return Layout(tuple(l.shape for l in ls), tuple(l.stride for l in ls))


def tile(layout: Any, tile_shape: Any) -> Any:
    """Split each mode ``i`` into ``(within-tile, tile-index)`` for a tile of
    extent ``tile_shape[i]``; every extent must divide its mode's size.

    >>> tile(Layout((8, 6)), (4, 3))
    ((4,2),(3,2)):((1,4),(8,24))
    """
    base = layout.layout if isinstance(layout, ComposedLayout) else layout_of(layout, "tile")
    if type(tile_shape) is not tuple:
        tile_shape = (tile_shape,)
    if len(tile_shape) != base.rank:
        raise ValueError(
            f"tile: tile shape {fmt(tile_shape)} must have one extent per mode of {base!r} "
            f"(rank {base.rank})"
        )
    for i, m in enumerate(tile_shape):
        if type(m) is not int or m <= 0:
            raise ValueError(f"tile: tile extents must be positive static ints, got {m!r}")
        sz = base[i].size
        if type(sz) is not int or sz % m != 0:
            raise ValueError(
                f"tile: tile extent {m} does not divide extent {sz} of mode {i} of {base!r}"
            )
    return logical_divide(layout, tuple(Layout(m) for m in tile_shape))


def logical_product(a: Any, b: Any) -> Any:
    """``(a, complement(a, size(a) * cosize(b)) o b)``: mode 1 repeats ``a``
    according to ``b``.

    >>> logical_product(Layout((2, 2), (4, 1)), Layout(6, 1))
    ((2,2),(2,3)):((4,1),(2,8))
    """
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.swizzle, logical_product(a.layout, b))
    a = layout_of(a, "logical_product")
    if type(b) is tuple and not all(type(e) is int for e in it.flatten(b)):
        return _by_mode(a, b, logical_product, "logical_product")
    b = layout_of(b, "logical_product")
    require_static(a, "logical_product")
    require_static(b, "logical_product")
    c = complement(a, a.size * b.cosize)
    return make_layout(a, compose(c, b))


def _pad(l: Layout, r: int) -> Layout:
    modes = list(l.modes()) if type(l.shape) is tuple else [l]
    modes += [Layout(1, 0)] * (r - len(modes))
    return Layout(tuple(m.shape for m in modes), tuple(m.stride for m in modes))


def _zip_product(a: Any, b: Any, raked: bool, name: str) -> Any:
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.swizzle, _zip_product(a.layout, b, raked, name))
    a = layout_of(a, name)
    b = layout_of(b, name)
    r = max(a.rank, b.rank)
    ap, bp = _pad(a, r), _pad(b, r)
    p = logical_product(ap, bp)
    A, CB = p[0], p[1]
    modes = []
    for i in range(r):
        x, y = A[i], CB[i]
        if raked:
            x, y = y, x
        modes.append(Layout((x.shape, y.shape), (x.stride, y.stride)))
    return make_layout(*modes) if r > 1 else Layout((modes[0].shape,), (modes[0].stride,))


def blocked_product(a: Any, b: Any) -> Any:
    """Mode ``i`` is ``(a_i, b_i)``: blocks of ``a`` arranged by ``b``.

    >>> blocked_product(Layout((2, 5), (5, 1)), Layout((3, 4), (1, 3)))
    ((2,3),(5,4)):((5,10),(1,30))
    """
    return _zip_product(a, b, False, "blocked_product")


def raked_product(a: Any, b: Any) -> Any:
    """Mode ``i`` is ``(b_i, a_i)``: ``a``'s elements interleaved by ``b``.

    >>> raked_product(Layout((2, 5), (5, 1)), Layout((3, 4), (1, 3)))
    ((3,2),(4,5)):((10,5),(30,1))
    """
    return _zip_product(a, b, True, "raked_product")
