"""Semantics of the warp copies (``nv.ldmatrix``, ``nv.stmatrix``, ``nv.cp_async*``), from the PTX ISA text.

ldmatrix: lane ``8j + r`` gives the address of row ``r`` of matrix ``j`` (eight 16-bit elements);
lane ``l`` receives, in register ``j``, the elements of matrix ``j`` at row ``l // 4``, columns
``2 (l % 4)`` and ``+1`` (low half first), or with ``.trans`` at rows ``2 (l % 4)`` and ``+1`` of
column ``l // 4``. stmatrix is the inverse. cp.async is modelled as an immediate copy (a stronger
ordering than the hardware's), zero-filling past ``src_bytes``. st.async is an asynchronous unit's
write into the shared memory of CTA ``rank`` of the cluster, completing with ``complete_tx`` of its
bytes on that CTA's barrier (as a TMA load into that CTA does).
"""
from __future__ import annotations

import struct

import numpy as np

from .core import InterpreterError, Pointer, load_bits, numpy_dtype, store_bits
from .machine import AsyncOp
from .mbarrier import barrier_at
from .registry import THREAD_SEMANTICS, WARP_SEMANTICS


def _row_addresses(lanes, num):
    rows = {}
    for j in range(num):
        for r in range(8):
            lane = 8 * j + r
            if lane not in lanes:
                raise InterpreterError(f"ldmatrix/stmatrix: lane {lane} (row {r} of matrix {j}) is not active")
            rows[j, r] = lanes[lane][0]
    return rows


def _element_position(lane, e, trans):
    g, t = lane >> 2, lane % 4
    return (2 * t + e, g) if trans else (g, 2 * t + e)


def _ldmatrix(machine, op, lanes):
    num, trans = op.attrs["num"], op.attrs["trans"]
    rows = _row_addresses(lanes, num)
    mats = {(j, r): struct.unpack("<8H", load_bits(rows[j, r], 16)) for j in range(num) for r in range(8)}
    out = {}
    for lane in lanes:
        regs = []
        for j in range(num):
            halves = []
            for e in (0, 1):
                row, col = _element_position(lane, e, trans)
                halves.append(mats[j, row][col])
            regs.append(halves[0] | (halves[1] << 16))
        out[lane] = tuple(regs)
    return out


def _stmatrix(machine, op, lanes):
    num, trans = op.attrs["num"], op.attrs["trans"]
    rows = _row_addresses(lanes, num)
    mats = {(j, r): [None] * 8 for j in range(num) for r in range(8)}
    for lane, (_ptr, *regs) in lanes.items():
        for j, word in enumerate(regs):
            for e in (0, 1):
                row, col = _element_position(lane, e, trans)
                mats[j, row][col] = (int(word) >> (16 * e)) & 0xFFFF
    for (j, r), vals in mats.items():
        store_bits(rows[j, r], struct.pack("<8H", *vals))
    return {lane: () for lane in lanes}


def _cp_async(thread, op, ins, t):
    dst, src, *rest = ins
    nbytes = op.attrs["nbytes"]
    valid = nbytes if not rest else int(rest[0])
    data = load_bits(src, valid) if valid else b""
    store_bits(dst, data + bytes(nbytes - valid))


def _st_async(th, op, ins, t):
    m = th.m
    dst, bar_ptr, rank, *values = ins
    rank = int(rank)
    peers = m.cluster_ctas(th.cta)
    cta = next((c for c in peers if c.rank == rank), None)
    if cta is None:
        raise InterpreterError(f"{op.loc}: store_remote to CTA rank {rank}, outside the cluster of {len(peers)} CTA(s)")
    if dst.buffer.cta is None or bar_ptr.buffer.cta is None:
        raise InterpreterError(f"{op.loc}: st.async needs a shared destination and a shared barrier")
    data = np.array(values, dtype=numpy_dtype(op.operands[3].type)).tobytes()
    lo = dst.offset * dst.elem.itemsize
    if lo % len(data):
        raise InterpreterError(f"{op.loc}: st.async of {len(data)} bytes at shared byte {lo}, not aligned to its size")
    if lo + len(data) > cta.smem.size:
        raise InterpreterError(f"{op.loc}: st.async past the end of CTA {rank}'s shared memory")
    bar = barrier_at(th, Pointer(cta.smem, bar_ptr.offset, bar_ptr.elem), op)
    bar.check_async_visible(op)

    def effect():
        cta.check_alive("a st.async", op.loc)
        cta.shadow.async_write_done(m, aop)
        cta.smem.view(np.ndarray)[lo:lo + len(data)] = np.frombuffer(data, np.uint8)
        bar.complete_tx(len(data), aop)

    aop = AsyncOp("st.async", op, th.cta, effect, lo=lo, hi=lo + len(data))
    cta.shadow.check_write_ordered(m, th, lo, lo + len(data), "the st.async", op.loc)
    cta.shadow.async_write_issued(aop)
    m.issue(aop)


WARP_SEMANTICS.add("nv.ldmatrix", _ldmatrix)
WARP_SEMANTICS.add("nv.stmatrix", _stmatrix)
THREAD_SEMANTICS.add("nv.cp_async", _cp_async)
THREAD_SEMANTICS.add("nv.st_async", _st_async)
THREAD_SEMANTICS.add("nv.cp_async.commit", lambda thread, op, ins, t: None)
THREAD_SEMANTICS.add("nv.cp_async.wait", lambda thread, op, ins, t: None)
