"""Tensor memory (TMEM): tiles, storage units, transfers and their partitions.

Host-side plan objects (pure Python + numpy); the kernel builtins that move
data live in ``tylo.lang.tcgen05``.  See docs/tmem.md.

Storage units (seed "TMEM tiles and transfers")
-----------------------------------------------
A TMEM address holds the physical lane in bits 31:16 and the 32-bit word
column in bits 15:0; there are 128 lanes and 512 columns.  A tile's layout
offset ``i`` counts *typed slots* of a column-major grid over 128 lanes:
lane ``i % 128``, typed position ``i // 128`` along the lane.  An f32 (or
any 32-bit type) fills a word; two 16-bit values share one, low half first.
So position ``p`` of a 16-bit tile is word ``p // 2``, bits ``16 * (p % 2)``.

A tile's ``address`` is the allocation-relative base in ISA units (a Python
int on the host, a runtime value in a kernel: only ``+ * // %`` are applied
to it).  ``offset`` (typed slots, default 0) is added to every layout offset;
``reinterpret_tile`` uses it to keep a half-word start.

Transfers
---------
``TmemTransfer(shape, axis=, atom=)`` is one warp's ``tcgen05.ld``/``st``
data-path shape bound to logical coordinates: ``axis`` holds the values of
one lane (the register axis), the other axis the lanes.  ``partition``
checks a TMEM view against it and returns a :class:`TmemAccess` (address,
instruction suffix, register count, ownership of the loaded fragment).  It
never picks another instruction: a view that does not fit raises a
``ValueError`` naming the rule.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir.nv.tmem import ATOMS, COLUMNS, LANES, TransferAtom  # ISA data of the TMEM ops, re-exported
from ..layouts import ComposedLayout, Layout, Ownership, View, fit_tv_layout, permutedims, window
from ..layouts.recognise import offsets_table

__all__ = [
    "LANES", "COLUMNS", "TmemTile", "TmemTransfer", "TmemAccess", "ATOMS", "TransferAtom",
    "partition", "reinterpret_tile", "tmem_location", "words_per_element", "slots_per_word", "known_multiple",
]



def _is_int(x) -> bool:
    return type(x) is int


def slots_per_word(dtype) -> int:
    """Typed values per 32-bit TMEM word: 1 for 32-bit types, 2 for 16-bit ones."""
    bits = getattr(dtype, "bits", None)
    if bits == 32 and dtype.kind in ("float", "int", "uint"):
        return 1
    if bits == 16 and dtype.kind in ("float", "int", "uint"):
        return 2
    raise ValueError(f"TMEM holds 32-bit or 16-bit element types (one or two per word); got {dtype!r}")


def words_per_element(dtype) -> float:
    return 1 / slots_per_word(dtype)


def _extents(layout) -> tuple:
    if isinstance(layout, View):
        return tuple(layout.shape)
    shape = layout.shape
    if type(shape) is not tuple:
        return (shape,)
    from ..layouts import inttuple as it

    return tuple(it.product(s) for s in shape)


def sum_skipping_zeros(a, b):
    """``a + b`` dropping static zeros (so runtime values see only real operators).

    Adds at once, in the operands' own type: TMEM addresses are always 32-bit. (Tile origins in
    ``tylo.lang.tiles`` instead defer a runtime sum until the address width is known.)"""
    if _is_int(b) and b == 0:
        return a
    if _is_int(a) and a == 0:
        return b
    return a + b


# --------------------------------------------------------------------------
# tiles


@dataclass(frozen=True, eq=False)
class TmemTile:
    """A typed TMEM tile: ``dtype``, base ``address`` (ISA units) and ``layout``.

    >>> from tylo.ir.types import f32
    >>> t = TmemTile(f32, 0, Layout((128, 128), (1, 128)))
    >>> t.shape, tmem_location(t, (3, 5))
    ((128, 128), (196613, 0))
    """

    dtype: Any
    address: Any
    layout: Any
    offset: Any = 0

    def __post_init__(self):
        per = slots_per_word(self.dtype)
        lay = self.layout
        if not isinstance(lay, (Layout, ComposedLayout, View)):
            raise ValueError(f"TmemTile: layout must be a Layout, ComposedLayout or window, got {lay!r}")
        if _is_int(self.address) and not 0 <= self.address < (1 << 32):
            raise ValueError(f"TmemTile: address {self.address:#x} is not a 32-bit TMEM address")
        if _is_int(self.address) and ((self.address >> 16) >= LANES or (self.address & 0xFFFF) >= COLUMNS):
            raise ValueError(
                f"TmemTile: address {self.address:#x} is outside the 128 lanes x 512 columns of TMEM"
            )
        if lay.is_static and _is_int(self.offset):
            offs = np.asarray(lay.offsets() if hasattr(lay, "offsets") else [], dtype=np.int64) + self.offset
            if offs.size and offs.min() < 0:
                raise ValueError(f"TmemTile: layout {lay!r} has negative offsets")
            if offs.size and int(offs.max()) // LANES >= COLUMNS * per:
                raise ValueError(
                    f"TmemTile: layout {lay!r} reaches position {int(offs.max()) // LANES} along a lane; "
                    f"TMEM has {COLUMNS} columns ({COLUMNS * per} {self.dtype} values per lane)"
                )

    @property
    def shape(self) -> tuple:
        return _extents(self.layout)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __len__(self):
        return self.rank

    def __tylo_window__(self, origin, shape, check):
        return TmemTile(self.dtype, self.address, window(self.layout, origin, shape, check), self.offset)

    def __tylo_permutedims__(self, perm):
        return TmemTile(self.dtype, self.address, permutedims(self.layout, perm), self.offset)

    def slot(self, coord) -> Any:
        """Typed-slot offset of a coordinate (layout offset plus ``offset``)."""
        return sum_skipping_zeros(self.layout(coord), self.offset)

    def __repr__(self) -> str:
        off = "" if _is_int(self.offset) and self.offset == 0 else f", offset={self.offset!r}"
        return f"TmemTile({self.dtype}, {self.address!r}, {self.layout!r}{off})"


def tmem_location(tile: TmemTile, coord) -> tuple:
    """``(word address, bit offset)`` of logical coordinate ``coord`` of ``tile``.

    The word address is ``tile.address + (lane << 16) + column``; the bit offset
    is 0 for 32-bit types and 0 or 16 for 16-bit ones (low half first).
    """
    per = slots_per_word(tile.dtype)
    i = tile.slot(coord)
    lane = i % LANES
    pos = i // LANES
    col = pos if per == 1 else pos // per
    bit = 0 if per == 1 else (pos % per) * 16
    return sum_skipping_zeros(tile.address, sum_skipping_zeros(lane * 65536, col)), bit


# --------------------------------------------------------------------------
# reinterpretation


def _flat_affine(tile: TmemTile, what: str):
    """(offset, strides, extents) of a flat affine tile view, or raise."""
    lay = tile.layout
    if isinstance(lay, ComposedLayout) and not lay.swizzle.is_identity:
        raise ValueError(f"{what}: needs a flat affine view; {lay!r} has a nonlinear swizzle")
    if isinstance(lay, ComposedLayout):
        lay = lay.layout
    if isinstance(lay, View):
        a = lay.affine()
        if a is None:
            raise ValueError(f"{what}: needs a flat affine view; {lay!r} is not affine along every axis")
        off, L = a
        strides = tuple(L.stride)
    else:
        from ..layouts import axis_strides

        strides = axis_strides(lay)
        if strides is None:
            raise ValueError(f"{what}: needs a flat affine view; {lay!r} is not affine along every axis")
        off = 0
    if not all(_is_int(s) for s in strides):
        raise ValueError(f"{what}: needs static strides, got {strides!r}")
    return sum_skipping_zeros(off, tile.offset), strides, tile.shape


def reinterpret_tile(dtype, tile: TmemTile, axis=None) -> TmemTile:
    """The same storage viewed as ``dtype`` (32-bit <-> 16-bit); ``axis`` is the
    logical axis whose extent doubles (32 -> 16 bit) or halves (16 -> 32 bit).

    Rules: an explicit ``axis``; a flat affine view (one stride per axis);
    ``axis`` runs along consecutive positions of a lane; every other axis
    runs along lanes without leaving the 128 lanes, or along whole words;
    16 -> 32 bit needs complete aligned pairs (even start, even extent).
    Values are not converted and nothing is made ready.
    """
    what = "reinterpret_tile"
    if axis is None:
        raise ValueError(f"{what}: give the logical axis that changes extent explicitly (axis=...)")
    src, dst = slots_per_word(tile.dtype), slots_per_word(dtype)
    rank = tile.rank
    if type(axis) is not int or not 0 <= axis < rank:
        raise ValueError(f"{what}: axis must be in range({rank}), got {axis!r}")
    off, strides, ext = _flat_affine(tile, what)
    if src == dst:
        return TmemTile(dtype, tile.address, tile.layout, tile.offset)
    if strides[axis] != LANES and ext[axis] > 1:
        raise ValueError(
            f"{what}: axis {axis} must run along consecutive positions of a lane (stride {LANES}), "
            f"it has stride {strides[axis]}"
        )
    static_off = _is_int(off)
    lane0 = off % LANES if static_off else None
    pos0 = off // LANES if static_off else None
    if dst == 2 and src == 1:  # 32 -> 16 bit: positions double
        conv = lambda d: 2 * d  # noqa: E731 - stride of whole positions
        new_ext = ext[axis] * 2
        new_off = (off + LANES * (off // LANES)) if not static_off else lane0 + LANES * 2 * pos0
    else:  # 16 -> 32 bit: need complete aligned pairs
        if not static_off:
            raise ValueError(f"{what}: a 16-bit view with a runtime offset cannot prove complete aligned pairs")
        if pos0 % 2:
            raise ValueError(
                f"{what}: 16-bit -> 32-bit needs complete aligned pairs; the view starts at position {pos0} "
                "(the high half of a word)"
            )
        if ext[axis] % 2:
            raise ValueError(
                f"{what}: 16-bit -> 32-bit needs complete aligned pairs; axis {axis} has odd extent {ext[axis]}"
            )
        conv = lambda d: d // 2  # noqa: E731
        new_ext = ext[axis] // 2
        new_off = lane0 + LANES * (pos0 // 2)
    new_shape, new_strides = [], []
    for i, (e, d) in enumerate(zip(ext, strides)):
        if i == axis:
            new_shape.append(new_ext)
            new_strides.append(LANES)
            continue
        if e == 1:
            new_shape.append(1)
            new_strides.append(0)
        elif d % LANES == 0:
            if dst == 1 and (d // LANES) % 2:
                raise ValueError(
                    f"{what}: 16-bit -> 32-bit needs complete aligned pairs; axis {i} steps by "
                    f"{d // LANES} positions (half a word)"
                )
            new_shape.append(e)
            new_strides.append(conv(d // LANES) * LANES)
        elif 0 < d < LANES and (not static_off or lane0 + (e - 1) * d < LANES):
            new_shape.append(e)
            new_strides.append(d)
        else:
            raise ValueError(
                f"{what}: axis {i} (stride {d}, extent {e}) neither stays within the 128 lanes nor "
                "steps by whole positions"
            )
    return TmemTile(dtype, tile.address, Layout(tuple(new_shape), tuple(new_strides)), new_off)


@dataclass(frozen=True)
class TmemTransfer:
    """One warp's TMEM transfer: ``shape`` logical, ``axis`` holds each lane's values.

    For ``.32x32b`` the other axis is the 32 lanes (one per thread); for the
    16-lane atoms it is 16 lanes.  The extent along ``axis`` counts elements
    of the tile's dtype (two 16-bit values per word).

    >>> TmemTransfer((32, 64), axis=1)
    TmemTransfer((32, 64), axis=1, atom='32x32b')
    """

    shape: tuple
    axis: int = 1
    atom: str = "32x32b"

    def __post_init__(self):
        shape = tuple(self.shape) if isinstance(self.shape, (tuple, list)) else self.shape
        if type(shape) is not tuple or len(shape) != 2 or not all(_is_int(s) and s > 0 for s in shape):
            raise ValueError(f"TmemTransfer: shape must be two positive ints, got {self.shape!r}")
        object.__setattr__(self, "shape", shape)
        if self.axis not in (0, 1):
            raise ValueError(f"TmemTransfer: axis must be 0 or 1, got {self.axis!r}")
        if self.atom not in ATOMS:
            raise ValueError(f"TmemTransfer: atom must be one of {', '.join(ATOMS)}, got {self.atom!r}")
        lanes = ATOMS[self.atom].lanes
        if shape[1 - self.axis] != lanes:
            raise ValueError(
                f"TmemTransfer: .{self.atom} moves {lanes} lanes; axis {1 - self.axis} has extent "
                f"{shape[1 - self.axis]}"
            )

    @property
    def lane_axis(self) -> int:
        return 1 - self.axis

    @property
    def values(self) -> int:
        return self.shape[self.axis]

    def __tylo_permutedims__(self, perm):
        if tuple(perm) == (0, 1):
            return self
        return TmemTransfer((self.shape[1], self.shape[0]), 1 - self.axis, self.atom)

    def __repr__(self) -> str:
        return f"TmemTransfer({self.shape!r}, axis={self.axis}, atom={self.atom!r})"


@dataclass(frozen=True, eq=False)
class TmemAccess:
    """A checked partition: what one warp's ``tcgen05.ld/st`` moves.

    ``address``: TMEM address of the first word (lane base in bits 31:16);
    ``instruction``: the shape suffix (``.32x32b.x64``); ``num``: the
    ``.num`` repetition; ``registers``: 32-bit registers per thread;
    ``split``: the ``immHalfSplitoff`` column offset of ``.16x32bx2`` (else
    None); ``warp``: which warp of the warpgroup (lane base // 32) must
    execute it; ``ownership``: the loaded fragment's ``Ownership`` over
    ``shape`` (value slot = element; a 16-bit register holds slots 2k, 2k+1).
    """

    tile: TmemTile
    transfer: TmemTransfer
    address: Any
    lane_base: int
    num: int
    registers: int
    ownership: Ownership
    split: int | None = None
    dtype: Any = field(default=None)
    lane_offset: Any = 0  # runtime lanes added to lane_base (a provable multiple of the band)

    @property
    def shape(self) -> tuple:
        return self.transfer.shape

    @property
    def atom(self) -> str:
        return self.transfer.atom

    @property
    def instruction(self) -> str:
        return f".{self.transfer.atom}.x{self.num}"

    @property
    def packed(self) -> bool:
        return slots_per_word(self.dtype) == 2

    @property
    def warp(self) -> Any:
        """The warp of the warpgroup that must execute the transfer (runtime for a runtime band)."""
        return sum_skipping_zeros(self.lane_base, self.lane_offset) // 32

    def __repr__(self) -> str:
        return (
            f"TmemAccess({self.instruction}, address={self.address!r}, {self.registers} registers, "
            f"lanes {self.lane_base}..{self.lane_base + ATOMS[self.atom].lanes - 1})"
        )


def _ownership(atom: TransferAtom, transfer: TmemTransfer, num: int, per: int, split: int) -> Ownership:
    """Fragment ownership over ``transfer.shape``: (thread, element slot) ->
    column-major index; built from the atom's (lane, word) map and checked to
    be a layout."""
    regs = atom.regs * num
    ax = transfer.axis
    ext = transfer.shape
    tab = np.zeros((32, regs * per), dtype=np.int64)
    for t in range(32):
        for k in range(regs):
            lane, word = atom.where(t, k, num, split)
            if atom.name == "16x32bx2" and word >= num:
                word = word - split + num  # logical value index of the second half
            for h in range(per):
                v = word * per + h
                coord = [0, 0]
                coord[1 - ax] = lane
                coord[ax] = v
                tab[t, k * per + h] = coord[0] + ext[0] * coord[1]
    tv = fit_tv_layout(tab)
    if tv is None:  # pragma: no cover - every ISA atom is a layout
        raise ValueError(f"partition: the ownership of .{atom.name} is not a layout")
    return Ownership(ext, tv, f"tmem .{atom.name}.x{num} {ext[0]}x{ext[1]} axis={ax}")


def tmem_offset_structure(tile: TmemTile, what: str):
    """(numpy offset table of the view with runtime origins at 0, runtime extra
    typed-slot offset, per-axis runtime origin flags)."""
    lay = tile.layout
    if isinstance(lay, ComposedLayout) and not lay.swizzle.is_identity:
        raise ValueError(
            f"{what}: TMEM layouts with a nonlinear swizzle are not supported ({lay.swizzle!r}); "
            "no tcgen05.ld/st shape reads them"
        )
    if isinstance(lay, View) and isinstance(lay.parent, ComposedLayout) and not lay.parent.swizzle.is_identity:
        raise ValueError(
            f"{what}: TMEM layouts with a nonlinear swizzle are not supported ({lay.parent.swizzle!r}); "
            "no tcgen05.ld/st shape reads them"
        )
    if not _is_int(tile.offset):
        raise ValueError(f"{what}: the tile's slot offset must be static, got {tile.offset!r}")
    extra: Any = 0
    lane_extra: Any = 0
    lane_multiple = 0  # gcd of what the runtime lane offsets are provably multiples of (0: none)
    if isinstance(lay, View) and not all(_is_int(o) for o in lay.origin):
        parent = lay.parent
        if not isinstance(parent, Layout) or not parent.is_static:
            raise ValueError(f"{what}: a runtime window origin needs a static affine parent layout, got {parent!r}")
        from ..layouts.affine import mode_stride

        origin = []
        for i, o in enumerate(lay.origin):
            if _is_int(o):
                origin.append(o)
                continue
            m = parent[i] if type(parent.shape) is tuple else parent
            d = mode_stride(m, None, m.size)
            if d is None:
                raise ValueError(f"{what}: axis {i} has a runtime origin but mode {m!r} is not affine")
            if d % LANES:
                k = known_multiple(o) * d
                if not 0 < d < LANES or k == 0 or k % 16:
                    raise ValueError(
                        f"{what}: axis {i} has a runtime origin but runs along lanes (stride {d}); the lane "
                        "band must be static, or a runtime origin that is a provable multiple of the band "
                        "(write it as 32 * w)"
                    )
                origin.append(0)
                lane_extra = sum_skipping_zeros(lane_extra, o * d)
                lane_multiple = math.gcd(lane_multiple, k)
                continue
            origin.append(0)
            extra = sum_skipping_zeros(extra, o * d)
        lay = View(parent, tuple(origin), lay.shape)
    if not lay.is_static:
        raise ValueError(f"{what}: the view {lay!r} has runtime leaves; its lane band must be static")
    table = offsets_table(lay) + tile.offset
    return table, extra, lane_extra, lane_multiple


def known_multiple(x) -> int:
    """A positive int that the integer ``x`` is provably a multiple of (1 when nothing is known).

    Python ints give themselves (0 is a multiple of anything: the answer is
    ``1 << 30``); runtime values are followed through the ops that define
    them (constants, ``*``, ``<<`` by a constant, ``+``/``-``, integer casts).
    """
    from math import gcd

    from ..ir.core import Op, Value

    x = getattr(x, "value", x) if type(x).__name__ == "RuntimeInt" else x
    if _is_int(x):
        return abs(x) if x else 1 << 30
    if not isinstance(x, Value) or not isinstance(x.owner, Op):
        return 1
    op = x.owner
    if op.name == "arith.constant" and _is_int(op.attrs.get("value")):
        return known_multiple(op.attrs["value"])
    if op.name == "arith.mul":
        return min(known_multiple(op.operands[0]) * known_multiple(op.operands[1]), 1 << 30)
    if op.name == "arith.shl":
        c = op.operands[1].owner
        if isinstance(c, Op) and c.name == "arith.constant" and _is_int(c.attrs.get("value")):
            return min(known_multiple(op.operands[0]) << c.attrs["value"], 1 << 30)
        return known_multiple(op.operands[0])
    if op.name in ("arith.add", "arith.sub"):
        return gcd(known_multiple(op.operands[0]), known_multiple(op.operands[1]))
    if op.name == "arith.cast" and getattr(x.type, "is_int", False):
        return known_multiple(op.operands[0])
    return 1


def partition(transfer: TmemTransfer, view: TmemTile) -> TmemAccess:
    """Bind ``transfer`` to the TMEM ``view`` (the seed's rules, in order):

    1. the view is a TMEM tile of a 32-bit or 16-bit type, with the
       transfer's shape and no nonlinear swizzle;
    2. the lane axis maps to consecutive lanes, the same position in each;
    3. the lanes form an aligned band (32 lanes at a multiple of 32 for
       ``.32x32b``, 16 lanes at a multiple of 16 for the 16-lane shapes);
    4. the value axis maps to contiguous positions (affine, stride one
       element; hierarchical modes with the same map are fine; ``.16x32bx2``
       allows one jump between its two halves), starting on a word;
    5. 1, 2, 4, ..., 128 words per thread (``.num`` within the shape's range)
       and inside the 512 columns.
    """
    what = "partition"
    if not isinstance(transfer, TmemTransfer):
        raise ValueError(f"{what}: expected a TmemTransfer, got {transfer!r}")
    if not isinstance(view, TmemTile):
        raise ValueError(f"{what}: expected a TmemTile view, got {type(view).__name__}")
    atom = ATOMS[transfer.atom]
    per = slots_per_word(view.dtype)
    if view.shape != transfer.shape:
        raise ValueError(f"{what}: the view has shape {view.shape} but the transfer moves {transfer.shape}")
    table, extra, lane_extra, lane_multiple = tmem_offset_structure(view, what)
    la, va = transfer.lane_axis, transfer.axis
    tab = np.moveaxis(table, la, 0)  # [lanes, values]
    lane = tab % LANES
    pos = tab // LANES
    L = atom.lanes
    base = int(lane[0, 0])
    n_words = pos.shape[1] // per
    reps = n_words // (2 if atom.name == "16x32bx2" else atom.words)
    name = f".{atom.name}.x{reps}" if reps >= 1 else f".{atom.name}"
    if not np.array_equal(lane, np.broadcast_to((base + np.arange(L))[:, None], lane.shape)):
        raise ValueError(
            f"{what}: transfer {name} needs axis {la} to map to {L} consecutive lanes with the same "
            f"lane for every value; the view {view.layout!r} does not"
        )
    if not np.array_equal(pos, np.broadcast_to(pos[:1, :], pos.shape)):
        raise ValueError(
            f"{what}: transfer {name} reads the same positions in every lane; positions along axis "
            f"{va} differ between lanes in {view.layout!r}"
        )
    if base % L:
        raise ValueError(f"{what}: transfer {name} needs a {L}-lane aligned band; the view starts at lane {base}")
    if lane_multiple % L:
        raise ValueError(
            f"{what}: transfer {name} needs a {L}-lane aligned band; the runtime lane origin is only known to be "
            f"a multiple of {lane_multiple} lanes"
        )
    p = pos[0]
    n = p.shape[0]
    if n % per:
        raise ValueError(
            f"{what}: transfer {name} moves whole 32-bit words; axis {va} has {n} 16-bit values (odd)"
        )
    words = n // per
    p0 = int(p[0])
    if p0 % per:
        raise ValueError(
            f"{what}: transfer {name} moves whole 32-bit words; the view starts at position {p0}, "
            "the high half of a word"
        )
    split = None
    if atom.name == "16x32bx2":
        half = n // 2
        if n % 2 or half % per:
            raise ValueError(f"{what}: transfer {name} needs an even number of words along axis {va}")
        s = int(p[half] - p0) if n > 1 else 0
        expect = np.concatenate([p0 + np.arange(half), p0 + s + np.arange(half)])
        if not np.array_equal(p, expect) or s < half:
            raise ValueError(
                f"{what}: transfer {name} needs axis {va} to map to two runs of contiguous positions "
                f"(the second at the split offset); the view maps {p[:4].tolist()}..."
            )
        split = s // per
    elif not np.array_equal(p, p0 + np.arange(n)):
        st = int(p[1] - p[0]) if n > 1 else 1
        raise ValueError(
            f"{what}: transfer {name} needs axis {va} to map to contiguous positions of a lane; the view "
            f"steps by {st} position(s) (incompatible strides)"
            if np.array_equal(p, p0 + st * np.arange(n))
            else f"{what}: transfer {name} needs axis {va} to be affine at contiguous positions; the view "
            f"maps it to positions {p[:6].tolist()}... (not affine)"
        )
    if atom.name == "16x32bx2":
        num = words // 2
    else:
        if words % atom.words:
            raise ValueError(
                f"{what}: transfer {name} moves {atom.words} words per lane per repetition; axis {va} "
                f"has {words} words"
            )
        num = words // atom.words
    regs = atom.regs * num
    if num & (num - 1) or not 1 <= num <= atom.max_num or regs > 128:
        raise ValueError(
            f"{what}: transfer {name} needs 1, 2, 4, ..., 128 words per thread (.x1 .. .x{atom.max_num}); "
            f"the view gives {regs} per thread (.x{num})"
        )
    last = p0 // per + (split or 0) + (words if split is None else num)
    if last > COLUMNS:
        raise ValueError(f"{what}: the view ends at column {last}, past the {COLUMNS} TMEM columns")
    col0 = p0 // per
    static = (base << 16) + col0
    if not (_is_int(extra) and extra == 0):
        extra_words = extra // LANES if per == 1 else extra // (LANES * per)
        if per != 1:
            raise ValueError(f"{what}: a runtime window origin on a 16-bit view cannot prove whole words")
        addr = sum_skipping_zeros(view.address, sum_skipping_zeros(static, extra_words))
    else:
        addr = sum_skipping_zeros(view.address, static)
    if not (_is_int(lane_extra) and lane_extra == 0):
        addr = sum_skipping_zeros(addr, lane_extra * 65536)
    own = _ownership(atom, transfer, num, per, split or 0)
    return TmemAccess(view, transfer, addr, base, num, regs, own, split, view.dtype, lane_extra)
