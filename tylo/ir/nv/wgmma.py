"""Hopper warpgroup MMA (sm_90a): ``nv.wgmma.*``.

The f32 accumulators pass *through* every op of the protocol (fence, mma_async, wait_group):
they are the op's trailing operands and its results, in the same order, so no arithmetic on
them can move across the asynchronous window. Descriptors are u64 (``smem_descriptor``),
``scale-d`` an i32 (0: D = A*B, else D += A*B).
"""
from __future__ import annotations

from .. import types as T
from ..opdef import Attr, OpDef
from ..ops import define_ops

__all__ = ["DEFINITIONS", "accumulators_error"]


def accumulators_error(op, first: int) -> str | None:
    """Why the accumulators ``op.operands[first:]`` -> ``op.results`` are not f32 registers passed through."""
    accs = op.operands[first:]
    if len(accs) != len(op.results):
        return f"{len(accs)} accumulators in, {len(op.results)} out"
    for v in list(accs) + list(op.results):
        if v.type != T.f32:
            return f"accumulators are f32, got {v.type}"
    return None


def _mma_check(op):
    a, b, scale = op.operands[:3]
    if a.type != T.u64 or b.type != T.u64:
        return f"descriptors are u64, got {a.type} and {b.type}"
    if scale.type != T.i32:
        return f"scale-d is i32, got {scale.type}"
    if len(op.results) != op.attrs["n"] // 2:
        return f"m64n{op.attrs['n']} has {op.attrs['n'] // 2} accumulators, got {len(op.results)}"
    return accumulators_error(op, 3)


def _mma_rs_check(op):
    return accumulators_error(op, len(op.operands) - len(op.results))


_INSTRUCTION = (Attr("shape", (tuple,)), Attr("dtype", (str,)), Attr("n", (int,)), Attr("immediates", (tuple,)))
_CONV = dict(convergent=True, memory="read_write")

DEFINITIONS = define_ops(
    OpDef("nv.wgmma.fence", None, None, False, lambda op: accumulators_error(op, 0),
          doc="*accs -> accs: wgmma.fence.sync.aligned", **_CONV),
    OpDef("nv.wgmma.mma_async", None, None, False, _mma_check, _INSTRUCTION,
          doc="desc_a, desc_b, scale_d, *accs -> accs: wgmma.mma_async.sync.aligned.m64nNkK.f32", **_CONV),
    OpDef("nv.wgmma.mma_async_rs", None, None, False, _mma_rs_check, _INSTRUCTION + (Attr("a_regs", (int,)),),
          doc="*a_regs, desc_b, scale_d, *accs -> accs: A from registers", **_CONV),
    OpDef("nv.wgmma.commit_group", 0, 0, False, doc="wgmma.commit_group.sync.aligned", **_CONV),
    OpDef("nv.wgmma.wait_group", None, None, False, lambda op: accumulators_error(op, 0), (Attr("n", (int,)),),
          doc="*accs -> accs: wgmma.wait_group.sync.aligned n", **_CONV),
)
