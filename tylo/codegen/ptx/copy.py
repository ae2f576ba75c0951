"""Inline PTX for ``ldmatrix``, ``stmatrix``, ``cp.async`` and ``st.async`` (see ``tylo.lang.copy``).

Shared addresses reach PTX as the 32-bit shared-window address (``ptrtoint`` of the
``addrspace(3)`` pointer to i32, constraint ``r``); global ones as the 64-bit address
(constraint ``l``). Every op is ``sideeffect`` with a ``~{memory}`` clobber, so LLVM keeps
ordinary loads and stores on their side of it.
"""
from __future__ import annotations

from ...ir import types as T
from ..asm import MEMORY_CLOBBER
from ..registry import lowering

__all__ = ["ldmatrix_template", "stmatrix_template", "cp_async_template", "st_async_template"]

_MEM = MEMORY_CLOBBER


def ldmatrix_template(num: int, trans: bool) -> str:
    regs = ", ".join(f"${i}" for i in range(num))
    return f"ldmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16 {{{regs}}}, [${num}];"


def stmatrix_template(num: int, trans: bool) -> str:
    regs = ", ".join(f"${i + 1}" for i in range(num))
    return f"stmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16 [$0], {{{regs}}};"


def cp_async_template(nbytes: int, cache: str, zero_fill: bool) -> str:
    return f"cp.async.{cache}.shared.global [$0], [$1], {nbytes}{', $2' if zero_fill else ''};"


def st_async_template(count: int) -> str:
    """$0 / $1: the destination and barrier (this CTA's shared addresses), $2 the CTA rank, then the values."""
    vec = {1: "", 2: ".v2", 4: ".v4"}[count]
    values = ", ".join(f"${i + 3}" for i in range(count))
    values = values if count == 1 else f"{{{values}}}"
    return ("{ .reg .b32 d, b; mapa.shared::cluster.u32 d, $0, $2; mapa.shared::cluster.u32 b, $1, $2; "
            f"st.async.shared::cluster.mbarrier::complete_tx::bytes{vec}.b32 [d], {values}, [b]; }}")


@lowering("nv.ldmatrix")
def lower_ldmatrix(lw, op):
    num, trans = op.attrs["num"], op.attrs["trans"]
    addr = lw.address(op.operands[0])
    cons = ",".join(["=r"] * num + ["r", _MEM])
    names = lw.asm(ldmatrix_template(num, trans), cons, ["i32"] * num, [("i32", addr)], side_effects=True,
                   convergent=True)
    for r, name in zip(op.results, names):
        lw.bind(r, name)


@lowering("nv.stmatrix")
def lower_stmatrix(lw, op):
    num, trans = op.attrs["num"], op.attrs["trans"]
    ptr, *regs = op.operands
    addr = lw.address(ptr)
    args = [("i32", addr)] + [("i32", lw.ref(r)) for r in regs]
    cons = ",".join(["r"] * (1 + num) + [_MEM])
    lw.asm(stmatrix_template(num, trans), cons, [], args, side_effects=True, convergent=True)


@lowering("nv.cp_async")
def lower_cp_async(lw, op):
    dst, src, *size = op.operands
    args = [("i32", lw.address(dst)), ("i64", lw.address(src, 64))]
    cons = ["r", "l"]
    if size:
        args.append(("i32", lw.ref(size[0])))
        cons.append("r")
    template = cp_async_template(op.attrs["nbytes"], op.attrs["cache"], bool(size))
    lw.asm(template, ",".join(cons + [_MEM]), [], args, side_effects=True)


@lowering("nv.cp_async.commit")
def lower_commit(lw, op):
    lw.asm("cp.async.commit_group;", _MEM, [], [], side_effects=True)


@lowering("nv.cp_async.wait")
def lower_wait(lw, op):
    lw.asm(f"cp.async.wait_group {op.attrs['n']};", _MEM, [], [], side_effects=True)


@lowering("nv.st_async")
def lower_st_async(lw, op):
    dst, bar, rank, *values = op.operands
    args = [("i32", lw.address(dst)), ("i32", lw.address(bar)), ("i32", lw.ref(rank))]
    for v in values:     # the bits of each 32-bit value as a b32 register
        ref = lw.ref(v)
        if v.type == T.f32:
            bits = lw.fresh()
            lw.emit(f"{bits} = bitcast float {ref} to i32")
            ref = bits
        args.append(("i32", ref))
    lw.asm(st_async_template(len(values)), ",".join(["r"] * len(args) + [_MEM]), [], args, side_effects=True)
