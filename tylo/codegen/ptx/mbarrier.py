"""Inline PTX for mbarriers, proxy fences, named barriers, elect and setmaxnreg.

Barrier pointers are ``ptr addrspace(3)`` in LLVM; they reach PTX as the
32-bit shared-window address (``lw.address``: ``ptrtoint ... to i32``, constraint ``r``),
which is what ``mbarrier.*.shared::cta.b64 [addr]`` takes. Every op with an
effect on memory or other threads is ``sideeffect`` and clobbers memory, so
LLVM moves no load or store across it.
"""
from __future__ import annotations

from ..asm import MEMORY_CLOBBER, convergent_asm
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


_FENCE = {
    "proxy_async": "fence.proxy.async;",
    "proxy_async_shared": "fence.proxy.async.shared::cta;",
    "mbarrier_init": "fence.mbarrier_init.release.cluster;",
}


@lowering("nv.fence")
def _fence(lw, op):
    lw.asm(_FENCE[op.attrs["kind"]], _MEM, (), (), side_effects=True)


@lowering("nv.named_barrier")
def _named(lw, op):
    bid, count = op.operands
    instr = {"sync": "bar.sync", "arrive": "bar.arrive"}[op.attrs["kind"]]
    convergent_asm(lw, f"{instr} $0, $1;", f"r,r,{_MEM}", (), [("i32", lw.ref(bid)), ("i32", lw.ref(count))],
           side_effects=True)


@lowering("nv.elect_one")
def _elect(lw, op):
    (r,) = convergent_asm(lw, "{ .reg .pred p; elect.sync _|p, 0xffffffff; selp.u32 $0, 1, 0, p; }", "=r", ["i32"], (),
                  side_effects=True)
    b = lw.fresh()
    lw.emit(f"{b} = icmp ne i32 {r}, 0")
    lw.bind(op.results[0], b)


@lowering("nv.setmaxnreg")
def _setmaxnreg(lw, op):
    convergent_asm(lw, f"setmaxnreg.{op.attrs['action']}.sync.aligned.u32 {op.attrs['count']};", _MEM, (), (),
           side_effects=True)


@lowering("nv.cluster.barrier")
def _cluster_barrier(lw, op):
    kind = op.attrs["kind"]
    text = "barrier.cluster.arrive.release.aligned;" if kind == "arrive" else "barrier.cluster.wait.acquire.aligned;"
    convergent_asm(lw, text, _MEM, (), (), side_effects=True)
