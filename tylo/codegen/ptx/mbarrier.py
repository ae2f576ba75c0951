"""Inline PTX for mbarriers (fences: ``fence.py``; named/cluster barriers, elect, setmaxnreg: ``sync.py``).

Barrier pointers are ``ptr addrspace(3)`` in LLVM; they reach PTX as the
32-bit shared-window address (``lw.address``: ``ptrtoint ... to i32``, constraint ``r``),
which is what ``mbarrier.*.shared::cta.b64 [addr]`` takes. Every op with an
effect on memory or other threads is ``sideeffect`` and clobbers memory, so
LLVM moves no load or store across it.
"""
from __future__ import annotations

from ..asm import MEMORY_CLOBBER, bind_flag
from ..registry import lowering

__all__ = []

_MEM = MEMORY_CLOBBER


def _on_barrier(lw, op, text, result=None):
    """Emit ``text`` on ``op``'s barrier: ``$0`` is the result of type ``result`` ("i64": ``=l``, "i32":
    ``=r``) when there is one, then the barrier's shared address, then the op's other (i32) operands, in
    order. Returns the result's LLVM value, or None."""
    bar, *rest = op.operands
    outs = [result] if result else []
    constraints = [("=l" if result == "i64" else "=r")] * len(outs) + ["r"] * (1 + len(rest)) + [_MEM]
    values = lw.asm(text, ",".join(constraints), outs,
                    [("i32", lw.address(bar))] + [("i32", lw.ref(v)) for v in rest], side_effects=True)
    return values[0] if result else None


@lowering("nv.mbarrier.init")
def _init(lw, op):
    _on_barrier(lw, op, "mbarrier.init.shared::cta.b64 [$0], $1;")


@lowering("nv.mbarrier.arrive")
def _arrive(lw, op):
    lw.bind(op.results[0], _on_barrier(lw, op, "mbarrier.arrive.shared::cta.b64 $0, [$1];", "i64"))


@lowering("nv.mbarrier.arrive_cluster")
def _arrive_cluster(lw, op):
    # mapa gives the barrier's shared::cluster address in CTA `rank`; a remote arrive has no state (sink _).
    # Release at the default CTA scope, as CUTLASS does: `.release.cluster` costs a MEMBAR.ALL.GPU before
    # every arrive (ptxas, sm_90a), which made the 2 x 1 cluster GEMM 0.6x of the plain one; the arrive
    # frees a stage the thread only read through the async proxy, so there is nothing to order wider.
    _on_barrier(lw, op, "{ .reg .b32 a; mapa.shared::cluster.u32 a, $0, $1; "
                        "mbarrier.arrive.shared::cluster.b64 _, [a]; }")


@lowering("nv.mbarrier.arrive_expect_tx")
def _arrive_tx(lw, op):
    lw.bind(op.results[0], _on_barrier(lw, op, "mbarrier.arrive.expect_tx.shared::cta.b64 $0, [$1], $2;", "i64"))


@lowering("nv.mbarrier.expect_tx")
def _expect_tx(lw, op):
    _on_barrier(lw, op, "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], $1;")


@lowering("nv.mbarrier.try_wait")
def _try_wait(lw, op):
    r = _on_barrier(lw, op, "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; "
                            "selp.u32 $0, 1, 0, p; }", "i32")
    bind_flag(lw, op, r)


@lowering("nv.mbarrier.wait")
def _wait(lw, op):
    # labels inside { } are local to the block, so the loop can be inlined many times
    _on_barrier(lw, op, "{ .reg .pred p; TYLO_WAIT: mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1; "
                        "@!p bra TYLO_WAIT; }")
