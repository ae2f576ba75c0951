"""The seed-level tcgen05 API: ``load_async`` / ``wait_load`` / ``store_async`` / ``wait_stores`` on
TMEM transfers, and the MMA API (``tcgen05_operand``, ``accumulator``, ``mma_tcgen05``, ``commit_mma``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir import types as T
from .. import core as L
from ..base import LangError, builtin
from ..tmem import TmemAccess, slots_per_word
from .plan import Tcgen05MMA, dtype_name, smem_descriptor
from .raw import (
    checked_cta_group,
    register_type,
    require_sm100a,
    shared_pointer_operand,
    tcgen05_commit,
    tcgen05_ld,
    tcgen05_mma,
    tcgen05_st,
    tcgen05_wait_ld,
    tcgen05_wait_st,
    u32_operand,
)

__all__ = [
    "load_async", "wait_load", "store_async", "wait_stores", "TmemLoad", "TmemLoadStatic", "OperandA", "OperandB",
    "operand_shape", "SmemOperand", "smem_operand", "tmem_operand_address", "accumulator", "Tcgen05Operand",
    "Tcgen05OperandStatic",
    "tcgen05_operand", "mma_tcgen05", "commit_mma",
]


# -- seed spelling: load_async / wait_load / store_async / wait_stores ---------


@dataclass(frozen=True)
class TmemLoadStatic:
    """The static part of a TmemLoad (its registers are the leaves): the access and whether
    ``tcgen05.wait::ld`` has completed it."""

    access: TmemAccess
    ready: bool

    def describe(self) -> str:
        state = "completed" if self.ready else "pending"
        return f"a {state} TMEM load {self.access!r}"


class TmemLoad:
    """A TMEM load in flight or completed: the access (static) and its
    registers (runtime).  ``values`` are 32-bit registers (packed pairs for
    16-bit tiles); ``ownership`` says which logical element each slot holds
    (slot ``2k``/``2k+1`` are the low/high halves of register ``k`` when
    ``packed``).  Wrap in a Fragment once ``tylo.lang.fragment`` lands."""

    def __init__(self, access: TmemAccess, values: tuple, ready: bool):
        self.access = access
        self.values = tuple(values)
        self.ready = ready

    dtype = property(lambda self: self.access.dtype)
    ownership = property(lambda self: self.access.ownership)
    packed = property(lambda self: self.access.packed)

    def __tylo_flatten__(self):
        return list(self.values), TmemLoadStatic(self.access, self.ready)

    @classmethod
    def __tylo_unflatten__(cls, static, leaves, ctx):
        return cls(static.access, tuple(leaves), static.ready)

    def __repr__(self):
        return f"TmemLoad({self.access.instruction}, {len(self.values)} registers, ready={self.ready})"


@builtin
def load_async(access, taddr=None, *, _ctx):
    """Start ``access``'s ``tcgen05.ld``; returns a pending ``TmemLoad``."""
    return TmemLoad(access, tcgen05_ld(access, taddr, _ctx=_ctx), False)


@builtin
def wait_load(pending, *, _ctx):
    """``tcgen05.wait::ld``; returns the ready ``TmemLoad`` (registers carried
    through the wait)."""
    if not isinstance(pending, TmemLoad):
        raise LangError(f"wait_load takes the result of load_async, got {pending!r}")
    from ..fragment import Fragment, PackedFragment

    regs = tcgen05_wait_ld(pending.values, _ctx=_ctx)
    access = pending.access
    if access.packed:  # two 16-bit values per word, low half first: the seed's PackedFragment
        return PackedFragment(access.dtype, access.ownership, regs)
    vals = [v if v.type == access.dtype else _ctx.builder.value("arith.bitcast", [v], access.dtype) for v in regs]
    return Fragment(access.dtype, access.ownership, vals)


@builtin
def store_async(access, values, taddr=None, *, _ctx):
    """Start ``access``'s ``tcgen05.st`` of ``values`` (a tuple of 32-bit
    registers, or a ``TmemLoad`` whose ownership matches)."""
    from ..fragment import Fragment, PackedFragment

    if isinstance(values, TmemLoad):
        if values.access.ownership != access.ownership or values.access.dtype != access.dtype:
            raise LangError("store_async: the registers' ownership does not match the access")
        values = values.values
    elif isinstance(values, (Fragment, PackedFragment)):
        if values.ownership != access.ownership:
            raise LangError(f"store_async: the fragment's ownership {values.ownership.name or values.ownership!r} "
                            f"is not the transfer's {access.ownership.name or access.ownership!r}")
        if isinstance(values, PackedFragment):
            values = values.words
        else:
            rt = register_type(access)
            values = [L.cast(v, access.dtype, _ctx=_ctx) for v in values.values]
            values = [v if v.type == rt else _ctx.builder.value("arith.bitcast", [v], rt) for v in values]
    tcgen05_st(access, values, taddr, _ctx=_ctx)


@builtin
def wait_stores(*, _ctx):
    """``tcgen05.wait::st``."""
    tcgen05_wait_st(_ctx=_ctx)


# --------------------------------------------------------------------------
# the seed-level MMA API: operands, accumulators, mma, commit
#
# Operand roles are the plain markers of ``tylo.lang.operands`` (``OperandA`` /
# ``OperandB``; the class or an instance), shared with WGMMA.  An operand tile is the logical
# ``(mn, k)`` matrix: A is ``(M / cta_group, K)`` rows of this CTA, B is
# ``(N / cta_group, K)`` (with ``cta_group::2`` each CTA of the pair holds
# half of A and half of B at the same shared-memory offset).

from ..operands import OperandA, OperandB  # noqa: E402  (plain role markers)


def _role(role) -> str:
    r = role if isinstance(role, type) else type(role)
    if r is OperandA:
        return "A"
    if r is OperandB:
        return "B"
    raise ValueError(f"tcgen05_operand: role must be OperandA or OperandB, got {role!r}")


def operand_shape(atom: Tcgen05MMA, role) -> tuple:
    """``(rows, K)`` of one CTA's operand: A ``(M / cta_group, K)``, B ``(N / cta_group, K)``."""
    rows = atom.m if _role(role) == "A" else atom.n
    return rows // atom.cta_group, atom.k


def _layout_extents(lay) -> tuple:
    shape = lay.shape
    if type(shape) is not tuple:
        return (shape,)
    from ...layouts import inttuple as it

    return tuple(it.product(x) for x in shape)


@dataclass(frozen=True)
class SmemOperand:
    """A checked shared-memory operand (host side): the canonical ``structure``,
    the descriptor without its start address (``desc``), the operand's
    ``shape`` and the pre-swizzle element offset of its origin (``start``, an
    int, or a runtime expression when the origin is runtime)."""

    role: str
    structure: Any
    desc: int
    shape: tuple
    start: Any
    elem_bytes: int

    @property
    def start_bytes(self):
        return self.start * self.elem_bytes


def smem_operand(atom: Tcgen05MMA, role, layout, origin=(0, 0)) -> SmemOperand:
    """Check that the ``(rows, K)`` window at ``origin`` of a shared tile laid out
    by ``layout`` (``Layout`` or swizzled ``ComposedLayout``, in elements,
    offset 0 aligned to the swizzle repeat) is what a tcgen05 shared-memory
    descriptor reads, and return its encoding.

    Model (PTX ISA "Shared memory descriptor" / "Shared Memory Matrix
    Layout"): the hardware reads element ``c`` of the operand at
    ``swizzle(start + canonical(c))`` where ``start`` is the descriptor's
    start address (the pre-swizzle offset of the origin element) and
    ``canonical`` the K- or MN-major pattern with the descriptor's LBO/SBO;
    the swizzle acts on absolute addresses (base offset 0, so the start must
    not fall inside the 8-row swizzle repeat: only offsets within one row or
    by whole repeats, the K-advance of CUTLASS/DeepGEMM).  This is checked
    element by element against ``layout``.  A runtime origin coordinate is
    the caller's contract: the check runs for every multiple of the operand
    extent along that axis (e.g. the k-th K slice).

    >>> from tylo.ir.types import bf16, f32
    >>> from tylo.layouts import Layout, Swizzle, compose
    >>> atom = Tcgen05MMA((128, 128), bf16, bf16, f32)
    >>> op = smem_operand(atom, OperandA, compose(Swizzle(3, 3, 3), Layout((128, 64), (64, 1))), (0, 16))
    >>> op.structure.major, op.start_bytes, hex(op.desc)
    ('K', 32, '0x4000404000010000')
    """
    import numpy as np

    from ...layouts import ComposedLayout, Layout, compose, swizzled_structure, swizzled_structure_reason

    r = _role(role)
    what = f"tcgen05_operand({'OperandA' if r == 'A' else 'OperandB'})"
    if not isinstance(layout, (Layout, ComposedLayout)) or not layout.is_static or layout.rank != 2:
        raise ValueError(f"{what}: needs a static rank-2 shared-memory layout, got {layout!r}")
    inner = layout.layout if isinstance(layout, ComposedLayout) else layout
    sw = layout.swizzle if isinstance(layout, ComposedLayout) else None
    ext = _layout_extents(layout)
    rows, k = operand_shape(atom, role)
    if ext[0] < rows or ext[1] < k:
        raise ValueError(f"{what}: the tile {ext} is smaller than the {rows}x{k} operand of {atom.instruction}")
    eb = atom.a_bytes
    try:
        sub = compose(inner, Layout((rows, k), (1, ext[0])))
    except Exception as e:  # pragma: no cover - composition of a static 2-D layout with a block
        raise ValueError(f"{what}: cannot restrict {layout!r} to a {rows}x{k} block ({e})") from None
    sub_layout = compose(sw, sub) if sw is not None else sub
    structure = swizzled_structure(sub_layout, eb)
    if structure is None:
        raise ValueError(f"{what}: the {rows}x{k} operand block matches no tcgen05 shared-memory encoding: "
                         f"{swizzled_structure_reason(sub_layout, eb)}")
    major = atom.a_major if r == "A" else atom.b_major
    if structure.major != major:
        raise ValueError(f"{what}: the tile is {structure.major}-major but the plan says {r.lower()}_major="
                         f"{major!r} (the instruction descriptor's transpose bit)")
    full = offsets_table_of(layout)
    pre = offsets_table_of(inner)
    canon = pre[:rows, :k]
    origin = tuple(origin)
    if len(origin) != 2:
        raise ValueError(f"{what}: the origin has two coordinates (mn, k), got {origin!r}")
    choices = []
    for o, e, step in zip(origin, ext, (rows, k)):
        if type(o) is int:
            if not 0 <= o <= e - step:
                raise ValueError(f"{what}: origin {origin} puts the {rows}x{k} operand outside the tile {ext}")
            choices.append([o])
        else:
            choices.append(list(range(0, e - step + 1, step)))
    for o0 in choices[0]:
        for o1 in choices[1]:
            s0 = int(pre[o0, o1])
            hw = s0 + canon
            if sw is not None:
                hw = sw(hw)
            if not np.array_equal(hw, full[o0:o0 + rows, o1:o1 + k]):
                raise ValueError(
                    f"{what}: at origin ({o0}, {o1}) the operand is not the descriptor's pattern shifted by its "
                    "start address (the origin must start a core-matrix group / swizzle row: mn a multiple of 8, "
                    "k inside one swizzle row)")
            if sw is not None and (s0 * eb >> 7) & 7:
                raise ValueError(
                    f"{what}: at origin ({o0}, {o1}) the start address is {s0 * eb} bytes into the tile, inside "
                    "the swizzle repeat (it would need the descriptor's base offset, which tylo does not model); "
                    "start the operand on a multiple of 8 rows (1024 bytes for 128-byte swizzles)")
            if (s0 * eb) % 16:
                raise ValueError(f"{what}: at origin ({o0}, {o1}) the start address is {s0 * eb} bytes into the "
                                 "tile, not 16-byte aligned")
    start = inner(origin) if all(type(o) is int for o in origin) else None
    return SmemOperand(r, structure, smem_descriptor(structure), (rows, k), start, eb)


def offsets_table_of(layout):
    from ...layouts import offsets_table

    return offsets_table(layout)


def _swizzle_repeat(structure) -> int:
    return 8 * structure.swizzle_bytes if structure.swizzle_bytes else 16


def tmem_operand_address(atom: Tcgen05MMA, tile, origin=(0, 0)):
    """Allocation-relative TMEM address of an A operand held in TMEM (``.kind::f16``
    or ``tf32``; M = 128 with cta_group::1 or M = 256 with cta_group::2): the
    ``(128, K)`` window at ``origin`` must put row ``i`` in lane ``i`` and K
    along consecutive positions of each lane from a whole word (data-path
    layouts D / A of the PTX ISA)."""
    import numpy as np

    from ...layouts import window
    from ..tmem import LANES, TmemTile, tmem_offset_structure

    what = "tcgen05_operand(OperandA, TmemTile)"
    if not isinstance(tile, TmemTile):
        raise ValueError(f"{what}: expected a TmemTile, got {tile!r}")
    if atom.kind not in ("f16", "tf32"):
        raise ValueError(f"{what}: A in TMEM is modelled for kind::f16 and kind::tf32 only, not kind::{atom.kind}")
    if (atom.m, atom.cta_group) not in ((128, 1), (256, 2)):
        raise ValueError(f"{what}: A in TMEM is modelled for M = 128 (cta_group::1) and M = 256 (cta_group::2); "
                         f"M = {atom.m} with cta_group::{atom.cta_group} uses a data-path layout tylo does not model")
    if dtype_name(tile.dtype) != dtype_name(atom.a_dtype):
        raise ValueError(f"{what}: the tile holds {tile.dtype}, the plan's A is {atom.a_dtype}")
    rows, k = operand_shape(atom, OperandA)
    view = window(tile, tuple(origin), (rows, k))
    table, extra, lane_extra, _ = tmem_offset_structure(view, what)
    if not (type(lane_extra) is int and lane_extra == 0):
        raise ValueError(f"{what}: the operand's lanes must be static")
    per = slots_per_word(tile.dtype)
    lane, pos = table % LANES, table // LANES
    if not np.array_equal(lane, np.broadcast_to(np.arange(rows)[:, None], lane.shape)):
        raise ValueError(f"{what}: row i of the operand must be in TMEM lane i (lanes 0..{rows - 1})")
    p0 = int(pos[0, 0])
    if not np.array_equal(pos, np.broadcast_to(p0 + np.arange(k)[None, :], pos.shape)) or p0 % per:
        raise ValueError(f"{what}: K must run along consecutive positions of each lane from a whole word")
    from ..tmem import sum_skipping_zeros

    addr = sum_skipping_zeros(tile.address, p0 // per)
    if not (type(extra) is int and extra == 0):
        from ..tmem import known_multiple

        if known_multiple(extra) % (LANES * per):
            raise ValueError(f"{what}: a runtime origin on a 16-bit tile must be a provable multiple of 2 "
                             "(whole words)")
        addr = sum_skipping_zeros(addr, extra // (LANES * per))
    return addr


def accumulator(atom: Tcgen05MMA, address=0):
    """The TMEM accumulator tile of ``atom``'s D in this CTA, at allocation-relative
    ``address`` (ISA units: lane << 16 | column).

    Data-path layouts of the PTX ISA ("Matrix fragments for tcgen05.mma"):

    * M = 128, cta_group::1 (layout D): row ``i`` in lane ``i``, column ``j``
      in word ``j``: ``Layout((128, N), (1, 128))``;
    * M = 256, cta_group::2 (layout A): each CTA holds its 128 rows the same
      way: ``Layout((128, N), (1, 128))``;
    * M = 64, cta_group::1 (layout F): 16 rows per 32-lane warp band, in its
      first 16 lanes: row ``r`` in lane ``32 * (r // 16) + r % 16``:
      ``Layout(((16, 4), N), ((1, 32), 128))``; read it with 16-lane transfers.

    M = 128 with cta_group::2 (layout B folds the column halves) and 16-bit
    accumulators (how two f16 share a word) are not modelled and raise.

    >>> from tylo.ir.types import bf16, f32
    >>> accumulator(Tcgen05MMA((128, 64), bf16, bf16, f32))
    TmemTile(f32, 0, (128,64):(1,128))
    """
    from ...layouts import Layout
    from ..tmem import TmemTile

    if not isinstance(atom, Tcgen05MMA):
        raise ValueError(f"accumulator: expected a Tcgen05MMA plan, got {atom!r}")
    acc = dtype_name(atom.acc_dtype)
    if acc not in ("f32", "i32"):
        raise ValueError(f"accumulator: {acc} accumulators (two per TMEM word) are not modelled; use f32")
    n = atom.n
    if (atom.m, atom.cta_group) in ((128, 1), (256, 2)):
        lay = Layout((128, n), (1, 128))
    elif (atom.m, atom.cta_group) == (64, 1):
        lay = Layout(((16, 4), n), ((1, 32), 128))
    else:
        raise ValueError(f"accumulator: M = {atom.m} with cta_group::{atom.cta_group} (PTX data-path layout B) is "
                         "not modelled; use M = 64/128 with cta_group::1 or M = 256 with cta_group::2")
    return TmemTile(atom.acc_dtype, address, lay)


@dataclass(frozen=True)
class Tcgen05OperandStatic:
    """The static part of a Tcgen05Operand (the descriptor or TMEM address is the leaf): the plan,
    the role (``'A'``/``'B'``), whether it lives in TMEM, and the shared-memory encoding."""

    atom: Tcgen05MMA
    role: str
    tmem: bool
    structure: Any = None

    def describe(self) -> str:
        where = "in tensor memory" if self.tmem else f"in shared memory ({self.structure})"
        return f"a tcgen05 operand {self.role} of {self.atom!r} {where}"


class Tcgen05Operand:
    """An MMA operand in a kernel: the runtime ``value`` (a u64 shared-memory
    descriptor, or a u32 TMEM address for A in TMEM) and static facts: the
    plan, the role, ``tmem`` and the canonical ``structure``."""

    def __init__(self, atom, role: str, value, tmem: bool, structure=None):
        self.atom = atom
        self.role = role
        self.value = value
        self.tmem = tmem
        self.structure = structure

    def __tylo_flatten__(self):
        return [self.value], Tcgen05OperandStatic(self.atom, self.role, self.tmem, self.structure)

    @classmethod
    def __tylo_unflatten__(cls, static, leaves, ctx):
        return cls(static.atom, static.role, leaves[0], static.tmem, static.structure)

    def __repr__(self):
        where = "tmem" if self.tmem else f"smem {self.structure}"
        return f"Tcgen05Operand({self.role}, {where})"


@builtin
def tcgen05_operand(atom, role, tile, origin=(0, 0), taddr=None, *, _ctx):
    """The operand of ``atom`` in role ``OperandA``/``OperandB`` at ``origin`` of ``tile``.

    ``tile``: a shared ``Tile`` (``tylo.SharedTile``; pass the whole tile,
    whose offset 0 is aligned to the swizzle repeat: claim ``align=`` at least
    ``8 * swizzle_bytes``) -> a 64-bit descriptor whose start address is the
    shared address of the origin element (computed in the kernel; the origin
    may be runtime, see ``smem_operand``); or, for A, a ``TmemTile`` -> its
    TMEM address (plus the runtime base ``taddr``).
    """
    from ..indexing import unwrap
    from ..tiles import Tile, add_origin, coord_value
    from ..tmem import TmemTile

    require_sm100a(_ctx, "tcgen05_operand")
    if not isinstance(atom, Tcgen05MMA):
        raise LangError(f"tcgen05_operand needs a Tcgen05MMA plan, got {atom!r}")
    try:
        r = _role(role)
    except ValueError as e:
        raise LangError(str(e)) from None
    origin = tuple(origin)
    if isinstance(tile, TmemTile):
        if r != "A":
            raise LangError("tcgen05_operand: only A may come from tensor memory; B is always a shared tile")
        try:
            from ..indexing import wrap_tree

            addr = tmem_operand_address(atom, tile, wrap_tree(_ctx, origin))
        except ValueError as e:
            raise LangError(str(e)) from None
        v = u32_operand(_ctx, addr, "the operand's TMEM address")
        if taddr is not None:
            v = L.binary(_ctx, "+", u32_operand(_ctx, taddr, "taddr"), v)
        return Tcgen05Operand(atom, r, v, True)
    if not isinstance(tile, Tile) or tile.space != "shared":
        raise LangError(f"tcgen05_operand: expected a shared-memory tile (tylo.SharedTile) or, for A, a TmemTile; "
                        f"got {tile!r}")
    want = atom.a_dtype if r == "A" else atom.b_dtype
    if dtype_name(tile.dtype) != dtype_name(want):
        raise LangError(f"tcgen05_operand: the tile holds {tile.dtype}, the plan's {r} is {want}")
    if not all(type(o) is int and o == 0 for o in tile.origin):
        raise LangError("tcgen05_operand: pass the whole shared tile (origin 0) and give the operand's origin "
                        "as the fourth argument")
    host_origin = tuple(o if type(o) is int else None for o in origin)
    try:
        plan = smem_operand(atom, role, tile.layout, host_origin)
    except ValueError as e:
        raise LangError(str(e)) from None
    repeat = _swizzle_repeat(plan.structure)
    if tile.align < repeat:
        raise LangError(f"tcgen05_operand: a {plan.structure.swizzle_bytes}-byte swizzled operand needs its tile "
                        f"aligned to {repeat} bytes (the swizzle repeat); the tile claims align={tile.align}")
    inner = tile.layout.layout if hasattr(tile.layout, "swizzle") else tile.layout
    if plan.start is not None:
        off = plan.start
    else:
        full = tuple(coord_value(_ctx, add_origin(0, o), T.i32) for o in origin)
        off = unwrap(inner(full))
    ptr = tile.ptr if (type(off) is int and off == 0) else L.offset(_ctx, tile.ptr, off)
    from ..address import shared_address

    addr = shared_address(ptr, _ctx=_ctx)
    field = L.binary(_ctx, "&", L.binary(_ctx, ">>", addr, 4), 0x3FFF)
    desc = L.binary(_ctx, "|", L.cast(field, T.u64, _ctx=_ctx), L.to_value(_ctx, plan.desc, T.u64))
    return Tcgen05Operand(atom, r, desc, False, plan.structure)


def _d_address(ctx, atom, d, taddr):
    from ..tmem import TmemTile

    if isinstance(d, TmemTile):
        try:
            expect = accumulator(atom, d.address)
        except ValueError as e:
            raise LangError(str(e).replace("accumulator:", "mma:")) from None
        if (dtype_name(d.dtype) != dtype_name(atom.acc_dtype) or d.shape != expect.shape
                or repr(d.layout) != repr(expect.layout)):
            raise LangError(f"mma: D must be the accumulator tile of the plan ({expect!r}), got {d!r}")
        v = u32_operand(ctx, d.address, "the accumulator address")
    else:
        v = u32_operand(ctx, d, "D (a TMEM address)")
    if taddr is not None:
        v = L.binary(ctx, "+", u32_operand(ctx, taddr, "taddr"), v)
    return v


@builtin
def mma_tcgen05(atom, d, a, b, accumulate=True, taddr=None, *, _ctx):
    """``D (+)= A B`` with one ``tcgen05.mma``: ``d`` the ``accumulator(atom, ...)``
    tile (or a raw u32 TMEM address), ``a``/``b`` from ``tcgen05_operand``;
    ``accumulate``: compile-time or runtime bool (the enable-input-d
    predicate; False overwrites D); ``taddr``: runtime TMEM base added to the
    accumulator's (allocation-relative) address.  One thread issues it; its
    completion is observed through ``commit_mma``."""
    require_sm100a(_ctx, "mma")
    if not isinstance(atom, Tcgen05MMA):
        raise LangError(f"mma: expected a Tcgen05MMA plan, got {atom!r}")
    for name, x, role in (("a", a, "A"), ("b", b, "B")):
        if not isinstance(x, Tcgen05Operand) or x.role != role:
            raise LangError(f"mma: {name} must be tcgen05_operand(atom, Operand{role}, ...), got {x!r}")
        if x.atom != atom:
            raise LangError(f"mma: operand {role} was made for {x.atom!r}, not {atom!r}")
    dv = _d_address(_ctx, atom, d, taddr)
    tcgen05_mma(atom, dv, a.value, b.value, accumulate, a.tmem, _ctx=_ctx)


def _tylo_mma(self, ctx, d, a, b, accumulate=True, taddr=None):
    """``tylo.mma(atom, d, a, b, accumulate=)`` for a tcgen05 plan: D (in TMEM) first, as in the seed."""
    return mma_tcgen05(self, d, a, b, accumulate, taddr, _ctx=ctx)


Tcgen05MMA.__tylo_mma__ = _tylo_mma


@builtin
def commit_mma(barrier, cta_group=1, cta_mask=None, *, _ctx):
    """``tcgen05.commit``: one arrival on ``barrier`` (a shared mbarrier) when this
    thread's prior tcgen05 MMAs (and copies) complete.  With ``cta_mask`` (a
    16-bit mask of CTAs in the cluster, compile-time or runtime) the
    ``.multicast::cluster`` form signals the mbarrier at the same offset in
    each of those CTAs (the CTA-pair pattern of ``cta_group::2``)."""
    require_sm100a(_ctx, "commit_mma")
    if cta_mask is None:
        tcgen05_commit(barrier, cta_group, _ctx=_ctx)
        return
    if isinstance(cta_mask, int) and not 0 < cta_mask < (1 << 16):
        raise LangError(f"commit_mma: cta_mask must be a nonzero 16-bit mask, got {cta_mask!r}")
    m = L.to_value(_ctx, cta_mask, T.u16) if isinstance(cta_mask, int) else L.cast(cta_mask, T.u16, _ctx=_ctx)
    _ctx.builder.create("nv.tcgen05.commit_multicast", [shared_pointer_operand(barrier, "commit_mma"), m], [],
                        {"cta_group": checked_cta_group(cta_group)})
