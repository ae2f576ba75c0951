"""Blackwell tensor memory and MMA (sm_100a): ``nv.tcgen05.*``.

TMEM addresses are 32-bit integers (lane << 16 | column); alloc and commit write to shared
memory (the allocated address, an mbarrier arrival). ``ld``/``st`` move ``num`` repetitions
of a ``shape`` access (``32x32b``, ``16x64b``, ``16x128b``, ``16x256b``, ``16x32bx2``) between
TMEM and the registers of a warp; ``wait_ld`` passes the loaded registers through, which is the
compiler dependency keeping their uses after the wait.
"""
from __future__ import annotations

from .. import types as T
from ..opdef import Attr, OpDef
from ..ops import define_ops
from ..types import PointerType

__all__ = ["DEFINITIONS"]


def _u32(v) -> bool:
    return isinstance(v.type, T.ScalarType) and v.type.is_int and v.type.bits == 32


def _check_addr(op):
    if not op.operands or not _u32(op.operands[0]):
        return "the TMEM address must be a 32-bit integer"
    return None


def _check_alloc(op):
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


def _check_wait_ld(op):
    if [v.type for v in op.operands] != [r.type for r in op.results]:
        return "wait_ld passes its registers through unchanged"
    return None


def _check_commit_mc(op):
    p, mask = op.operands
    if not isinstance(p.type, PointerType) or p.type.space != "shared":
        return "tcgen05.commit writes to a shared-memory mbarrier"
    if not (isinstance(mask.type, T.ScalarType) and mask.type.is_int and mask.type.bits == 16):
        return "the CTA mask is 16-bit"
    return None


_CTA = Attr("cta_group", (int,))
_ACCESS = (Attr("shape", (str,)), Attr("num", (int,)), Attr("pack", (bool,)), Attr("split", (int,), False))
_CONV = dict(convergent=True, memory="read_write")

DEFINITIONS = define_ops(
    OpDef("nv.tcgen05.alloc", 1, 0, False, _check_alloc, (_CTA, Attr("columns", (int,))),
          doc="dst (*shared): tcgen05.alloc.cta_group::N.sync.aligned.shared::cta.b32", **_CONV),
    OpDef("nv.tcgen05.dealloc", 1, 0, False, _check_addr, (_CTA, Attr("columns", (int,))),
          doc="taddr: tcgen05.dealloc", **_CONV),
    OpDef("nv.tcgen05.relinquish_alloc_permit", 0, 0, False, attrs=(_CTA,),
          doc="tcgen05.relinquish_alloc_permit", **_CONV),
    OpDef("nv.tcgen05.ld", 1, None, False, _check_addr, _ACCESS,
          doc="taddr -> registers: tcgen05.ld.sync.aligned.<shape>.x<num>.b32", **_CONV),
    OpDef("nv.tcgen05.st", None, 0, False, _check_addr, _ACCESS,
          doc="taddr, *registers: tcgen05.st.sync.aligned.<shape>.x<num>.b32", **_CONV),
    OpDef("nv.tcgen05.wait_ld", None, None, False, _check_wait_ld,
          doc="*registers -> registers: tcgen05.wait::ld", **_CONV),
    OpDef("nv.tcgen05.wait_st", 0, 0, False, doc="tcgen05.wait::st", **_CONV),
    OpDef("nv.tcgen05.fence_before", 0, 0, False, memory="read_write",
          doc="tcgen05.fence::before_thread_sync"),
    OpDef("nv.tcgen05.fence_after", 0, 0, False, memory="read_write",
          doc="tcgen05.fence::after_thread_sync"),
    OpDef("nv.tcgen05.mma", 5, 0, False, _check_mma,
          (Attr("kind", (str,)), _CTA, Attr("a_tmem", (bool,))), memory="read_write",
          doc="d_taddr, a, b_desc, idesc, enable_input_d: tcgen05.mma.cta_group::N.kind::K"),
    OpDef("nv.tcgen05.commit", 1, 0, False, _check_alloc, (_CTA,), memory="read_write",
          doc="bar: tcgen05.commit...mbarrier::arrive::one"),
    OpDef("nv.tcgen05.commit_multicast", 2, 0, False, _check_commit_mc, (_CTA,), memory="read_write",
          doc="bar, cta mask u16: tcgen05.commit...multicast::cluster"),
)
