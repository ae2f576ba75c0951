"""Inline PTX for warp-level MMA: the ``nv.mma.sync`` op (see ``tylo.lang.mma``).

``mma.sync.aligned.<shape>.row.col.<d>.<a>.<b>.<c> {d..}, {a..}, {b..}, {c..};`` with one
output per D register (``=f`` for f32, ``=r`` for 32-bit integer/packed registers) and
``r`` inputs for A/B (f32 tf32 values are bitcast to i32 first), ``f``/``r`` for C.
"""
from __future__ import annotations

from ...ir import types as T
from ..registry import lowering

__all__ = ["mma_template", "mma_opcode", "FP8_MIN_PTX"]

FP8_MIN_PTX = 84  # 'mma with FP8 floating point type' requires PTX ISA 8.4 (ptxas)

# tylo type names -> PTX type suffixes of mma.sync
_PTX_TYPE = {"f16": "f16", "bf16": "bf16", "f32": "f32", "tf32": "tf32", "i32": "s32", "i8": "s8", "u8": "u8",
             "f8e4m3": "e4m3", "f8e5m2": "e5m2"}


def mma_opcode(shape, types) -> str:
    """``mma.sync.aligned.mMnNkK.row.col.<d>.<a>.<b>.<c>`` for an atom's shape and (a, b, acc) type names."""
    m, n, k = shape
    a, b, acc = (_PTX_TYPE[t] for t in types)
    return f"mma.sync.aligned.m{m}n{n}k{k}.row.col.{acc}.{a}.{b}.{acc}"


def mma_template(opcode: str, na: int, nb: int, nc: int) -> str:
    """``opcode {$0..}, {a..}, {b..}, {c..};`` for ``nc`` D outputs and na/nb/nc inputs."""
    groups, n = [], 0
    for count in (nc, na, nb, nc):
        groups.append("{" + ", ".join(f"${n + i}" for i in range(count)) + "}")
        n += count
    return f"{opcode} {', '.join(groups)};"


def _reg32(lw, v):
    """(llvm type, name, constraint) of a 32-bit register operand for an ``r`` slot."""
    if v.type == T.f32:
        name = lw.fresh()
        lw.emit(f"{name} = bitcast float {lw.ref(v)} to i32")
        return "i32", name, "r"
    return "i32", lw.ref(v), "r"


@lowering("nv.mma.sync")
def lower_mma_sync(lw, op):
    opcode = mma_opcode(op.attrs["shape"], op.attrs["types"])
    na, nb, nc = op.attrs["a"], op.attrs["b"], op.attrs["c"]
    if (".e4m3" in opcode or ".e5m2" in opcode) and lw.target.ptx_version < FP8_MIN_PTX:
        raise ValueError(
            f"{opcode}: fp8 mma.sync needs PTX ISA 8.4 or newer, but target {lw.target.name} emits "
            f"PTX {lw.target.ptx_isa} (raise its ptx_version in tylo/codegen/targets.py)")
    args, cons = [], []
    for v in op.operands[: na + nb]:
        t, name, c = _reg32(lw, v)
        args.append((t, name))
        cons.append(c)
    for v in op.operands[na + nb:]:
        if v.type == T.f32:
            args.append(("float", lw.ref(v)))
            cons.append("f")
        else:
            args.append(("i32", lw.ref(v)))
            cons.append("r")
    outs = ["float" if r.type == T.f32 else "i32" for r in op.results]
    out_cons = ["=f" if r.type == T.f32 else "=r" for r in op.results]
    names = lw.asm(mma_template(opcode, na, nb, nc), ",".join(out_cons + cons), outs, args, convergent=True)
    for r, name in zip(op.results, names):
        lw.bind(r, name)
