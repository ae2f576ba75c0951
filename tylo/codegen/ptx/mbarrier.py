"""Inline PTX for mbarriers (fences: ``fence.py``; named/cluster barriers, elect, setmaxnreg: ``sync.py``).

Barrier pointers are ``ptr addrspace(3)`` in LLVM; they reach PTX as the
32-bit shared-window address (``lw.address``: ``ptrtoint ... to i32``, constraint ``r``),
which is what ``mbarrier.*.shared::cta.b64 [addr]`` takes. Every op with an
effect on memory or other threads is ``sideeffect`` and clobbers memory, so
LLVM moves no load or store across it.
"""
from __future__ import annotations

from ..asm import MEMORY_CLOBBER
from ..registry import lowering

__all__ = []

_MEM = MEMORY_CLOBBER


@lowering("nv.mbarrier.init")
def _init(lw, op):
    bar, count = op.operands
    lw.asm("mbarrier.init.shared::cta.b64 [$0], $1;", f"r,r,{_MEM}", (),
           [("i32", lw.address(bar)), ("i32", lw.ref(count))], side_effects=True)


@lowering("nv.mbarrier.arrive")
def _arrive(lw, op):
    (bar,) = op.operands
    (r,) = lw.asm("mbarrier.arrive.shared::cta.b64 $0, [$1];", f"=l,r,{_MEM}", ["i64"],
                  [("i32", lw.address(bar))], side_effects=True)
    lw.bind(op.results[0], r)


@lowering("nv.mbarrier.arrive_cluster")
def _arrive_cluster(lw, op):
    bar, rank = op.operands
    # mapa gives the barrier's shared::cluster address in CTA `rank`; a remote arrive has no state (sink _)
    lw.asm("{ .reg .b32 a; mapa.shared::cluster.u32 a, $0, $1; "
           "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [a]; }",
           f"r,r,{_MEM}", (), [("i32", lw.address(bar)), ("i32", lw.ref(rank))], side_effects=True)


@lowering("nv.mbarrier.arrive_expect_tx")
def _arrive_tx(lw, op):
    bar, tx = op.operands
    (r,) = lw.asm("mbarrier.arrive.expect_tx.shared::cta.b64 $0, [$1], $2;", f"=l,r,r,{_MEM}", ["i64"],
                  [("i32", lw.address(bar)), ("i32", lw.ref(tx))], side_effects=True)
    lw.bind(op.results[0], r)


@lowering("nv.mbarrier.expect_tx")
def _expect_tx(lw, op):
    bar, tx = op.operands
    lw.asm("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], $1;", f"r,r,{_MEM}", (),
           [("i32", lw.address(bar)), ("i32", lw.ref(tx))], side_effects=True)


@lowering("nv.mbarrier.try_wait")
def _try_wait(lw, op):
    bar, parity = op.operands
    (r,) = lw.asm("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; "
                  "selp.u32 $0, 1, 0, p; }",
                  f"=r,r,r,{_MEM}", ["i32"],
                  [("i32", lw.address(bar)), ("i32", lw.ref(parity))], side_effects=True)
    b = lw.fresh()
    lw.emit(f"{b} = icmp ne i32 {r}, 0")
    lw.bind(op.results[0], b)


@lowering("nv.mbarrier.wait")
def _wait(lw, op):
    bar, parity = op.operands
    # labels inside { } are local to the block, so the loop can be inlined many times
    lw.asm("{ .reg .pred p; TYLO_WAIT: mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1; "
           "@!p bra TYLO_WAIT; }",
           f"r,r,{_MEM}", (), [("i32", lw.address(bar)), ("i32", lw.ref(parity))], side_effects=True)
