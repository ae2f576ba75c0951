"""The WGMMA plan (host side, pure, works on plain ints).

* ``WGMMA64(dtype, n=, k=, partitions=1)``: a 64 x n x k product issued by one
  warpgroup (128 threads) as ``k / instr_k`` instructions of
  ``m64nNk{instr_k}`` (instr_k = 16 for bf16/f16, 32 for fp8), f32
  accumulators. Instruction ``i`` updates accumulator partition ``i %
  partitions``; ``finish`` sums the partitions. Rules: N in 8..256 step 8;
  K a multiple of instr_k up to 256 (several TMA boxes along K for a K-major
  operand wider than one swizzle row); ``partitions`` divides the
  instruction count; ``partitions * n / 2 <= 128`` f32 registers per thread.
* ``smem_descriptor(structure, address_bytes)``: the 64-bit matrix descriptor
  of a canonical shared-memory operand (``tylo.layouts.swizzled_structure``),
  built from the field table ``DESCRIPTOR_FIELDS`` (PTX ISA, "Matrix
  Descriptor Format" of wgmma; defined beside the ops in ``tylo.ir.nv.wgmma``).
* ``wgmma_instruction(plan, a_major, b_major)``: the instruction's shape, operand counts and immediates
  (codegen/ptx/wgmma.py spells the PTX).
* ``accumulator_ownership(plan)``: ``Ownership.wgmma_accumulator(n)``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir.nv.bitfields import pack_fields, unpack_fields
from ...ir.nv.wgmma import WGMMA_DESCRIPTOR_FIELDS, WGMMA_SWIZZLE_MODES, wgmma_smem_descriptor
from ...ir.types import ScalarType
from ...layouts import Ownership, swizzled_structure_reason
from ..operands import OperandA, OperandB

__all__ = [
    "WGMMA64", "validate_wgmma", "DESCRIPTOR_FIELDS", "SWIZZLE_MODE", "encode_fields", "decode_fields",
    "smem_descriptor", "WGMMAInstruction", "wgmma_instruction", "accumulator_ownership",
    "accumulator_registers",
]


_INSTR_K = {"bf16": 16, "f16": 16, "f8e4m3": 32, "f8e5m2": 32}
MAX_ACC_REGISTERS = 128
MAX_K = 256  # one plan issues up to 16 (bf16/f16) or 8 (fp8) instructions: P V over a 256-key block


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
        if not isinstance(k, int) or isinstance(k, bool) or not ik <= k <= MAX_K or k % ik:
            raise ValueError(f"WGMMA64: K must be a multiple of {ik} in {ik}..{MAX_K} for {name} (one instruction "
                             f"per {ik}), got {k!r}")
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
        from ...layouts import swizzled_structure

        st = swizzled_structure(lay, plan.dtype.itemsize)
        if plan.dtype.itemsize == 1 and st.major != "K":
            raise ValueError(f"validate_wgmma: {role!r}: fp8 operands must be K-major, got {st.major}-major")
    return plan


def _top_extents(lay) -> tuple:
    from ...layouts.inttuple import product

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
