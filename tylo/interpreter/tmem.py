"""Semantics of tensor memory (``nv.tcgen05.{alloc,dealloc,relinquish_alloc_permit,ld,st,wait_ld,wait_st}``),
PTX ISA 9.7.16 (tcgen05): 9.7.16.7.1 (alloc/dealloc/relinquish), 9.7.16.8.3/4 (ld/st), 9.7.16.8.5 (wait).

TMEM is 128 lanes x 512 columns of 32-bit cells per CTA (``Tmem``); an address is ``lane << 16 |
column``. ``alloc`` (a warp collective) takes a power-of-two number of columns (32 .. 512) at the
lowest free column aligned to the size, and writes the address to shared memory; ``dealloc``
frees it; after ``relinquish_alloc_permit`` the CTA may not allocate again. ``ld``/``st`` move
``num`` repetitions of a data-path shape between TMEM and the warp's registers through
``TransferAtom.where``; warp ``w`` reaches lanes ``32 (w % 4) ..`` only. A loaded register is
pending (``PendingValue``) until ``wait::ld`` passes it through; a store counts as in flight for
``tcgen05.mma`` until ``wait::st``.

Hazards: an access to columns not allocated (before alloc or after dealloc), a register read
before ``wait::ld``, reading TMEM columns a ``tcgen05.mma`` writes before the thread observed
its commit, and TMEM still allocated when the CTA exits.
"""
from __future__ import annotations

import numpy as np

from ..ir.nv.tmem import ATOMS, COLUMNS, LANES
from .core import PendingValue, Pointer, numpy_dtype
from .errors import InterpreterError
from .machine import EXIT_HOOKS, AsyncOp
from .registry import WARP_SEMANTICS

__all__ = ["Tmem", "tmem_of"]


class Tmem:
    def __init__(self, cta):
        self.cta = cta
        self.cells = np.zeros((LANES, COLUMNS), np.uint32)
        self.allocated = {}          # first column -> (columns, op)
        self.relinquished = False
        self.writer = np.zeros(COLUMNS, np.int64)     # id of the tcgen05.mma that last wrote each column
        self.reader = np.zeros(COLUMNS, np.int64)     # id of the tcgen05.mma that last read each column (A)
        self.mma = {}                # id -> AsyncOp
        self.stores_in_flight = {}   # warp -> the tcgen05.st op not yet waited for
        # per cell: the thread (vector-clock slot) whose tcgen05.st last wrote it (-1: none since an MMA
        # wrote it), that thread's epoch at the store, and the store op
        self.store_thread = np.full((LANES, COLUMNS), -1, np.int64)
        self.store_epoch = np.zeros((LANES, COLUMNS), np.int64)
        self.store_op = {}           # thread slot -> its last tcgen05.st (for the report)

    def owned(self, col0, ncols, op):
        for start, (n, _) in self.allocated.items():
            if start <= col0 and col0 + ncols <= start + n:
                return
        self.cta.m.hazard("TMEM not allocated", f"{op.name} accesses TMEM columns {col0}..{col0 + ncols - 1}, "
                          f"which are not allocated (before tcgen05.alloc or after dealloc)", [("the access", op.loc)])

    def check_mma_results(self, thread, col0, ncols, op):
        ids = self.writer[col0:col0 + ncols]
        for i in np.unique(ids[ids != 0]):
            if int(i) not in thread.seen:
                a = self.mma[int(i)]
                self.cta.m.hazard("TMEM read of an MMA in flight",
                                  "a warp reads TMEM columns a tcgen05.mma writes, without a completed wait on the "
                                  "mbarrier its tcgen05.commit signals", [("the MMA", a.op.loc), ("the read", op.loc)])


    def check_thread_stores(self, thread, lanes, col0, ncols, op, what):
        """A tcgen05.mma by ``thread`` touches cells other threads wrote with tcgen05.st: each store must
        happen before the issue (the issuer's vector clock covers the storing thread's epoch at the
        store: a barrier, or an mbarrier arrive observed by the issuer's wait, in between)."""
        if thread.clock is None:
            return
        writers = self.store_thread[lanes, col0:col0 + ncols]
        mask = (writers >= 0) & (writers != thread.index)
        if not mask.any():
            return
        late = thread.clock[writers[mask]] < self.store_epoch[lanes, col0:col0 + ncols][mask]
        if late.any():
            st = self.store_op.get(int(writers[mask][late.argmax()]))
            self.cta.m.hazard("TMEM store not synchronised with the MMA",
                              f"a tcgen05.mma {what} TMEM cells another thread wrote with tcgen05.st, with no "
                              f"barrier or observed mbarrier arrive from that thread in between",
                              [("the tcgen05.st", st.loc if st is not None else op.loc), ("the tcgen05.mma", op.loc)])

    def check_store_after_mma(self, thread, col0, ncols, op):
        """A tcgen05.st into columns an MMA reads (A from TMEM) or writes, before the storing thread observed
        that MMA's commit: the MMA may still read the old values or overwrite the new ones."""
        ids = np.concatenate([self.writer[col0:col0 + ncols], self.reader[col0:col0 + ncols]])
        for i in np.unique(ids[ids != 0]):
            if int(i) not in thread.seen:
                a = self.mma[int(i)]
                self.cta.m.hazard("TMEM store while an MMA in flight uses it",
                                  "a warp stores into TMEM columns a tcgen05.mma reads or writes, without a completed "
                                  "wait on the mbarrier its tcgen05.commit signals", [("the MMA", a.op.loc),
                                                                                       ("the store", op.loc)])

    def mma_writes(self, lanes, col0, ncols):
        """The cells an MMA writes are the MMA's now (its commit orders later readers)."""
        self.store_thread[lanes, col0:col0 + ncols] = -1


def tmem_of(cta) -> Tmem:
    t = cta.state.get("tmem")
    if t is None:
        t = cta.state["tmem"] = Tmem(cta)
    return t


def _warp_threads(machine, lanes):
    th = machine.current
    base = th.linear - th.linear % 32
    return [t for t in th.cta.threads if base <= t.linear < base + 32 and (t.linear - base) in lanes]


def _alloc(machine, op, lanes):
    th = machine.current
    tm = tmem_of(th.cta)
    n = op.attrs["columns"]
    if n < 32 or n > COLUMNS or n & (n - 1):
        raise InterpreterError(f"{op.loc}: tcgen05.alloc of {n} columns: a power of two in 32..512")
    if op.attrs["cta_group"] != 1:
        raise InterpreterError(f"{op.loc}: tcgen05.alloc.cta_group::2 is not modelled")
    if tm.relinquished:
        raise InterpreterError(f"{op.loc}: tcgen05.alloc after tcgen05.relinquish_alloc_permit")
    used = np.zeros(COLUMNS, bool)
    for start, (cols, _) in tm.allocated.items():
        used[start:start + cols] = True
    for start in range(0, COLUMNS, n):
        if not used[start:start + n].any():
            break
    else:
        raise InterpreterError(f"{op.loc}: tcgen05.alloc of {n} columns: TMEM is full (the hardware would block)")
    tm.allocated[start] = (n, op)
    dst = lanes[min(lanes)][0]
    machine.store(Pointer(dst.buffer, dst.offset, dst.elem), np.uint32(start).astype(numpy_dtype(dst.elem)))
    return {lane: () for lane in lanes}


def _dealloc(machine, op, lanes):
    tm = tmem_of(machine.current.cta)
    addr = int(lanes[min(lanes)][0])
    col = addr & 0xFFFF
    n = op.attrs["columns"]
    if tm.allocated.get(col, (None,))[0] != n:
        raise InterpreterError(f"{op.loc}: tcgen05.dealloc of {n} columns at column {col}, which is not an "
                               f"allocation of that size")
    del tm.allocated[col]
    return {lane: () for lane in lanes}


def _relinquish(machine, op, lanes):
    tmem_of(machine.current.cta).relinquished = True
    return {lane: () for lane in lanes}


def _cells(op, lanes, warp):
    """(lane, column) of each thread's registers: {thread lane: [(tmem lane, column), ...]} and the columns."""
    atom = ATOMS[op.attrs["shape"]]
    num = op.attrs["num"]
    if op.attrs["pack"]:
        raise InterpreterError(f"{op.loc}: tcgen05.ld/st .pack::16b is not modelled")
    split = op.attrs.get("split") or 0
    addr = int(lanes[min(lanes)][0])
    lane0, col0 = addr >> 16, addr & 0xFFFF
    quarter = 32 * (warp % 4)
    if not quarter <= lane0 < quarter + 32:
        raise InterpreterError(f"{op.loc}: warp {warp} may access TMEM lanes {quarter}..{quarter + 31}, the "
                               f"address names lane {lane0} (PTX ISA 9.7.16.2.3)")
    regs = atom.regs * num
    where = {t: [atom.where(t, k, num, split) for k in range(regs)] for t in lanes}
    cols = [c for w in where.values() for _, c in w]
    return lane0, col0, where, max(cols) + 1 if cols else 0


def _ld(machine, op, lanes):
    th = machine.current
    tm = tmem_of(th.cta)
    lane0, col0, where, ncols = _cells(op, lanes, th.linear // 32)
    tm.owned(col0, ncols, op)
    tm.check_mma_results(th, col0, ncols, op)
    rt = numpy_dtype(op.results[0].type) if op.results else np.uint32
    token = AsyncOp("tcgen05.ld", op, th.cta, None)
    token.done = token.retired = False
    token.values = {}
    for t, cells in where.items():
        bits = np.array([tm.cells[lane0 + ln, col0 + c] for ln, c in cells], np.uint32)
        token.values[t] = tuple(bits.view(rt)) if rt != np.int32 else tuple(int(x) for x in bits.view(np.int32))
    machine.pending_values += 1
    return {t: tuple(PendingValue(token, t, k) for k in range(len(where[t]))) for t in lanes}


def _wait_ld(machine, op, lanes):
    out = {}
    for t, vals in lanes.items():
        res = []
        for x in vals:
            if type(x) is PendingValue and x.token.kind == "tcgen05.ld":
                if not x.token.retired:
                    x.token.retired = True
                    machine.pending_values -= 1
                res.append(x.token.values[x.thread][x.index])
            else:
                res.append(x)
        out[t] = tuple(res)
    return out


def _st(machine, op, lanes):
    th = machine.current
    tm = tmem_of(th.cta)
    lane0, col0, where, ncols = _cells(op, lanes, th.linear // 32)
    tm.owned(col0, ncols, op)
    tm.check_store_after_mma(th, col0, ncols, op)
    src_t = numpy_dtype(op.operands[1].type) if len(op.operands) > 1 else np.uint32
    warp = {t.linear % 32: t for t in _warp_threads(machine, lanes)}
    for t, cells in where.items():
        owner = warp.get(t)
        if owner is not None and owner.clock is not None:
            rows = [lane0 + ln for ln, _ in cells]
            cols = [col0 + c for _, c in cells]
            tm.store_thread[rows, cols] = owner.index
            tm.store_epoch[rows, cols] = owner.clock[owner.index]
            tm.store_op[owner.index] = op
        vals = lanes[t][1:]
        bits = np.array(vals, src_t).view(np.uint32) if src_t != np.int32 else \
            np.array([int(v) & 0xFFFFFFFF for v in vals], np.uint32)
        for (ln, c), b in zip(cells, bits):
            tm.cells[lane0 + ln, col0 + c] = b
        tm.writer[col0:col0 + ncols] = 0
    tm.stores_in_flight[(th.cta.rank, th.linear // 32)] = op
    return {t: () for t in lanes}


def _wait_st(machine, op, lanes):
    th = machine.current
    tmem_of(th.cta).stores_in_flight.pop((th.cta.rank, th.linear // 32), None)
    return {t: () for t in lanes}


def _at_exit(machine):
    for cta in machine.ctas:
        tm = cta.state.get("tmem")
        if tm is not None and tm.allocated:
            start, (n, op) = next(iter(tm.allocated.items()))
            machine.hazard("TMEM not deallocated", f"the CTA exits with {n} TMEM columns at column {start} still "
                           f"allocated (PTX ISA 9.7.16.7.1: every allocation must be freed)",
                           [("the tcgen05.alloc", op.loc)])


WARP_SEMANTICS.add("nv.tcgen05.alloc", _alloc)
WARP_SEMANTICS.add("nv.tcgen05.dealloc", _dealloc)
WARP_SEMANTICS.add("nv.tcgen05.relinquish_alloc_permit", _relinquish)
WARP_SEMANTICS.add("nv.tcgen05.ld", _ld)
WARP_SEMANTICS.add("nv.tcgen05.wait_ld", _wait_ld)
WARP_SEMANTICS.add("nv.tcgen05.st", _st)
WARP_SEMANTICS.add("nv.tcgen05.wait_st", _wait_st)
EXIT_HOOKS.append(_at_exit)
