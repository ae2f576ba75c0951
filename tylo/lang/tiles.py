"""Memory tiles and the transfers between tiles and fragments.

A tile borrows a typed pointer and describes storage with a static layout
(logical coordinate -> element offset, swizzles included), a static logical
shape and a runtime origin kept *inside* the layout map (so a window of a
swizzled tile keeps the swizzle phase). ``load(tile, ownership)`` gives each
thread the values its ownership assigns it; ``store(tile, fragment)`` writes
them back. Both group a thread's slots into 16/8/4-byte vector accesses when
``vector_access_plan`` says the storage and the alignment allow it.

Alignment: ``align`` claims the byte alignment of the tile's origin element.
A static window origin updates the claim exactly; a runtime origin keeps the
parent's claim, which is then the caller's contract (the origin must be a
multiple of the vector width along the contiguous axis). Global coordinates
are widened to 64 bits before they are multiplied by strides.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir import types as T
from ..ir.core import Value
from ..ir.types import PointerType
from ..layouts import ComposedLayout, Layout, Ownership, ownership_table, vector_access_plan
from ..layouts import permutedims as layout_permutedims
from ..layouts.ownership import ownership_name
from . import core as L
from .base import LangError, builtin
from .fragment import Fragment, PackedFragment
from .indexing import RuntimeInt, unwrap, wrap

__all__ = ["Tile", "TileStatic", "GlobalTile", "SharedTile", "load", "store", "store_bounded", "store_remote",
           "copy_async", "window",
           "permutedims", "thread_in_group", "fragment_coords", "slot_offsets"]


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _pattern_text(x) -> str:
    """CuTe-style text of a shape/stride pattern, ``?`` for a runtime entry."""
    if isinstance(x, tuple):
        return "(" + ",".join(_pattern_text(e) for e in x) + ")"
    return "?" if x is None else str(x)


@dataclass(frozen=True)
class TileStatic:
    """The static part of a Tile (the pointer, runtime origin entries and runtime strides are leaves).

    ``layout``: the layout, or for a layout with runtime leaves its ``(shape, stride)`` pattern with
    None at each runtime leaf (``runtime_leaves`` of them); ``shape``/``origin``: None at runtime entries.
    """

    layout: object
    shape: tuple
    origin: tuple
    align: int
    runtime_leaves: int = 0

    def describe(self) -> str:
        if self.runtime_leaves:
            layout = f"{_pattern_text(self.layout[0])}:{_pattern_text(self.layout[1])} (? = runtime)"
        else:
            layout = repr(self.layout)
        return (f"a tile with layout {layout}, shape {_pattern_text(self.shape)}, origin "
                f"{_pattern_text(self.origin)} and {self.align}-byte alignment")


class Tile:
    """A view of global or shared memory: pointer + static layout + (runtime) origin + static shape."""

    def __init__(self, ptr: Value, layout, shape=None, origin=None, align: int = 16):
        self.ptr = ptr
        self.layout = layout
        self.shape = tuple(shape) if shape is not None else _extents(layout)
        self.origin = tuple(origin) if origin is not None else (0,) * len(self.shape)
        self.align = align

    @property
    def space(self) -> str:
        return self.ptr.type.space

    @property
    def dtype(self):
        return self.ptr.type.elem

    # -- structured value protocol -------------------------------------------------------
    # Runtime leaves: the pointer, runtime origin entries and runtime layout strides
    # (a layout built in the kernel from runtime ints holds them as RuntimeInt leaves).
    def __tylo_flatten__(self):
        origin = [unwrap(o) for o in self.origin]
        leaves = [self.ptr] + [o for o in origin if isinstance(o, Value)]
        pattern = tuple(o if _is_int(o) else None for o in origin)
        layout_key, dyn = self.layout, []
        shape = self.shape
        if isinstance(self.layout, Layout) and not self.layout.is_static:
            dyn = [x for x in _leaves((self.layout.shape, self.layout.stride)) if isinstance(x, RuntimeInt)]
            layout_key = _stride_pattern((self.layout.shape, self.layout.stride))
            leaves += [x.value for x in dyn]
            shape = _stride_pattern(self.shape)
        return leaves, TileStatic(layout_key, shape, pattern, self.align, len(dyn))

    @classmethod
    def __tylo_unflatten__(cls, static, leaves, ctx):
        it = iter(leaves[1:])
        origin = tuple(next(it) if o is None else o for o in static.origin)
        layout, shape = static.layout, static.shape
        if static.runtime_leaves:
            shape_tree, stride_tree = _fill_strides(layout, it, ctx)
            layout = Layout(shape_tree, stride_tree)
            shape = _extents(layout) if None in shape else shape
        return cls(leaves[0], layout, shape, origin, static.align)

    def __repr__(self):
        return f"Tile({self.ptr.type}, {self.layout!r}, shape={self.shape})"

    # -- views --------------------------------------------------------------------------------
    def __tylo_window__(self, origin, shape, check):
        origin = tuple(origin)
        shape = tuple(shape)
        if len(origin) != len(self.shape) or len(shape) != len(self.shape):
            raise LangError(f"window of a rank-{len(self.shape)} tile needs {len(self.shape)} origin and shape entries")
        for o, s, e in zip(origin, shape, self.shape):
            if not _is_int(s) or s <= 0:
                raise LangError(f"window shapes must be positive compile-time ints, got {shape}")
            if check and _is_int(o) and _is_int(e) and not (0 <= o and o + s <= e):
                raise LangError(f"window origin {origin} with shape {shape} leaves the tile's shape {self.shape}")
            if check and _is_int(e) and s > e:
                raise LangError(f"window shape {shape} is larger than the tile's shape {self.shape}")
        new_origin = tuple(add_origin(a, b) for a, b in zip(self.origin, origin))
        align = self.align
        if all(_is_int(o) for o in origin):
            delta = _static_offset(self.layout, self.origin, origin)
            if delta is not None:
                align = math.gcd(align, delta * self.dtype.itemsize) if delta else align
        return Tile(self.ptr, self.layout, shape, new_origin, align)

    def __tylo_permutedims__(self, perm):
        return Tile(self.ptr, layout_permutedims(self.layout, perm), tuple(self.shape[p] for p in perm),
                    tuple(self.origin[p] for p in perm), self.align)

    # -- addressing ------------------------------------------------------------------------------
    def pointer(self, ctx, coord):
        """The element pointer of logical ``coord`` (relative to this view's origin)."""
        return _slot_pointer(ctx, self, tuple(coord))

    def __tylo_getattr__(self, ctx, name):
        if name == "pointer":
            return _BoundPointer(self)
        if name in ("shape", "layout", "dtype", "ptr", "align", "space", "origin"):
            return getattr(self, name)
        raise LangError(f"a tile has no attribute '{name}'")

    def _coord(self, index):
        idx = index if isinstance(index, tuple) else (index,)
        if len(idx) != len(self.shape):
            raise LangError(f"a tile of shape {self.shape} needs {len(self.shape)} coordinates, got {len(idx)}")
        return idx

    def __tylo_getitem__(self, ctx, index):
        return L.load(ctx, self.pointer(ctx, self._coord(index)))

    def __tylo_setitem__(self, ctx, index, value):
        L.store(ctx, self.pointer(ctx, self._coord(index)), value)


class _BoundPointer:
    __tylo_builtin__ = True

    def __init__(self, tile):
        self.tile = tile

    def __call__(self, coord, *, _ctx):
        return self.tile.pointer(_ctx, tuple(coord))


def _stride_pattern(stride):
    if isinstance(stride, tuple):
        return tuple(_stride_pattern(s) for s in stride)
    return None if isinstance(stride, RuntimeInt) else stride


def _fill_strides(pattern, it, ctx):
    if isinstance(pattern, tuple):
        return tuple(_fill_strides(p, it, ctx) for p in pattern)
    return RuntimeInt(ctx, next(it)) if pattern is None else pattern


def _extents(layout) -> tuple:
    """Extent of each top-level mode (runtime when a leaf of the mode is)."""
    shape = layout.shape
    if not isinstance(shape, tuple):
        shape = (shape,)
    out = []
    for s in shape:
        total = 1
        for leaf in _leaves(s):
            total = leaf * total if not _is_int(total) or total != 1 else leaf
        out.append(total)
    return tuple(out)


def _leaves(s):
    if isinstance(s, tuple):
        for x in s:
            yield from _leaves(x)
    else:
        yield s


def add_origin(a, b):
    """``a + b`` for origin entries: ints add now, runtime parts become a pending sum (see coord_value)."""
    if _is_int(a) and a == 0:
        return b
    if _is_int(b) and b == 0:
        return a
    if _is_int(a) and _is_int(b):
        return a + b
    return _Sum(a, b)  # added with the builder when the address is formed, in the address's width


class _Sum:
    """A pending runtime sum of origin parts, added with the builder when addresses are formed."""

    def __init__(self, a, b):
        self.a, self.b = a, b


def _materialize_sum(ctx, x, t):
    if isinstance(x, _Sum):
        return wrap(ctx, _materialize_sum(ctx, x.a, t), t) + wrap(ctx, _materialize_sum(ctx, x.b, t), t)
    return x


def _evaluate(layout, coord):
    return layout(tuple(coord))


def _static_offset(layout, origin, delta):
    if not all(_is_int(o) for o in origin):
        return None
    try:
        a = layout(tuple(o + d for o, d in zip(origin, delta)))
        b = layout(tuple(origin))
        return int(a) - int(b)
    except Exception:
        return None


def _validate_layout(layout, what):
    if not isinstance(layout, (Layout, ComposedLayout)):
        raise LangError(f"{what} needs a tylo.layouts Layout (or a swizzled ComposedLayout), got {layout!r}")
    if isinstance(layout, ComposedLayout) and not layout.is_static:
        raise LangError(f"{what}: a swizzled layout must be static, got {layout!r}")


def _make_tile(space, ptr, layout, align, what):
    if not isinstance(ptr, Value) or not isinstance(ptr.type, PointerType):
        raise LangError(f"{what} borrows a typed pointer, got {ptr!r}")
    if ptr.type.space != space:
        raise LangError(f"{what} needs a {space} pointer, got {ptr.type}")
    _validate_layout(layout, what)
    if not _is_int(align) or align <= 0 or align & (align - 1):
        raise LangError(f"{what}: align must be a power of two in bytes, got {align!r}")
    return Tile(ptr, layout, align=align)


def _pointer_of(ptr):
    """A typed pointer, or the pointer of a shared array."""
    return ptr.ptr if isinstance(ptr, L.SharedArray) else ptr


@builtin
def GlobalTile(ptr, layout, align: int = 16, *, _ctx):
    """A tile over global memory: ``ptr`` (a global pointer), a ``layout``, an alignment claim in bytes."""
    return _make_tile("global", _pointer_of(ptr), layout, align, "GlobalTile")


@builtin
def SharedTile(ptr, layout, align: int = 16, *, _ctx):
    """A tile over shared memory (``ptr``: a shared pointer or a shared array)."""
    return _make_tile("shared", _pointer_of(ptr), layout, align, "SharedTile")


def _dual(fn):
    """A function usable on the host and in kernels (the frontend passes ``_ctx``, ignored)."""

    def wrapper(*args, _ctx=None, **kwargs):
        return fn(*args, **kwargs)

    wrapper.__tylo_builtin__ = True
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def _window(x, origin, shape, check=True):
    """``window(x, origin, shape)``: tiles, fragments, layouts (see tylo.layouts.window)."""
    from ..layouts import window as layouts_window
    return layouts_window(x, origin, shape, check)


window = _dual(_window)
permutedims = _dual(layout_permutedims)


# -- transfers between tiles and fragments -------------------------------------------------------

def thread_in_group(ctx, threads: int, who: str = "this ownership"):
    """This thread's index within an ownership of ``threads`` threads (groups of consecutive
    linear thread indices). When the block is known (``maxntid``, the launch's ``block``), it must have
    at least ``threads`` threads: otherwise the slots of the missing threads would silently never be read
    or written."""
    block = ctx.kernel.attrs.get("maxntid")
    if block is not None and math.prod(block) < threads:
        raise LangError(f"{who} spreads the tile over {threads} threads, but the block has only "
                        f"{math.prod(block)} ({'x'.join(map(str, block))}); launch with at least {threads} threads "
                        f"or choose an ownership of at most {math.prod(block)}")
    tid = L.linear_thread_index(ctx)
    if threads & (threads - 1) == 0:
        return L.binary(ctx, "&", tid, threads - 1)
    return L.binary(ctx, "%", tid, threads)


def _separable(o: Ownership):
    """(per-thread coordinate base, per-slot static coordinate) when coord(t, v) == base(t) + rel(v)."""
    tab = ownership_table(o)  # [T, V, rank]
    base = tab[:, :1, :] - tab[:1, :1, :]
    rel = tab[:1, :, :]
    if not (tab == base + rel).all():
        raise LangError(f"the ownership {o.name or o!r} is not a per-thread shift of one slot pattern; "
                        f"tylo cannot address it with one base per thread")
    return tab, [tuple(int(x) for x in rel[0, v]) for v in range(o.values)]


def _thread_coords(ctx, o: Ownership):
    """Runtime logical coordinate of this thread's slot 0, per axis.

    ``tv_layout(t, v)`` is the sum of its thread mode at ``t`` and its value mode at ``v``, and
    ``(0, 0)`` maps to index 0, so slot 0 of thread ``t`` sits at index ``thread_mode(t)``
    (column-major over the logical shape).
    """
    t = wrap(ctx, thread_in_group(ctx, o.threads, f"the ownership {ownership_name(o)}"))
    idx = o.tv_layout[0](t)
    coords = []
    stride = 1
    for axis, extent in enumerate(o.shape):
        c = idx // stride if stride != 1 else idx
        if axis < len(o.shape) - 1:
            c = c % extent if extent != 1 else 0
        coords.append(c)
        stride *= extent
    return coords


def slot_offsets(o: Ownership) -> list[tuple]:
    """The compile-time part of each slot's logical coordinate: ``coord(t, v) == coord(t, 0) +
    slot_offsets(o)[v]`` for every thread ``t`` (a ``LangError`` when the ownership is not such a shift).

    >>> from tylo import MMAAtom, bf16, f32
    >>> slot_offsets(MMAAtom((16, 8, 16), bf16, bf16, f32).c_ownership)
    [(0, 0), (0, 1), (8, 0), (8, 1)]
    """
    return _separable(o)[1]


@builtin
def fragment_coords(f, *, _ctx):
    """``(rows, cols)``: i32 fragments of ``f``'s ownership (or of an ``Ownership``) holding each slot's
    logical coordinate: this thread's runtime base (from its linear index) plus the slot's compile-time
    offset (``slot_offsets``). For masks: ``rows, cols = tylo.fragment_coords(s)``,
    ``tylo.where(cols < n, s, -inf)``. One tuple entry per axis of the ownership."""
    if isinstance(f, PackedFragment):
        raise LangError("fragment_coords: unpack the packed fragment first (tylo.unpack(p)), or pass its ownership")
    o = f.ownership if isinstance(f, Fragment) else f
    if not isinstance(o, Ownership):
        raise LangError(f"fragment_coords takes a Fragment or an Ownership, got {f!r}")
    rel = _separable(o)[1]
    base = _thread_coords(_ctx, o)
    axes = []
    for axis in range(len(o.shape)):
        vals = [unwrap(coord_value(_ctx, add_origin(base[axis], r[axis]), T.i32)) for r in rel]
        axes.append(Fragment(T.i32, o, [v if isinstance(v, Value) else L.to_value(_ctx, v, T.i32) for v in vals]))
    return tuple(axes)


def _slot_coords(ctx, tile: Tile, o: Ownership, what: str):
    """Each slot's logical coordinate for this thread: a runtime base plus a static offset."""
    if not all(_is_int(e) for e in tile.shape):
        raise LangError(f"{what}: the tile has runtime extents {tile.shape}; take a window with a static shape first")
    if tuple(o.shape) != tuple(tile.shape):
        raise LangError(f"{what}: the ownership's shape {o.shape} differs from the tile's shape {tile.shape}")
    _, rel = _separable(o)
    base = _thread_coords(ctx, o)
    return [tuple(add_origin(b, c) for b, c in zip(base, r)) for r in rel]


def _accesses(tile: Tile, o: Ownership):
    """The vector access plan for ``o`` on ``tile``'s storage (widest accesses the alignment allows)."""
    try:
        static_view = _static_storage(tile)
        plan = vector_access_plan(o, static_view, tile.dtype.itemsize, min(tile.align, 16))
        return [(a.slots, a.width_bytes) for a in plan.accesses]
    except (ValueError, TypeError):
        return [((v,), tile.dtype.itemsize) for v in range(o.values)]


def _static_storage(tile: Tile):
    from ..layouts import window as layouts_window
    if all(_is_int(o) for o in tile.origin):
        return layouts_window(tile.layout, tile.origin, tile.shape)
    return layouts_window(tile.layout, (0,) * len(tile.shape), tile.shape)


def coord_value(ctx, c, wide):
    """An origin entry or coordinate as a runtime int of type ``wide`` (pending sums added here)."""
    if isinstance(c, _Sum):
        return _materialize_sum(ctx, c, wide)
    return wrap(ctx, c, wide)


def _slot_pointer(ctx, tile: Tile, coord):
    wide = T.i64 if tile.space == "global" else T.i32
    full = tuple(coord_value(ctx, add_origin(o, c), wide) for o, c in zip(tile.origin, coord))
    off = unwrap(_evaluate(tile.layout, full))
    if _is_int(off) and off == 0:
        return tile.ptr
    return L.offset(ctx, tile.ptr, off)


@builtin
def load(tile, ownership, *, _ctx) -> Fragment:
    """Load the values ``ownership`` assigns to this thread from ``tile`` (vectorised when allowed)."""
    if not isinstance(tile, Tile):
        raise LangError(f"load needs a tile (GlobalTile/SharedTile), got {tile!r}")
    if not isinstance(ownership, Ownership):
        raise LangError(f"load needs an Ownership, got {ownership!r}")
    plan = _ldmatrix_plan(tile, ownership) if _ctx.sm >= 75 else None
    if plan is not None:
        return Fragment(tile.dtype, ownership, _ldmatrix_load(_ctx, tile, ownership, plan))
    coords = _slot_coords(_ctx, tile, ownership, "load")
    values = [None] * ownership.values
    for slots, width in _accesses(tile, ownership):
        ptr = _slot_pointer(_ctx, tile, coords[slots[0]])
        if len(slots) == 1:
            values[slots[0]] = L.load(_ctx, ptr)
        else:
            op = _ctx.builder.create("mem.vload", [ptr], [tile.dtype] * len(slots), {"align": width})
            for s, r in zip(slots, op.results):
                values[s] = r
    return Fragment(tile.dtype, ownership, values)


@builtin
def store(dst, frag, bounds=None, *, _ctx) -> None:
    """Store a fragment into a tile by its ownership, or a thread's packed words through a pointer.

    ``bounds``: valid extents from the view's origin (runtime allowed); slots past them are not
    written (ragged edges, see ``store_bounded``)."""
    if bounds is not None:
        return store_bounded(dst, frag, bounds, _ctx=_ctx)
    if isinstance(dst, Value) and isinstance(dst.type, PointerType) and isinstance(frag, PackedFragment):
        return _store_packed(_ctx, dst, frag)
    if not isinstance(dst, Tile):
        raise LangError(f"store needs a tile and a fragment (or a pointer and a packed fragment), got {dst!r}")
    if isinstance(frag, PackedFragment):
        raise LangError("store a PackedFragment through a pointer, or unpack it to store into a tile")
    if not isinstance(frag, Fragment):
        raise LangError(f"store needs a Fragment, got {frag!r}")
    _check_fragment_store(frag, dst, "store")
    plan = _ldmatrix_plan(dst, frag.ownership) if _ctx.sm >= 90 else None
    if plan is not None:  # stmatrix: the same 8x8-matrix geometry as ldmatrix (sm_90+)
        return _stmatrix_store(_ctx, dst, frag, plan)
    coords = _slot_coords(_ctx, dst, frag.ownership, "store")
    vals = [L.cast(v, dst.dtype, _ctx=_ctx) if v.type != dst.dtype else v for v in frag.values]
    for slots, width in _accesses(dst, frag.ownership):
        ptr = _slot_pointer(_ctx, dst, coords[slots[0]])
        if len(slots) == 1:
            L.store(_ctx, ptr, vals[slots[0]])
        else:
            _ctx.builder.create("mem.vstore", [ptr] + [vals[s] for s in slots], [], {"align": width})


def _store_packed(ctx, ptr, packed: PackedFragment):
    """Write the packed words contiguously (the seed's rule: 16-byte accesses for 4+ words, 8 for 2-3, 4 for 1)."""
    elem = ptr.type.elem
    if elem not in (packed.dtype, T.u16):
        raise LangError(f"store of a packed {packed.dtype} fragment needs a *{packed.dtype} or *u16 pointer, "
                        f"got {ptr.type}")
    words = list(packed.words)
    n = len(words)
    width = 16 if n >= 4 else 8 if n >= 2 else 4
    wptr = ctx.builder.value("ptr.cast", [ptr], PointerType(T.u32, ptr.type.space))
    i = 0
    while i < n:
        k = min(width // 4, n - i)
        while k & (k - 1):
            k -= 1
        p = L.offset(ctx, wptr, i) if i else wptr
        if k == 1:
            L.store(ctx, p, words[i])
        else:
            ctx.builder.create("mem.vstore", [p] + words[i:i + k], [], {"align": 4 * k})
        i += k


# -- bounded stores and the cp.async copy plan ----------------------------------------------------

def _in_bounds(ctx, coord, bounds):
    """``coord < bounds`` on every axis (coordinates are relative to the view; None = unbounded)."""
    cond = True
    wide = T.i32
    for c, b in zip(coord, bounds):
        if b is None:
            continue
        cv = unwrap(coord_value(ctx, c, wide))
        if _is_int(cv) and _is_int(b):
            ok = cv < b
        else:
            ok = L.compare(ctx, "<", cv, b)
        if ok is False:
            return False
        if ok is True:
            continue
        cond = ok if cond is True else L.binary(ctx, "&", cond, ok)
    return cond


def _guarded(ctx, cond, emit):
    """Run ``emit()`` under ``if cond`` (a runtime bool) as a structured ``scf.if``."""
    from ..ir.core import Block

    if cond is True:
        emit()
        return
    if cond is False:
        return
    then, other = Block(), Block()
    with ctx.builder.at(then):
        emit()
        ctx.builder.create("scf.yield", [])
    with ctx.builder.at(other):
        ctx.builder.create("scf.yield", [])
    ctx.builder.create("scf.if", [cond], [], blocks=[then, other])


def _check_fragment_store(frag: Fragment, dst: Tile, what: str) -> None:
    """The scalar store rule (``core.store_truncates``/``store_converts``) applied to a whole fragment."""
    vt, elem = frag.dtype, dst.dtype
    if L.store_truncates(vt, elem):
        raise LangError(f"{what}: storing a fragment of {vt} into a tile of {elem} would truncate it; convert "
                        f"explicitly with .astype(tylo.{elem.name})")
    if not L.store_converts(vt, elem):
        raise LangError(f"{what}: cannot store a fragment of {vt} into a tile of {elem}")


@builtin
def store_bounded(dst, frag, bounds, *, _ctx) -> None:
    """``store`` that writes only slots whose view coordinate is below ``bounds`` (ragged edges)."""
    if not isinstance(dst, Tile) or not isinstance(frag, Fragment):
        raise LangError("store_bounded needs a tile and a fragment")
    bounds = tuple(bounds)
    if len(bounds) != len(dst.shape):
        raise LangError(f"store_bounded needs one bound per axis of {dst.shape}")
    _check_fragment_store(frag, dst, "store_bounded")
    coords = _slot_coords(_ctx, dst, frag.ownership, "store_bounded")
    for v, coord in zip(frag.values, coords):
        val = L.cast(v, dst.dtype, _ctx=_ctx) if v.type != dst.dtype else v
        ok = _in_bounds(_ctx, coord, bounds)
        _guarded(_ctx, ok, lambda coord=coord, val=val: L.store(_ctx, _slot_pointer(_ctx, dst, coord), val))


_ST_ASYNC_TYPES = (T.f32, T.i32, T.u32)


@builtin
def store_remote(dst, frag, bar, rank, *, _ctx) -> None:
    """Store a fragment into the shared memory of CTA ``rank`` of this thread's cluster (sm_90+):
    ``dst`` is a shared tile and ``bar`` an mbarrier of this CTA, both standing for the same offsets in
    CTA ``rank`` (``mapa``), as ``mbarrier_arrive_cluster`` takes its barrier. Each vector access is one
    ``st.async ... mbarrier::complete_tx::bytes``: when it lands, the bytes count off that CTA's barrier,
    so its threads wait for the data as for a TMA load (``mbarrier_arrive_expect_tx`` of the total, then
    ``mbarrier_wait``). 32-bit elements (f32, i32, u32). Nothing orders the stores for this thread; the
    receiver's barrier is the only completion. The values leave with the instruction (registers), so the
    sender may exit at once; the receiver must not exit before the stores land (its wait keeps it)."""
    if _ctx.sm < 90:
        raise LangError(f"store_remote needs sm_90 or newer (target {_ctx.arch})")
    if not isinstance(dst, Tile) or dst.space != "shared":
        raise LangError(f"store_remote needs a shared tile (SharedTile) as its destination, got {dst!r}")
    if not isinstance(frag, Fragment):
        raise LangError(f"store_remote needs a Fragment, got {frag!r}")
    if dst.dtype not in _ST_ASYNC_TYPES:
        raise LangError(f"store_remote stores 32-bit elements (f32, i32, u32), the tile holds {dst.dtype}")
    bar = getattr(bar, "ptr", bar)
    if not (isinstance(bar, Value) and isinstance(bar.type, PointerType) and bar.type.space == "shared"
            and bar.type.elem in (T.u64, T.i64)):
        raise LangError(f"store_remote: the barrier must be a *shared u64 pointer, got {bar!r}")
    _check_fragment_store(frag, dst, "store_remote")
    rank = L.to_value(_ctx, unwrap(rank), T.i32)
    coords = _slot_coords(_ctx, dst, frag.ownership, "store_remote")
    vals = [L.cast(v, dst.dtype, _ctx=_ctx) if v.type != dst.dtype else v for v in frag.values]
    for slots, _width in _accesses(dst, frag.ownership):       # 4, 8 or 16 bytes: 1, 2 or 4 values
        ptr = _slot_pointer(_ctx, dst, coords[slots[0]])
        _ctx.builder.create("nv.st_async", [ptr, bar, rank] + [vals[v] for v in slots], [])


def _unit_stride_axes(tile: Tile) -> list:
    """Axes along which the tile's storage is contiguous (static stride 1)."""
    layout = tile.layout.layout if isinstance(tile.layout, ComposedLayout) else tile.layout
    strides = layout.stride if isinstance(layout.stride, tuple) else (layout.stride,)
    return [axis for axis, s in enumerate(strides) if _is_int(s) and s == 1]


def _load_or_zero(ctx, cond, ptr, dtype):
    """``*ptr`` where ``cond`` holds, else 0, without touching memory when it does not."""
    from ..ir.core import Block

    if cond is True:
        return L.load(ctx, ptr)
    then, other = Block(), Block()
    with ctx.builder.at(then):
        ctx.builder.create("scf.yield", [L.load(ctx, ptr)])
    with ctx.builder.at(other):
        ctx.builder.create("scf.yield", [L.to_value(ctx, 0, dtype)])
    return ctx.builder.create("scf.if", [cond], [dtype], blocks=[then, other]).results[0]


@builtin
def copy_async(dst, src, threads, bounds=None, vector_bytes: int = 16, *, _ctx) -> None:
    """Copy a global tile into a shared tile of the same shape with ``cp.async``, 16 bytes per
    instruction, the vectors spread over ``threads`` threads (thread ``tid % threads`` takes
    vectors ``tid, tid + threads, ...``). Call ``commit_copies()``/``wait_copies(n)`` after.

    With ``bounds`` (valid extents from the view's origin, runtime allowed), vectors past them
    are zero-filled (``src-size`` 0, or partial at a ragged edge) and their source pointer is
    the view's origin, so no address outside the data is formed.

    ``vector_bytes`` (16, 8 or 4) is the width of each ``cp.async``; the source rows must be
    aligned to it. ``vector_bytes`` equal to the element size copies element by element with
    ordinary loads and stores (synchronous), for sources whose rows are not 4-byte aligned.
    """
    from .copy import cp_async

    if not isinstance(dst, Tile) or not isinstance(src, Tile):
        raise LangError("copy_async needs a shared destination tile and a global source tile")
    if dst.space != "shared" or src.space != "global":
        raise LangError(f"copy_async copies global -> shared, got {src.space} -> {dst.space}")
    if dst.shape != src.shape or not all(_is_int(e) for e in dst.shape) or len(dst.shape) != 2:
        raise LangError(f"copy_async needs two 2-D tiles of one static shape, got {src.shape} and {dst.shape}")
    if dst.dtype.itemsize != src.dtype.itemsize:
        raise LangError(f"copy_async copies bytes of equal-size elements, got {src.dtype} and {dst.dtype}")
    # (a source stride can be 1 on two axes, e.g. a K == 1 specialisation: follow the destination)
    common = [a for a in _unit_stride_axes(dst) if a in _unit_stride_axes(src)]
    if not common:
        raise LangError("copy_async needs both tiles contiguous (stride 1) along the same axis")
    axis = common[-1]
    elem = src.dtype.itemsize
    if vector_bytes not in (16, 8, 4, elem) or vector_bytes < elem:
        raise LangError(f"copy_async: vector_bytes must be 16, 8, 4 or the element size, got {vector_bytes}")
    vec = vector_bytes // elem
    extent = dst.shape[axis]
    other = dst.shape[1 - axis]
    if extent % vec:
        raise LangError(f"copy_async moves {vector_bytes}-byte vectors: the contiguous extent {extent} must be a "
                        f"multiple of {vec}")
    per_line = extent // vec
    total = per_line * other
    if not _is_int(threads) or threads <= 0 or total % threads:
        raise LangError(f"copy_async: {total} vectors do not divide evenly over {threads} threads")
    tid = thread_in_group(_ctx, threads, f"copy_async with threads={threads}")
    for i in range(total // threads):
        chunk = L.binary(_ctx, "+", tid, i * threads) if i else tid
        line = L.binary(_ctx, "//", chunk, per_line) if per_line > 1 else chunk
        pos = L.binary(_ctx, "*", L.binary(_ctx, "%", chunk, per_line), vec) if per_line > 1 else 0
        coord = (line, pos) if axis == 1 else (pos, line)
        dptr = _slot_pointer(_ctx, dst, coord)
        sptr = _slot_pointer(_ctx, src, coord)
        if vec == 1 and vector_bytes < 4:  # element by element, synchronous
            ok = True if bounds is None else _in_bounds(_ctx, coord, tuple(bounds))
            L.store(_ctx, dptr, _load_or_zero(_ctx, ok, sptr, src.dtype))
            continue
        if bounds is None:
            cp_async(dptr, sptr, vector_bytes, _ctx=_ctx)
            continue
        b_line, b_pos = (bounds[0], bounds[1]) if axis == 1 else (bounds[1], bounds[0])
        line_ok = L.compare(_ctx, "<", line, b_line)
        left = L.binary(_ctx, "-", b_pos, pos)  # valid elements from this vector on
        n_valid = L.maximum(L.minimum(left, vec, _ctx=_ctx), 0, _ctx=_ctx)
        nbytes = L.where(line_ok, L.binary(_ctx, "*", n_valid, elem), 0, _ctx=_ctx)
        safe = L.where(L.compare(_ctx, ">", nbytes, 0), sptr, src.ptr if all(_is_int(o) and o == 0 for o in src.origin)
                       else _slot_pointer(_ctx, src, (0, 0)), _ctx=_ctx)
        cp_async(dptr, safe, vector_bytes, src_bytes=nbytes, _ctx=_ctx)


# -- ldmatrix: when a fragment load from shared memory is an 8x8-matrix load ----------------------

def _ldmatrix_plan(tile: Tile, o: Ownership):
    """``(trans, groups)`` when every warp's load of ``o`` from ``tile`` is a sequence of
    ``ldmatrix`` instructions, else None. ``groups`` lists (first register, count) per
    instruction. Checked on the ownership table and the static storage offsets:

    * 16-bit elements in shared memory, whole warps, an even number of slots per thread;
    * register ``j`` (slots ``2j, 2j+1``) of lane ``l`` holds row ``l // 4`` of an 8x8 matrix,
      columns ``2(l % 4)`` and ``+1`` (``.trans``: rows ``2(l % 4)``, ``+1`` and column
      ``l // 4``), the matrix rows being 16-byte aligned runs of 8 elements anywhere.
    """
    import numpy as np

    from ..layouts import offsets_table

    if tile.space != "shared" or tile.dtype.bits != 16 or o.threads % 32 or o.values % 2 or tile.align < 16:
        return None  # (matrix rows must be 16-byte aligned: the tile's origin must be too)
    try:
        offs = offsets_table(_static_storage(tile))
    except (ValueError, TypeError):
        return None
    tab = ownership_table(o)
    off = offs[tuple(tab[:, :, i] for i in range(o.rank))]  # [T, V] element offsets
    T_, V = off.shape
    lane = np.arange(T_) % 32
    for trans in (False, True):
        ok = True
        for j in range(V // 2):
            lo, hi = off[:, 2 * j], off[:, 2 * j + 1]
            if not trans:
                row_start = lo - 2 * (lane % 4)
                good = (hi == lo + 1) & (row_start % 8 == 0)
                # the 4 lanes of a quad agree on the row start
                good &= (row_start.reshape(-1, 4) == row_start.reshape(-1, 4)[:, :1]).all(axis=1).repeat(4)
            else:
                r0 = lo - lane // 4
                r1 = hi - lane // 4
                good = (r0 % 8 == 0) & (r1 % 8 == 0)
                # lanes with the same l % 4 read the same two rows
                q = (lane % 4)
                for w in range(T_ // 32):
                    sl = slice(32 * w, 32 * w + 32)
                    for k in range(4):
                        sel = np.flatnonzero(q[sl] == k) + 32 * w
                        good[sel] &= (r0[sel] == r0[sel[0]]) & (r1[sel] == r1[sel[0]])
            if not good.all():
                ok = False
                break
        if ok:
            n = V // 2
            groups = []
            r = 0
            while r < n:
                m = 4 if n - r >= 4 else 2 if n - r >= 2 else 1
                groups.append((r, m))
                r += m
            return trans, tuple(groups)
    return None


def _int_op(ctx, op, a, b):
    """``a op b`` at compile time when both are ints, else in the kernel."""
    if _is_int(a) and _is_int(b):
        return {"+": a + b, "<<": a << b}[op]
    return L.binary(ctx, op, a, b)


def _matrix_row_pointers(ctx, tile: Tile, o: Ownership, plan):
    """For each instruction of an ldmatrix/stmatrix plan: (first register, count, this lane's row pointer)."""
    trans, groups = plan
    tgroup = thread_in_group(ctx, o.threads, f"the ownership {ownership_name(o)}")
    lane = L.binary(ctx, "&", tgroup, 31)
    warp_base = L.binary(ctx, "-", tgroup, lane)
    j_in = L.binary(ctx, ">>", lane, 3)      # the matrix this lane addresses
    r = L.binary(ctx, "&", lane, 7)          # the matrix row this lane addresses
    out = []
    for first, m in groups:
        j = L.binary(ctx, "&", j_in, m - 1) if m > 1 else 0  # lanes past the last matrix repeat valid rows
        reg = _int_op(ctx, "+", j, first)          # the register (slot pair) this lane's row feeds
        if not trans:  # row r of matrix j: thread 4r's register
            src_thread = L.binary(ctx, "+", warp_base, L.binary(ctx, "<<", r, 2))
            slot = _int_op(ctx, "<<", reg, 1)
        else:          # .trans: row r is the low (r even) or high half of thread r//2's register
            src_thread = L.binary(ctx, "+", warp_base, L.binary(ctx, ">>", r, 1))
            slot = _int_op(ctx, "+", _int_op(ctx, "<<", reg, 1), L.binary(ctx, "&", r, 1))
        idx = o.tv_layout((wrap(ctx, src_thread), wrap(ctx, slot)))
        coord = []
        stride = 1
        for axis, extent in enumerate(o.shape):
            c = idx // stride if stride != 1 else idx
            if axis < len(o.shape) - 1:
                c = c % extent
            coord.append(c)
            stride *= extent
        out.append((first, m, _slot_pointer(ctx, tile, tuple(coord))))
    return out


def _ldmatrix_load(ctx, tile: Tile, o: Ownership, plan):
    from .copy import ldmatrix

    values = [None] * o.values
    for first, m, ptr in _matrix_row_pointers(ctx, tile, o, plan):
        for k, reg in enumerate(ldmatrix(ptr, m, plan[0], _ctx=ctx)):
            op = ctx.builder.create("nv.unpack2", [reg], [tile.dtype, tile.dtype], {})
            values[2 * (first + k)], values[2 * (first + k) + 1] = op.results
    return values


def _stmatrix_store(ctx, tile: Tile, frag: Fragment, plan):
    from .copy import stmatrix
    from .fragment import pack_bits

    vals = [L.cast(v, tile.dtype, _ctx=ctx) for v in frag.values]
    words = pack_bits(ctx, vals, 2)
    for first, m, ptr in _matrix_row_pointers(ctx, tile, frag.ownership, plan):
        stmatrix(ptr, tuple(words[first:first + m]), plan[0], _ctx=ctx)
