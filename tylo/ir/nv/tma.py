"""Bulk tensor copies through a tensor map (TMA, sm_90+): ``nv.tma.*``.

The tensor map is its generic address (u64); the shared tile a ``*shared`` pointer; the box
origin ``rank`` i32 coordinates (innermost first, as ``cp.async.bulk.tensor`` takes them).
A load completes on an mbarrier (``complete_tx::bytes``), optionally multicast to the CTAs of
a 16-bit mask; stores complete in bulk groups (``commit`` / ``wait``).
"""
from __future__ import annotations

from .. import types as T
from ..opdef import Attr, OpDef
from ..ops import define_ops
from ..types import PointerType

__all__ = ["DEFINITIONS"]


def _copy_check(op):
    tmap = op.operands[0]
    if tmap.type != T.u64:
        return f"the tensor map address is u64, got {tmap.type}"
    smem = op.operands[1]
    if not (isinstance(smem.type, PointerType) and smem.type.space == "shared"):
        return f"the tile must be a *shared pointer, got {smem.type}"
    rank = op.attrs["rank"]
    coords = op.operands[2:2 + rank]
    if len(coords) != rank or any(c.type != T.i32 for c in coords):
        return f"{rank} i32 coordinates expected"
    return None


def _load_check(op):
    err = _copy_check(op)
    if err:
        return err
    extra = 1 if op.attrs.get("multicast") else 0
    if len(op.operands) != 3 + op.attrs["rank"] + extra:
        return "takes tmap, dst, coordinates, the mbarrier (and the CTA mask with multicast)"
    return None


def _store_check(op):
    err = _copy_check(op)
    if err:
        return err
    if len(op.operands) != 2 + op.attrs["rank"]:
        return "takes tmap, src and the coordinates"
    return None


DEFINITIONS = define_ops(
    OpDef("nv.tma.load", None, 0, False, _load_check, (Attr("rank", (int,)), Attr("multicast", (bool,), False)),
          memory="read_write",
          doc="tmap, dst, *coords, bar[, mask u16]: cp.async.bulk.tensor.{rank}d.shared::cluster.global"),
    OpDef("nv.tma.store", None, 0, False, _store_check, (Attr("rank", (int,)),), memory="read_write",
          doc="tmap, src, *coords: cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group"),
    OpDef("nv.tma.commit", 0, 0, False, memory="read_write", doc="cp.async.bulk.commit_group"),
    OpDef("nv.tma.wait", 0, 0, False, attrs=(Attr("n", (int,)), Attr("read", (bool,))), memory="read_write",
          doc="cp.async.bulk.wait_group[.read] n"),
    OpDef("nv.tma.prefetch", 1, 0, False, memory="read", doc="tmap: prefetch.tensormap"),
)
