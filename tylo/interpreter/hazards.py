"""The hazard checker: a shadow of each CTA's shared memory and the rules it enforces.

What each thread has synchronised with is tracked two ways: ``thread.seen`` holds the
asynchronous writes (TMA loads) whose completion it has observed through an mbarrier phase or a
barrier, and ``thread.clock`` is a vector clock over the cluster's threads (joined at barriers,
released by mbarrier arrivals and acquired by waits). Per shared byte the shadow keeps the TMA
load that last wrote it, and the thread and clock of the last generic-proxy write. In-flight
asynchronous reads (WGMMA operands, TMA stores) and writes (TMA loads) are kept as byte ranges
until their issuer has waited for them.

The rules, from the PTX ISA (section numbers of ISA 8.x):

* 9.7.9.25.4 (cp.async.bulk.tensor) with 9.7.13.15 (mbarrier, complete-tx): the bytes a TMA load
  writes are visible to a thread only after it observed the completion of the mbarrier phase the
  load signals. A thread (or a WGMMA it issues) reading them earlier is a hazard.
* 9.7.15.7 (wgmma.wait_group): the shared operands of a wgmma.mma_async may be read until the
  wait_group that covers it; writing them earlier is a hazard. Likewise 9.7.9.25.5
  (cp.async.bulk.wait_group.read) for the shared source of a TMA store.
* The same rules with the memory consistency model's ordering (8.x: mbarrier arrive releases, a
  completed wait acquires; bar.sync joins): a write over operand bytes of a WGMMA that its issuers
  have waited for must also be ordered after that wait_group. A write whose writer has not
  synchronised with any issuing thread *after* its wait_group (e.g. the stage was released by an
  arrive placed before the wait) races with the read however the interleaving falls, so it is
  reported at the write's issue, not only when the bytes land during the read.
* 9.7.13.4.x / memory consistency model (proxies, 8.6): generic-proxy writes are visible to the
  async proxy (TMA store, WGMMA operands) only after a fence.proxy.async by the writing thread,
  and after the reader synchronised with the writer.
* memory consistency model (data races, 8.x): a thread's generic read of shared bytes another
  warp's thread wrote, or its write over bytes another warp's thread last read, with no barrier or
  observed mbarrier arrive between the two (vector clocks), is a race. Atomics and accesses within
  one warp (which communicate without a barrier in warp-synchronous code) are not checked; only the
  last reader of each byte is kept.
"""
from __future__ import annotations

import numpy as np

__all__ = ["SharedShadow", "SharedRead", "join_clocks"]


def join_clocks(threads, released=(), silent=()) -> None:
    """A barrier among ``threads``: each gets the join of their clocks and of their observed
    asynchronous writes, then starts a new epoch of its own. ``released``: ``(clock, seen)`` that
    threads which only arrived (``bar.arrive``) published when they arrived; they add to the join but
    acquire nothing (PTX ISA 9.7.13.1: bar.arrive does not wait). ``silent``: those of ``threads`` that
    arrived relaxed (``barrier.cluster.arrive.relaxed``): they acquire the join but add nothing to it."""
    if not threads:
        return
    sources = [th.clock for th in threads if th not in silent] + [c for c, _ in released]
    joined = np.maximum.reduce(sources) if sources else None      # once: a cluster has hundreds of threads
    seen = set().union(*(th.seen for th in threads if th not in silent), *(s for _, s in released))
    for th in threads:
        th.clock = th.clock.copy() if joined is None else np.maximum(joined, th.clock)
        th.clock[th.index] += 1
        th.seen = seen | th.seen


def _warp_keys(m):
    """(CTA, warp) of each thread of the running cluster, as one integer per cluster index."""
    keys = getattr(m, "_warp_key_cache", None)
    if keys is None or keys[0] is not m._threads:
        keys = (m._threads, np.array([th.cta.rank * 4096 + th.linear // 32 for th in m._threads], np.int64))
        m._warp_key_cache = keys
    return keys[1]


def _overlaps(items, lo, hi):
    return [a for a in items if a.lo < hi and lo < a.hi]


class SharedRead:
    """An in-flight read of shared bytes ``[lo, hi)`` by an MMA unit (WGMMA, tcgen05.mma), which the
    hazard checker holds against writers until its issuer's wait ``retired`` it."""

    def __init__(self, kind, op, lo, hi):
        self.kind, self.op, self.lo, self.hi = kind, op, lo, hi
        self.retired = False
        self.waited = None       # {thread index: its epoch at the wait that retired the read}, if known


class SharedShadow:
    def __init__(self, nbytes: int):
        self.tma_writer = np.zeros(nbytes, np.int64)      # AsyncOp id of the TMA load that last wrote
        self.gen_writer = np.full(nbytes, -1, np.int64)   # cluster index of the last generic writer
        self.gen_clock = np.zeros(nbytes, np.int64)       # that writer's epoch at the write
        self.gen_reader = np.full(nbytes, -1, np.int64)   # cluster index of the last generic reader
        self.read_clock = np.zeros(nbytes, np.int64)      # that reader's epoch at the read
        self.readers = []        # in-flight async reads (AsyncOp with lo, hi), until retired
        self.waited_reads = []   # retired reads with ``waited`` epochs: later writers must be ordered after
        self.writes = []         # TMA loads issued and not completed
        self.ops = {}            # id -> AsyncOp of the TMA loads that wrote here

    # -- generic-proxy accesses by threads ---------------------------------------------------------
    def thread_access(self, m, thread, op, lo, hi, write):
        loc = getattr(op, "loc", "?")
        for a in _overlaps(self.writes, lo, hi):
            m.hazard("read of a TMA load in flight" if not write else "write over a TMA load in flight",
                     f"a thread {'writes' if write else 'reads'} shared bytes [{lo}, {hi}) that a TMA load is "
                     f"still writing (no completed wait on its mbarrier phase)",
                     [("the TMA load", a.op.loc), ("the access", loc)])
        if getattr(op, "name", "") != "nv.atomic":
            self._check_race(m, thread, lo, hi, write, loc)
        if write:
            self.check_write_ordered(m, thread, lo, hi, "the write", loc)
            thread.last_write_loc = loc
            self.tma_writer[lo:hi] = 0
            self.gen_writer[lo:hi] = thread.index
            self.gen_clock[lo:hi] = thread.clock[thread.index]
            return
        self.gen_reader[lo:hi] = thread.index
        self.read_clock[lo:hi] = thread.clock[thread.index]
        thread.last_read_loc = loc
        self.check_observed(m, [thread], lo, hi, "the read", loc)

    def _check_race(self, m, thread, lo, hi, write, loc):
        """A generic access racing with another warp's last write (or, for a write, last read) of the bytes."""
        warp = _warp_keys(m)
        for owners, clocks, what in ((self.gen_writer, self.gen_clock, "write"),) + \
                (((self.gen_reader, self.read_clock, "read"),) if write else ()):
            who = owners[lo:hi]
            mask = (who >= 0) & (warp[np.maximum(who, 0)] != warp[thread.index])
            if not mask.any():
                continue
            late = thread.clock[who[mask]] < clocks[lo:hi][mask]
            if late.any():
                w = int(who[mask][late.argmax()])
                other = m.thread_by_index(w)
                where = getattr(other, f"last_{what}_loc", "?")
                m.hazard(f"shared {'write' if write else 'read'} racing with another warp's {what}",
                         f"a thread {'writes' if write else 'reads'} shared bytes [{lo}, {hi}) that thread "
                         f"{other.linear} {'wrote' if what == 'write' else 'read'} with no barrier or observed "
                         f"mbarrier arrive between the two", [(f"the {what}", where), ("the access", loc)])

    def check_observed(self, m, threads, lo, hi, what, loc):
        ids = self.tma_writer[lo:hi]
        if not ids.any():
            return
        for i in np.unique(ids[ids != 0]):
            i = int(i)
            if any(i not in th.seen for th in threads):
                a = self.ops[i]
                m.hazard("read of a TMA load not waited for",
                         f"shared bytes [{lo}, {hi}) written by a TMA load are read without a completed wait on "
                         f"the mbarrier phase it signals", [("the TMA load", a.op.loc), (what, loc)])

    # -- the async proxy ------------------------------------------------------------------------------
    def async_read(self, m, aop, threads):
        """An asynchronous unit will read ``[aop.lo, aop.hi)`` for ``threads`` (WGMMA, TMA store)."""
        lo, hi, loc = aop.lo, aop.hi, aop.op.loc
        for a in _overlaps(self.writes, lo, hi):
            m.hazard("read of a TMA load in flight",
                     f"a {aop.kind} reads shared bytes [{lo}, {hi}) that a TMA load is still writing",
                     [("the TMA load", a.op.loc), (f"the {aop.kind}", loc)])
        self.check_observed(m, threads, lo, hi, f"the {aop.kind}", loc)
        writers = self.gen_writer[lo:hi]
        mask = writers >= 0
        if mask.any():
            clocks = self.gen_clock[lo:hi][mask]
            for w in np.unique(writers[mask]):
                w = int(w)
                newest = int(clocks[writers[mask] == w].max())
                writer = m.thread_by_index(w)
                if writer.fenced < newest:
                    m.hazard("generic write not fenced for the async proxy",
                             f"a {aop.kind} reads shared memory that thread {writer.linear} wrote without a "
                             f"fence.proxy.async after the write", [("the write", m.last_write_loc(w)),
                                                                     (f"the {aop.kind}", loc)])
                if any(th.index != w and th.clock[w] < newest for th in threads):
                    m.hazard("async read of unsynchronised writes",
                             f"a {aop.kind} reads shared memory that thread {writer.linear} wrote with no barrier "
                             f"between the write and the issue", [("the write", m.last_write_loc(w)),
                                                                  (f"the {aop.kind}", loc)])
        self.readers.append(aop)

    def retire_read(self, aop, waiters=None):
        """``aop``'s issuer has waited for it; ``waiters``: the threads whose wait retired it (their
        epochs now order later writes, ``check_write_ordered``)."""
        aop.retired = True
        if aop in self.readers:
            self.readers.remove(aop)
        if waiters:
            aop.waited = {th.index: int(th.clock[th.index]) for th in waiters}
            # a newer wait of the same threads over the same bytes orders everything the older one did
            self.waited_reads = [r for r in self.waited_reads
                                 if not (r.lo == aop.lo and r.hi == aop.hi and r.waited.keys() == aop.waited.keys())]
            self.waited_reads.append(aop)

    def check_write_ordered(self, m, writer, lo, hi, what, loc):
        """A write of ``[lo, hi)`` by ``writer`` (a thread's store, or a TMA load it issues) must be
        ordered after the wait of every asynchronous read of those bytes: a read not yet waited for is a
        hazard (checked when a TMA load is issued, not only when its bytes land); for a waited one,
        ``writer`` must have synchronised with a waiting thread at or after its wait (PTX ISA 9.7.15.7
        wgmma.wait_group; memory consistency model: mbarrier arrive/wait release/acquire, 9.7.13.15)."""
        for a in _overlaps(self.readers, lo, hi):
            m.hazard("stage overwritten while read",
                     f"shared bytes [{lo}, {hi}) that a {a.kind} still reads (its issuer has not waited for it) are "
                     f"overwritten", [(f"the {a.kind}", a.op.loc), (what, loc)])
        keep = []
        for r in self.waited_reads:
            if not (r.lo < hi and lo < r.hi):
                keep.append(r)
                continue
            if not any(writer.clock[t] >= e for t, e in r.waited.items()):
                m.hazard("stage released before its read completed",
                         f"shared bytes [{lo}, {hi}) are overwritten by a writer not ordered after the wait for the "
                         f"{r.kind} that reads them (no arrive after that wait reaches the writer)",
                         [(f"the {r.kind}", r.op.loc), (what, loc)])
                keep.append(r)
            elif not (lo <= r.lo and r.hi <= hi):
                keep.append(r)          # partly overwritten: the rest still needs ordering
        self.waited_reads = keep

    def async_write_issued(self, aop):
        self.writes.append(aop)

    def async_write_done(self, m, aop):
        """A TMA load has written ``[aop.lo, aop.hi)``."""
        lo, hi = aop.lo, aop.hi
        for a in _overlaps(self.readers, lo, hi):
            m.hazard("stage overwritten while read",
                     f"a TMA load overwrites shared bytes [{lo}, {hi}) that a {a.kind} still reads (its issuer has "
                     f"not waited for it)", [(f"the {a.kind}", a.op.loc), ("the TMA load", aop.op.loc)])
        if aop in self.writes:
            self.writes.remove(aop)
        self.tma_writer[lo:hi] = aop.id
        self.gen_writer[lo:hi] = -1
        self.ops[aop.id] = aop
