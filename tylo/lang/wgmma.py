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
* ``wgmma_instruction(plan, a_major, b_major)``: the PTX opcode and operand counts.
* ``accumulator_ownership(plan)``: ``Ownership.wgmma_accumulator(n)``.

Kernel side: ``wgmma_fence``, ``wgmma_mma_async`` (raw u64 descriptors and a
tuple of f32 accumulator values), ``wgmma_commit_group``, ``wgmma_wait_group``,
``zero_accumulators``. The accumulators pass *through* the fence and the wait
as tied register operands, so no arithmetic on them moves across either.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import ops as _ops
from ..ir import types as T
from ..ir.core import Value
from ..ir.types import ScalarType
from ..layouts import Ownership, SwizzledStructure, swizzled_structure_reason
from .base import LangError, builtin

__all__ = [
    "WGMMA64", "validate_wgmma", "OperandA", "OperandB", "DESCRIPTOR_FIELDS", "SWIZZLE_MODE",
    "encode_fields", "decode_fields", "smem_descriptor", "WGMMAInstruction", "wgmma_instruction",
    "accumulator_ownership", "accumulator_registers",
    "wgmma_fence", "wgmma_mma_async", "wgmma_commit_group", "wgmma_wait_group", "zero_accumulators",
]

_INSTR_K = {"bf16": 16, "f16": 16, "f8e4m3": 32, "f8e5m2": 32}
_PTX_TYPE = {"bf16": "bf16", "f16": "f16", "f8e4m3": "e4m3", "f8e5m2": "e5m2"}
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


class _Role:
    name = ""
    axis_extent = ""

    def __repr__(self):
        return f"{self.name}()"

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))


class OperandA(_Role):
    """Role marker: the (64, k) A operand (mn = M)."""

    name = "OperandA"


class OperandB(_Role):
    """Role marker: the (n, k) B operand (mn = N)."""

    name = "OperandB"


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

#: (field, lowest bit, width) of the 64-bit wgmma shared-memory matrix descriptor
#: (PTX ISA 9.7.15.5.1.2.2 "Matrix Descriptor Format"). Address and offsets are
#: stored as ``(x & 0x3FFFF) >> 4``.
DESCRIPTOR_FIELDS = (
    ("start_address", 0, 14),
    ("leading_byte_offset", 16, 14),
    ("stride_byte_offset", 32, 14),
    ("base_offset", 49, 3),
    ("swizzle", 62, 2),
)
#: swizzle row bytes -> the descriptor's 2-bit swizzle mode
SWIZZLE_MODE = {0: 0, 128: 1, 64: 2, 32: 3}


def encode_fields(**values) -> int:
    """Pack raw field values (already encoded) into the descriptor; each must fit its width."""
    out = 0
    names = {f for f, _, _ in DESCRIPTOR_FIELDS}
    for key in values:
        if key not in names:
            raise ValueError(f"encode_fields: unknown descriptor field {key!r}")
    for name, lo, width in DESCRIPTOR_FIELDS:
        v = int(values.get(name, 0))
        if not 0 <= v < (1 << width):
            raise ValueError(f"encode_fields: {name} = {v} does not fit in {width} bits")
        out |= v << lo
    return out


def decode_fields(desc: int) -> dict:
    """The raw field values of a descriptor (inverse of ``encode_fields``)."""
    return {name: (desc >> lo) & ((1 << width) - 1) for name, lo, width in DESCRIPTOR_FIELDS}


def _encode_bytes(x: int, what: str) -> int:
    if x % 16 or not 0 <= x < (1 << 18):
        raise ValueError(f"smem_descriptor: {what} = {x} bytes must be a multiple of 16 in [0, 2^18)")
    return (x & 0x3FFFF) >> 4


def smem_descriptor(structure: SwizzledStructure, address_bytes: int, base_offset: int = 0) -> int:
    """The wgmma matrix descriptor of a canonical operand starting at shared address ``address_bytes``.

    An offset the layout leaves undetermined or the hardware does not read
    (``None`` in the structure: K-major swizzled LBO, single groups) is
    encoded as 1, the value the PTX ISA says is assumed. ``base_offset`` is 0
    when the swizzle pattern starts at its natural alignment (1024/512/256
    bytes for 128/64/32-byte rows), as for every tile tylo allocates.
    """
    if not isinstance(structure, SwizzledStructure):
        raise ValueError(f"smem_descriptor: expected a SwizzledStructure, got {structure!r}")
    lbo, sbo = structure.leading_byte_offset, structure.stride_byte_offset
    return encode_fields(
        start_address=_encode_bytes(address_bytes, "the start address"),
        leading_byte_offset=1 if lbo is None else _encode_bytes(lbo, "LBO"),
        stride_byte_offset=1 if sbo is None else _encode_bytes(sbo, "SBO"),
        base_offset=base_offset,
        swizzle=SWIZZLE_MODE[structure.swizzle_bytes],
    )


# -- the instruction ------------------------------------------------------------------


@dataclass(frozen=True)
class WGMMAInstruction:
    """One ``wgmma.mma_async`` of a plan: its opcode and operand counts.

    ``accumulators``: f32 registers (n / 2); ``descriptors``: 2 (A and B from
    shared memory); ``immediates``: imm-scale-a, imm-scale-b and, for 16-bit
    inputs, imm-trans-a, imm-trans-b.
    """

    opcode: str
    accumulators: int
    descriptors: int
    trans_a: int
    trans_b: int
    immediates: tuple

    def operands_text(self, acc: list, desc_a: str, desc_b: str, scale_d: str) -> str:
        imms = ", ".join(str(i) for i in self.immediates)
        return f"{{{', '.join(acc)}}}, {desc_a}, {desc_b}, {scale_d}, {imms}"


def wgmma_instruction(plan: WGMMA64, a_major: str = "K", b_major: str = "K") -> WGMMAInstruction:
    """``wgmma.mma_async.sync.aligned.m64n{N}k{K}.f32.{A}.{B}`` for ``plan``; majors are 'K' or 'MN'."""
    for what, major in (("A", a_major), ("B", b_major)):
        if major not in ("K", "MN"):
            raise ValueError(f"wgmma_instruction: {what} major must be 'K' or 'MN', got {major!r}")
    t = _PTX_TYPE[plan.dtype.name]
    ta, tb = int(a_major == "MN"), int(b_major == "MN")
    if plan.dtype.itemsize == 1:
        if ta or tb:
            raise ValueError("wgmma_instruction: fp8 operands must both be K-major (no transpose for 8-bit inputs)")
        imms = (1, 1)
    else:
        imms = (1, 1, ta, tb)
    opcode = f"wgmma.mma_async.sync.aligned.m64n{plan.n}k{plan.instr_k}.f32.{t}.{t}"
    return WGMMAInstruction(opcode, plan.n // 2, 2, ta, tb, imms)


# -- kernel side ------------------------------------------------------------------------

def _accs_check(op, first: int):
    accs = op.operands[first:]
    if len(accs) != len(op.results):
        return f"{len(accs)} accumulators in, {len(op.results)} out"
    for v in list(accs) + list(op.results):
        if v.type != T.f32:
            return f"accumulators are f32, got {v.type}"
    return None


def _mma_check(op):
    a, b, scale = op.operands[:3]
    if a.type != T.u64 or b.type != T.u64:
        return f"descriptors are u64, got {a.type} and {b.type}"
    if scale.type != T.i32:
        return f"scale-d is i32, got {scale.type}"
    if len(op.results) != op.attrs["n"] // 2:
        return f"m64n{op.attrs['n']} has {op.attrs['n'] // 2} accumulators, got {len(op.results)}"
    return _accs_check(op, 3)


_ops.register_op("nv.wgmma.fence", None, None, False, lambda op: _accs_check(op, 0))
_ops.register_op("nv.wgmma.mma_async", None, None, False, _mma_check)
_ops.register_op("nv.wgmma.commit_group", 0, 0, False)
_ops.register_op("nv.wgmma.wait_group", None, None, False, lambda op: _accs_check(op, 0))


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
                             {"opcode": ins.opcode, "n": plan.n, "immediates": ins.immediates})
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


def _shared_address_check(op):
    p = op.operands[0]
    if not (hasattr(p.type, "space") and p.type.space == "shared"):
        return f"expects a *shared pointer, got {p.type}"
    return None if op.results[0].type == T.u32 else "the result is u32"


_ops.register_op("nv.shared_address", 1, 1, True, _shared_address_check)


@builtin
def shared_address(ptr, *, _ctx):
    """The u32 shared-window address of a ``*shared`` pointer (or shared array): the
    ``start_address`` a matrix descriptor encodes (``desc | (addr >> 4)``)."""
    p = getattr(ptr, "ptr", ptr)
    if not (isinstance(p, Value) and getattr(p.type, "space", None) == "shared"):
        raise LangError(f"shared_address: expected a *shared pointer or shared array, got {ptr!r}")
    return _ctx.builder.value("nv.shared_address", [p], T.u32)


__all__ += ["shared_address"]
