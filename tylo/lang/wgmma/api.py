"""The seed-level WGMMA API: operands, accumulator states and fragments.

  acc = zero_accumulator(plan)                        # Fragment (1 partition) or PartialAccumulator
  a = wgmma_operand(plan, OperandA, a_tile, (row, 0))  # shared descriptor (or a register Fragment)
  b = wgmma_operand(plan, OperandB, b_tile, (col, 0))
  pending = mma_async(plan, a, b, acc)                 # fence, K / instr_k instructions, commit
  acc = wait_mma(pending)                              # wgmma.wait_group 0, registers tied through it
  result = finish_mma(acc)                             # Fragment with the accumulator ownership
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir import types as T
from ...ir.nv.address import CLUSTER_RANK_SHIFT
from ...layouts import Ownership, SwizzledStructure, swizzled_structure_reason
from ..base import LangError, builtin
from ..operands import OperandA, OperandB, OperandRole
from .plan import (
    WGMMA64,
    accumulator_ownership,
    accumulator_registers,
    operand_shape,
    smem_descriptor,
    wgmma_instruction,
)
from .raw import require_sm90a, wgmma_commit_group, wgmma_fence, wgmma_wait_group

__all__ = [
    "a_register_ownership", "WGMMAOperand", "WGMMAOperandStatic", "PendingAccumulator", "PendingAccumulatorStatic",
    "PartialAccumulator", "PartialAccumulatorStatic", "wgmma_operand",
    "mma_async", "mma_async_interleaved", "wait_mma", "finish_mma",
]


# -- the seed-level API: operands, accumulator states and fragments ---------------------------
#
#   acc = zero_accumulator(plan)                        # Fragment (1 partition) or PartialAccumulator
#   a = wgmma_operand(plan, OperandA, a_tile, (row, 0))  # shared descriptor (or a register Fragment)
#   b = wgmma_operand(plan, OperandB, b_tile, (col, 0))
#   pending = mma_async(plan, a, b, acc)                 # fence, K / instr_k instructions, commit
#   acc = wait_mma(pending)                              # wgmma.wait_group 0, registers tied through it
#   s = wait_mma(s_pending, pending=1)                   # wait_group 1: s done, one newer group in flight
#   result = finish_mma(acc)                             # Fragment with the accumulator ownership


def a_register_ownership(plan: WGMMA64) -> Ownership:
    """The register A operand ``(64, plan.k)`` of 16-bit inputs (PTX ISA, "wgmma register fragment
    layout for matrix A", m64nNk16): warp ``w`` owns rows ``16w .. 16w+15`` and, per K=16
    instruction, lane ``l`` (``g = l // 4``, ``t = l % 4``) holds ``a[4q + 2h + b]`` at row
    ``16w + g + 8h``, column ``16 i + 8q + 2t + b``; slot ``8i + 4q + 2h + b``. Packed two per
    32-bit register (low half = even slot), four registers per instruction.

    >>> from tylo.ir.types import bf16
    >>> o = a_register_ownership(WGMMA64(bf16, n=64, k=32))
    >>> o.coord(5, 0), o.coord(5, 3), o.coord(37, 12)
    ((1, 2), (9, 3), (17, 26))
    """
    if plan.dtype.itemsize != 2:
        raise ValueError(f"a_register_ownership: A from registers is supported for 16-bit inputs, not {plan.dtype}")
    from ...layouts import Layout

    tv = Layout(((4, 8, 4), (2, 2, 2, plan.instructions)), ((128, 1, 16), (64, 8, 512, 1024)))
    return Ownership((64, plan.k), tv, f"wgmma_a(64x{plan.k})")


def _leading(shape, stride, e: int):
    """``(shape, stride)`` of the first ``e`` coordinates of one static layout mode (colexicographic),
    rounded up to whole leading sub-modes (an MN-major operand 72 wide over 64-wide boxes reads two
    boxes' pattern), or None when the mode is shorter."""
    from ...layouts.inttuple import flatten

    shapes, strides = (flatten(shape), flatten(stride)) if isinstance(shape, tuple) else ((shape,), (stride,))
    out_s, out_d = [], []
    for s, d in zip(shapes, strides):
        if e <= s:
            out_s.append(e)
            out_d.append(d)
            break
        out_s.append(s)
        out_d.append(d)
        e = -(-e // s)
    else:
        return None
    return (out_s[0], out_d[0]) if len(out_s) == 1 else (tuple(out_s), tuple(out_d))


def operand_encoding(plan: WGMMA64, role, layout, what: str):
    """(structure, major, linear layout, per-instruction element offsets) of a canonical tile layout."""
    from ...layouts import ComposedLayout, Layout, swizzled_structure
    from ...layouts.inttuple import product

    if isinstance(layout, ComposedLayout):
        sw, lin = layout.swizzle, layout.layout
    elif isinstance(layout, Layout):
        sw, lin = None, layout
    else:
        raise LangError(f"{what}: the tile's layout {layout!r} is not a canonical TMA shared layout")
    if not (lin.is_static and lin.rank == 2):
        raise LangError(f"{what}: the tile's layout {layout!r} is not a canonical TMA shared layout "
                        f"(a static 2-D (mn, k) layout, e.g. shared_layout(TMATile(...)))")
    extents = tuple(product(m) for m in lin.shape)
    mn, k = operand_shape(plan, role)
    if extents[0] < mn or extents[1] < k:
        raise LangError(f"{what}: {role!r} of {plan!r} reads a ({mn}, {k}) tile; the shared tile is only "
                        f"{extents}")

    def sub(shape):
        modes = [_leading(s, d, e) for s, d, e in zip(lin.shape, lin.stride, shape)]
        if None in modes:
            raise LangError(f"{what}: the first {shape} elements of {layout!r} are not a sub-layout")
        inner = Layout(tuple(m[0] for m in modes), tuple(m[1] for m in modes))
        return inner if sw is None else ComposedLayout(sw, inner)

    st = swizzled_structure(sub((mn, plan.instr_k)), plan.dtype.itemsize)
    steps = tuple(lin((0, i * plan.instr_k)) for i in range(plan.instructions))
    why = swizzled_structure_reason(sub((mn, k)), plan.dtype.itemsize)
    if why is not None and not (st is not None and _slices_are_translates(lin, mn, plan.instr_k, steps)):
        raise LangError(f"{what}: {role!r} is not a canonical shared-memory encoding: {why}")
    if st is None:
        raise LangError(f"{what}: one K={plan.instr_k} instruction of {role!r} is not a canonical encoding")
    if plan.dtype.itemsize == 1 and st.major != "K":
        raise LangError(f"{what}: fp8 operands must be K-major, got {st.major}-major")
    return st, st.major, lin, steps


def _slices_are_translates(lin, mn: int, instr_k: int, steps) -> bool:
    """Whether every instruction's (mn, instr_k) slice of ``lin`` is the first slice shifted by its
    step: each descriptor describes one slice, so an operand longer along K than one canonical
    encoding (a K-major operand over several TMA boxes along K) is read correctly slice by slice.
    The swizzle needs nothing more: the hardware applies it to the addresses, which are then the
    tile's own."""
    from ...layouts import offsets_table

    table = offsets_table(lin)
    first = table[:mn, :instr_k]
    return all((table[:mn, i * instr_k:(i + 1) * instr_k] == first + step).all() for i, step in enumerate(steps))


@dataclass(frozen=True)
class WGMMAOperandStatic:
    """The static part of a WGMMAOperand (the descriptor is the leaf): the plan, the role, the
    canonical encoding, its major and the descriptor advance (16-byte units) of every K instruction."""

    plan: WGMMA64
    role: OperandRole
    structure: SwizzledStructure
    major: str
    steps: tuple

    def describe(self) -> str:
        return (f"a WGMMA operand {self.role.name} of {self.plan!r} in shared memory ({self.structure}, "
                f"K steps {self.steps})")


class WGMMAOperand:
    """A shared-memory WGMMA operand: the descriptor of its origin element (runtime u64) plus,
    statically, the plan, role, encoding and the descriptor advance of every K instruction."""

    def __init__(self, plan, role, structure, major, steps, desc):
        self.plan, self.role, self.structure, self.major, self.steps, self.desc = (
            plan, role, structure, major, steps, desc)

    def __tylo_flatten__(self):
        return [self.desc], WGMMAOperandStatic(self.plan, self.role, self.structure, self.major, self.steps)

    @classmethod
    def __tylo_unflatten__(cls, static, leaves, ctx):
        return cls(static.plan, static.role, static.structure, static.major, static.steps, leaves[0])

    def __tylo_getattr__(self, ctx, name):
        if name in ("plan", "role", "structure", "major", "desc"):
            return getattr(self, name)
        raise LangError(f"a WGMMA operand has no attribute '{name}'")

    def __repr__(self):
        return f"WGMMAOperand({self.role!r}, {self.plan!r}, {self.structure})"


def _layout_extent(lin, axis: int) -> int:
    from ...layouts.inttuple import product

    return product(lin.shape[axis])


def _static_int(x):
    from ..indexing import unwrap

    x = unwrap(x)
    return x if isinstance(x, int) and not isinstance(x, bool) else None


@builtin
def wgmma_operand(plan, role, tile, origin=(0, 0), *, _ctx):
    """The ``role`` operand of ``plan`` at logical ``origin`` (mn, k) of a shared tile.

    ``tile`` is a SharedTile (or a window of one) whose logical shape is ``(mn, k)`` with a
    canonical TMA layout (``shared_layout(plan)``; ``permutedims`` of it for the other major),
    and whose allocation starts the swizzle pattern (``swizzle_period_bytes``). The
    descriptor starts at the shared address of the origin element. Rules (seed): non-K
    origins are multiples of 8, K origins multiples of 16 (checked when compile-time; a
    runtime origin is the caller's contract). A role ``OperandA`` may instead be a
    register Fragment: pass it to ``mma_async`` directly.
    """
    from ..indexing import wrap
    from ..tiles import Tile, add_origin, coord_value

    what = "wgmma_operand"
    require_sm90a(_ctx, what)
    if not isinstance(plan, WGMMA64):
        raise LangError(f"{what}: the first argument must be a WGMMA64 plan, got {plan!r}")
    if isinstance(role, type):
        role = role()
    if not isinstance(role, (OperandA, OperandB)):
        raise LangError(f"{what}: the role must be OperandA or OperandB, got {role!r}")
    if not isinstance(tile, Tile) or tile.space != "shared":
        raise LangError(f"{what}: expected a SharedTile (e.g. shared_tile(tma_plan, ptr)), got {tile!r}")
    if tile.dtype.itemsize != plan.dtype.itemsize or tile.dtype.name not in (plan.dtype.name, "u16", "u8"):
        raise LangError(f"{what}: the shared tile holds {tile.dtype}, the plan {plan.dtype}")
    origin = tuple(origin)
    if len(origin) != 2:
        raise LangError(f"{what}: the origin is (mn, k), got {origin!r}")
    st, major, lin, steps = operand_encoding(plan, role, tile.layout, what)
    total = tuple(add_origin(a, b) for a, b in zip(tile.origin, origin))
    for axis, (o, rule) in enumerate(zip(total, (8, 16))):
        v = _static_int(o) if not hasattr(o, "a") else None
        if v is not None and v % rule:
            name = "K" if axis == 1 else "non-K (mn)"
            raise LangError(f"{what}: the {name} origin {v} must be a multiple of {rule}")
        extent = _layout_extent(lin, axis)
        if v is not None and not 0 <= v <= extent - operand_shape(plan, role)[axis]:
            extent = (_layout_extent(lin, 0), _layout_extent(lin, 1))
            raise LangError(f"{what}: the operand at origin {total} leaves the tile {extent}")
    # the unswizzled offset: under the origin rules the swizzle does not move the origin element,
    # and the hardware applies the swizzle to the addresses it forms from the descriptor
    from .. import core as L
    from ..indexing import unwrap

    ptr = tile.ptr
    if any(_static_int(o) != 0 for o in total):
        off = unwrap(lin(tuple(wrap(_ctx, coord_value(_ctx, o, T.i32), T.i32) for o in total)))
        if not (isinstance(off, int) and off == 0):
            ptr = L.offset(_ctx, ptr, off)
    addr = _ctx.builder.value("nv.shared_address", [ptr], T.u32)
    desc = _descriptor(_ctx, addr, smem_descriptor(st, 0))
    step_bytes = tuple(s * plan.dtype.itemsize for s in steps)
    if any(b % 16 for b in step_bytes):
        raise LangError(f"{what}: the K step of {role!r} is not a multiple of 16 bytes")
    return WGMMAOperand(plan, role, st, major, tuple(b >> 4 for b in step_bytes), desc)


def _no_math(what, hint):
    def err(self, *args, **kwargs):
        raise LangError(f"{what} has no arithmetic, comparison or attribute access; {hint}")
    return err


@dataclass(frozen=True)
class PendingAccumulatorStatic:
    """The static part of a PendingAccumulator (the registers of every part are the leaves): the
    plan and the number of parts (one per K partition). The commit group's mark is not part of
    it (see PendingAccumulator)."""

    plan: WGMMA64
    parts: int

    def describe(self) -> str:
        return f"a pending WGMMA accumulator of {self.plan!r} in {self.parts} part{'s' if self.parts != 1 else ''}"


@dataclass(frozen=True)
class PartialAccumulatorStatic(PendingAccumulatorStatic):
    """The static part of a PartialAccumulator: completed partitions, not yet summed (never equal
    to a PendingAccumulatorStatic: dataclass equality compares the classes)."""

    def describe(self) -> str:
        return f"a partial (unsummed) WGMMA accumulator of {self.plan!r} in {self.parts} parts"


class PendingAccumulator:
    """Accumulators of WGMMAs in flight (``mma_async``'s result). Registers are owned by the
    asynchronous instructions: the only uses are ``wait_mma`` and further ``mma_async``."""

    def __init__(self, plan: WGMMA64, parts, group=None):
        self.plan = plan
        self.parts = tuple(tuple(p) for p in parts)
        # the commit group's mark (Context.count_commit); not part of the static type, so an
        # accumulator carried through a loop or a branch forgets it (the count is unknown there)
        self.group = group

    def __tylo_flatten__(self):
        return [v for p in self.parts for v in p], PendingAccumulatorStatic(self.plan, len(self.parts))

    @classmethod
    def __tylo_unflatten__(cls, static, leaves, ctx):
        n = len(leaves) // static.parts
        return cls(static.plan, [leaves[i * n:(i + 1) * n] for i in range(static.parts)])

    __tylo_binary__ = __tylo_compare__ = __tylo_unary__ = __tylo_getitem__ = __tylo_getattr__ = _no_math(
        "a pending WGMMA accumulator", "wait_mma(pending) first")

    def __repr__(self):
        return f"PendingAccumulator({self.plan!r})"


class PartialAccumulator:
    """Completed accumulators of a plan with several partitions (one per K chain), not yet
    summed: ``finish_mma`` sums them into a Fragment; ``mma_async`` continues them."""

    def __init__(self, plan: WGMMA64, parts):
        self.plan = plan
        self.parts = tuple(tuple(p) for p in parts)

    def __tylo_flatten__(self):
        return [v for p in self.parts for v in p], PartialAccumulatorStatic(self.plan, len(self.parts))

    __tylo_unflatten__ = classmethod(PendingAccumulator.__tylo_unflatten__.__func__)
    __tylo_binary__ = __tylo_compare__ = __tylo_unary__ = __tylo_getitem__ = __tylo_getattr__ = _no_math(
        "a partial (partitioned) WGMMA accumulator", "finish_mma(acc) sums its partitions into a Fragment")

    def __repr__(self):
        return f"PartialAccumulator({self.plan!r})"


def _zero_accumulator(plan: WGMMA64, ctx):
    from ..fragment import Fragment

    require_sm90a(ctx, "zero_accumulator")
    zero = ctx.builder.constant(0.0, T.f32)
    n = accumulator_registers(plan)
    if plan.partitions == 1:
        return Fragment(T.f32, accumulator_ownership(plan), [zero] * n)
    return PartialAccumulator(plan, [[zero] * n for _ in range(plan.partitions)])


WGMMA64.__tylo_zero_accumulator__ = lambda self, ctx: _zero_accumulator(self, ctx)


def _acc_parts(plan, acc, what):
    from ...layouts import same_distribution
    from ..fragment import Fragment

    if isinstance(acc, (PendingAccumulator, PartialAccumulator)):
        if acc.plan != plan:
            raise LangError(f"{what}: the accumulator belongs to {acc.plan!r}, not {plan!r}")
        return [list(p) for p in acc.parts]
    if isinstance(acc, Fragment):
        if plan.partitions != 1:
            raise LangError(f"{what}: {plan!r} has {plan.partitions} partitions; start from zero_accumulator(plan)")
        own = accumulator_ownership(plan)
        if acc.ownership != own and not same_distribution(acc.ownership, own):
            raise LangError(f"{what}: the accumulator has ownership {acc.ownership.name or acc.ownership!r}, "
                            f"{plan!r} needs {own.name}")
        if acc.dtype != T.f32:
            raise LangError(f"{what}: WGMMA accumulators are f32, got a {acc.dtype} fragment")
        return [list(acc.values)]
    raise LangError(f"{what}: expected an accumulator (zero_accumulator(plan), wait_mma's result or a pending "
                    f"accumulator), got {acc!r}")


def _a_registers(ctx, plan, a, what):
    from ...layouts import same_distribution
    from ..fragment import Fragment, PackedFragment, pack

    own = a_register_ownership(plan)
    if isinstance(a, PackedFragment):
        if a.dtype != plan.dtype:
            raise LangError(f"{what}: register A holds {a.dtype}, the plan {plan.dtype}")
        words = list(a.words)
    elif isinstance(a, Fragment):
        if a.dtype != plan.dtype:
            raise LangError(f"{what}: register A must hold {plan.dtype}; convert with pack({plan.dtype}, f) "
                            f"or .astype(tylo.{plan.dtype}), got a {a.dtype} fragment")
        words = list(pack(plan.dtype, a, _ctx=ctx).words)   # exact: the values are already 16-bit
    else:
        raise LangError(f"{what}: A is a wgmma_operand(plan, OperandA, ...) or a register Fragment, got {a!r}")
    if a.ownership != own and not same_distribution(a.ownership, own):
        raise LangError(f"{what}: register A has ownership {a.ownership.name or a.ownership!r}; {plan!r} needs "
                        f"{own.name} (a_register_ownership(plan))")
    return words


# The start-address field of a descriptor (bits 0-13) holds the shared address / 16, below 2^14 (shared
# memory is under 256 KB): the base and every K advance stay in the low 32-bit word without a carry out of
# it, so descriptors are built and advanced in 32-bit halves (a 64-bit add costs ptxas an add with carry
# and its register moves per WGMMA, in the K loop of every kernel).
_LOW_WORD, _HIGH_WORD = 0xFFFF_FFFF, 0xFFFF_FFFF_0000_0000
# The ISA encodes an address as (addr & 0x3FFFF) >> 4. In a cluster launch a CTA's shared-window
# addresses carry its cluster rank from bit 24 up (0 without clusters), which unmasked lands in the leading
# byte offset (bits 16-29) and moves every 64-wide box of an MN-major operand but the first. The rank is
# subtracted rather than masked off: with the mask LLVM proves the low word cannot carry and widens every
# K advance to a 64-bit add (measured 7-9% slower on 128 x 128 GEMM tiles); the subtraction (of a
# loop-invariant) leaves it nothing to prove, so the arithmetic stays in the low word.


def _descriptor(ctx, addr, static_fields: int):
    """The u64 descriptor ``((addr & 0x3FFFF) >> 4) + static_fields`` (``addr``: u32 shared address; the
    static fields leave the start-address bits zero), computed as ``((addr - (rank << 24)) >> 4) + ...``."""
    from .. import core as L
    from ..sync import cluster_ctarank

    rank = L.cast(cluster_ctarank(_ctx=ctx), T.u32, _ctx=ctx)
    local = L.binary(ctx, "-", addr, L.binary(ctx, "<<", rank, CLUSTER_RANK_SHIFT))
    low = L.binary(ctx, "+", L.binary(ctx, ">>", local, 4), static_fields & _LOW_WORD)
    return L.binary(ctx, "|", L.cast(low, T.u64, _ctx=ctx), static_fields & _HIGH_WORD)


def _advance(ctx, desc, step: int):
    """``desc`` advanced by ``step`` 16-byte units (in the low word: see ``_descriptor``)."""
    from .. import core as L

    if not step:
        return desc
    low = L.binary(ctx, "+", L.cast(desc, T.u32, _ctx=ctx), step)
    return L.binary(ctx, "|", L.binary(ctx, "&", desc, _HIGH_WORD), L.cast(low, T.u64, _ctx=ctx))


def _product_stream(ctx, plan, a, b, acc, what):
    """One product's checked operands: ``(plan, a, a_regs, b, instruction, accumulator parts)``."""
    if not isinstance(plan, WGMMA64):
        raise LangError(f"{what}: the first argument must be a WGMMA64 plan, got {plan!r}")
    if not (isinstance(b, WGMMAOperand) and isinstance(b.role, OperandB)):
        raise LangError(f"{what}: B must be wgmma_operand(plan, OperandB, tile, origin), got {b!r}")
    if b.plan != plan:
        raise LangError(f"{what}: B was made for {b.plan!r}, not {plan!r}")
    a_regs = None
    if isinstance(a, WGMMAOperand):
        if not isinstance(a.role, OperandA):
            raise LangError(f"{what}: the A argument is an {a.role!r} operand")
        if a.plan != plan:
            raise LangError(f"{what}: A was made for {a.plan!r}, not {plan!r}")
        a_major = a.major
    else:
        a_regs = _a_registers(ctx, plan, a, what)
        a_major = "K"
    return plan, a, a_regs, b, wgmma_instruction(plan, a_major, b.major), _acc_parts(plan, acc, what)


def _issue(ctx, products):
    """``wgmma.fence`` over every product's accumulators; the products' instructions in turns (instruction
    ``i`` of each product, in the order given, then ``i + 1``; instruction ``i`` of a plan on its partition
    ``i % partitions``, descriptors advanced along K); one ``wgmma.commit_group``. Returns the accumulator
    parts of each product and the group's mark."""
    flat = wgmma_fence(tuple(v for *_, parts in products for p in parts for v in p), _ctx=ctx)
    accs = []
    for plan, *_, parts in products:
        n = accumulator_registers(plan)
        accs.append([list(flat[i * n:(i + 1) * n]) for i in range(len(parts))])
        flat = flat[n * len(parts):]
    one = ctx.builder.constant(1, T.i32)
    for i in range(max(plan.instructions for plan, *_ in products)):
        for (plan, a, a_regs, b, ins, _), parts in zip(products, accs):
            if i >= plan.instructions:
                continue
            n = accumulator_registers(plan)
            pi = i % plan.partitions
            db = _advance(ctx, b.desc, b.steps[i])
            if a_regs is None:
                da = _advance(ctx, a.desc, a.steps[i])
                op = ctx.builder.create("nv.wgmma.mma_async", [da, db, one, *parts[pi]], [T.f32] * n,
                                        {"shape": ins.shape, "dtype": ins.dtype, "n": plan.n,
                                         "immediates": ins.immediates})
            else:
                imms = ins.immediates[:2] + ins.immediates[3:]   # no imm-trans-a with A in registers
                words = a_regs[4 * i:4 * i + 4]
                op = ctx.builder.create("nv.wgmma.mma_async_rs", [*words, db, one, *parts[pi]], [T.f32] * n,
                                        {"shape": ins.shape, "dtype": ins.dtype, "n": plan.n, "immediates": imms,
                                         "a_regs": 4})
            parts[pi] = list(op.results)
    return accs, wgmma_commit_group(_ctx=ctx)


@builtin
def mma_async(plan, a, b, acc, *, _ctx):
    """``wgmma.fence``; the plan's ``K / instr_k`` instructions (instruction ``i`` on partition
    ``i % partitions``, descriptors advanced along K); ``wgmma.commit_group``. Returns a
    ``PendingAccumulator``. All 128 threads of the warpgroup execute it."""
    require_sm90a(_ctx, "mma_async")
    (parts,), group = _issue(_ctx, [_product_stream(_ctx, plan, a, b, acc, "mma_async")])
    return PendingAccumulator(plan, parts, group)


@builtin
def mma_async_interleaved(*products, _ctx):
    """Several products ``(plan, a, b, acc)`` in one commit group, their instructions issued in turns (the
    first instruction of each, then the second, ...): two independent accumulator chains side by side, so one
    warpgroup keeps the tensor core busier than with one chain at a time. Returns one ``PendingAccumulator``
    per product; they complete together (``wait_mma`` of either waits for the group)."""
    what = "mma_async_interleaved"
    require_sm90a(_ctx, what)
    if len(products) < 2 or not all(isinstance(p, tuple) and len(p) == 4 for p in products):
        raise LangError(f"{what}: takes two or more (plan, a, b, acc) tuples, got {products!r}")
    streams = [_product_stream(_ctx, *p, what) for p in products]
    accs, group = _issue(_ctx, streams)
    return tuple(PendingAccumulator(s[0], parts, group) for s, parts in zip(streams, accs))


def _after_values(after):
    """The 32-bit scalar values of ``wait_mma``'s ``after=``: a Fragment, a runtime scalar or a tuple of them."""
    from ...ir.core import Value
    from ..fragment import Fragment

    items = after if isinstance(after, (tuple, list)) else (after,)
    out = []
    for item in items:
        if isinstance(item, Fragment):
            out.extend(item.values)
        elif isinstance(item, Value):
            out.append(item)
        else:
            raise LangError(f"wait_mma: after= takes fragments and runtime scalars computed before the wait, "
                            f"got {item!r}")
    return out


@builtin
def wait_mma(acc, n=0, *, pending=None, after=(), _ctx):
    """``wgmma.wait_group`` with the accumulator registers tied through it.

    ``wait_mma(acc)``: ``wait_group 0``, the completed accumulator (a Fragment, or a
    PartialAccumulator for several partitions).

    ``wait_mma(acc, pending=n)``: ``wait_group n`` (the newest ``n`` groups may stay in flight) and
    the completed accumulator, which requires ``acc``'s group to be older than those ``n``: at least
    ``n`` groups committed after it, in the same straight-line code. Otherwise a compile error says
    how many were (accumulators of the newer groups stay pending: wait for them later).

    ``wait_mma(acc, n)`` (positional, ``n > 0``): ``wait_group n`` and ``acc`` still pending, for
    pipelines that wait for older groups (to release their buffers) while ``acc`` keeps accumulating.

    ``after=``: fragments or scalars (32-bit) that are computed before the wait, with everything they depend
    on: the work a pipeline overlaps with the groups it waits for. ptxas otherwise may schedule the wait above
    independent work, which then runs after the groups complete (the attention kernel's softmax of block j
    ran after the wait for block j - 1's P V until its row sums were passed here).
    """
    from ..fragment import Fragment

    if not isinstance(acc, PendingAccumulator):
        raise LangError(f"wait_mma takes mma_async's pending accumulator, got {acc!r}")
    strict = pending is not None
    if strict:
        n = pending
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise LangError(f"wait_mma: the number of groups left in flight must be a non-negative compile-time int, "
                        f"got {n!r}")
    if strict and n:
        later = _ctx.commits_since("wgmma", acc.group)
        if later is None:
            raise LangError(f"wait_mma(acc, pending={n}): tylo cannot tell how many WGMMA groups were committed "
                            f"after this accumulator's (it came through a loop or a branch, or the wait is in "
                            f"another block than its mma_async); wait_mma(acc) waits for every group")
        if later < n:
            raise LangError(f"wait_mma(acc, pending={n}): this accumulator's commit group is still in flight "
                            f"after wgmma.wait_group {n}: only {later} group(s) were committed after it, and the "
                            f"newest {n} may still run; use pending={later} or fewer (or commit more work first)")
    plan = acc.plan
    flat = wgmma_wait_group(n, tuple(v for p in acc.parts for v in p), after=_after_values(after), _ctx=_ctx)
    k = accumulator_registers(plan)
    parts = [flat[i * k:(i + 1) * k] for i in range(len(acc.parts))]
    if n and not strict:
        return PendingAccumulator(plan, parts, acc.group)
    if plan.partitions == 1:
        return Fragment(T.f32, accumulator_ownership(plan), parts[0])
    return PartialAccumulator(plan, parts)


@builtin
def finish_mma(acc, *, _ctx):
    """A plain f32 Fragment with ``accumulator_ownership(plan)``: the partitions summed."""
    from .. import core as L
    from ..fragment import Fragment

    if isinstance(acc, Fragment):
        return acc
    if isinstance(acc, PendingAccumulator):
        raise LangError("finish_mma: the accumulator is still pending; wait_mma(pending) first")
    if not isinstance(acc, PartialAccumulator):
        raise LangError(f"finish_mma takes wait_mma's result, got {acc!r}")
    vals = list(acc.parts[0])
    for p in acc.parts[1:]:
        vals = [L.binary(_ctx, "+", x, y) for x, y in zip(vals, p)]
    return Fragment(T.f32, accumulator_ownership(acc.plan), vals)
