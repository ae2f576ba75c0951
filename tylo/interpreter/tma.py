"""Semantics of the TMA bulk tensor copies (``nv.tma.*``), PTX ISA 9.7.9.25 (cp.async.bulk.tensor,
commit_group, wait_group, prefetch.tensormap).

The tensor map is a TMA binding (``prepare_tma(plan, numpy_array)``) passed as a kernel
parameter; its address (``ptr.to_int`` of the parameter) finds it. A box is ``plan.outer`` rows of
one swizzle row each (``plan.inner`` elements), at coordinates given innermost first.

* Load: completes asynchronously (the TMA engine, ``machine.AsyncOp``); then the box is in shared
  memory, each 16-byte chunk at its address XOR the swizzle of the address bits 7.. (the hardware
  swizzle on absolute shared addresses, ``tylo.ir.nv.tma.hardware_swizzle``), elements past the
  bounds (or before 0) zero; and the mbarrier at the same address in each destination CTA
  (the multicast mask's CTAs, else the issuer's) receives ``complete_tx`` of the box's bytes.
* Store: reads the box from shared memory when it completes and writes the elements inside the
  outer and batch bounds; along the inner axis whole 16-byte chunks are written once a chunk
  starts inside the bound (what the H200 does, docs/hopper.md), never past the array.
  ``commit`` closes the thread's bulk group; ``wait n`` completes all but the newest ``n`` groups
  and retires their shared reads.
"""
from __future__ import annotations

import numpy as np

from .core import Pointer
from .errors import InterpreterError
from .machine import AsyncOp
from .mbarrier import barrier_at
from .registry import THREAD_SEMANTICS

__all__ = ["binding_at"]


def binding_at(m, address, op):
    b = m.blobs.get(int(address))
    if b is None or not hasattr(b, "plan") or not hasattr(b, "array"):
        raise InterpreterError(f"{op.loc}: {op.name}: the tensor map operand is not a TMA binding parameter")
    if not isinstance(b.array, np.ndarray):
        raise InterpreterError(f"{op.loc}: the interpreter needs TMA bindings of numpy arrays (prepare_tma(plan, "
                               f"numpy_array)), got one of {type(b.array).__name__}")
    return b


def _geometry(b, coords, op):
    plan = b.plan
    arr = b.array
    bounds = tuple(b.bounds)
    inner_bound, outer_bound = bounds[plan.axis], bounds[1 - plan.axis]
    if len(coords) != arr.ndim:
        raise InterpreterError(f"{op.loc}: a rank-{len(coords)} TMA copy through a {arr.ndim}-D binding")
    c_in, c_out = int(coords[0]), int(coords[1])
    batch = int(coords[2]) if len(coords) == 3 else None
    rows = c_out + np.arange(plan.outer)
    cols = c_in + np.arange(plan.inner)
    return plan, arr, rows, cols, inner_bound, outer_bound, batch, (bounds[2] if batch is not None else None)


def swizzled_chunks(base, rows, row_bytes, swizzle):
    """Shared byte address of each 16-byte chunk ``[r, j]`` of a box written at ``base``."""
    a = base + np.arange(rows)[:, None] * row_bytes + np.arange(row_bytes // 16)[None, :] * 16
    return a ^ ((a >> 3) & ((swizzle // 16 - 1) << 4))


def _load(th, op, ins, t):
    m = th.m
    rank = op.attrs["rank"]
    tmap, dst, coords = ins[0], ins[1], ins[2:2 + rank]
    bar_ptr = ins[2 + rank]
    mask = int(ins[3 + rank]) if op.attrs.get("multicast") else None
    b = binding_at(m, tmap, op)
    m.check_grid_waited(th, "a TMA load", op)
    plan, arr, rows, cols, ib, ob, batch, bb = _geometry(b, coords, op)
    base = dst.offset * dst.elem.itemsize
    row_bytes = plan.inner * plan.elem_bytes
    nbytes = plan.outer * row_bytes
    if base % 128:
        raise InterpreterError(f"{op.loc}: a TMA load's shared destination must be 128-byte aligned, got {base}")
    if mask is None:
        targets = [th.cta]
    else:
        targets = [c for c in m.cluster_ctas(th.cta) if mask >> c.rank & 1]
        if not targets:
            raise InterpreterError(f"{op.loc}: a multicast TMA load with an empty CTA mask")
    bars = [barrier_at(th, _in_cta(bar_ptr, c), op) for c in targets]
    for bar in bars:
        bar.check_async_visible(op)

    def effect():
        box = np.zeros((plan.outer, plan.inner), arr.dtype)
        rv = (rows >= 0) & (rows < ob)
        cv = (cols >= 0) & (cols < ib)
        if rv.any() and cv.any() and (batch is None or 0 <= batch < bb):
            src = arr if batch is None else arr[batch]
            box[np.ix_(rv, cv)] = src[np.ix_(rows[rv], cols[cv])]
        data = box.view(np.uint8).reshape(plan.outer, row_bytes // 16, 16)
        addr = swizzled_chunks(base, plan.outer, row_bytes, plan.swizzle)
        for cta, bar in zip(targets, bars):
            cta.check_alive("a TMA load", op.loc)
            cta.shadow.async_write_done(m, aop)
            raw = cta.smem.view(np.ndarray)
            raw[addr[..., None] + np.arange(16)] = data
            bar.complete_tx(nbytes, aop)

    aop = AsyncOp("TMA load", op, th.cta, effect, lo=base, hi=base + nbytes)
    for cta in targets:
        cta.shadow.check_write_ordered(m, th, base, base + nbytes, "the TMA load", op.loc)
        cta.shadow.async_write_issued(aop)
    m.issue(aop)


def _in_cta(ptr, cta):
    return Pointer(cta.smem, ptr.offset, ptr.elem)


def _store(th, op, ins, t):
    m = th.m
    rank = op.attrs["rank"]
    tmap, src, coords = ins[0], ins[1], ins[2:2 + rank]
    b = binding_at(m, tmap, op)
    m.check_grid_waited(th, "a TMA store", op)
    plan, arr, rows, cols, ib, ob, batch, bb = _geometry(b, coords, op)
    if (rows < 0).any() or (cols < 0).any() or (batch is not None and batch < 0):
        raise InterpreterError(f"{op.loc}: a TMA store at a negative coordinate (the H200 faults, docs/hopper.md)")
    base = src.offset * src.elem.itemsize
    row_bytes = plan.inner * plan.elem_bytes
    nbytes = plan.outer * row_bytes
    cta = th.cta

    def effect():
        addr = swizzled_chunks(base, plan.outer, row_bytes, plan.swizzle)
        raw = cta.smem.view(np.ndarray)
        data = raw[addr[..., None] + np.arange(16)].reshape(plan.outer, row_bytes)
        box = data.copy().view(arr.dtype).reshape(plan.outer, plan.inner)
        per_chunk = 16 // plan.elem_bytes
        inner_limit = min(arr.shape[-1], -(-ib // per_chunk) * per_chunk)   # whole chunks past the bound
        rv = rows < min(ob, arr.shape[-2])
        cv = cols < inner_limit
        if batch is not None and batch >= min(bb, arr.shape[0]):
            return
        if rv.any() and cv.any():
            dst = arr if batch is None else arr[batch]
            dst[np.ix_(rows[rv], cols[cv])] = box[np.ix_(rv, cv)]

    aop = AsyncOp("TMA store", op, cta, effect, lo=base, hi=base + nbytes)
    cta.shadow.async_read(m, aop, [th])
    th.bulk_open.append(aop)
    m.issue(aop)


def _commit(th, op, ins, t):
    if th.bulk_open:
        th.bulk_groups.append(th.bulk_open)
    th.bulk_open = []


def _wait(th, op, ins, t):
    n = op.attrs["n"]
    while len(th.bulk_groups) > n:
        for aop in th.bulk_groups.pop(0):
            th.m.complete(aop)
            aop.cta.shadow.retire_read(aop, [th])   # later writes must be ordered after this wait


def _prefetch(th, op, ins, t):
    binding_at(th.m, ins[0], op)


THREAD_SEMANTICS.add("nv.tma.load", _load)
THREAD_SEMANTICS.add("nv.tma.store", _store)
THREAD_SEMANTICS.add("nv.tma.commit", _commit)
THREAD_SEMANTICS.add("nv.tma.wait", _wait)
THREAD_SEMANTICS.add("nv.tma.prefetch", _prefetch)
