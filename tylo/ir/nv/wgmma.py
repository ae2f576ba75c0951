"""Hopper warpgroup MMA (sm_90a): ``nv.wgmma.*``.

The f32 accumulators pass *through* every op of the protocol (fence, mma_async, wait_group):
they are the op's trailing operands and its results, in the same order, so no arithmetic on
them can move across the asynchronous window. Descriptors are u64 (``smem_descriptor``),
``scale-d`` an i32 (0: D = A*B, else D += A*B).
"""
from __future__ import annotations

from ...layouts import SwizzledStructure
from .. import types as T
from ..opdef import Attr, OpDef
from ..ops import define_ops
from .bitfields import descriptor_offset_field, pack_fields

__all__ = ["DEFINITIONS", "ORDERED_TYPES", "accumulators_error", "WGMMA_DESCRIPTOR_FIELDS", "WGMMA_SWIZZLE_MODES",
           "wgmma_smem_descriptor"]

# -- the shared-memory matrix descriptor (the u64 operands of nv.wgmma.mma_async) ------------------

#: (field, lowest bit, width) of the 64-bit wgmma shared-memory matrix descriptor
#: (PTX ISA 9.7.15.5.1.2.2 "Matrix Descriptor Format"). Address and offsets are
#: stored as ``(x & 0x3FFFF) >> 4``.
WGMMA_DESCRIPTOR_FIELDS = (
    ("start_address", 0, 14),
    ("leading_byte_offset", 16, 14),
    ("stride_byte_offset", 32, 14),
    ("base_offset", 49, 3),
    ("swizzle", 62, 2),
)
#: swizzle row bytes -> the wgmma descriptor's 2-bit swizzle mode (tcgen05's 3-bit codes differ)
WGMMA_SWIZZLE_MODES = {0: 0, 128: 1, 64: 2, 32: 3}


def _offset_field(x: int, what: str) -> int:
    if x % 16 or not 0 <= x < (1 << 18):
        raise ValueError(f"smem_descriptor: {what} = {x} bytes must be a multiple of 16 in [0, 2^18)")
    return descriptor_offset_field(x)


def wgmma_smem_descriptor(structure: SwizzledStructure, address_bytes: int, base_offset: int = 0) -> int:
    """The wgmma matrix descriptor of a canonical operand starting at shared address ``address_bytes``.

    An offset the layout leaves undetermined or the hardware does not read
    (``None`` in the structure: K-major swizzled LBO, single groups) is
    encoded as 1, the value the wgmma section of the PTX ISA says is assumed
    (tcgen05's descriptor writes 0 for such an SBO: see
    ``tylo.ir.nv.tcgen05.tcgen05_smem_descriptor``). ``base_offset`` is 0
    when the swizzle pattern starts at its natural alignment (1024/512/256
    bytes for 128/64/32-byte rows), as for every tile tylo allocates.
    """
    if not isinstance(structure, SwizzledStructure):
        raise ValueError(f"smem_descriptor: expected a SwizzledStructure, got {structure!r}")
    lbo, sbo = structure.leading_byte_offset, structure.stride_byte_offset
    fields = dict(
        start_address=_offset_field(address_bytes, "the start address"),
        leading_byte_offset=1 if lbo is None else _offset_field(lbo, "LBO"),
        stride_byte_offset=1 if sbo is None else _offset_field(sbo, "SBO"),
        base_offset=base_offset,
        swizzle=WGMMA_SWIZZLE_MODES[structure.swizzle_bytes],
    )
    return pack_fields(WGMMA_DESCRIPTOR_FIELDS, {k: int(v) for k, v in fields.items()}, 64, "encode_fields")


# -- the ops ----------------------------------------------------------------------------------------


def accumulators_error(op, first: int) -> str | None:
    """Why the accumulators ``op.operands[first:]`` -> ``op.results`` are not f32 registers passed through."""
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
    return accumulators_error(op, 3)


def _mma_rs_check(op):
    return accumulators_error(op, len(op.operands) - len(op.results))


#: the value types ``nv.wgmma.order_before_wait`` takes: 32-bit scalars, one register each
ORDERED_TYPES = (T.f32, T.i32, T.u32)


def _order_check(op):
    if not op.operands:
        return "no values to order"
    for v in op.operands:
        if v.type not in ORDERED_TYPES:
            return f"ordered values are 32-bit scalars, got {v.type}"
    return None


_INSTRUCTION = (Attr("shape", (tuple,)), Attr("dtype", (str,)), Attr("n", (int,)), Attr("immediates", (tuple,)))
_CONV = dict(convergent=True, memory="read_write")

DEFINITIONS = define_ops(
    OpDef("nv.wgmma.fence", None, None, False, lambda op: accumulators_error(op, 0),
          doc="*accs -> accs: wgmma.fence.sync.aligned", **_CONV),
    OpDef("nv.wgmma.mma_async", None, None, False, _mma_check, _INSTRUCTION,
          doc="desc_a, desc_b, scale_d, *accs -> accs: wgmma.mma_async.sync.aligned.m64nNkK.f32", **_CONV),
    OpDef("nv.wgmma.mma_async_rs", None, None, False, _mma_rs_check, _INSTRUCTION + (Attr("a_regs", (int,)),),
          doc="*a_regs, desc_b, scale_d, *accs -> accs: A from registers", **_CONV),
    OpDef("nv.wgmma.commit_group", 0, 0, False, doc="wgmma.commit_group.sync.aligned", **_CONV),
    OpDef("nv.wgmma.wait_group", None, None, False, lambda op: accumulators_error(op, 0), (Attr("n", (int,)),),
          doc="*accs -> accs: wgmma.wait_group.sync.aligned n", **_CONV),
    OpDef("nv.wgmma.order_before_wait", None, 0, False, _order_check,
          doc="*values: the values are computed before the next wgmma.wait_group (work to overlap with the "
              "groups it waits for); no effect on any value", **_CONV),
)
