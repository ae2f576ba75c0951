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

Ordering across threads (PTX ISA 9.7.16.6, memory consistency of tcgen05): ``ld``, ``st`` and
``mma`` are *asynchronous* tcgen05 operations, ordered with another thread's tcgen05 operations
only by the canonical pattern "async op; ``tcgen05.fence::before_thread_sync``; thread sync
(barrier, mbarrier arrive -> wait, or a tcgen05.commit's arrive -> wait);
``tcgen05.fence::after_thread_sync``; async op". The checker models both fences:

* ``fence::after_thread_sync`` snapshots the thread's vector clock and its observed MMAs
  (``tc_clock``, ``tc_seen``); the thread's later ``ld``/``st``/``mma`` are judged against that
  snapshot, so a sync with no fence after it orders nothing for them;
* ``fence::before_thread_sync`` records an epoch (``tc_fences``); a thread's ``ld``/``st`` at epoch
  ``e`` counts as published to a reader that synchronised with its epoch ``E`` only when a fence
  lies in ``[e, E)`` (after the access, before the release).

The synchronous ones (``alloc``, ``dealloc``, ``commit``, ``wait::*``) need no fence on their own
side: ``dealloc`` is judged with the thread's plain clock, but every other thread's ``ld``/``st`` of
the columns must be published to it as above, and every MMA on them observed. The cells each
thread last stored or loaded are kept, so an ``mma`` that reads cells another thread stored, or
overwrites cells another thread loaded or stored, is checked the same way.
"""
from __future__ import annotations

import bisect

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
        self.stores_in_flight = {}   # warp -> [(op, lanes, columns)] of its tcgen05.st not yet waited for
        # per cell: the thread (vector-clock slot) whose tcgen05.st last wrote it (-1: none since an MMA
        # wrote it), that thread's epoch at the store, and the store op
        self.store_thread = np.full((LANES, COLUMNS), -1, np.int64)
        self.store_epoch = np.zeros((LANES, COLUMNS), np.int64)
        self.store_op = {}           # thread slot -> its last tcgen05.st (for the report)
        # likewise for tcgen05.ld (an MMA overwriting cells another thread loaded)
        self.load_thread = np.full((LANES, COLUMNS), -1, np.int64)
        self.load_epoch = np.zeros((LANES, COLUMNS), np.int64)
        self.load_op = {}
        self.last_access = {}        # thread slot -> (epoch, op) of its last tcgen05.ld/st (dealloc)

    def owned(self, col0, ncols, op):
        for start, (n, _) in self.allocated.items():
            if start <= col0 and col0 + ncols <= start + n:
                return
        self.cta.m.hazard("TMEM not allocated", f"{op.name} accesses TMEM columns {col0}..{col0 + ncols - 1}, "
                          f"which are not allocated (before tcgen05.alloc or after dealloc)", [("the access", op.loc)])

    def _unobserved(self, thread, ids, op, what, verb):
        """Report the first MMA of ``ids`` whose commit ``thread`` has not observed for its tcgen05 ops."""
        for i in np.unique(ids[ids != 0]):
            i = int(i)
            if i in thread.tc_seen:
                continue
            a = self.mma[i]
            if i in thread.seen:
                self.cta.m.hazard("TMEM access not fenced after the thread sync",
                                  f"a warp {verb} TMEM columns a tcgen05.mma {what}; the thread observed its commit "
                                  f"but issued no tcgen05.fence::after_thread_sync between that wait and the access "
                                  f"(PTX ISA 9.7.16.6)", [("the MMA", a.op.loc), ("the access", op.loc)])
            return a
        return None

    def check_mma_results(self, thread, col0, ncols, op):
        a = self._unobserved(thread, self.writer[col0:col0 + ncols], op, "writes", "reads")
        if a is not None:
            self.cta.m.hazard("TMEM read of an MMA in flight",
                              "a warp reads TMEM columns a tcgen05.mma writes, without a completed wait on the "
                              "mbarrier its tcgen05.commit signals", [("the MMA", a.op.loc), ("the read", op.loc)])

    def check_store_after_mma(self, thread, col0, ncols, op):
        """A tcgen05.st into columns an MMA reads (A from TMEM) or writes, before the storing thread observed
        that MMA's commit: the MMA may still read the old values or overwrite the new ones."""
        ids = np.concatenate([self.writer[col0:col0 + ncols], self.reader[col0:col0 + ncols]])
        a = self._unobserved(thread, ids, op, "reads or writes", "stores into")
        if a is not None:
            self.cta.m.hazard("TMEM store while an MMA in flight uses it",
                              "a warp stores into TMEM columns a tcgen05.mma reads or writes, without a completed "
                              "wait on the mbarrier its tcgen05.commit signals", [("the MMA", a.op.loc),
                                                                                   ("the store", op.loc)])

    def unpublished(self, writer, epoch, clock):
        """Why an async tcgen05 access of thread slot ``writer`` at ``epoch`` is not ordered before a reader
        whose clock is ``clock`` ("sync": no barrier or observed arrive from it since; "fence": no
        tcgen05.fence::before_thread_sync between the access and the release), or None."""
        if clock[writer] < epoch:
            return "sync"
        fences = self.cta.m.thread_by_index(writer).tc_fences
        k = bisect.bisect_left(fences, epoch)
        if k == len(fences) or fences[k] >= clock[writer]:
            return "fence"
        return None

    def _check_cells(self, thread, owners, epochs, ops, lanes, col0, ncols, op, what, access):
        if thread.clock is None:
            return
        writers = owners[lanes, col0:col0 + ncols]
        mask = (writers >= 0) & (writers != thread.index)
        if not mask.any():
            return
        ep = epochs[lanes, col0:col0 + ncols][mask]
        ws = writers[mask]
        for w in np.unique(ws):
            w = int(w)
            why = self.unpublished(w, int(ep[ws == w].max()), thread.tc_clock)
            if why is None:
                continue
            other = ops.get(w)
            sides = [(f"the {access}", other.loc if other is not None else op.loc), ("the tcgen05.mma", op.loc)]
            if why == "sync" and self.unpublished(w, int(ep[ws == w].max()), thread.clock) is None:
                self.cta.m.hazard("TMEM access not fenced after the thread sync",
                                  f"a tcgen05.mma {what} TMEM cells another thread accessed with {access}; the "
                                  f"issuer synchronised with that thread but issued no "
                                  f"tcgen05.fence::after_thread_sync between the sync and the MMA (PTX ISA 9.7.16.6)",
                                  sides)
            if why == "sync":
                self.cta.m.hazard(f"TMEM {'store' if access == 'tcgen05.st' else 'load'} not synchronised with "
                                  f"the MMA", f"a tcgen05.mma {what} TMEM cells another thread accessed with "
                                  f"{access}, with no barrier or observed mbarrier arrive from that thread in between "
                                  f"(followed by tcgen05.fence::after_thread_sync)", sides)
            self.cta.m.hazard("TMEM access not fenced before the thread sync",
                              f"a tcgen05.mma {what} TMEM cells another thread accessed with {access}; that thread "
                              f"synchronised with the issuer but issued no tcgen05.fence::before_thread_sync between "
                              f"the access and the sync (PTX ISA 9.7.16.6)", sides)

    def check_thread_stores(self, thread, lanes, col0, ncols, op, what):
        """A tcgen05.mma by ``thread`` touches cells other threads wrote with tcgen05.st: each store must be
        published to the issuer (fence::before_thread_sync, then a barrier or an mbarrier arrive the issuer
        observed, then fence::after_thread_sync on the issuer's side)."""
        self._check_cells(thread, self.store_thread, self.store_epoch, self.store_op, lanes, col0, ncols, op, what,
                          "tcgen05.st")

    def check_thread_loads(self, thread, lanes, col0, ncols, op):
        """A tcgen05.mma by ``thread`` overwrites cells other threads read with tcgen05.ld: as for stores."""
        self._check_cells(thread, self.load_thread, self.load_epoch, self.load_op, lanes, col0, ncols, op,
                          "overwrites", "tcgen05.ld")

    def record_access(self, owner, rows, cols, op, load):
        epoch = owner.clock[owner.index]
        if load:
            self.load_thread[rows, cols] = owner.index
            self.load_epoch[rows, cols] = epoch
            self.load_op[owner.index] = op
        else:
            self.store_thread[rows, cols] = owner.index
            self.store_epoch[rows, cols] = epoch
            self.store_op[owner.index] = op
        self.last_access[owner.index] = (int(epoch), op)

    def check_dealloc(self, thread, warp_slots, col0, ncols, op):
        """``dealloc`` (synchronous) by ``thread``'s warp: every other thread's tcgen05.ld/st must be published
        to it, and every MMA on the columns observed."""
        if thread.clock is None:
            return
        for w, (epoch, access) in self.last_access.items():
            if w in warp_slots:
                continue
            why = self.unpublished(w, epoch, thread.clock)
            if why is not None:
                self.cta.m.hazard("TMEM deallocated before an access was ordered",
                                  f"tcgen05.dealloc while another thread's {access.name} may still be in flight: "
                                  + ("no barrier or observed arrive from that thread since" if why == "sync" else
                                     "it issued no tcgen05.fence::before_thread_sync between the access and the "
                                     "sync (PTX ISA 9.7.16.6)"), [(f"the {access.name}", access.loc),
                                                                   ("the tcgen05.dealloc", op.loc)])
        ids = np.concatenate([self.writer[col0:col0 + ncols], self.reader[col0:col0 + ncols]])
        for i in np.unique(ids[ids != 0]):
            if int(i) not in thread.seen:
                a = self.mma[int(i)]
                self.cta.m.hazard("TMEM deallocated while an MMA in flight uses it",
                                  "tcgen05.dealloc of columns a tcgen05.mma reads or writes, without a completed wait "
                                  "on the mbarrier its tcgen05.commit signals", [("the MMA", a.op.loc),
                                                                                ("the tcgen05.dealloc", op.loc)])

    def mma_writes(self, lanes, col0, ncols):
        """The cells an MMA writes are the MMA's now (its commit orders later readers)."""
        self.store_thread[lanes, col0:col0 + ncols] = -1
        self.load_thread[lanes, col0:col0 + ncols] = -1


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
    th = machine.current
    tm.check_dealloc(th, {t.index for t in _warp_threads(machine, lanes)}, col, n, op)
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
    warp = {t.linear % 32: t for t in _warp_threads(machine, lanes)}
    for t, cells in where.items():
        owner = warp.get(t)
        if owner is not None and owner.clock is not None and cells:
            tm.record_access(owner, [lane0 + ln for ln, _ in cells], [col0 + c for _, c in cells], op, True)
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
        if owner is not None and owner.clock is not None and cells:
            tm.record_access(owner, [lane0 + ln for ln, _ in cells], [col0 + c for _, c in cells], op, False)
        vals = lanes[t][1:]
        bits = np.array(vals, src_t).view(np.uint32) if src_t != np.int32 else \
            np.array([int(v) & 0xFFFFFFFF for v in vals], np.uint32)
        for (ln, c), b in zip(cells, bits):
            tm.cells[lane0 + ln, col0 + c] = b
        tm.writer[col0:col0 + ncols] = 0
    tm.stores_in_flight.setdefault((th.cta.rank, th.linear // 32), []).append(
        (op, range(lane0, lane0 + 32), range(col0, col0 + ncols)))
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
