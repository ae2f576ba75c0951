"""Bulk tensor copies through a tensor map (TMA, sm_90+): the tile plan and the ``nv.tma.*`` ops.

``TMATile`` (rules in ``tylo.lang.tma``'s doc) is the box a tensor map describes; ``shared_layout``
where TMA writes it in shared memory (the hardware swizzle); ``tma_geometry`` the tensor map's
dims, strides and box for a row-major array.

The tensor map is its generic address (u64); the shared tile a ``*shared`` pointer; the box
origin ``rank`` i32 coordinates (innermost first, as ``cp.async.bulk.tensor`` takes them).
A load completes on an mbarrier (``complete_tx::bytes``), optionally multicast to the CTAs of
a 16-bit mask; stores complete in bulk groups (``commit`` / ``wait``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...layouts import ComposedLayout, Layout, Swizzle, compose
from .. import types as T
from ..opdef import Attr, OpDef
from ..ops import define_ops
from ..types import PointerType, ScalarType

__all__ = [
    "DEFINITIONS", "SWIZZLES", "MAX_BOX", "TMATile", "transfer_bytes", "swizzle_bytes", "size",
    "swizzle_period_bytes", "hardware_swizzle", "shared_layout", "box_grid", "tma_coordinates", "tma_geometry",
]

# -- the plan: the box a tensor map moves, and where TMA puts it in shared memory ------------------
#
# Pure geometry (plain ints): the kernel builtins (tylo.lang.tma), the host binding
# (tylo.runtime.tma_binding) and an interpreter model of nv.tma.* all read it.


SWIZZLES = (128, 64, 32)
MAX_BOX = 256


@dataclass(frozen=True)
class TMATile:
    """A TMA tile plan: ``TMATile(bf16, (128, 64), axis=1, swizzle=128)``.

    ``shape`` is the logical tile shape; ``axis`` (0 or 1) the inner axis,
    contiguous in global memory and within a shared-memory row.
    """

    dtype: ScalarType
    shape: tuple
    axis: int = 1
    swizzle: int = 128

    def __tylo_signature__(self):
        """How a 2-D TMA binding of this plan appears in ``kernel.compile(signature=[...])``."""
        return ("blob", "tma", (self, 2), 128)

    def __hash__(self):
        # computed once (in __post_init__): a plan is part of every launch's specialisation key
        return self._hash

    def __reduce__(self):
        # rebuild through __init__ so the cached hash is this process's (str hashes are salted)
        return (type(self), (self.dtype, self.shape, self.axis, self.swizzle))

    def __post_init__(self):
        dt = self.dtype
        if not isinstance(dt, ScalarType) or dt.is_bool or dt.itemsize not in (1, 2, 4):
            raise ValueError(f"TMATile: the element type must be a tylo dtype of 1, 2 or 4 bytes, got {dt!r}")
        shape = self.shape
        if (not isinstance(shape, tuple) or len(shape) != 2
                or not all(isinstance(s, int) and not isinstance(s, bool) for s in shape)):
            raise ValueError(f"TMATile: the shape must be a 2-tuple of ints, got {shape!r}")
        if self.axis not in (0, 1) or isinstance(self.axis, bool):
            raise ValueError(f"TMATile: axis (the inner axis) must be 0 or 1, got {self.axis!r}")
        if self.swizzle not in SWIZZLES:
            raise ValueError(f"TMATile: the swizzle row width must be 128, 64 or 32 bytes, got {self.swizzle!r}")
        row = self.swizzle // dt.itemsize
        inner, outer = shape[self.axis], shape[1 - self.axis]
        if inner != row:
            raise ValueError(
                f"TMATile: the inner extent (axis {self.axis}) must be exactly one swizzle row, "
                f"{self.swizzle} bytes / {dt.itemsize}-byte {dt} = {row} elements; got {inner}")
        if outer <= 0 or outer % 8 or outer > MAX_BOX:
            raise ValueError(
                f"TMATile: the outer extent (axis {1 - self.axis}) must be a positive multiple of 8 "
                f"and at most {MAX_BOX}; got {outer}")
        object.__setattr__(self, "_hash", hash((self.dtype, self.shape, self.axis, self.swizzle)))

    @property
    def elem_bytes(self) -> int:
        return self.dtype.itemsize

    @property
    def inner(self) -> int:
        """Elements per row (along the inner axis)."""
        return self.shape[self.axis]

    @property
    def outer(self) -> int:
        """Rows (along the outer axis)."""
        return self.shape[1 - self.axis]

    def __repr__(self) -> str:
        return f"TMATile({self.dtype}, {self.shape}, axis={self.axis}, swizzle={self.swizzle})"


def transfer_bytes(plan: TMATile, boxes: tuple = (1, 1)) -> int:
    """Bytes one tile (of ``boxes`` plan boxes) moves: what it adds to an mbarrier's transaction count."""
    return math.prod(plan.shape) * plan.elem_bytes * math.prod(_check_boxes(plan, boxes))


def swizzle_bytes(plan: TMATile) -> int:
    return plan.swizzle


def size(plan: TMATile) -> tuple:
    """The logical tile shape."""
    return plan.shape


def swizzle_period_bytes(plan: TMATile) -> int:
    """Alignment of the shared allocation that establishes the swizzle origin (8 rows)."""
    return 8 * plan.swizzle


def hardware_swizzle(swizzle: int, elem_bytes: int) -> Swizzle:
    """``Swizzle<B, M, 3>`` on element offsets for a ``swizzle``-byte row of ``elem_bytes`` elements."""
    return Swizzle((swizzle // 16).bit_length() - 1, (16 // elem_bytes).bit_length() - 1, 3)


def _check_boxes(plan: TMATile, boxes) -> tuple:
    if (not isinstance(boxes, tuple) or len(boxes) != 2
            or not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in boxes)):
        raise ValueError(f"TMA boxes: a pair of positive ints (boxes along logical axes 0 and 1), got {boxes!r}")
    return boxes


def shared_layout(plan: TMATile, boxes: tuple = (1, 1)) -> ComposedLayout:
    """Logical coordinate -> element offset of the tile in shared memory (module doc).

    ``boxes=(b0, b1)``: a tile of ``b0 x b1`` plan boxes (logical shape ``(b0 * shape[0],
    b1 * shape[1])``), each stored whole in the plan's layout, one after another in row-major
    box order. A box is a whole number of swizzle periods, so the swizzle applies across them;
    an MN-major WGMMA operand wider than one swizzle row is such a tile.
    """
    b0, b1 = _check_boxes(plan, boxes)
    row = plan.inner
    stride = (row, 1) if plan.axis == 1 else (1, row)
    box = plan.outer * plan.inner
    shape = tuple(e if b == 1 else (e, b) for e, b in zip(plan.shape, (b0, b1)))
    strides = tuple(s if b == 1 else (s, box * step) for s, b, step in zip(stride, (b0, b1), (b1, 1)))
    return compose(hardware_swizzle(plan.swizzle, plan.elem_bytes), Layout(shape, strides))


def box_grid(plan: TMATile, shape: tuple) -> tuple:
    """``(b0, b1)``: how many plan boxes tile a shared tile of logical ``shape``, or ValueError."""
    if len(shape) != 2 or any(not isinstance(e, int) or e % p for e, p in zip(shape, plan.shape)):
        raise ValueError(f"the tile shape {tuple(shape)} is not a whole number of {plan!r} boxes")
    return (shape[0] // plan.shape[0], shape[1] // plan.shape[1])


def tma_coordinates(plan: TMATile, origin: tuple) -> tuple:
    """Logical origin ``(c0, c1[, batch])`` -> TMA coordinates, innermost first.

    Works on ints and on runtime values alike (it only reorders).
    """
    if len(origin) not in (2, 3):
        raise ValueError(f"tma_coordinates: an origin has 2 coordinates (3 with a batch), got {origin!r}")
    a = plan.axis
    return (origin[a], origin[1 - a], *origin[2:])


def tma_geometry(plan: TMATile, shape: tuple, strides: tuple, bounds=None):
    """Pure part of :func:`prepare_tma`: ``(bounds, global_dims, global_strides_bytes, box_dims)``.

    ``shape``/``strides`` (elements) are the array's, row-major: the last
    dimension is the inner axis.  Raises ValueError naming the rule.
    """
    nd = len(shape)
    if nd not in (2, 3):
        raise ValueError(f"prepare_tma: the array must be 2-D, or 3-D for a batch of matrices; got shape {shape}")
    if strides[-1] != 1:
        raise ValueError(f"prepare_tma: the array's last dimension (the plan's inner axis {plan.axis}) "
                         f"must be contiguous (stride 1); strides are {strides} elements")
    inner_ext, outer_ext = shape[-1], shape[-2]
    full = [0, 0]
    full[plan.axis], full[1 - plan.axis] = inner_ext, outer_ext
    full = tuple(full) + ((shape[0],) if nd == 3 else ())
    if bounds is None:
        bounds = full
    bounds = tuple(int(b) for b in bounds)
    if len(bounds) != nd:
        raise ValueError(f"prepare_tma: bounds {bounds} must have {nd} entries (logical extents in origin order)")
    for i, (b, f) in enumerate(zip(bounds, full)):
        if not 0 < b <= f:
            raise ValueError(f"prepare_tma: bound {b} of coordinate {i} must be positive and at most "
                             f"the array's extent {f}")
    e = plan.elem_bytes
    dims = (bounds[plan.axis], bounds[1 - plan.axis]) + bounds[2:]
    # an extent of 1 has no meaningful stride (a (1, K) view of a (K, 1) column has row stride 1): TMA never
    # steps along it, so give it the smallest pitch it accepts (16-byte multiple) past the data it spans
    pitch = strides[-2] * e if outer_ext > 1 else -(-inner_ext * e // 16) * 16
    gstrides = (pitch,) + (((strides[0] * e) if shape[0] > 1 else -(-pitch * outer_ext // 16) * 16,)
                           if nd == 3 else ())
    box = (plan.inner, plan.outer) + ((1,) if nd == 3 else ())
    return bounds, dims, gstrides, box


# -- the ops ----------------------------------------------------------------------------------------

def _copy_check(op):
    tmap = op.operands[0]
    if tmap.type != T.u64:
        return f"the tensor map address is u64, got {tmap.type}"
    smem = op.operands[1]
    if not (isinstance(smem.type, PointerType) and smem.type.space == "shared"):
        return f"the tile must be a *shared pointer, got {smem.type}"
    rank = op.attrs["rank"]
    coords = op.operands[2:2 + rank]
    if len(coords) != rank or any(c.type != T.i32 for c in coords):
        return f"{rank} i32 coordinates expected"
    return None


def _load_check(op):
    err = _copy_check(op)
    if err:
        return err
    extra = 1 if op.attrs.get("multicast") else 0
    if len(op.operands) != 3 + op.attrs["rank"] + extra:
        return "takes tmap, dst, coordinates, the mbarrier (and the CTA mask with multicast)"
    return None


def _store_check(op):
    err = _copy_check(op)
    if err:
        return err
    if len(op.operands) != 2 + op.attrs["rank"]:
        return "takes tmap, src and the coordinates"
    return None


DEFINITIONS = define_ops(
    OpDef("nv.tma.load", None, 0, False, _load_check, (Attr("rank", (int,)), Attr("multicast", (bool,), False)),
          memory="read_write",
          doc="tmap, dst, *coords, bar[, mask u16]: cp.async.bulk.tensor.{rank}d.shared::cluster.global"),
    OpDef("nv.tma.store", None, 0, False, _store_check, (Attr("rank", (int,)),), memory="read_write",
          doc="tmap, src, *coords: cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group"),
    OpDef("nv.tma.commit", 0, 0, False, memory="read_write", doc="cp.async.bulk.commit_group"),
    OpDef("nv.tma.wait", 0, 0, False, attrs=(Attr("n", (int,)), Attr("read", (bool,))), memory="read_write",
          doc="cp.async.bulk.wait_group[.read] n"),
    OpDef("nv.tma.prefetch", 1, 0, False, memory="read", doc="tmap: prefetch.tensormap"),
)
