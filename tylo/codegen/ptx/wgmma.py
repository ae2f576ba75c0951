"""Inline PTX for WGMMA: fence, mma_async, commit_group, wait_group.

The accumulators are f32 registers that pass *through* each op: outputs
``=f`` x N, inputs tied to them with ``0`` .. ``N-1``. So the register
allocator keeps them in place (no moves between WGMMAs) and no arithmetic
on the results can be scheduled above a ``wait_group``.
"""
from __future__ import annotations

from ...ir import types as T
from ..asm import convergent_asm
from ..registry import lowering

__all__ = []


def _through(lw, op, template: str, extra_constraints: str = "", extra_args=()):
    """Emit ``template`` with the op's f32 accumulators tied in and out; bind the results."""
    n = len(op.results)
    if n == 0:
        cons = ",".join(c for c in (extra_constraints, "~{memory}") if c)
        convergent_asm(lw, template, cons, (), list(extra_args), side_effects=True)
        return
    cons = ",".join(["=f"] * n + [str(i) for i in range(n)] + ([extra_constraints] if extra_constraints else [])
                    + ["~{memory}"])
    args = [("float", lw.ref(v)) for v in op.operands[-n:]] + list(extra_args)
    names = convergent_asm(lw, template, cons, ["float"] * n, args, side_effects=True)
    for r, name in zip(op.results, names):
        lw.bind(r, name)


@lowering("nv.wgmma.fence")
def _fence(lw, op):
    _through(lw, op, "wgmma.fence.sync.aligned;")


@lowering("nv.wgmma.commit_group")
def _commit(lw, op):
    _through(lw, op, "wgmma.commit_group.sync.aligned;")


@lowering("nv.wgmma.wait_group")
def _wait(lw, op):
    _through(lw, op, f"wgmma.wait_group.sync.aligned {op.attrs['n']};")


@lowering("nv.wgmma.order_before_wait")
def _order_before_wait(lw, op):
    """A store of the values' xor, predicated on a condition that is never true (``%nwarpid``, the SM's warp
    slots, above 4096), which ptxas cannot prove: it keeps a store before a later ``wgmma.wait_group``, so the
    instructions that compute the values stay before the wait too. Without it ptxas may hoist the wait above
    independent work and serialise it after the groups (measured: the attention softmax ran after the P V
    GEMM's wait). The store never executes, so its address (the warp-slot count) is never used."""
    n = len(op.operands)
    body = "mov.b32 x, $0; " + "".join(f"mov.b32 t, ${i}; xor.b32 x, x, t; " for i in range(1, n))
    template = ("{ .reg .pred q; .reg .b32 x, t, w; " + body +
                "mov.u32 w, %nwarpid; setp.gt.u32 q, w, 4096; @q st.shared.b32 [w], x; }")
    kinds = [("float", "f") if v.type == T.f32 else ("i32", "r") for v in op.operands]
    convergent_asm(lw, template, ",".join([c for _, c in kinds] + ["~{memory}"]), (),
                   [(t, lw.ref(v)) for (t, _), v in zip(kinds, op.operands)], side_effects=True)


# tylo type names -> PTX type suffixes of wgmma
_PTX_TYPE = {"bf16": "bf16", "f16": "f16", "f8e4m3": "e4m3", "f8e5m2": "e5m2"}


def wgmma_opcode(attrs) -> str:
    """``wgmma.mma_async.sync.aligned.m64nNkK.f32.<t>.<t>`` from the op's shape and input type."""
    m, n, k = attrs["shape"]
    t = _PTX_TYPE[attrs["dtype"]]
    return f"wgmma.mma_async.sync.aligned.m{m}n{n}k{k}.f32.{t}.{t}"


@lowering("nv.wgmma.mma_async")
def _mma(lw, op):
    n = len(op.results)
    desc_a, desc_b, scale = op.operands[:3]
    acc = ", ".join(f"${i}" for i in range(n))
    a, b, s = 2 * n, 2 * n + 1, 2 * n + 2   # inputs after the n tied accumulators
    imms = ", ".join(str(i) for i in op.attrs["immediates"])
    template = (f"{{ .reg .pred p; setp.ne.b32 p, ${s}, 0; "
                f"{wgmma_opcode(op.attrs)} {{{acc}}}, ${a}, ${b}, p, {imms}; }}")
    _through(lw, op, template, "l,l,r",
             [("i64", lw.ref(desc_a)), ("i64", lw.ref(desc_b)), ("i32", lw.ref(scale))])


@lowering("nv.wgmma.mma_async_rs")
def _mma_rs(lw, op):
    """A from four 32-bit registers (packed 16-bit pairs), B from a descriptor."""
    n = len(op.results)
    na = op.attrs["a_regs"]
    a_regs, (desc_b, scale) = op.operands[:na], op.operands[na:na + 2]
    acc = ", ".join(f"${i}" for i in range(n))
    a_ops = ", ".join(f"${2 * n + i}" for i in range(na))
    b, s = 2 * n + na, 2 * n + na + 1
    imms = ", ".join(str(i) for i in op.attrs["immediates"])
    template = (f"{{ .reg .pred p; setp.ne.b32 p, ${s}, 0; "
                f"{wgmma_opcode(op.attrs)} {{{acc}}}, {{{a_ops}}}, ${b}, p, {imms}; }}")
    args = [("i32", lw.ref(r)) for r in a_regs] + [("i64", lw.ref(desc_b)), ("i32", lw.ref(scale))]
    _through(lw, op, template, ",".join(["r"] * na + ["l", "r"]), args)
