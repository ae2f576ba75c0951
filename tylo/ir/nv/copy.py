"""Warp copies and asynchronous copies: ``nv.ldmatrix``, ``nv.stmatrix``, ``nv.cp_async*``, ``nv.st_async``.

ldmatrix/stmatrix move 8x8 matrices of 16-bit elements between shared memory and the
registers of a warp (``num`` matrices, one u32 register each per lane); cp.async copies 4, 8
or 16 bytes from global to shared memory, completing at ``cp_async.wait``; st.async stores 1, 2
or 4 32-bit registers into the shared memory of a CTA of the cluster (sm_90+), completing on that
CTA's mbarrier (``complete_tx`` of the bytes).
"""
from __future__ import annotations

from .. import types as T
from ..opdef import Attr, OpDef
from ..ops import define_ops
from ..types import PointerType

__all__ = ["DEFINITIONS", "shared_pointer_error"]


def shared_pointer_error(v) -> str | None:
    """Why ``v`` is not a pointer into shared memory, or None."""
    if not isinstance(v.type, PointerType) or v.type.space != "shared":
        return f"needs a shared pointer, got {v.type}"
    return None


def _check_ldmatrix(op):
    num = op.attrs.get("num")
    if num not in (1, 2, 4) or len(op.results) != num:
        return f"num must be 1, 2 or 4 and equal the result count, got {num} and {len(op.results)}"
    if any(r.type != T.u32 for r in op.results):
        return "results must be u32"
    return shared_pointer_error(op.operands[0])


def _check_stmatrix(op):
    num = op.attrs.get("num")
    if num not in (1, 2, 4) or len(op.operands) != 1 + num:
        return f"num must be 1, 2 or 4 and equal the register count, got {num} and {len(op.operands) - 1}"
    if any(v.type not in (T.u32, T.i32) for v in op.operands[1:]):
        return "registers must be u32 or i32"
    return shared_pointer_error(op.operands[0])


def _check_cp_async(op):
    if len(op.operands) not in (2, 3):
        return "takes dst, src and an optional src size"
    dst, src = op.operands[:2]
    err = shared_pointer_error(dst)
    if err:
        return "dst " + err
    if not isinstance(src.type, PointerType) or src.type.space != "global":
        return f"src must be a global pointer, got {src.type}"
    if len(op.operands) == 3 and op.operands[2].type != T.u32:
        return "src size must be u32"
    nbytes, cache = op.attrs.get("nbytes"), op.attrs.get("cache")
    if nbytes not in (4, 8, 16) or cache not in ("ca", "cg") or (cache == "cg" and nbytes != 16):
        return f"bad nbytes/cache {nbytes}/{cache}"
    return None


def _check_st_async(op):
    if len(op.operands) not in (4, 5, 7):
        return "takes dst, bar, CTA rank and 1, 2 or 4 values"
    dst, bar, rank, *values = op.operands
    err = shared_pointer_error(dst)
    if err:
        return "dst " + err
    if shared_pointer_error(bar) or bar.type.elem not in (T.u64, T.i64):
        return f"the barrier must be a *shared u64 pointer, got {bar.type}"
    if rank.type != T.i32:
        return f"the CTA rank is i32, got {rank.type}"
    if any(v.type not in (T.f32, T.i32, T.u32) for v in values):
        return "values must be 32-bit: f32, i32 or u32"
    return None


_NUM_TRANS = (Attr("num", (int,)), Attr("trans", (bool,)))

DEFINITIONS = define_ops(
    OpDef("nv.ldmatrix", 1, None, False, _check_ldmatrix, _NUM_TRANS, convergent=True, memory="read",
          doc="ptr -> num u32 registers: ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16"),
    OpDef("nv.stmatrix", None, 0, False, _check_stmatrix, _NUM_TRANS, convergent=True, memory="write",
          doc="ptr, num registers: stmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16"),
    OpDef("nv.cp_async", None, 0, False, _check_cp_async, (Attr("nbytes", (int,)), Attr("cache", (str,))),
          memory="read_write", doc="dst (shared), src (global)[, src size u32]: cp.async.{cache}.shared.global"),
    OpDef("nv.cp_async.commit", 0, 0, False, memory="read_write", doc="cp.async.commit_group"),
    OpDef("nv.cp_async.wait", 0, 0, False, attrs=(Attr("n", (int,)),), memory="read_write",
          doc="cp.async.wait_group n"),
    OpDef("nv.st_async", None, 0, False, _check_st_async, memory="read_write",
          doc="dst, bar (shared, this CTA's offsets), CTA rank, 1/2/4 values: mapa + "
              "st.async.shared::cluster.mbarrier::complete_tx::bytes at those offsets in CTA rank"),
)
