"""TMA (the Tensor Memory Accelerator): tile plans, their shared-memory layout and host bindings.

A :class:`TMATile` names the element type, the logical 2-D tile shape, the
*inner* axis (the one contiguous in global memory, zero-based) and the swizzle
row width (128, 64 or 32 bytes).  The rules (seed "TMA and Hopper WGMMA"):

* the element type has 1, 2 or 4 bytes;
* the inner extent is exactly one swizzle row: ``swizzle / elem_bytes`` elements;
* the outer extent is a multiple of 8 and at most 256.

``shared_layout(plan)`` is where TMA puts each logical element in shared
memory, in elements: rows of ``W = swizzle / elem_bytes`` elements packed one
after another, then the hardware swizzle ``Swizzle(log2(swizzle/16),
log2(16/elem_bytes), 3)`` (CuTe's ``Swizzle<B,M,S>`` on element offsets: the
16-byte chunk index within a row is XORed with three bits of the byte address
starting at bit 7, so the pattern repeats every 1024/512/256 bytes for
128/64/32-byte rows).  The allocation must be aligned to that period.

>>> from tylo.ir.types import bf16, f32
>>> a = TMATile(bf16, (128, 64), axis=1)
>>> transfer_bytes(a), shared_layout(a)((1, 0))
(16384, 72)
>>> b = TMATile(f32, (16, 64), axis=0, swizzle=64)
>>> swizzle_bytes(b), size(b)
(64, (16, 64))

Host arrays are row-major (C order): the array's last (stride-1) dimension
holds the plan's inner axis, the one before it the outer axis, and a 3-D
array adds a leading batch dimension.  ``tylo.prepare_tma(plan, array)``
(``tylo.runtime.tma_binding``) encodes the CUDA tensor map
(``tylo.runtime.tma.encode_tiled``) and returns a ``TMABinding`` that keeps
the array alive.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.nv.tma import (  # noqa: F401
    MAX_BOX,
    SWIZZLES,
    TMATile,
    box_grid,
    hardware_swizzle,
    shared_layout,
    size,
    swizzle_bytes,
    swizzle_period_bytes,
    tma_coordinates,
    tma_geometry,
    transfer_bytes,
)

__all__ = [
    "TMATile", "TMALoad", "transfer_bytes", "swizzle_bytes", "size", "shared_layout",
    "swizzle_period_bytes", "tma_coordinates", "box_grid", "batched",
]
# The plan's geometry is ISA data the op's meaning needs: it lives beside the op in tylo.ir.nv.tma
# (re-exported here). The host half, ``prepare_tma`` and ``TMABinding``, needs the driver and lives in
# tylo.runtime.tma_binding (importable as tylo.prepare_tma).

@dataclass(frozen=True)
class batched:
    """``batched(plan)`` in ``kernel.compile(signature=[...])`` stands for a 3-D (batched) binding."""

    plan: TMATile

    def __tylo_signature__(self):
        return ("blob", "tma", (self.plan, 3), 128)


def TMALoad(dtype, shape, axis: int = 1) -> TMATile:
    """The seed's earlier name of the 128-byte plan."""
    return TMATile(dtype, tuple(shape), axis=axis, swizzle=128)


# -- kernel side: bulk tensor copies ------------------------------------------------------
#
# For now the tensor map comes in as its generic address (a u64 value, e.g. from
# ``cvta.param`` of a grid-constant parameter once the JIT passes TMABindings).

from ..ir import types as _T  # noqa: E402
from ..ir.core import Value as _Value  # noqa: E402
from ..ir.types import PointerType as _PointerType  # noqa: E402
from .base import LangError as _LangError  # noqa: E402
from .base import builtin as _builtin  # noqa: E402


def _tile_boxes(ctx, plan, tile, what):
    """``[(shared pointer, (d0, d1) logical offset)]``, one per plan box of ``tile``.

    ``tile`` is a shared pointer/array (one box) or a whole SharedTile laid out as
    ``shared_layout(plan, boxes)``; the boxes follow that layout's row-major box order.
    """
    from . import core as L
    from .tiles import Tile

    grid = (1, 1)
    if isinstance(tile, Tile):
        if any(not (isinstance(o, int) and o == 0) for o in tile.origin) or tile.space != "shared":
            raise _LangError(f"{what}: the shared tile must be a whole tile (origin 0), not a window")
        try:
            grid = box_grid(plan, tuple(tile.shape))
        except ValueError:
            raise _LangError(f"{what}: the shared tile's shape {tuple(tile.shape)} is not the plan's {plan.shape} "
                             f"(or a whole number of its boxes)") from None
        if tile.layout != shared_layout(plan, grid):
            raise _LangError(f"{what}: the shared tile's layout {tile.layout!r} is not where TMA puts the plan's "
                             f"boxes ({shared_layout(plan, grid)!r}); build it with shared_tile(plan, ptr, boxes=...)")
    ptr = getattr(tile, "ptr", tile)
    if not (isinstance(ptr, _Value) and isinstance(ptr.type, _PointerType) and ptr.type.space == "shared"):
        raise _LangError(f"{what}: the shared tile must be a *shared pointer or shared array, got {tile!r}")
    if ptr.type.elem.itemsize != plan.elem_bytes:
        raise _LangError(f"{what}: the shared tile holds {ptr.type.elem}, the plan {plan.dtype}")
    box = plan.outer * plan.inner
    out = []
    for i in range(grid[0]):
        for j in range(grid[1]):
            k = i * grid[1] + j
            out.append((L.offset(ctx, ptr, k * box) if k else ptr, (i * plan.shape[0], j * plan.shape[1])))
    return out


def _shifted(ctx, origin, delta):
    """``origin + delta`` per coordinate (ints stay ints; a batch coordinate is not shifted)."""
    from . import core as L
    from .core import to_value

    def add(o, d):
        if d == 0:
            return o
        if isinstance(o, int) and not isinstance(o, bool):
            return o + d
        return L.binary(ctx, "+", to_value(ctx, o, _T.i32), d)
    return tuple(add(o, d) for o, d in zip(origin, delta + (0,) * (len(origin) - 2)))


def _check_origin(plan, origin, what):
    if not isinstance(plan, TMATile):
        raise _LangError(f"{what}: the first argument must be a TMATile plan, got {plan!r}")
    if not isinstance(origin, tuple) or len(origin) not in (2, 3):
        raise _LangError(f"{what}: the origin is a tuple of 2 logical coordinates (3 with a batch), got {origin!r}")
    inner = origin[plan.axis]
    if isinstance(inner, int) and (inner * plan.elem_bytes) % 16:
        raise _LangError(f"{what}: the inner origin {inner} must start a 16-byte chunk "
                         f"(a multiple of {16 // plan.elem_bytes} elements)")


def _coords(ctx, plan, origin, what):
    """The i32 TMA coordinates (innermost first) of a checked logical origin."""
    from .core import to_value

    _check_origin(plan, origin, what)
    return [to_value(ctx, c, _T.i32) for c in tma_coordinates(plan, origin)]


def _tmap(ctx, tmap, what, origin=None):
    from .core import to_value

    if isinstance(tmap, TMAMap):
        if origin is not None and len(origin) != tmap.rank:
            raise _LangError(f"{what}: the binding is {tmap.rank}-D, so the origin has {tmap.rank} coordinates "
                             f"({'(c0, c1, batch)' if tmap.rank == 3 else '(c0, c1)'}); got {len(origin)}")
        return tmap.address

    if isinstance(tmap, _Value) and tmap.type not in (_T.u64, _T.i64):
        raise _LangError(f"{what}: the tensor map is passed as its u64 generic address, got {tmap.type}")
    return to_value(ctx, tmap, _T.u64)


def _sm90(ctx, what):
    if ctx.sm < 90:
        raise _LangError(f"{what} needs sm_90 or newer (target {ctx.arch})")


@_builtin
def tma_load_tile(plan, tmap, tile, origin, bar, multicast=None, *, _ctx):
    """One elected thread: copy the plan's tile at logical ``origin`` into ``tile``;
    completion adds ``transfer_bytes(plan)`` transactions to ``bar`` (arrive/expect are the caller's).
    A tile of several boxes (``shared_tile(plan, ptr, boxes=...)``) is one copy per box, and
    ``transfer_bytes(plan, boxes)`` transactions.

    ``multicast``: a 16-bit mask of CTAs in the cluster (launch with ``cluster=``); the tile lands
    at the same shared offset in each of them and completes on each one's ``bar`` at the same
    offset (``.multicast::cluster``). Each receiving CTA expects the bytes on its own barrier."""
    _sm90(_ctx, "tma_load_tile")
    from .core import to_value
    from .mbarrier import barrier_operand

    what = "tma_load_tile"
    _check_origin(plan, origin, what)          # before any op is emitted
    address, barrier = _tmap(_ctx, tmap, what, origin), barrier_operand(bar, what)
    extra, attrs = [], {"rank": len(origin)}
    if multicast is not None:
        if isinstance(multicast, int) and not 0 < multicast < 1 << 16:
            raise _LangError(f"{what}: the multicast mask is a non-empty 16-bit CTA mask, got {multicast}")
        extra, attrs["multicast"] = [to_value(_ctx, multicast, _T.u16)], True
    for ptr, delta in _tile_boxes(_ctx, plan, tile, what):
        coords = _coords(_ctx, plan, _shifted(_ctx, origin, delta), what)
        _ctx.builder.create("nv.tma.load", [address, ptr, *coords, barrier, *extra], [], dict(attrs))


@_builtin
def tma_store_tile(plan, tmap, tile, origin, *, _ctx):
    """One elected thread: copy ``tile`` to the plan's tile at logical ``origin`` (a bulk group;
    one copy per box of a several-box tile). Elements past the bounds are dropped, but along the
    inner axis the hardware writes whole 16-byte chunks; origins must not be negative (a
    compile-time negative origin is an error; a runtime one faults on the H200)."""
    _sm90(_ctx, "tma_store_tile")
    what = "tma_store_tile"
    _check_origin(plan, origin, what)
    if any(isinstance(o, int) and not isinstance(o, bool) and o < 0 for o in origin):
        raise _LangError(f"{what}: the origin {origin} is negative; TMA stores at negative coordinates fault "
                         f"(illegal instruction on the H200), unlike loads, which zero-fill")
    address = _tmap(_ctx, tmap, what, origin)
    for ptr, delta in _tile_boxes(_ctx, plan, tile, what):
        coords = _coords(_ctx, plan, _shifted(_ctx, origin, delta), what)
        _ctx.builder.create("nv.tma.store", [address, ptr, *coords], [], {"rank": len(coords)})


@_builtin
def commit_tma_stores(*, _ctx):
    """``cp.async.bulk.commit_group``: close the current bulk group of stores."""
    _sm90(_ctx, "commit_tma_stores")
    _ctx.builder.create("nv.tma.commit", [], [])


def _wait(ctx, n, read, what):
    _sm90(ctx, what)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise _LangError(f"{what}: n must be a non-negative compile-time int, got {n!r}")
    ctx.builder.create("nv.tma.wait", [], [], {"n": n, "read": read})


@_builtin
def wait_tma_reads(n, *, _ctx):
    """Wait until the shared sources of all but the newest ``n`` bulk groups may be reused."""
    _wait(_ctx, n, True, "wait_tma_reads")


@_builtin
def wait_tma_stores(n, *, _ctx):
    """Wait until the global writes of all but the newest ``n`` bulk groups are complete."""
    _wait(_ctx, n, False, "wait_tma_stores")


@_builtin
def prefetch_tma_descriptor(tmap, *, _ctx):
    """``prefetch.tensormap [tmap]`` (generic address)."""
    _sm90(_ctx, "prefetch_tma_descriptor")
    _ctx.builder.create("nv.tma.prefetch", [_tmap(_ctx, tmap, "prefetch_tma_descriptor")], [])


__all__ += ["tma_load_tile", "tma_store_tile", "commit_tma_stores", "wait_tma_reads", "wait_tma_stores",
            "prefetch_tma_descriptor"]


@dataclass(frozen=True)
class TMAMapStatic:
    """The static part of a TMAMap (the descriptor's address is the leaf): its plan and rank."""

    plan: TMATile
    rank: int

    def describe(self) -> str:
        return f"a rank-{self.rank} TMA binding of {self.plan!r}"


class TMAMap:
    """A TMA binding inside a kernel: its plan and rank (static) and the u64 generic address of
    its by-value descriptor (``.address``). Builtins taking a tensor map accept it, and
    ``shared_tile(map, ptr)`` / ``tma_load(tile, map, origin, bar)`` take the plan from it."""

    def __init__(self, plan, rank, address):
        self.plan, self.rank, self.address = plan, rank, address

    def __tylo_flatten__(self):
        return [self.address], TMAMapStatic(self.plan, self.rank)

    @classmethod
    def __tylo_unflatten__(cls, static, leaves, ctx):
        return cls(static.plan, static.rank, leaves[0])

    def __tylo_getattr__(self, ctx, name):
        if name in ("plan", "rank", "address"):
            return getattr(self, name)
        raise _LangError(f"a TMA map has attributes plan, rank and address, not '{name}'")

    def __repr__(self):
        return f"TMAMap({self.plan!r}, rank={self.rank})"


def _tma_kernel_value(ctx, address, static):
    """In a kernel a TMA binding is a ``TMAMap``: the generic address (u64) of its by-value descriptor."""
    plan, rank = static
    return TMAMap(plan, rank, ctx.builder.value("ptr.to_int", [address], _T.u64))


def _plan_of(x, what):
    if isinstance(x, TMAMap):
        return x.plan
    if isinstance(x, TMATile):
        return x
    raise _LangError(f"{what}: expected a TMATile plan or a TMA binding, got {x!r}")


@_builtin
def shared_tile(plan, ptr, boxes=(1, 1), *, _ctx):
    """A SharedTile over ``ptr`` (a shared array or pointer) with ``shared_layout(plan, boxes)``.

    ``plan`` may be a TMATile or a TMA binding. The allocation must start the swizzle
    pattern: align it to ``swizzle_period_bytes(plan)`` (1024 bytes for 128-byte rows).
    ``boxes=(b0, b1)`` makes a tile of several plan boxes (``tma_load``/``tma_store`` move
    each), e.g. an MN-major WGMMA operand 256 elements wide from 64-element TMA rows.
    """
    from .tiles import SharedTile

    plan = _plan_of(plan, "shared_tile")
    p = getattr(ptr, "ptr", ptr)
    if not (isinstance(p, _Value) and isinstance(p.type, _PointerType) and p.type.space == "shared"):
        raise _LangError(f"shared_tile: expected a shared array or *shared pointer, got {ptr!r}")
    if p.type.elem.itemsize != plan.elem_bytes:
        raise _LangError(f"shared_tile: the pointer holds {p.type.elem}, the plan {plan.dtype}")
    try:
        layout = shared_layout(plan, tuple(boxes))
    except ValueError as e:
        raise _LangError(f"shared_tile: {e}") from None
    return SharedTile(p, layout, swizzle_period_bytes(plan), _ctx=_ctx)


@_builtin
def tma_load(tile, tmap, origin, bar, *, _ctx):
    """Seed spelling: ``tma_load(shared_tile(map, p), map, (row, k), bar)`` (one elected thread)."""
    if not isinstance(tmap, TMAMap):
        raise _LangError(f"tma_load: the second argument must be a TMA binding parameter, got {tmap!r}; "
                         f"with a raw u64 address use tma_load_tile(plan, tmap, tile, origin, bar)")
    tma_load_tile(tmap.plan, tmap, tile, origin, bar, _ctx=_ctx)


@_builtin
def tma_store(tmap, tile, origin, *, _ctx):
    """Seed spelling: ``tma_store(map, shared_tile(map, p), (row, col))`` (one elected thread)."""
    if not isinstance(tmap, TMAMap):
        raise _LangError(f"tma_store: the first argument must be a TMA binding parameter, got {tmap!r}; "
                         f"with a raw u64 address use tma_store_tile(plan, tmap, tile, origin)")
    tma_store_tile(tmap.plan, tmap, tile, origin, _ctx=_ctx)


__all__ += ["TMAMap", "TMAMapStatic", "shared_tile", "tma_load", "tma_store"]


from .base import register_blob_kind  # noqa: E402

register_blob_kind("tma", _tma_kernel_value)
