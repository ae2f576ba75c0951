"""Plans derived from ownership tables, lowered later by the fragment code.

Every plan is a frozen dataclass (comparable, hashable, printable) computed
exactly from the host enumeration of the ownership maps; a request that the
hardware cannot serve without moving values between threads, or across
warps, raises ``ValueError`` naming the ownership and the rule.

* ``reduction_plan(o, axis)``: a local pairwise tree over the slots of each
  thread that share the kept coordinate, then one XOR shuffle per lane bit
  that varies along ``axis``; ``result`` is the reduced ownership (extent 1
  on ``axis``, replicated over the reduced lanes).
* ``broadcast_plan(full, reduced, axis)``: which reduced slot feeds each
  full slot, without any shuffle.
* ``register_window(o, origin, shape)``: the slots of a static window.
* ``relayout_plan(src, dst)``: an in-lane register permutation.
* ``vector_access_plan(o, storage, elem_bytes, align_bytes)``: which slots
  form contiguous, aligned 16/8/4-byte accesses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .inttuple import fmt
from .ownership import (
    Ownership,
    RegisterWindow,
    fit_ownership,
    index_table,
    is_complete,
    ownership_name,
    ownership_table,
    prefix_strides,
    register_window,
    slot_list,
)
from .recognise import offsets_table

__all__ = [
    "ReductionPlan",
    "BroadcastPlan",
    "RegisterWindow",
    "RelayoutPlan",
    "VectorAccess",
    "VectorAccessPlan",
    "reduction_plan",
    "broadcast_plan",
    "register_window",
    "relayout_plan",
    "vector_access_plan",
]

WARP = 32


@dataclass(frozen=True)
class ReductionPlan:
    """Reduce ``source`` along ``axis``.

    ``groups[g]``: the slots of every thread that share kept coordinate
    ``g`` (result slot ``g``); ``tree``: rounds of ``(dst, src)`` register
    combines (``dst op= src``), pairwise; after the tree slot ``groups[g][0]``
    holds the thread's partial for group ``g``; ``shuffle_masks``: one
    ``shfl.xor`` per mask, applied to every group; ``result``: the reduced
    ownership.
    """

    source: Ownership
    axis: int
    groups: tuple
    tree: tuple
    shuffle_masks: tuple
    result: Ownership

    def __str__(self) -> str:
        combines = sum(len(r) for r in self.tree)
        lines = [
            f"ReductionPlan(axis={self.axis}) of {ownership_name(self.source)}: "
            f"{self.source.threads} threads x {self.source.values} slots",
            f"  local: {len(self.groups)} groups, {len(self.tree)} rounds, {combines} combines",
        ]
        for g, s in enumerate(self.groups[:4]):
            lines.append(f"    group {g}: {slot_list(s)}")
        if len(self.groups) > 4:
            lines.append(f"    ... {len(self.groups) - 4} more groups")
        lines.append(
            "  shuffles: " + (", ".join(f"xor {m}" for m in self.shuffle_masks) or "none")
        )
        lines.append(f"  result: {self.result!r}")
        return "\n".join(lines)


@dataclass(frozen=True)
class BroadcastPlan:
    """Broadcast ``source`` (reduced along ``axis``) back over ``target``:
    full slot ``v`` takes reduced slot ``sources[v]`` of the same thread."""

    source: Ownership
    target: Ownership
    axis: int
    sources: tuple

    def __str__(self) -> str:
        return (
            f"BroadcastPlan(axis={self.axis}) {ownership_name(self.source)} -> {ownership_name(self.target)}: "
            f"sources {slot_list(self.sources)}"
        )


@dataclass(frozen=True)
class RelayoutPlan:
    """In-lane relayout: target slot ``v`` takes source slot ``sources[v]``
    of the same thread."""

    source: Ownership
    target: Ownership
    sources: tuple

    def __str__(self) -> str:
        return (
            f"RelayoutPlan {ownership_name(self.source)} -> {ownership_name(self.target)}: "
            f"sources {slot_list(self.sources)}"
        )


@dataclass(frozen=True)
class VectorAccess:
    """One access of ``width_bytes`` covering ``slots`` in address order."""

    slots: tuple
    width_bytes: int

    def __str__(self) -> str:
        return f"{self.width_bytes}B{slot_list(self.slots)}"


@dataclass(frozen=True)
class VectorAccessPlan:
    """The accesses every thread issues (the same slots and widths in every
    thread) for ``ownership`` stored through ``storage``."""

    ownership: Ownership
    storage: Any
    elem_bytes: int
    align_bytes: int
    accesses: tuple

    @property
    def widths(self) -> tuple:
        return tuple(a.width_bytes for a in self.accesses)

    def __str__(self) -> str:
        return (
            f"VectorAccessPlan {ownership_name(self.ownership)} via {self.storage!r} "
            f"({self.elem_bytes}-byte elements, base aligned to {self.align_bytes}): "
            + " ".join(str(a) for a in self.accesses)
        )


# --------------------------------------------------------------------------


def _tree(groups) -> tuple:
    rounds: list[list] = []
    for g in groups:
        cur = list(g)
        r = 0
        while len(cur) > 1:
            if len(rounds) <= r:
                rounds.append([])
            rounds[r] += [(cur[i], cur[i + 1]) for i in range(0, len(cur) - 1, 2)]
            cur = cur[::2]
            r += 1
    return tuple(tuple(r) for r in rounds)


def reduction_plan(o: Ownership, axis: int) -> ReductionPlan:
    """Plan the reduction of fragment ownership ``o`` along logical ``axis``.

    >>> p = reduction_plan(Ownership.wgmma_accumulator(16), axis=1)
    >>> p.shuffle_masks, len(p.groups), p.groups[0]
    ((1, 2), 2, (0, 1, 4, 5))
    """
    what = "reduction_plan"
    if type(axis) is not int or not 0 <= axis < o.rank:
        raise ValueError(f"{what}: axis must be in range({o.rank}), got {axis!r}")
    if not is_complete(o):
        raise ValueError(
            f"{what}: {ownership_name(o)} does not own every coordinate; a reduction needs all values"
        )
    idx = index_table(o)
    T, V = idx.shape
    rshape = tuple(1 if i == axis else s for i, s in enumerate(o.shape))
    inner = prefix_strides(o.shape)[axis]
    extent = o.shape[axis]
    hi = idx // inner
    ax = hi % extent
    kidx = idx - hi * inner + (hi // extent) * inner  # index in the reduced shape
    # local groups (from thread 0), checked uniform over threads
    k0 = kidx[0]
    keys, first = np.unique(k0, return_index=True)
    order = np.argsort(first, kind="stable")
    keys = keys[order]
    groups = tuple(tuple(int(v) for v in np.flatnonzero(k0 == key)) for key in keys)
    reps = np.array([g[0] for g in groups], dtype=np.int64)
    rep_of = np.empty(V, dtype=np.int64)
    for g in groups:
        rep_of[list(g)] = g[0]
    if not np.array_equal(kidx, kidx[:, rep_of]):
        t = int(np.flatnonzero((kidx != kidx[:, rep_of]).any(axis=1))[0])
        raise ValueError(
            f"{what}: threads of {ownership_name(o)} group their slots differently along axis {axis} "
            f"(thread {t} differs from thread 0)"
        )
    R = kidx[:, reps]
    Rs = np.sort(R, axis=1)
    if (Rs[:, 1:] == Rs[:, :-1]).any():
        t = int(np.flatnonzero((Rs[:, 1:] == Rs[:, :-1]).any(axis=1))[0])
        raise ValueError(
            f"{what}: thread {t} of {ownership_name(o)} holds one kept coordinate in two slot groups"
        )
    # lane bits that vary along the axis
    masks = []
    tt = np.arange(T)
    for b in range(5):
        m = 1 << b
        partner = tt ^ m
        if partner.max() >= T:
            continue
        if not np.array_equal(R[partner], R):
            continue
        if np.array_equal(ax[partner], ax):
            continue  # a replication bit: the partner holds the same values
        masks.append(m)
    span = [0]
    for m in masks:
        span = span + [s | m for s in span]
    for gi, g in enumerate(groups):
        A = ax[:, list(g)]
        gathered = np.concatenate([A[tt ^ s] for s in span], axis=1)
        if gathered.shape[1] == extent:
            # each axis coordinate exactly once per thread
            flat = (gathered + (tt * extent)[:, None]).ravel()
            cnt = np.bincount(flat, minlength=T * extent).reshape(T, extent)
            bad = np.flatnonzero((cnt != 1).any(axis=1))
            if bad.size == 0:
                continue
            t = int(bad[0])
        else:
            t = 0
        # diagnose on the first failing thread
        key = R[t, gi]
        owners = np.flatnonzero((kidx == key).any(axis=1))
        warps = sorted({int(w) for w in owners // WARP})
        in_warp = owners[owners // WARP == t // WARP]
        have = np.unique(ax[in_warp][kidx[in_warp] == key])
        if have.size < extent and len(warps) > 1:
            raise ValueError(
                f"{what}: axis {axis} of {ownership_name(o)} spans warps: the values of kept "
                f"coordinate {int(key)} are held by warps {warps}; a warp shuffle cannot "
                "combine them"
            )
        raise ValueError(
            f"{what}: the owners of kept coordinate {int(key)} in {ownership_name(o)} are not "
            f"combined exactly once by XOR shuffles over lane bits (masks {masks}); "
            "values are replicated or lanes do not vary by whole bits"
        )
    rname = f"{ownership_name(o)}.reduce(axis={axis})"
    result = fit_ownership(R, rshape, rname, what)
    return ReductionPlan(o, axis, groups, _tree(groups), tuple(masks), result)


def broadcast_plan(full: Ownership, reduced: Ownership | None = None, axis: int = 1) -> BroadcastPlan:
    """Which slot of ``reduced`` (default: the result of
    ``reduction_plan(full, axis)``) feeds each slot of ``full``.

    >>> o = Ownership.wgmma_accumulator(16)
    >>> broadcast_plan(o, axis=1).sources
    (0, 0, 1, 1, 0, 0, 1, 1)
    """
    what = "broadcast_plan"
    if type(axis) is not int or not 0 <= axis < full.rank:
        raise ValueError(f"{what}: axis must be in range({full.rank}), got {axis!r}")
    if reduced is None:
        reduced = reduction_plan(full, axis).result
    rshape = tuple(1 if i == axis else s for i, s in enumerate(full.shape))
    if reduced.shape != rshape:
        raise ValueError(
            f"{what}: reduced shape {fmt(reduced.shape)} must be {fmt(rshape)} "
            f"({fmt(full.shape)} with extent 1 on axis {axis})"
        )
    if reduced.threads != full.threads:
        raise ValueError(f"{what}: {ownership_name(reduced)} and {ownership_name(full)} have different thread counts")
    tab = ownership_table(full)
    rpre = prefix_strides(rshape)
    kidx = np.zeros(tab.shape[:2], dtype=np.int64)
    for i in range(full.rank):
        if i != axis:
            kidx += tab[:, :, i] * rpre[i]
    ridx = index_table(reduced)
    return BroadcastPlan(reduced, full, axis, _select(ridx, kidx, reduced, full, what))


def _select(src_idx, dst_idx, src, dst, what) -> tuple:
    """For each dst slot, the src slot (same in every thread) holding the
    same index in the same thread."""
    T = dst_idx.shape[0]
    pos0 = {}
    for u, key in enumerate(src_idx[0].tolist()):
        pos0.setdefault(key, u)
    sources = []
    for key in dst_idx[0].tolist():
        if key not in pos0:
            raise ValueError(
                f"{what}: values would have to move between threads: thread 0 of "
                f"{ownership_name(dst)} needs index {key}, which thread 0 of {ownership_name(src)} does not hold"
            )
        sources.append(pos0[key])
    sources_a = np.array(sources, dtype=np.int64)
    got = src_idx[:, sources_a] if len(sources) else np.zeros((T, 0), dtype=np.int64)
    bad = np.argwhere(got != dst_idx)
    if bad.size:
        t, v = (int(x) for x in bad[0])
        key = int(dst_idx[t, v])
        if (src_idx[t] == key).any():
            raise ValueError(
                f"{what}: thread {t} keeps index {key} of {ownership_name(dst)} slot {v} in a different "
                f"slot of {ownership_name(src)} than thread 0; register selection must be uniform"
            )
        raise ValueError(
            f"{what}: values would have to move between threads: thread {t} of {ownership_name(dst)} "
            f"needs index {key} (slot {v}), which it does not hold in {ownership_name(src)}"
        )
    return tuple(sources)


def relayout_plan(src: Ownership, dst: Ownership) -> RelayoutPlan:
    """Register permutation within each thread turning ``src`` into ``dst``;
    ``ValueError`` when values would have to move between threads.

    >>> from tylo.layouts import Layout
    >>> a = Ownership.local((4, 8), axis=1)
    >>> b = Ownership((4, 8), Layout((4, (2, 4)), (1, (16, 4))))
    >>> relayout_plan(a, b).sources
    (0, 4, 1, 5, 2, 6, 3, 7)
    """
    what = "relayout_plan"
    if src.shape != dst.shape:
        raise ValueError(f"{what}: shapes {fmt(src.shape)} and {fmt(dst.shape)} differ")
    if src.threads != dst.threads:
        raise ValueError(
            f"{what}: {ownership_name(src)} has {src.threads} threads, {ownership_name(dst)} has {dst.threads}"
        )
    return RelayoutPlan(src, dst, _select(index_table(src), index_table(dst), src, dst, what))


def vector_access_plan(
    o: Ownership,
    storage: Any,
    elem_bytes: int,
    align_bytes: int = 16,
    widths: tuple = (16, 8, 4),
) -> VectorAccessPlan:
    """Group each thread's slots into contiguous, aligned accesses (widest
    first); the plan is the same for every thread by construction (a width is
    used only when it is valid in all threads), leftovers are single-element
    accesses.  ``storage`` maps logical coordinates to element offsets from a
    base aligned to ``align_bytes``.

    >>> from tylo.layouts import Layout
    >>> o = Ownership.local((4, 8), axis=1)
    >>> str(vector_access_plan(o, Layout((4, 8), (8, 1)), 4).accesses[0])
    '16B[0,1,2,3]'
    """
    what = "vector_access_plan"
    if type(elem_bytes) is not int or elem_bytes <= 0:
        raise ValueError(f"{what}: elem_bytes must be a positive int, got {elem_bytes!r}")
    if type(align_bytes) is not int or align_bytes <= 0 or align_bytes & (align_bytes - 1):
        raise ValueError(f"{what}: align_bytes must be a power of two, got {align_bytes!r}")
    if not getattr(storage, "is_static", False):
        raise ValueError(f"{what}: storage must be a static layout or view, got {storage!r}")
    ext = offsets_table(storage)
    if tuple(ext.shape) != tuple(o.shape):
        raise ValueError(
            f"{what}: storage extents {tuple(ext.shape)} differ from the fragment shape {fmt(o.shape)}"
        )
    tab = ownership_table(o)
    off = ext[tuple(tab[:, :, i] for i in range(o.rank))]  # [T, V]
    T, V = off.shape
    ws = [w for w in sorted(widths, reverse=True) if w > elem_bytes and w % elem_bytes == 0 and align_bytes % w == 0]
    order = sorted(range(V), key=lambda v: (int(off[0, v]), v))
    covered = [False] * V
    by_off: dict[int, list[int]] = {}
    for v in order:
        by_off.setdefault(int(off[0, v]), []).append(v)
    accesses = []
    for s0 in order:
        if covered[s0]:
            continue
        o0 = int(off[0, s0])
        chosen = None
        for w in ws:
            n = w // elem_bytes
            cand = [s0]
            for k in range(1, n):
                nxt = next((v for v in by_off.get(o0 + k, ()) if not covered[v] and v not in cand), None)
                if nxt is None:
                    break
                cand.append(nxt)
            if len(cand) < n:
                continue
            blk = off[:, cand]
            if not np.array_equal(blk - blk[:, :1], np.broadcast_to(np.arange(n), blk.shape)):
                continue
            if ((blk[:, 0] * elem_bytes) % w).any():
                continue
            chosen = (tuple(cand), w)
            break
        if chosen is None:
            chosen = ((s0,), elem_bytes)
        for v in chosen[0]:
            covered[v] = True
        accesses.append(VectorAccess(*chosen))
    return VectorAccessPlan(o, storage, elem_bytes, align_bytes, tuple(accesses))

