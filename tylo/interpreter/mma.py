"""Semantics of ``nv.mma.sync``: D = A @ B + C for one warp, placed through the atom's ownerships.

The operand ownerships are the PTX ISA fragment layouts (``tylo.ir.nv.mma``), checked on an H200 for
every atom against float64 products. Products are exact in float64 and the sum is rounded once to
the accumulator type (the hardware's internal order may differ in the last bit: compare with a
tolerance).
"""
from __future__ import annotations

import numpy as np

from ..ir import types as T
from ..ir.nv.mma import MMA_ATOMS, tf32
from .core import InterpreterError, numpy_dtype
from .registry import WARP_SEMANTICS

_BY_KEY = {(a.shape, a.types): a for a in MMA_ATOMS}


def _elements(word, dtype, per):
    """The ``per`` elements packed in a 32-bit register, low bits first."""
    if per == 1:
        if dtype is tf32 or dtype == T.f32:
            return [float(np.array([word]).astype(np.float32)[0]) if isinstance(word, float) or
                    isinstance(word, np.floating) else float(np.array([int(word) & 0xFFFFFFFF], np.uint32)
                                                              .view(np.float32)[0])]
        return [int(word)]
    bits = 32 // per
    raw = np.array([(int(word) >> (bits * i)) & ((1 << bits) - 1) for i in range(per)],
                   dtype=np.uint16 if bits == 16 else np.uint8)
    return [float(x) if dtype.kind in ("float", "fp8") else int(x) for x in raw.view(numpy_dtype(dtype))]


def _gather(lanes, offset, count, dtype, per, ownership, shape):
    m = np.zeros(shape, dtype=np.float64 if dtype is tf32 or dtype.kind in ("float", "fp8") else np.int64)
    for lane, regs in lanes.items():
        values = []
        for w in regs[offset:offset + count]:
            values += _elements(w, dtype, per)
        for slot, v in enumerate(values):
            m[ownership.coord(lane, slot)] = v
    return m


def _mma(machine, op, lanes):
    atom = _BY_KEY.get((tuple(op.attrs["shape"]), tuple(op.attrs["types"])))
    if atom is None:
        raise InterpreterError(f"no MMA atom of shape {op.attrs['shape']} and types {op.attrs['types']}")
    if len(lanes) != 32:
        raise InterpreterError("mma.sync needs all 32 lanes of the warp")
    na, nb, nc = op.attrs["a"], op.attrs["b"], op.attrs["c"]
    per = atom.elements_per_reg
    a = _gather(lanes, 0, na, atom.a_dtype, per, atom.a_ownership, (atom.M, atom.K))
    b = _gather(lanes, na, nb, atom.b_dtype, per, atom.b_ownership, (atom.K, atom.N))
    if atom.acc_dtype != T.f32 and atom.acc_dtype != T.i32:
        raise InterpreterError(f"the interpreter models f32 and i32 accumulators, not {atom.acc_dtype}")
    c = _gather(lanes, na + nb, nc, atom.acc_dtype, 1, atom.c_ownership, (atom.M, atom.N))
    d = a @ b + c
    out = {}
    for lane in lanes:
        vals = [d[atom.c_ownership.coord(lane, s)] for s in range(atom.c_ownership.values)]
        out[lane] = tuple(np.float32(v) if atom.acc_dtype == T.f32 else int(v) for v in vals)
    return out


WARP_SEMANTICS.add("nv.mma.sync", _mma)
