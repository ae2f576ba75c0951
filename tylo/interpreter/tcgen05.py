"""Semantics of the tcgen05 MMA ops (``nv.tcgen05.mma``, ``commit``, ``commit_multicast``, the thread-sync
fences), PTX ISA 9.7.16.9 (tcgen05.mma), 9.7.16.10 (commit), 9.7.16.6 (fences).

* ``mma`` (one thread issues it): the instruction descriptor is decoded from its bits
  (``TCGEN05_IDESC_FIELDS``: M, N, the A/B types of the kind, transposes, negations, D type), the
  shared operands from the tcgen05 shared-memory descriptors (``TCGEN05_SMEM_DESCRIPTOR_FIELDS``,
  the same canonical K-/MN-major layouts as wgmma, swizzled on absolute addresses), A from TMEM
  when ``a_tmem`` (row ``i`` in lane ``i``, 16-bit elements two per column, low half first).
  M = 128 with ``cta_group::1``: row ``i`` of D in TMEM lane ``i``, column ``j`` at the D address'
  column + ``j`` (f32). D = A B^T (+ D with enable_input_d), in float64 rounded once to f32.
  It is asynchronous and in order (``machine.AsyncOp``): the operands are read when it completes.
* ``commit``: an asynchronous arrive-one on the mbarrier once every earlier MMA of the CTA has
  completed (``commit_multicast``: on the mbarrier at the same address in each CTA of the mask);
  the waiters then observe the MMAs (their TMEM results and the end of their shared reads).
* ``fence_before`` / ``fence_after`` (``tcgen05.fence::{before,after}_thread_sync``): no value
  effect (the interpreter executes tcgen05 ops in issue order); they tell the hazard checker
  which thread syncs order the thread's asynchronous tcgen05 ops (``tmem.py``, PTX ISA 9.7.16.6):
  ``after`` snapshots the clock and observed MMAs the thread's later ld/st/mma are judged by,
  ``before`` marks the epoch from which the thread's earlier ld/st count as published.
"""
from __future__ import annotations

import numpy as np

from ..ir import types as T
from ..ir.nv.bitfields import unpack_fields
from ..ir.nv.tcgen05 import TCGEN05_IDESC_FIELDS, TCGEN05_SMEM_DESCRIPTOR_FIELDS
from .core import Pointer, numpy_dtype
from .errors import InterpreterError
from .hazards import SharedRead
from .machine import AsyncOp
from .mbarrier import barrier_at
from .operand_layout import operand_addresses
from .registry import THREAD_SEMANTICS
from .tmem import tmem_of

__all__ = ["decode_tcgen05_operand"]

_SWIZZLE = {0: 0, 2: 128, 4: 64, 6: 32}
_TYPES = {"f16": {0: T.f16, 1: T.bf16}, "tf32": {2: T.f32}, "f8f6f4": {0: T.f8e4m3, 1: T.f8e5m2},
          "i8": {0: T.u8, 1: T.i8}}


def decode_tcgen05_operand(desc: int, rows: int, k: int, elem_bytes: int, mn_major: bool) -> np.ndarray:
    """Byte address of element ``[mn, k]`` of an operand from a tcgen05 shared-memory descriptor."""
    f = unpack_fields(TCGEN05_SMEM_DESCRIPTOR_FIELDS, int(desc))
    if f["version"] != 1 or f["lbo_mode"] or f["base_offset"]:
        raise InterpreterError(f"tcgen05 descriptor: version {f['version']}, lbo_mode {f['lbo_mode']}, base offset "
                               f"{f['base_offset']}: only version 1, relative LBO, base offset 0 are modelled")
    if f["swizzle"] not in _SWIZZLE:
        raise InterpreterError(f"tcgen05 descriptor: swizzle mode {f['swizzle']} is not modelled")
    return operand_addresses(f["start_address"] << 4, f["leading_byte_offset"] << 4, f["stride_byte_offset"] << 4,
                             _SWIZZLE[f["swizzle"]], rows, k, elem_bytes, mn_major)


def _elements(raw, addr, dtype):
    eb = dtype.itemsize
    if addr.min() < 0 or addr.max() + eb > raw.size:
        raise InterpreterError("tcgen05.mma: an operand descriptor addresses past the CTA's shared memory")
    data = np.ascontiguousarray(raw[addr[..., None] + np.arange(eb)])
    return data.view(numpy_dtype(dtype))[..., 0].astype(np.float64)


_K = {"f16": 16, "tf32": 8, "f8f6f4": 32, "i8": 32}


def _check_stores_waited(m, tm, op, lane0, lanes, col0, cols):
    """PTX ISA 9.7.16.8.5: a tcgen05.st is complete only after tcgen05.wait::st; an MMA reading (A) or
    accumulating into / overwriting (D) cells a store not waited for may still write is a hazard."""
    for stores in tm.stores_in_flight.values():
        for st, st_lanes, st_cols in stores:
            if (st_lanes.start < lane0 + lanes and lane0 < st_lanes.stop and st_cols.start < col0 + cols
                    and col0 < st_cols.stop):
                m.hazard("TMEM operand stored without wait::st",
                         "a tcgen05.mma uses TMEM cells (A, or the accumulator) while a tcgen05.st that no "
                         "tcgen05.wait::st completed may still write them",
                         [("the tcgen05.st", st.loc), ("the tcgen05.mma", op.loc)])


def _mma(th, op, ins, t):
    d_addr, a, b_desc, idesc, enable = ins
    kind = op.attrs["kind"]
    f = unpack_fields(TCGEN05_IDESC_FIELDS, int(idesc))
    M, N, K = f["m_dim"] << 4, f["n_dim"] << 3, _K[kind]
    if M != 128 or op.attrs["cta_group"] != 1:
        raise InterpreterError(f"{op.loc}: tcgen05.mma with M = {M}, cta_group::{op.attrs['cta_group']} is not "
                               f"modelled (M = 128, cta_group::1 is)")
    if f["sparse"] or f["d_type"] != 1:
        raise InterpreterError(f"{op.loc}: tcgen05.mma: only dense MMAs into f32 are modelled")
    a_t, b_t = _TYPES[kind].get(f["a_type"]), _TYPES[kind].get(f["b_type"])
    if a_t is None or b_t is None:
        raise InterpreterError(f"{op.loc}: tcgen05.mma.kind::{kind}: A/B type codes {f['a_type']}/{f['b_type']}")
    cta = th.cta
    tm = tmem_of(cta)
    m = th.m
    raw = cta.smem.view(np.ndarray)
    d_lane, d_col = int(d_addr) >> 16, int(d_addr) & 0xFFFF
    if d_lane:
        raise InterpreterError(f"{op.loc}: tcgen05.mma with M = 128 writes lanes 0..127: the D address's lane is "
                               f"{d_lane}")
    tm.owned(d_col, N, op)
    tm.check_thread_stores(th, slice(0, M), d_col, N, op, "accumulates into" if enable else "overwrites")
    _check_stores_waited(m, tm, op, 0, M, d_col, N)
    tm.check_thread_loads(th, slice(0, M), d_col, N, op)
    b_addr = decode_tcgen05_operand(b_desc, N, K, b_t.itemsize, bool(f["transpose_b"]))
    reads = [SharedRead("tcgen05.mma", op, int(b_addr.min()), int(b_addr.max()) + b_t.itemsize)]
    if op.attrs["a_tmem"]:
        a_lane, a_col = int(a) >> 16, int(a) & 0xFFFF
        per = 4 // a_t.itemsize
        tm.owned(a_col, K // per, op)
        tm.check_thread_stores(th, slice(a_lane, a_lane + M), a_col, K // per, op, "reads A from")
        _check_stores_waited(m, tm, op, a_lane, M, a_col, K // per)
        a_addr = None
    else:
        a_addr = decode_tcgen05_operand(a, M, K, a_t.itemsize, bool(f["transpose_a"]))
        reads.append(SharedRead("tcgen05.mma", op, int(a_addr.min()), int(a_addr.max()) + a_t.itemsize))
    for r in reads:
        cta.shadow.async_read(m, r, [th])
    chain = cta.state.get("tcgen05_last")
    sign_a = -1.0 if f["negate_a"] else 1.0
    sign_b = -1.0 if f["negate_b"] else 1.0

    def effect():
        if a_addr is None:
            words = tm.cells[a_lane:a_lane + M, a_col:a_col + K // per]
            av = np.ascontiguousarray(words).view(numpy_dtype(a_t)).astype(np.float64)
        else:
            av = _elements(raw, a_addr, a_t)
        bv = _elements(raw, b_addr, b_t)
        dv = (sign_a * av) @ (sign_b * bv).T
        cells = tm.cells[0:M, d_col:d_col + N]
        if enable:
            dv = dv + cells.view(np.float32).astype(np.float64)
        tm.cells[0:M, d_col:d_col + N] = dv.astype(np.float32).view(np.uint32)
        tm.writer[d_col:d_col + N] = aop.id

    aop = AsyncOp("tcgen05.mma", op, cta, effect, after=chain)
    aop.reads = reads
    tm.mma[aop.id] = aop
    tm.writer[d_col:d_col + N] = aop.id       # in flight from the issue on
    tm.mma_writes(slice(0, M), d_col, N)
    if a_addr is None:
        tm.reader[a_col:a_col + K // per] = aop.id
    cta.state["tcgen05_last"] = aop
    cta.state.setdefault("tcgen05_issued", []).append(aop)
    m.issue(aop)


def _commit(th, op, ins, t, mask=None):
    cta = th.cta
    m = th.m
    # PTX ISA 9.7.16.10: the commit tracks the completion of *all* prior async tcgen05 operations of the thread
    covered = list(cta.state.get("tcgen05_issued", []))
    targets = [cta] if mask is None else [c for c in m.cluster_ctas(cta) if int(mask) >> c.rank & 1]
    ptr = ins[0]
    bars = [barrier_at(th, Pointer(c.smem, ptr.offset, ptr.elem), op) for c in targets]
    clock = th.clock.copy()
    seen = set(th.seen)

    def effect():
        for a in covered:
            for r in a.reads:
                if not r.retired:
                    r.retired = True
                    a.cta.shadow.retire_read(r)
        for bar in bars:
            bar.seen |= seen | {a.id for a in covered}
            np.maximum(bar.clock, clock, out=bar.clock)
            bar.arrive(None, op)

    m.issue(AsyncOp("tcgen05.commit", op, cta, effect, after=cta.state.get("tcgen05_last")))


def _commit_multicast(th, op, ins, t):
    return _commit(th, op, ins, t, mask=ins[1])


THREAD_SEMANTICS.add("nv.tcgen05.mma", _mma)
THREAD_SEMANTICS.add("nv.tcgen05.commit", _commit)
THREAD_SEMANTICS.add("nv.tcgen05.commit_multicast", _commit_multicast)
def _fence_before(th, op, ins, t):
    if th.clock is not None:
        th.tc_fences.append(int(th.clock[th.index]))
        th.clock[th.index] += 1     # accesses after the fence belong to a later epoch


def _fence_after(th, op, ins, t):
    if th.clock is not None:
        th.tc_clock = th.clock.copy()
        th.tc_seen = set(th.seen)


THREAD_SEMANTICS.add("nv.tcgen05.fence_before", _fence_before)
THREAD_SEMANTICS.add("nv.tcgen05.fence_after", _fence_after)
