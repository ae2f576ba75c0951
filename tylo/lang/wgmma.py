"""Hopper WGMMA: instruction plans, shared-memory matrix descriptors and kernel builtins.

Host side (pure, works on plain ints):

* ``WGMMA64(dtype, n=, k=, partitions=1)``: a 64 x n x k product issued by one
  warpgroup (128 threads) as ``k / instr_k`` instructions of
  ``m64nNk{instr_k}`` (instr_k = 16 for bf16/f16, 32 for fp8), f32
  accumulators. Instruction ``i`` updates accumulator partition ``i %
  partitions``; ``finish`` sums the partitions. Rules: N in 8..256 step 8;
  K in {16, 32, 64} (bf16/f16) or {32, 64} (fp8); ``partitions`` divides the
  instruction count; ``partitions * n / 2 <= 128`` f32 registers per thread.
* ``smem_descriptor(structure, address_bytes)``: the 64-bit matrix descriptor
  of a canonical shared-memory operand (``tylo.layouts.swizzled_structure``),
  built from the single field table ``DESCRIPTOR_FIELDS`` (PTX ISA, "Matrix
  Descriptor Format" of wgmma).
* ``wgmma_instruction(plan, a_major, b_major)``: the instruction's shape, operand counts and immediates
  (codegen/ptx/wgmma.py spells the PTX).
* ``accumulator_ownership(plan)``: ``Ownership.wgmma_accumulator(n)``.

Kernel side: ``wgmma_fence``, ``wgmma_mma_async`` (raw u64 descriptors and a
tuple of f32 accumulator values), ``wgmma_commit_group``, ``wgmma_wait_group``,
``zero_accumulators``. The accumulators pass *through* the fence and the wait
as tied register operands, so no arithmetic on them moves across either.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import types as T
from ..ir.core import Value
from ..ir.types import ScalarType
from ..ir.nv.bitfields import pack_fields, unpack_fields
from ..ir.nv.wgmma import WGMMA_DESCRIPTOR_FIELDS, WGMMA_SWIZZLE_MODES, wgmma_smem_descriptor
from ..layouts import Ownership, swizzled_structure_reason
from .address import shared_address
from .base import LangError, builtin
from .operands import OperandA, OperandB

__all__ = [
    "WGMMA64", "validate_wgmma", "OperandA", "OperandB", "DESCRIPTOR_FIELDS", "SWIZZLE_MODE",
    "encode_fields", "decode_fields", "smem_descriptor", "WGMMAInstruction", "wgmma_instruction",
    "accumulator_ownership", "accumulator_registers",
    "wgmma_fence", "wgmma_mma_async", "wgmma_commit_group", "wgmma_wait_group", "zero_accumulators",
]

_INSTR_K = {"bf16": 16, "f16": 16, "f8e4m3": 32, "f8e5m2": 32}
MAX_ACC_REGISTERS = 128


@dataclass(frozen=True)
class WGMMA64:
    """``WGMMA64(bf16, n=8, k=64, partitions=4)``: see the module doc for the rules."""

    dtype: ScalarType
    n: int
    k: int
    partitions: int = 1

    def __post_init__(self):
        name = getattr(self.dtype, "name", None)
        if not isinstance(self.dtype, ScalarType) or name not in _INSTR_K:
            raise ValueError(f"WGMMA64: inputs must be bf16, f16, f8e4m3 or f8e5m2, got {self.dtype!r}")
        ik = _INSTR_K[name]
        n, k, p = self.n, self.k, self.partitions
        if not isinstance(n, int) or not 8 <= n <= 256 or n % 8:
            raise ValueError(f"WGMMA64: N must be 8..256 in steps of 8, got {n!r}")
        allowed = (16, 32, 64) if ik == 16 else (32, 64)
        if k not in allowed:
            raise ValueError(f"WGMMA64: K must be one of {allowed} for {name}, got {k!r}")
        count = k // ik
        if not isinstance(p, int) or p < 1 or count % p:
            raise ValueError(f"WGMMA64: partitions ({p!r}) must divide the {count} K={ik} instructions")
        if p * n // 2 > MAX_ACC_REGISTERS:
            raise ValueError(f"WGMMA64: {p} partitions x N={n}/2 = {p * n // 2} f32 accumulator registers per "
                             f"thread exceed the {MAX_ACC_REGISTERS}-register budget")

    @property
    def m(self) -> int:
        return 64

    @property
    def instr_k(self) -> int:
        return _INSTR_K[self.dtype.name]

    @property
    def instructions(self) -> int:
        return self.k // self.instr_k

    def __repr__(self) -> str:
        return f"WGMMA64({self.dtype}, n={self.n}, k={self.k}, partitions={self.partitions})"


def accumulator_registers(plan: WGMMA64) -> int:
    """f32 registers per thread of one partition (n / 2)."""
    return plan.n // 2


def accumulator_ownership(plan: WGMMA64) -> Ownership:
    return Ownership.wgmma_accumulator(plan.n)


def operand_shape(plan: WGMMA64, role) -> tuple:
    """The logical ``(mn, k)`` shape one plan reads for ``role``."""
    if isinstance(role, type):
        role = role()
    if isinstance(role, OperandA):
        return (64, plan.k)
    if isinstance(role, OperandB):
        return (plan.n, plan.k)
    raise ValueError(f"expected OperandA() or OperandB(), got {role!r}")


def validate_wgmma(plan: WGMMA64, a_layout=None, b_layout=None) -> WGMMA64:
    """Check the plan's geometry, and optionally the (mn, k) shared layouts of A and B.

    A layout must have the operand's logical shape and be a canonical
    encoding (``swizzled_structure``); fp8 operands must be K-major.
    """
    if not isinstance(plan, WGMMA64):
        raise ValueError(f"validate_wgmma: expected a WGMMA64 plan, got {plan!r}")
    WGMMA64.__post_init__(plan)
    for role, lay in ((OperandA(), a_layout), (OperandB(), b_layout)):
        if lay is None:
            continue
        want = operand_shape(plan, role)
        shape = tuple(int(s) if isinstance(s, int) else s for s in _top_extents(lay))
        if shape != want:
            raise ValueError(f"validate_wgmma: {role!r} of {plan!r} needs a logical (mn, k) tile of {want}, "
                             f"got {shape}")
        why = swizzled_structure_reason(lay, plan.dtype.itemsize)
        if why is not None:
            raise ValueError(f"validate_wgmma: {role!r} is not a canonical shared-memory encoding: {why}")
        from ..layouts import swizzled_structure

        st = swizzled_structure(lay, plan.dtype.itemsize)
        if plan.dtype.itemsize == 1 and st.major != "K":
            raise ValueError(f"validate_wgmma: {role!r}: fp8 operands must be K-major, got {st.major}-major")
    return plan


def _top_extents(lay) -> tuple:
    from ..layouts.inttuple import product

    return tuple(product(s) for s in lay.shape)


# -- the matrix descriptor ----------------------------------------------------------

# The descriptor's bit table and encoder are ISA data of the nv.wgmma ops (tylo.ir.nv.wgmma); the
# names below are this module's API for them.
DESCRIPTOR_FIELDS = WGMMA_DESCRIPTOR_FIELDS
SWIZZLE_MODE = WGMMA_SWIZZLE_MODES
smem_descriptor = wgmma_smem_descriptor


def encode_fields(**values) -> int:
    """Pack raw field values (already encoded) into a wgmma descriptor; each must fit its width."""
    return pack_fields(DESCRIPTOR_FIELDS, {k: int(v) for k, v in values.items()}, 64, "encode_fields")


def decode_fields(desc: int) -> dict:
    """The raw field values of a wgmma descriptor (inverse of ``encode_fields``)."""
    return unpack_fields(DESCRIPTOR_FIELDS, desc)


# -- the instruction ------------------------------------------------------------------


@dataclass(frozen=True)
class WGMMAInstruction:
    """One ``wgmma.mma_async`` of a plan: its shape, input type and operand counts.

    ``shape``: (64, n, k of one instruction); ``dtype``: the input type's name;
    ``accumulators``: f32 registers (n / 2); ``descriptors``: 2 (A and B from
    shared memory); ``immediates``: imm-scale-a, imm-scale-b and, for 16-bit
    inputs, imm-trans-a, imm-trans-b. These are the IR op's attributes.
    """

    shape: tuple
    dtype: str
    accumulators: int
    descriptors: int
    trans_a: int
    trans_b: int
    immediates: tuple


def wgmma_instruction(plan: WGMMA64, a_major: str = "K", b_major: str = "K") -> WGMMAInstruction:
    """The ``wgmma.mma_async`` instruction of ``plan``; majors are 'K' or 'MN'."""
    for what, major in (("A", a_major), ("B", b_major)):
        if major not in ("K", "MN"):
            raise ValueError(f"wgmma_instruction: {what} major must be 'K' or 'MN', got {major!r}")
    ta, tb = int(a_major == "MN"), int(b_major == "MN")
    if plan.dtype.itemsize == 1:
        if ta or tb:
            raise ValueError("wgmma_instruction: fp8 operands must both be K-major (no transpose for 8-bit inputs)")
        imms = (1, 1)
    else:
        imms = (1, 1, ta, tb)
    return WGMMAInstruction((64, plan.n, plan.instr_k), plan.dtype.name, plan.n // 2, 2, ta, tb, imms)


# -- kernel side ------------------------------------------------------------------------



def _acc_values(accs, what: str) -> list:
    if not isinstance(accs, (tuple, list)):
        raise LangError(f"{what}: accumulators must be a tuple of f32 values, got {accs!r}")
    for v in accs:
        if not isinstance(v, Value) or v.type != T.f32:
            raise LangError(f"{what}: accumulators must be runtime f32 values, got {v!r}")
    return list(accs)


def _sm90a(ctx, what: str):
    if ctx.arch != "sm_90a":
        raise LangError(f"{what} needs sm_90a (wgmma is architecture-specific); the target is {ctx.arch}")


@builtin
def zero_accumulators(count: int, *, _ctx):
    """A tuple of ``count`` f32 zeros (one partition of an m64nN accumulator has n/2)."""
    if not isinstance(count, int) or count <= 0:
        raise LangError(f"zero_accumulators: count must be a positive compile-time int, got {count!r}")
    zero = _ctx.builder.constant(0.0, T.f32)
    return tuple(zero for _ in range(count))


@builtin
def wgmma_fence(accs=(), *, _ctx):
    """``wgmma.fence.sync.aligned``; the accumulators pass through (returned) so their
    register writes stay ordered before the fence."""
    _sm90a(_ctx, "wgmma_fence")
    accs = _acc_values(accs, "wgmma_fence")
    op = _ctx.builder.create("nv.wgmma.fence", accs, [T.f32] * len(accs))
    return tuple(op.results)


@builtin
def wgmma_mma_async(plan, desc_a, desc_b, accs, scale_d=True, a_major: str = "K", b_major: str = "K", *, _ctx):
    """Issue one ``wgmma.mma_async`` of ``plan`` (its K is ``plan.instr_k``; issue
    ``plan.instructions`` of these per plan) on u64 descriptors; returns the new accumulators.

    ``scale_d``: False (or a runtime 0) computes D = A*B, ignoring ``accs``' values.
    """
    from .core import to_value

    _sm90a(_ctx, "wgmma_mma_async")
    if not isinstance(plan, WGMMA64):
        raise LangError(f"wgmma_mma_async: the first argument must be a WGMMA64 plan, got {plan!r}")
    ins = wgmma_instruction(plan, a_major, b_major)
    accs = _acc_values(accs, "wgmma_mma_async")
    if len(accs) != ins.accumulators:
        raise LangError(f"wgmma_mma_async: m64n{plan.n} needs {ins.accumulators} accumulators, got {len(accs)}")
    da, db = (to_value(_ctx, d, T.u64) for d in (desc_a, desc_b))
    if isinstance(scale_d, Value):
        from .core import cast
        scale = cast(scale_d, T.i32, _ctx=_ctx)
    else:
        scale = _ctx.builder.constant(1 if scale_d else 0, T.i32)
    op = _ctx.builder.create("nv.wgmma.mma_async", [da, db, scale, *accs], [T.f32] * len(accs),
                             {"shape": ins.shape, "dtype": ins.dtype, "n": plan.n, "immediates": ins.immediates})
    return tuple(op.results)


@builtin
def wgmma_commit_group(*, _ctx):
    """``wgmma.commit_group.sync.aligned``: close the group of issued wgmma ops."""
    _sm90a(_ctx, "wgmma_commit_group")
    _ctx.builder.create("nv.wgmma.commit_group", [], [])


@builtin
def wgmma_wait_group(n: int, accs=(), *, _ctx):
    """``wgmma.wait_group.sync.aligned n``; returns ``accs`` passed through the wait
    (use the returned values: arithmetic on them cannot move above the wait)."""
    _sm90a(_ctx, "wgmma_wait_group")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise LangError(f"wgmma_wait_group: n must be a non-negative compile-time int, got {n!r}")
    accs = _acc_values(accs, "wgmma_wait_group")
    op = _ctx.builder.create("nv.wgmma.wait_group", accs, [T.f32] * len(accs), {"n": n})
    return tuple(op.results)




__all__ += ["shared_address"]


# -- the seed-level API: operands, accumulator states and fragments ---------------------------
#
#   acc = zero_accumulator(plan)                        # Fragment (1 partition) or PartialAccumulator
#   a = wgmma_operand(plan, OperandA, a_tile, (row, 0))  # shared descriptor (or a register Fragment)
#   b = wgmma_operand(plan, OperandB, b_tile, (col, 0))
#   pending = mma_async(plan, a, b, acc)                 # fence, K / instr_k instructions, commit
#   acc = wait_mma(pending)                              # wgmma.wait_group 0, registers tied through it
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
    from ..layouts import Layout

    tv = Layout(((4, 8, 4), (2, 2, 2, plan.instructions)), ((128, 1, 16), (64, 8, 512, 1024)))
    return Ownership((64, plan.k), tv, f"wgmma_a(64x{plan.k})")


def _leading(shape, stride, e: int):
    """``(shape, stride)`` of the first ``e`` coordinates of one static layout mode (colexicographic),
    rounded up to whole leading sub-modes (an MN-major operand 72 wide over 64-wide boxes reads two
    boxes' pattern), or None when the mode is shorter."""
    from ..layouts.inttuple import flatten

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


def _operand_encoding(plan: WGMMA64, role, layout, what: str):
    """(structure, major, linear layout, per-instruction element offsets) of a canonical tile layout."""
    from ..layouts import ComposedLayout, Layout, swizzled_structure
    from ..layouts.inttuple import product

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

    whole = sub((mn, k))
    why = swizzled_structure_reason(whole, plan.dtype.itemsize)
    if why is not None:
        raise LangError(f"{what}: {role!r} is not a canonical shared-memory encoding: {why}")
    st = swizzled_structure(sub((mn, plan.instr_k)), plan.dtype.itemsize)
    if st is None:
        raise LangError(f"{what}: one K={plan.instr_k} instruction of {role!r} is not a canonical encoding")
    if plan.dtype.itemsize == 1 and st.major != "K":
        raise LangError(f"{what}: fp8 operands must be K-major, got {st.major}-major")
    steps = tuple(lin((0, i * plan.instr_k)) for i in range(plan.instructions))
    return st, st.major, lin, steps


class WGMMAOperand:
    """A shared-memory WGMMA operand: the descriptor of its origin element (runtime u64) plus,
    statically, the plan, role, encoding and the descriptor advance of every K instruction."""

    def __init__(self, plan, role, structure, major, steps, desc):
        self.plan, self.role, self.structure, self.major, self.steps, self.desc = (
            plan, role, structure, major, steps, desc)

    def __tylo_flatten__(self):
        return [self.desc], (self.plan, self.role, self.structure, self.major, self.steps)

    @classmethod
    def __tylo_unflatten__(cls, static, leaves):
        return cls(*static, leaves[0])

    def __tylo_getattr__(self, ctx, name):
        if name in ("plan", "role", "structure", "major", "desc"):
            return getattr(self, name)
        raise LangError(f"a WGMMA operand has no attribute '{name}'")

    def __repr__(self):
        return f"WGMMAOperand({self.role!r}, {self.plan!r}, {self.structure})"


def _layout_extent(lin, axis: int) -> int:
    from ..layouts.inttuple import product

    return product(lin.shape[axis])


def _static_int(x):
    from .indexing import unwrap

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
    from .indexing import wrap
    from .tiles import Tile, _add, _coord_value

    what = "wgmma_operand"
    _sm90a(_ctx, what)
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
    st, major, lin, steps = _operand_encoding(plan, role, tile.layout, what)
    total = tuple(_add(a, b) for a, b in zip(tile.origin, origin))
    for axis, (o, rule) in enumerate(zip(total, (8, 16))):
        v = _static_int(o) if not hasattr(o, "a") else None
        if v is not None and v % rule:
            name = "K" if axis == 1 else "non-K (mn)"
            raise LangError(f"{what}: the {name} origin {v} must be a multiple of {rule}")
        extent = _layout_extent(lin, axis)
        if v is not None and not 0 <= v <= extent - operand_shape(plan, role)[axis]:
            raise LangError(f"{what}: the operand at origin {total} leaves the tile {_layout_extent(lin, 0), _layout_extent(lin, 1)}")
    # the unswizzled offset: under the origin rules the swizzle does not move the origin element,
    # and the hardware applies the swizzle to the addresses it forms from the descriptor
    from . import core as L
    from .indexing import unwrap

    ptr = tile.ptr
    if any(_static_int(o) != 0 for o in total):
        off = unwrap(lin(tuple(wrap(_ctx, _coord_value(_ctx, o, T.i32), T.i32) for o in total)))
        if not (isinstance(off, int) and off == 0):
            ptr = L.offset(_ctx, ptr, off)
    addr = _ctx.builder.value("nv.shared_address", [ptr], T.u32)
    addr64 = L.cast(addr, T.u64, _ctx=_ctx)
    desc = L.binary(_ctx, "+", L.binary(_ctx, ">>", addr64, 4), smem_descriptor(st, 0))
    step_bytes = tuple(s * plan.dtype.itemsize for s in steps)
    if any(b % 16 for b in step_bytes):
        raise LangError(f"{what}: the K step of {role!r} is not a multiple of 16 bytes")
    return WGMMAOperand(plan, role, st, major, tuple(b >> 4 for b in step_bytes), desc)


def _no_math(what, hint):
    def err(self, *args, **kwargs):
        raise LangError(f"{what} has no arithmetic, comparison or attribute access; {hint}")
    return err


class PendingAccumulator:
    """Accumulators of WGMMAs in flight (``mma_async``'s result). Registers are owned by the
    asynchronous instructions: the only uses are ``wait_mma`` and further ``mma_async``."""

    def __init__(self, plan: WGMMA64, parts):
        self.plan = plan
        self.parts = tuple(tuple(p) for p in parts)

    def __tylo_flatten__(self):
        return [v for p in self.parts for v in p], (self.plan, len(self.parts))

    @classmethod
    def __tylo_unflatten__(cls, static, leaves):
        plan, p = static
        n = len(leaves) // p
        return cls(plan, [leaves[i * n:(i + 1) * n] for i in range(p)])

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

    __tylo_flatten__ = PendingAccumulator.__tylo_flatten__
    __tylo_unflatten__ = classmethod(PendingAccumulator.__tylo_unflatten__.__func__)
    __tylo_binary__ = __tylo_compare__ = __tylo_unary__ = __tylo_getitem__ = __tylo_getattr__ = _no_math(
        "a partial (partitioned) WGMMA accumulator", "finish_mma(acc) sums its partitions into a Fragment")

    def __repr__(self):
        return f"PartialAccumulator({self.plan!r})"


def _zero_accumulator(plan: WGMMA64, ctx):
    from .fragment import Fragment

    _sm90a(ctx, "zero_accumulator")
    zero = ctx.builder.constant(0.0, T.f32)
    n = accumulator_registers(plan)
    if plan.partitions == 1:
        return Fragment(T.f32, accumulator_ownership(plan), [zero] * n)
    return PartialAccumulator(plan, [[zero] * n for _ in range(plan.partitions)])


WGMMA64.__tylo_zero_accumulator__ = lambda self, ctx: _zero_accumulator(self, ctx)


def _acc_parts(plan, acc, what):
    from .fragment import Fragment
    from ..layouts import same_distribution

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
    from .fragment import Fragment, PackedFragment, pack
    from ..layouts import same_distribution

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




def _advance(ctx, desc, step: int):
    from . import core as L

    return desc if not step else L.binary(ctx, "+", desc, step)


@builtin
def mma_async(plan, a, b, acc, *, _ctx):
    """``wgmma.fence``; the plan's ``K / instr_k`` instructions (instruction ``i`` on partition
    ``i % partitions``, descriptors advanced along K); ``wgmma.commit_group``. Returns a
    ``PendingAccumulator``. All 128 threads of the warpgroup execute it."""
    what = "mma_async"
    _sm90a(_ctx, what)
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
        a_regs = _a_registers(_ctx, plan, a, what)
        a_major = "K"
    ins = wgmma_instruction(plan, a_major, b.major)
    parts = _acc_parts(plan, acc, what)
    flat = wgmma_fence(tuple(v for p in parts for v in p), _ctx=_ctx)
    n = accumulator_registers(plan)
    parts = [list(flat[i * n:(i + 1) * n]) for i in range(len(parts))]
    one = _ctx.builder.constant(1, T.i32)
    for i in range(plan.instructions):
        pi = i % plan.partitions
        db = _advance(_ctx, b.desc, b.steps[i])
        if a_regs is None:
            da = _advance(_ctx, a.desc, a.steps[i])
            op = _ctx.builder.create("nv.wgmma.mma_async", [da, db, one, *parts[pi]], [T.f32] * n,
                                     {"shape": ins.shape, "dtype": ins.dtype, "n": plan.n, "immediates": ins.immediates})
        else:
            imms = ins.immediates[:2] + ins.immediates[3:]   # no imm-trans-a with A in registers
            words = a_regs[4 * i:4 * i + 4]
            op = _ctx.builder.create("nv.wgmma.mma_async_rs", [*words, db, one, *parts[pi]], [T.f32] * n,
                                     {"shape": ins.shape, "dtype": ins.dtype, "n": plan.n, "immediates": imms, "a_regs": 4})
        parts[pi] = list(op.results)
    wgmma_commit_group(_ctx=_ctx)
    return PendingAccumulator(plan, parts)


@builtin
def wait_mma(pending, n=0, *, _ctx):
    """``wgmma.wait_group n`` with the accumulator registers tied through it. ``n == 0``: the
    completed accumulator (a Fragment, or a PartialAccumulator for several partitions); ``n > 0``:
    still a PendingAccumulator (its newest ``n`` groups may be in flight)."""
    from .fragment import Fragment

    if not isinstance(pending, PendingAccumulator):
        raise LangError(f"wait_mma takes mma_async's pending accumulator, got {pending!r}")
    plan = pending.plan
    flat = wgmma_wait_group(n, tuple(v for p in pending.parts for v in p), _ctx=_ctx)
    k = accumulator_registers(plan)
    parts = [flat[i * k:(i + 1) * k] for i in range(len(pending.parts))]
    if n:
        return PendingAccumulator(plan, parts)
    if plan.partitions == 1:
        return Fragment(T.f32, accumulator_ownership(plan), parts[0])
    return PartialAccumulator(plan, parts)


@builtin
def finish_mma(acc, *, _ctx):
    """A plain f32 Fragment with ``accumulator_ownership(plan)``: the partitions summed."""
    from .fragment import Fragment
    from . import core as L

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


__all__ += ["a_register_ownership", "WGMMAOperand", "PendingAccumulator", "PartialAccumulator",
            "wgmma_operand", "mma_async", "wait_mma", "finish_mma"]
