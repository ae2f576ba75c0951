"""Inline PTX for TMA bulk tensor copies (``nv.tma.*``, see ``tylo.lang.tma``).

The tensor map is a 64-bit generic address (``l``); shared tiles and
mbarriers are 32-bit shared-window addresses (``r``); coordinates are i32,
innermost first.
"""
from __future__ import annotations

from ..asm import MEMORY_CLOBBER
from ..registry import lowering

__all__ = []

_MEM = MEMORY_CLOBBER


def _coords(first: int, rank: int) -> str:
    return "{" + ", ".join(f"${first + i}" for i in range(rank)) + "}"


@lowering("nv.tma.load")
def _load(lw, op):
    rank = op.attrs["rank"]
    tmap, dst, *rest = op.operands
    coords, bar = rest[:rank], rest[rank]
    multicast = op.attrs.get("multicast", False)
    template = (f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                f"{'.multicast::cluster' if multicast else ''} "
                f"[$0], [$1, {_coords(2, rank)}], [${2 + rank}]{f', ${3 + rank}' if multicast else ''};")
    args = [("i32", lw.address(dst)), ("i64", lw.ref(tmap))]
    args += [("i32", lw.ref(c)) for c in coords] + [("i32", lw.address(bar))]
    cons = ["r", "l"] + ["r"] * rank + ["r"]
    if multicast:
        args.append(("i16", lw.ref(rest[rank + 1])))
        cons.append("h")
    lw.asm(template, ",".join(cons + [_MEM]), (), args, side_effects=True)


@lowering("nv.tma.store")
def _store(lw, op):
    rank = op.attrs["rank"]
    tmap, src, *coords = op.operands
    template = (f"cp.async.bulk.tensor.{rank}d.global.shared::cta.tile.bulk_group "
                f"[$0, {_coords(1, rank)}], [${1 + rank}];")
    args = [("i64", lw.ref(tmap))] + [("i32", lw.ref(c)) for c in coords] + [("i32", lw.address(src))]
    lw.asm(template, ",".join(["l"] + ["r"] * rank + ["r", _MEM]), (), args, side_effects=True)


@lowering("nv.tma.commit")
def _commit(lw, op):
    lw.asm("cp.async.bulk.commit_group;", _MEM, (), (), side_effects=True)


@lowering("nv.tma.wait")
def _wait(lw, op):
    read = ".read" if op.attrs["read"] else ""
    lw.asm(f"cp.async.bulk.wait_group{read} {op.attrs['n']};", _MEM, (), (), side_effects=True)


@lowering("nv.tma.prefetch")
def _prefetch(lw, op):
    lw.asm("prefetch.tensormap [$0];", f"l,{_MEM}", (), [("i64", lw.ref(op.operands[0]))], side_effects=True)
