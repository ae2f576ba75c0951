"""Blackwell tensor-core MMA (sm_100a): ``nv.tcgen05.mma``, ``commit``, the thread-sync fences,
and the descriptors the MMA reads.

The TMEM ops (alloc, ld, st and their waits; also spelled ``nv.tcgen05.*`` as in PTX) are in
``tylo.ir.nv.tmem``. TMEM addresses are 32-bit integers (lane << 16 | column); commit writes an
mbarrier arrival to shared memory.
"""
from __future__ import annotations

from .. import types as T
from ..opdef import Attr, OpDef
from ..ops import define_ops
from ..types import PointerType
from .bitfields import descriptor_offset_field, pack_fields

__all__ = ["DEFINITIONS", "tmem_address_error", "shared_pointer_error", "TCGEN05_IDESC_FIELDS",
           "TCGEN05_SMEM_DESCRIPTOR_FIELDS", "TCGEN05_SWIZZLE_MODES",
           "tcgen05_smem_descriptor"]

# -- descriptors (the idesc and the 64-bit operands of nv.tcgen05.mma) -------------------------------
# PTX ISA: tcgen05 "Instruction descriptor" for .kind::tf32/f16/f8f6f4/i8, "Shared memory descriptor".

#: (field, lowest bit, width) of the 32-bit instruction descriptor.
TCGEN05_IDESC_FIELDS = (
    ("sparsity_selector", 0, 2),
    ("sparse", 2, 1),
    ("saturate", 3, 1),
    ("d_type", 4, 2),
    # bit 6 reserved
    ("a_type", 7, 3),
    ("b_type", 10, 3),
    ("negate_a", 13, 1),
    ("negate_b", 14, 1),
    ("transpose_a", 15, 1),
    ("transpose_b", 16, 1),
    ("n_dim", 17, 6),  # N >> 3
    # bit 23 reserved
    ("m_dim", 24, 5),  # M >> 4
    # bit 29 reserved
    ("max_shift", 30, 2),  # .ws only
)

#: (field, lowest bit, width) of the 64-bit tcgen05 shared-memory descriptor.
TCGEN05_SMEM_DESCRIPTOR_FIELDS = (
    ("start_address", 0, 14),  # (addr & 0x3FFFF) >> 4
    ("leading_byte_offset", 16, 14),  # (LBO & 0x3FFFF) >> 4
    ("stride_byte_offset", 32, 14),  # (SBO & 0x3FFFF) >> 4
    ("version", 46, 3),  # fixed 0b001 on sm_100 (bits 46-48)
    ("base_offset", 49, 3),
    ("lbo_mode", 52, 1),  # 0: relative byte offset, 1: absolute address (sm_103a)
    # bits 53-60 fixed 0
    ("swizzle", 61, 3),
)

#: swizzle byte size -> 3-bit mode of the tcgen05 shared-memory descriptor (0: none; wgmma's 2-bit modes differ).
TCGEN05_SWIZZLE_MODES = {0: 0, "128B_base32B": 1, 128: 2, 64: 4, 32: 6}


def tcgen05_smem_descriptor(structure, start_address: int = 0, base_offset: int = 0) -> int:
    """The 64-bit tcgen05 shared-memory descriptor of a canonical operand tile.

    ``structure``: a ``tylo.layouts.SwizzledStructure`` (from
    ``swizzled_structure(layout, elem_bytes)``).  A byte offset the tile does
    not determine (``None``) is encoded as 16 bytes for LBO (the ISA says a
    swizzled K-major LBO is "assumed 1") and 0 for SBO, a field the hardware
    does not read in that case (wgmma's encoder writes 1 there, the value its
    ISA section names: ``tylo.ir.nv.wgmma.wgmma_smem_descriptor``; the
    descriptors in tests pin both).  ``start_address`` is the shared-memory
    byte address (16-byte aligned); ``base_offset`` the 3-bit pattern phase
    (0 when the tile starts on the swizzle repeat).
    """
    if structure is None:
        raise ValueError("smem_descriptor: the tile matches no canonical shared-memory encoding")
    if type(start_address) is int and start_address % 16:
        raise ValueError(f"smem_descriptor: start address {start_address} is not 16-byte aligned")
    lbo = structure.leading_byte_offset
    sbo = structure.stride_byte_offset
    fields = {
        "start_address": descriptor_offset_field(start_address),
        "leading_byte_offset": descriptor_offset_field(16 if lbo is None else lbo),
        "stride_byte_offset": descriptor_offset_field(0 if sbo is None else sbo),
        "version": 1,
        "base_offset": base_offset,
        "lbo_mode": 0,
        "swizzle": TCGEN05_SWIZZLE_MODES[structure.swizzle_bytes],
    }
    return pack_fields(TCGEN05_SMEM_DESCRIPTOR_FIELDS, fields, 64)


# -- the ops ----------------------------------------------------------------------------------------


def _u32(v) -> bool:
    return isinstance(v.type, T.ScalarType) and v.type.is_int and v.type.bits == 32


def tmem_address_error(op):
    """Why ``op``'s first operand is not a TMEM address (a 32-bit integer), or None."""
    if not op.operands or not _u32(op.operands[0]):
        return "the TMEM address must be a 32-bit integer"
    return None


def shared_pointer_error(op):
    """Why ``op``'s single operand is not a shared-memory pointer (where alloc/commit write), or None."""
    (p,) = op.operands
    if not isinstance(p.type, PointerType) or p.type.space != "shared":
        return "tcgen05.alloc writes the address to a shared-memory pointer"
    return None


def _check_mma(op):
    d, a, b, idesc, en = op.operands
    if not _u32(d) or not _u32(idesc):
        return "d (TMEM address) and idesc must be 32-bit integers"
    if b.type.bits != 64 or (a.type.bits != (32 if op.attrs.get("a_tmem") else 64)):
        return "A and B descriptors are 64-bit (A a 32-bit TMEM address with a_tmem)"
    if en.type != T.bool_:
        return "enable_input_d must be bool"
    return None


def _check_commit_mc(op):
    p, mask = op.operands
    if not isinstance(p.type, PointerType) or p.type.space != "shared":
        return "tcgen05.commit writes to a shared-memory mbarrier"
    if not (isinstance(mask.type, T.ScalarType) and mask.type.is_int and mask.type.bits == 16):
        return "the CTA mask is 16-bit"
    return None


_CTA = Attr("cta_group", (int,))
_CONV = dict(convergent=True, memory="read_write")

DEFINITIONS = define_ops(
    OpDef("nv.tcgen05.fence_before", 0, 0, False, memory="read_write",
          doc="tcgen05.fence::before_thread_sync"),
    OpDef("nv.tcgen05.fence_after", 0, 0, False, memory="read_write",
          doc="tcgen05.fence::after_thread_sync"),
    # issued by one thread, but lowered as convergent asm: LLVM must not duplicate it into branches
    OpDef("nv.tcgen05.mma", 5, 0, False, _check_mma,
          (Attr("kind", (str,)), _CTA, Attr("a_tmem", (bool,))), convergent=True, memory="read_write",
          doc="d_taddr, a, b_desc, idesc, enable_input_d: tcgen05.mma.cta_group::N.kind::K"),
    OpDef("nv.tcgen05.commit", 1, 0, False, shared_pointer_error, (_CTA,), memory="read_write",
          doc="bar: tcgen05.commit...mbarrier::arrive::one"),
    OpDef("nv.tcgen05.commit_multicast", 2, 0, False, _check_commit_mc, (_CTA,), memory="read_write",
          doc="bar, cta mask u16: tcgen05.commit...multicast::cluster"),
)
