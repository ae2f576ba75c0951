"""Inline PTX for named and cluster barriers, elect and setmaxnreg: ``convergent`` asm (never
duplicated into divergent paths) with a memory clobber; the counter wait, a spin loop of relaxed loads; and
``griddepcontrol`` (a memory clobber: no memory access moves above the wait)."""
from __future__ import annotations

from ..asm import MEMORY_CLOBBER, bind_flag, convergent_asm
from ..registry import lowering

__all__ = ["waits_on_prior_grids"]

_MEM = MEMORY_CLOBBER


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
    bind_flag(lw, op, r)


@lowering("nv.setmaxnreg")
def _setmaxnreg(lw, op):
    convergent_asm(lw, f"setmaxnreg.{op.attrs['action']}.sync.aligned.u32 {op.attrs['count']};", _MEM, (), (),
           side_effects=True)


@lowering("nv.cluster.barrier")
def _cluster_barrier(lw, op):
    text = {"arrive": "barrier.cluster.arrive.release.aligned;",
            "arrive_relaxed": "barrier.cluster.arrive.relaxed.aligned;",
            "wait": "barrier.cluster.wait.acquire.aligned;"}[op.attrs["kind"]]
    convergent_asm(lw, text, _MEM, (), (), side_effects=True)


@lowering("nv.wait_at_least")
def _wait_at_least(lw, op):
    ptr, value = op.operands
    polls = op.attrs["polls"]
    space = ".global" if ptr.type.space == "global" else ""
    # a relaxed GPU-scope load sees other SMs' atomics (a weak load may be served from L1 forever); the wrapping
    # difference compares in serial-number order; a bounded wait counts its loads down; labels inside { } are
    # local, so the loop can be inlined many times
    load = f"ld.relaxed.gpu{space}.s32 v, [$1]; sub.s32 v, v, $2; setp.ge.s32 p, v, 0; "
    if polls:
        text = ("{ .reg .pred p, q; .reg .s32 v, n; mov.s32 n, " + str(polls) + "; TYLO_SPIN: " + load
                + "@p bra TYLO_DONE; sub.s32 n, n, 1; setp.gt.s32 q, n, 0; @q bra TYLO_SPIN; "
                "TYLO_DONE: selp.u32 $0, 1, 0, p; }")
    else:
        text = "{ .reg .pred p; .reg .s32 v; TYLO_SPIN: " + load + "@!p bra TYLO_SPIN; selp.u32 $0, 1, 0, p; }"
    (r,) = lw.asm(text, f"=r,l,r,{_MEM}", ["i32"], [("i64", lw.address(ptr, 64)), ("i32", lw.ref(value))],
                  side_effects=True)
    bind_flag(lw, op, r)


@lowering("nv.griddepcontrol")
def _griddepcontrol(lw, op):
    lw.asm(f"griddepcontrol.{op.attrs['kind']};", _MEM, (), (), side_effects=True)


def waits_on_prior_grids(ptx: str) -> bool:
    """Whether a kernel's PTX waits on the grids before it (``nv.griddepcontrol`` wait): the launcher then allows
    programmatic stream serialization. Read from the PTX, which the cache keeps with every kernel."""
    return "griddepcontrol.wait;" in ptx
