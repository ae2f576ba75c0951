"""Inline PTX for the tcgen05 MMA ops: fences, ``tcgen05.mma``, ``tcgen05.commit`` (TMEM ops: ``tmem.py``).

Each lowering emits exactly the PTX instruction of its op (PTX ISA 8.6+, sm_100a), as
``sideeffect`` asm so LLVM keeps it in program order with the waits and fences around it.
"""
from __future__ import annotations

from ..registry import lowering

__all__ = []


@lowering("nv.tcgen05.fence_before")
def _fence_before(lw, op):
    lw.asm("tcgen05.fence::before_thread_sync;", "~{memory}", side_effects=True)


@lowering("nv.tcgen05.fence_after")
def _fence_after(lw, op):
    lw.asm("tcgen05.fence::after_thread_sync;", "~{memory}", side_effects=True)


@lowering("nv.tcgen05.mma")
def _mma(lw, op):
    d, a, b, idesc, en = op.operands
    at = op.attrs
    p = lw.fresh()
    lw.emit(f"{p} = zext i1 {lw.ref(en)} to i32")
    a_op = "[$1]" if at["a_tmem"] else "$1"
    text = ("{ .reg .pred p; setp.ne.b32 p, $4, 0; "
            f"tcgen05.mma.cta_group::{at['cta_group']}.kind::{at['kind']} [$0], {a_op}, $2, $3, p; }}")
    a_c = "r" if at["a_tmem"] else "l"
    lw.asm(text, f"r,{a_c},l,r,r,~{{memory}}",
           args=[("i32", lw.ref(d)), ("i32" if at["a_tmem"] else "i64", lw.ref(a)), ("i64", lw.ref(b)),
                 ("i32", lw.ref(idesc)), ("i32", p)], side_effects=True, convergent=True)


@lowering("nv.tcgen05.commit")
def _commit(lw, op):
    cg = op.attrs["cta_group"]
    lw.asm(f"tcgen05.commit.cta_group::{cg}.mbarrier::arrive::one.shared::cluster.b64 [$0];",
           "r,~{memory}", args=[("i32", lw.address(op.operands[0]))], side_effects=True)


@lowering("nv.tcgen05.commit_multicast")
def _commit_multicast(lw, op):
    cg = op.attrs["cta_group"]
    bar, mask = op.operands
    lw.asm(f"tcgen05.commit.cta_group::{cg}.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [$0], $1;",
           "r,h,~{memory}", args=[("i32", lw.address(bar)), ("i16", lw.ref(mask))], side_effects=True)
