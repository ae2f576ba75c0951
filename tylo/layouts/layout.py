"""``Layout``, ``Swizzle`` and ``ComposedLayout`` (a swizzle after a layout).

A ``Layout(shape, stride)`` is a function from coordinates to offsets
(CuTe conventions).  ``shape`` and ``stride`` are congruent int tuples; a
coordinate is either

* hierarchical (congruent with ``shape``),
* partially flat: any mode may be given as a single integer index that is
  decomposed first-sub-mode-fastest (colexicographically) within that mode,
* or a single integer index into the whole layout.

Evaluation only applies ``+ * // %`` to coordinates (``^ & >>`` for swizzles)
and short-circuits static zeros and ones, so the same code evaluates Python
ints on the host, numpy arrays (vectorised enumeration) and SSA values in a
kernel.  The last sub-mode of a decomposed index is not reduced modulo its
extent, which extends a layout past its size the way CuTe does.
"""

from __future__ import annotations

from typing import Any, Iterator

from . import inttuple as it
from .inttuple import add, fmt, mul

__all__ = ["Layout", "Swizzle", "ComposedLayout", "make_layout", "evaluate", "coalesce", "coalesce_modes", "layout_of",
           "layout_from_modes", "coalesced_modes", "require_static"]


# --------------------------------------------------------------------------
# generic (recursive) evaluation


def _eval_index(c: Any, shapes: tuple, strides: tuple) -> Any:
    """Offset of the 1-D index ``c`` into flat ``shapes``/``strides``."""
    acc: Any = 0
    div: Any = 1
    n = len(shapes)
    for k in range(n):
        s = shapes[k]
        d = strides[k]
        last = k == n - 1
        if not last and type(s) is int and s == 1:
            continue
        if type(d) is int and d == 0:
            div = mul(div, s)
            continue
        q = c if (type(div) is int and div == 1) else c // div
        if not last:
            q = q % s
        acc = add(acc, mul(q, d))
        div = mul(div, s)
    return acc


def evaluate(coord: Any, shape: Any, stride: Any) -> Any:
    """Offset of ``coord`` under ``shape:stride`` (generic recursive path)."""
    if type(shape) is tuple:
        if type(coord) is tuple:
            if len(coord) != len(shape):
                raise ValueError(
                    f"coordinate {fmt(coord)} has {len(coord)} modes, layout shape "
                    f"{fmt(shape)} has {len(shape)}"
                )
            acc: Any = 0
            for c, s, d in zip(coord, shape, stride):
                acc = add(acc, evaluate(c, s, d))
            return acc
        return _eval_index(coord, it.flatten(shape), it.flatten(stride))
    if type(coord) is tuple:
        if len(coord) == 1:
            return evaluate(coord[0], shape, stride)
        raise ValueError(
            f"coordinate {fmt(coord)} is deeper than the layout mode of extent {fmt(shape)}"
        )
    if type(coord) is int and coord == 0:
        return 0
    return mul(coord, stride)


# --------------------------------------------------------------------------
# specialised evaluation: Python source generated once per layout


def _term_src(x: str, div: Any, s: Any, d: Any, last: bool, env: dict) -> str | None:
    def name(v):
        if type(v) is int:
            return str(v)
        key = f"_k{len(env)}"
        env[key] = v
        return key

    if type(d) is int and d == 0:
        return None
    if not last and type(s) is int and s == 1:
        return None
    q = x
    if not (type(div) is int and div == 1):
        q = f"({q} // {name(div)})"
    if not last:
        q = f"({q} % {name(s)})"
    if type(d) is int and d == 1:
        return q
    return f"{q} * {name(d)}"


def _mode_src(x: str, shapes: tuple, strides: tuple, env: dict) -> list[str]:
    terms = []
    div: Any = 1
    n = len(shapes)
    for k in range(n):
        t = _term_src(x, div, shapes[k], strides[k], k == n - 1, env)
        if t is not None:
            terms.append(t)
        div = mul(div, shapes[k])
    return terms


def _compile(shape: Any, stride: Any, swizzle: "Swizzle | None" = None):
    """Return ``(f_tuple, f_index)``: offset of a flat top-level coordinate
    tuple whose entries are scalars, and offset of a single index (followed
    by ``swizzle`` when given)."""
    env: dict = {}

    def ret(expr: str) -> str:
        if swizzle is None or swizzle.bits == 0:
            return f"    return {expr}\n"
        op = ">>" if swizzle.shift >= 0 else "<<"
        return f"    x = {expr}\n    return x ^ ((x & {swizzle.yyy}) {op} {abs(swizzle.shift)})\n"

    if type(shape) is tuple:
        names = [f"c{i}" for i in range(len(shape))]
        terms: list[str] = []
        for x, s, d in zip(names, shape, stride):
            if type(s) is int and s == 1:
                continue  # the only in-range coordinate is 0
            terms += _mode_src(x, it.flatten(s), it.flatten(d), env)
        body = " + ".join(terms) if terms else "0"
        unpack = ", ".join(names) + ("," if len(names) == 1 else "")
        allint = " and ".join(f"type({n}) is int" for n in names)
        anyfold = " or ".join(f"type({n}) is tuple or type({n}) is int" for n in names)
        src_t = (
            "def _ft(c):\n"
            "    if type(c) is not tuple:\n        return _fi(c)\n"
            f"    if len(c) != {len(names)}:\n        return _slow(c)\n"
            f"    {unpack} = c\n"
            f"    if {allint}:\n" + ret(body).replace("\n    ", "\n        ").replace("    ", "        ", 1)
            + f"    if {anyfold}:\n        return _slow(c)\n" + ret(body)
        )
    else:
        t = _term_src("c", 1, shape, stride, True, env)
        src_t = "def _ft(c):\n    if type(c) is tuple:\n        return _slow(c)\n" + ret(t if t else "0")
    terms = _mode_src("i", it.flatten(shape), it.flatten(stride), env)
    src_i = "def _fi(i):\n" + ret(" + ".join(terms) if terms else "0")
    sw = swizzle if swizzle is not None and swizzle.bits else None
    env["_slow"] = (
        (lambda c: evaluate(c, shape, stride))
        if sw is None
        else (lambda c: sw(evaluate(c, shape, stride)))
    )
    ns = dict(env)
    exec(src_t + src_i, ns)  # noqa: S102 - generated from integers and names only
    return ns["_ft"], ns["_fi"]


# --------------------------------------------------------------------------


class Layout:
    """A CuTe layout ``shape:stride``.

    >>> Layout((128, 128), (1, 128))
    (128,128):(1,128)
    >>> Layout((4, 8))((1, 2)), Layout((4, 8))(9)
    (9, 9)

    ``==`` is structural (same trees); use :meth:`same_map` for equality as
    functions.
    """

    __slots__ = ("shape", "stride", "_ft", "_fi", "_hash", "_flat")

    def __init__(self, shape: Any, stride: Any = None):
        shape = it.normalize(shape, "Layout shape")
        for s in it.flatten(shape):
            if type(s) is int and s <= 0:
                raise ValueError(
                    f"Layout shape {fmt(shape)}: extents must be positive, got {s}"
                )
        if stride is None:
            stride = _col_major_strides(shape)
        else:
            stride = it.normalize(stride, "Layout stride")
        if not it.congruent(shape, stride):
            raise ValueError(
                f"Layout: shape {fmt(shape)} and stride {fmt(stride)} must be congruent "
                "(the same tree of tuples)"
            )
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "stride", stride)
        object.__setattr__(self, "_ft", None)
        object.__setattr__(self, "_fi", None)
        object.__setattr__(self, "_hash", None)
        object.__setattr__(self, "_flat", None)

    def __setattr__(self, k, v):
        raise AttributeError("Layout is immutable")

    # -- constructors -------------------------------------------------------
    @classmethod
    def col_major(cls, shape: Any) -> "Layout":
        """Compact column-major (first mode fastest) layout of ``shape``."""
        shape = it.normalize(shape, "Layout shape")
        return cls(shape, _col_major_strides(shape))

    @classmethod
    def row_major(cls, shape: Any) -> "Layout":
        """Compact row-major (last leaf fastest) layout of ``shape``."""
        shape = it.normalize(shape, "Layout shape")
        flat = it.flatten(shape)
        strides: list = [0] * len(flat)
        cur: Any = 1
        for k in range(len(flat) - 1, -1, -1):
            strides[k] = cur
            cur = mul(cur, flat[k])
        return cls(shape, it.unflatten(tuple(strides), shape))

    # -- properties -----------------------------------------------------------
    @property
    def rank(self) -> int:
        return it.rank(self.shape)

    @property
    def depth(self) -> int:
        return it.depth(self.shape)

    @property
    def size(self) -> Any:
        return it.product(self.shape)

    @property
    def cosize(self) -> Any:
        """One past the largest offset (``size`` of the codomain)."""
        acc: Any = 1
        for s, d in zip(it.flatten(self.shape), it.flatten(self.stride)):
            if type(s) is int and type(d) is int:
                acc = acc + max(0, (s - 1) * d)
            else:
                acc = add(acc, mul(s - 1, d))
        return acc

    @property
    def is_static(self) -> bool:
        return it.is_static(self.shape) and it.is_static(self.stride)

    def flat(self) -> tuple[tuple, tuple]:
        """``(shapes, strides)`` of the leaves."""
        f = self._flat
        if f is None:
            f = (it.flatten(self.shape), it.flatten(self.stride))
            object.__setattr__(self, "_flat", f)
        return f

    def __len__(self) -> int:
        return self.rank

    def __getitem__(self, i: int) -> "Layout":
        if type(self.shape) is not tuple:
            if i in (0, -1):
                return self
            raise IndexError(i)
        return Layout(self.shape[i], self.stride[i])

    def modes(self) -> Iterator["Layout"]:
        for i in range(self.rank):
            yield self[i]

    # -- evaluation -----------------------------------------------------------
    def _compiled(self):
        if self._ft is None:
            ft, fi = _compile(self.shape, self.stride)
            object.__setattr__(self, "_ft", ft)
            object.__setattr__(self, "_fi", fi)
        return self._ft, self._fi

    def __call__(self, coord: Any, *more: Any) -> Any:
        if more:
            coord = (coord,) + more
        ft = self._ft
        if ft is None:
            ft = self._compiled()[0]
        return ft(coord)

    def offsets(self):
        """numpy array of ``self(i)`` for ``i in range(size)`` (static only)."""
        require_static(self, "offsets")
        return np_offsets(*self.flat())

    # -- structure ------------------------------------------------------------
    def flatten(self) -> "Layout":
        shapes, strides = self.flat()
        if type(self.shape) is not tuple:
            return self
        return Layout(shapes, strides)

    def coalesce(self, profile: Any = None) -> "Layout":
        return coalesce(self, profile)

    def same_map(self, other: Any) -> bool:
        """Equality as functions: same size and the same offset at every index."""
        return same_map(self, other)

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, Layout):
            return NotImplemented
        return _tree_eq(self.shape, other.shape) and _tree_eq(self.stride, other.stride)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            try:
                h = hash(("Layout", self.shape, self.stride))
            except TypeError:
                h = hash(("Layout", fmt(self.shape), fmt(self.stride)))
            object.__setattr__(self, "_hash", h)
        return h

    def __repr__(self) -> str:
        return f"{fmt(self.shape)}:{fmt(self.stride)}"

    def __reduce__(self):
        return (Layout, (self.shape, self.stride))


def _tree_eq(a: Any, b: Any) -> bool:
    if type(a) is tuple:
        return type(b) is tuple and len(a) == len(b) and all(_tree_eq(x, y) for x, y in zip(a, b))
    if type(b) is tuple:
        return False
    if type(a) is int or type(b) is int:
        return type(a) is type(b) and a == b
    return a is b


def _col_major_strides(shape: Any) -> Any:
    flat = it.flatten(shape)
    strides = []
    cur: Any = 1
    for s in flat:
        strides.append(cur)
        cur = mul(cur, s)
    return it.unflatten(tuple(strides), shape)


def np_offsets(shapes: tuple, strides: tuple):
    """numpy int64 array of the offsets of a static flat layout, index order."""
    import numpy as np

    n = 1
    for s in shapes:
        n *= s
    i = np.arange(n, dtype=np.int64)
    acc = np.zeros(n, dtype=np.int64)
    div = 1
    last = len(shapes) - 1
    for k, (s, d) in enumerate(zip(shapes, strides)):
        if d != 0 and (s != 1 or k == last):
            q = i if div == 1 else i // div
            if k != last:
                q = q % s
            acc += q * d if d != 1 else q
        div *= s
    return acc


def require_static(x: Any, what: str) -> None:
    if not x.is_static:
        raise ValueError(f"{what}: needs a static layout (all leaves Python ints), got {x!r}")


def make_layout(*layouts: Any) -> Layout:
    """Concatenate layouts (or ints, meaning ``n:1``) into one whose modes
    are the arguments."""
    ls = [_as_layout(x) for x in layouts]
    if len(ls) == 1:
        return ls[0]
    return Layout(tuple(l.shape for l in ls), tuple(l.stride for l in ls))


def _as_layout(x: Any) -> Layout:
    if isinstance(x, Layout):
        return x
    if type(x) is int or (isinstance(x, tuple)):
        return Layout(x)
    raise ValueError(f"expected a Layout or a shape, got {type(x).__name__} {x!r}")


# --------------------------------------------------------------------------
# coalesce (here, not in algebra.py, because Layout.coalesce needs it)


def layout_of(x: Any, what: str) -> Layout:
    """``x`` as a Layout (a static shape becomes its column-major layout); ``what`` names the caller."""
    if isinstance(x, Layout):
        return x
    if type(x) is int or (type(x) is tuple and all(type(e) in (int, tuple) for e in it.flatten(x))):
        return Layout(x)
    raise ValueError(f"{what}: expected a Layout or a static shape, got {type(x).__name__} {x!r}")


def layout_from_modes(modes: list[tuple[Any, Any]]) -> Layout:
    """The flat layout of ``(shape, stride)`` modes (``1:0`` when there are none)."""
    if not modes:
        return Layout(1, 0)
    if len(modes) == 1:
        return Layout(modes[0][0], modes[0][1])
    return Layout(tuple(m[0] for m in modes), tuple(m[1] for m in modes))


def coalesced_modes(shapes: tuple, strides: tuple) -> list[tuple[Any, Any]]:
    """Flat modes with unit extents dropped and contiguous neighbours merged."""
    out: list[list] = []
    for s, d in zip(shapes, strides):
        if type(s) is int and s == 1:
            continue
        if out:
            ps, pd = out[-1]
            if type(ps) is int and type(pd) is int and type(d) is int and type(s) is int and pd * ps == d:
                out[-1][0] = ps * s
                continue
        out.append([s, d])
    return [(s, d) for s, d in out]


def coalesce(layout: Any, profile: Any = None) -> Any:
    """Simplify ``layout`` without changing it as a function of the 1-D index.

    With ``profile`` (a tuple), coalesce each top-level mode separately so the
    rank is kept (CuTe's by-mode coalesce).

    >>> coalesce(Layout((2, (1, 6)), (1, (6, 2))))
    12:1
    >>> coalesce(Layout((2, (1, 6)), (1, (6, 2))), (1, 1))
    (2,6):(1,2)
    """
    if isinstance(layout, ComposedLayout):
        return ComposedLayout(layout.swizzle, coalesce(layout.layout, profile))
    layout = layout_of(layout, "coalesce")
    if type(profile) is tuple:
        if type(layout.shape) is not tuple or len(profile) > layout.rank:
            raise ValueError(
                f"coalesce: profile {fmt(profile)} has more modes than layout {layout!r}"
            )
        parts = [coalesce(layout[i], profile[i]) for i in range(len(profile))]
        parts += [layout[i] for i in range(len(profile), layout.rank)]
        return make_layout(*parts) if len(parts) > 1 else Layout((parts[0].shape,), (parts[0].stride,))
    shapes, strides = layout.flat()
    return layout_from_modes(coalesced_modes(shapes, strides))


def coalesce_modes(layout: Any) -> Any:
    """Per-mode coalesce: each top-level mode simplified, rank kept."""
    return coalesce(layout, (1,) * layout.rank)


# --------------------------------------------------------------------------


class Swizzle:
    """CuTe ``Swizzle<bits, base, shift>`` on offsets.

    ``y = x ^ ((x & yyy) >> shift)`` where ``yyy`` is ``bits`` one-bits at
    ``base + max(shift, 0)`` and the XOR target ``zzz`` is at
    ``base + max(-shift, 0)`` (a negative shift moves bits left).  The two
    fields must be disjoint (``|shift| >= bits``) and lie within 31 bits.
    A swizzle is an involution and permutes every aligned block of
    ``2**(base + |shift| + bits)`` offsets.

    >>> sw = Swizzle(3, 3, 3)          # 128-byte swizzle of 16-bit elements
    >>> sw(64 + 0), sw(sw(72))
    (72, 72)
    """

    __slots__ = ("bits", "base", "shift", "yyy", "zzz")

    def __init__(self, bits: int, base: int, shift: int):
        for name, v in (("bits", bits), ("base", base), ("shift", shift)):
            if type(v) is not int:
                raise ValueError(f"Swizzle: {name} must be a static int, got {v!r}")
        if bits < 0 or base < 0:
            raise ValueError(f"Swizzle({bits},{base},{shift}): bits and base must be >= 0")
        if bits > 0 and abs(shift) < bits:
            raise ValueError(
                f"Swizzle({bits},{base},{shift}): the source and target bit fields overlap "
                f"(need |shift| >= bits)"
            )
        if base + abs(shift) + bits > 31:
            raise ValueError(
                f"Swizzle({bits},{base},{shift}): fields must lie within 31 bits "
                f"(base + |shift| + bits = {base + abs(shift) + bits})"
            )
        m = (1 << bits) - 1
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "shift", shift)
        object.__setattr__(self, "yyy", m << (base + max(shift, 0)))
        object.__setattr__(self, "zzz", m << (base + max(-shift, 0)))

    def __setattr__(self, k, v):
        raise AttributeError("Swizzle is immutable")

    @property
    def is_identity(self) -> bool:
        return self.bits == 0

    @property
    def period(self) -> int:
        """Size of the aligned blocks the swizzle permutes."""
        return 1 << (self.base + abs(self.shift) + self.bits)

    def __call__(self, x: Any) -> Any:
        if self.bits == 0:
            return x
        if type(x) is int and x == 0:
            return 0
        if self.shift >= 0:
            return x ^ ((x & self.yyy) >> self.shift)
        return x ^ ((x & self.yyy) << -self.shift)

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, Swizzle):
            return NotImplemented
        if self.bits == 0 and other.bits == 0:
            return True
        return (self.bits, self.base, self.shift) == (other.bits, other.base, other.shift)

    def __hash__(self) -> int:
        return hash(("Swizzle", 0, 0, 0) if self.bits == 0 else ("Swizzle", self.bits, self.base, self.shift))

    def __repr__(self) -> str:
        return f"Sw<{self.bits},{self.base},{self.shift}>"

    def __reduce__(self):
        return (Swizzle, (self.bits, self.base, self.shift))


class ComposedLayout:
    """``swizzle o layout``: ``c -> swizzle(layout(c))``.

    >>> L = ComposedLayout(Swizzle(3, 3, 3), Layout((128, 64), (64, 1)))
    >>> L
    Sw<3,3,3> o (128,64):(64,1)
    >>> L((1, 0))
    72
    """

    __slots__ = ("swizzle", "layout", "_f")

    def __init__(self, swizzle: Swizzle, layout: Layout):
        if not isinstance(swizzle, Swizzle):
            raise ValueError(f"ComposedLayout: outer must be a Swizzle, got {swizzle!r}")
        if not isinstance(layout, Layout):
            raise ValueError(f"ComposedLayout: inner must be a Layout, got {layout!r}")
        object.__setattr__(self, "swizzle", swizzle)
        object.__setattr__(self, "layout", layout)
        object.__setattr__(self, "_f", None)

    def __setattr__(self, k, v):
        raise AttributeError("ComposedLayout is immutable")

    shape = property(lambda self: self.layout.shape)
    rank = property(lambda self: self.layout.rank)
    depth = property(lambda self: self.layout.depth)
    size = property(lambda self: self.layout.size)
    is_static = property(lambda self: self.layout.is_static)

    @property
    def cosize(self) -> int:
        require_static(self, "cosize")
        return int(self.offsets().max()) + 1

    def __len__(self) -> int:
        return self.rank

    def __getitem__(self, i: int) -> "ComposedLayout":
        return ComposedLayout(self.swizzle, self.layout[i])

    def __call__(self, coord: Any, *more: Any) -> Any:
        if more:
            coord = (coord,) + more
        f = self._f
        if f is None:
            f = _compile(self.layout.shape, self.layout.stride, self.swizzle)[0]
            object.__setattr__(self, "_f", f)
        return f(coord)

    def offsets(self):
        return self.swizzle(self.layout.offsets())

    def flatten(self) -> "ComposedLayout":
        return ComposedLayout(self.swizzle, self.layout.flatten())

    def coalesce(self, profile: Any = None) -> "ComposedLayout":
        return ComposedLayout(self.swizzle, self.layout.coalesce(profile))

    def same_map(self, other: Any) -> bool:
        return same_map(self, other)

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, ComposedLayout):
            return NotImplemented
        return self.swizzle == other.swizzle and self.layout == other.layout

    def __hash__(self) -> int:
        return hash(("ComposedLayout", self.swizzle, self.layout))

    def __repr__(self) -> str:
        return f"{self.swizzle!r} o {self.layout!r}"

    def __reduce__(self):
        return (ComposedLayout, (self.swizzle, self.layout))


def same_map(a: Any, b: Any) -> bool:
    """Equality as functions of the 1-D index: same size, same offsets."""
    if a.size != b.size:
        return False
    if isinstance(a, Layout) and isinstance(b, Layout) and a == b:
        return True
    import numpy as np

    return bool(np.array_equal(a.offsets(), b.offsets()))

