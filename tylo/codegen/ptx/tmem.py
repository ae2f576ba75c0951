"""Inline PTX for the TMEM ops: ``tcgen05.alloc/dealloc/relinquish_alloc_permit``, ``tcgen05.ld/st``
and their waits (PTX ISA 8.6+, sm_100a).

Loads and stores are ``sideeffect`` asm so LLVM keeps them in program order with the waits,
fences and MMAs around them; ``wait::ld`` takes the loaded registers as tied operands and returns
them, which is the compiler dependency that keeps their uses after the wait.
"""
from __future__ import annotations

from ..registry import lowering

__all__ = ["ld_template", "st_template"]


def _regs(first: int, n: int) -> str:
    return "{" + ", ".join(f"${i}" for i in range(first, first + n)) + "}"


def _shape_suffix(attrs) -> str:
    pack = ".pack::16b" if attrs.get("pack") else ""
    return f".{attrs['shape']}.x{attrs['num']}{pack}"


def ld_template(attrs, n: int) -> str:
    """``tcgen05.ld.sync.aligned.<shape>.x<num>.b32 {$0..}, [$n](, split);``"""
    split = f", {attrs['split']}" if attrs["shape"] == "16x32bx2" else ""
    return f"tcgen05.ld.sync.aligned{_shape_suffix(attrs)}.b32 {_regs(0, n)}, [${n}]{split};"


def st_template(attrs, n: int) -> str:
    suffix = _shape_suffix(attrs).replace(".pack::16b", ".unpack::16b")
    split = f", {attrs['split']}" if attrs["shape"] == "16x32bx2" else ""
    return f"tcgen05.st.sync.aligned{suffix}.b32 [$0]{split}, {_regs(1, n)};"


def _cons(t) -> str:
    return "f" if t.name == "f32" else "r"


@lowering("nv.tcgen05.alloc")
def _alloc(lw, op):
    a = op.attrs
    lw.asm(f"tcgen05.alloc.cta_group::{a['cta_group']}.sync.aligned.shared::cta.b32 [$0], {a['columns']};",
           "r,~{memory}", args=[("i32", lw.address(op.operands[0]))], side_effects=True, convergent=True)


@lowering("nv.tcgen05.dealloc")
def _dealloc(lw, op):
    a = op.attrs
    lw.asm(f"tcgen05.dealloc.cta_group::{a['cta_group']}.sync.aligned.b32 $0, {a['columns']};",
           "r,~{memory}", args=[("i32", lw.ref(op.operands[0]))], side_effects=True, convergent=True)


@lowering("nv.tcgen05.relinquish_alloc_permit")
def _relinquish(lw, op):
    lw.asm(f"tcgen05.relinquish_alloc_permit.cta_group::{op.attrs['cta_group']}.sync.aligned;",
           "~{memory}", side_effects=True, convergent=True)


@lowering("nv.tcgen05.ld")
def _ld(lw, op):
    n = len(op.results)
    types = [r.type for r in op.results]
    cons = ",".join("=" + _cons(t) for t in types) + ",r,~{memory}"
    names = lw.asm(ld_template(op.attrs, n), cons, [lw.llvm_type(t) for t in types],
                   [("i32", lw.ref(op.operands[0]))], side_effects=True, convergent=True)
    for r, name in zip(op.results, names):
        lw.bind(r, name)


@lowering("nv.tcgen05.st")
def _st(lw, op):
    addr, *vals = op.operands
    cons = "r," + ",".join(_cons(v.type) for v in vals) + ",~{memory}"
    args = [("i32", lw.ref(addr))] + [(lw.llvm_type(v.type), lw.ref(v)) for v in vals]
    lw.asm(st_template(op.attrs, len(vals)), cons, args=args, side_effects=True, convergent=True)


@lowering("nv.tcgen05.wait_ld")
def _wait_ld(lw, op):
    n = len(op.operands)
    if n == 0:
        lw.asm("tcgen05.wait::ld.sync.aligned;", "~{memory}", side_effects=True, convergent=True)
        return
    types = [v.type for v in op.operands]
    cons = ",".join("=" + _cons(t) for t in types) + "," + ",".join(str(i) for i in range(n)) + ",~{memory}"
    names = lw.asm("tcgen05.wait::ld.sync.aligned;", cons, [lw.llvm_type(t) for t in types],
                   [(lw.llvm_type(v.type), lw.ref(v)) for v in op.operands], side_effects=True, convergent=True)
    for r, name in zip(op.results, names):
        lw.bind(r, name)


@lowering("nv.tcgen05.wait_st")
def _wait_st(lw, op):
    lw.asm("tcgen05.wait::st.sync.aligned;", "~{memory}", side_effects=True, convergent=True)
