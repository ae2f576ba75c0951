"""Tensor memory (sm_100a): allocation and data movement, ``nv.tcgen05.{alloc,dealloc,
relinquish_alloc_permit,ld,st,wait_ld,wait_st}`` (spelled as in PTX), and the ISA's data-path shapes.

TMEM is 128 lanes x 512 columns of 32-bit cells per CTA; an address is a 32-bit integer
``lane << 16 | column``. ``ld``/``st`` move ``num`` repetitions of a ``shape`` access (``ATOMS``)
between TMEM and the registers of a warp; ``wait_ld`` passes the loaded registers through, which
is the compiler dependency keeping their uses after the wait.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..opdef import Attr, OpDef, one_of
from ..ops import define_ops
from .tcgen05 import shared_pointer_error, tmem_address_error

__all__ = ["DEFINITIONS", "LANES", "COLUMNS", "TransferAtom", "ATOMS"]

LANES = 128
COLUMNS = 512


# --------------------------------------------------------------------------
# transfer atoms (the tcgen05.ld / tcgen05.st data-path shapes)


@dataclass(frozen=True)
class TransferAtom:
    """One ``tcgen05.ld/st`` shape: ``lanes`` TMEM lanes, ``words`` 32-bit
    columns per lane per repetition, ``regs`` registers per thread per
    repetition, ``max_num`` the largest ``.num``; ``where(t, k, num)`` gives
    (lane, word) of register ``k`` of thread ``t`` (ISA data-path figures /
    CuTe ``SM100_TMEM_LOAD_*`` traits)."""

    name: str
    lanes: int
    words: int
    regs: int
    max_num: int

    def where(self, t: int, k: int, num: int, split: int = 0) -> tuple[int, int]:
        n = self.name
        if n == "32x32b":
            return t, k
        if n == "16x64b":  # thread t: lane t//4 + 8*(t%2), word 2*rep + (t//2)%2
            return t // 4 + 8 * (t % 2), 2 * k + (t // 2) % 2
        if n == "16x128b":  # r0 lane t//4, r1 lane t//4+8; word 4*rep + t%4
            rep, r = divmod(k, 2)
            return t // 4 + 8 * r, 4 * rep + t % 4
        if n == "16x256b":  # r0,r1 lane t//4 words 2(t%4)+{0,1}; r2,r3 lane t//4+8
            rep, r = divmod(k, 4)
            return t // 4 + 8 * (r // 2), 8 * rep + 2 * (t % 4) + r % 2
        if n == "16x32bx2":  # threads 0-15 first half, 16-31 second half at +split
            return t % 16, k + (t // 16) * split
        raise AssertionError(n)


ATOMS = {
    "32x32b": TransferAtom("32x32b", 32, 1, 1, 128),
    "16x64b": TransferAtom("16x64b", 16, 2, 1, 128),
    "16x128b": TransferAtom("16x128b", 16, 4, 2, 64),
    "16x256b": TransferAtom("16x256b", 16, 8, 4, 32),
    "16x32bx2": TransferAtom("16x32bx2", 16, 2, 1, 128),  # two 16x32b halves
}


# -- the ops ----------------------------------------------------------------------------------------

def _check_wait_ld(op):
    if [v.type for v in op.operands] != [r.type for r in op.results]:
        return "wait_ld passes its registers through unchanged"
    return None


def _check_access(op):
    return tmem_address_error(op) or one_of("shape", tuple(ATOMS))(op)


_CTA = Attr("cta_group", (int,))
_ACCESS = (Attr("shape", (str,)), Attr("num", (int,)), Attr("pack", (bool,)), Attr("split", (int,), False))
_CONV = dict(convergent=True, memory="read_write")

DEFINITIONS = define_ops(
    OpDef("nv.tcgen05.alloc", 1, 0, False, shared_pointer_error, (_CTA, Attr("columns", (int,))),
          doc="dst (*shared): tcgen05.alloc.cta_group::N.sync.aligned.shared::cta.b32", **_CONV),
    OpDef("nv.tcgen05.dealloc", 1, 0, False, tmem_address_error, (_CTA, Attr("columns", (int,))),
          doc="taddr: tcgen05.dealloc", **_CONV),
    OpDef("nv.tcgen05.relinquish_alloc_permit", 0, 0, False, attrs=(_CTA,),
          doc="tcgen05.relinquish_alloc_permit", **_CONV),
    OpDef("nv.tcgen05.ld", 1, None, False, _check_access, _ACCESS,
          doc="taddr -> registers: tcgen05.ld.sync.aligned.<shape>.x<num>.b32", **_CONV),
    OpDef("nv.tcgen05.st", None, 0, False, _check_access, _ACCESS,
          doc="taddr, *registers: tcgen05.st.sync.aligned.<shape>.x<num>.b32", **_CONV),
    OpDef("nv.tcgen05.wait_ld", None, None, False, _check_wait_ld,
          doc="*registers -> registers: tcgen05.wait::ld", **_CONV),
    OpDef("nv.tcgen05.wait_st", 0, 0, False, doc="tcgen05.wait::st", **_CONV),
)
