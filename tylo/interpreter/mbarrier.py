"""Semantics of mbarriers (``nv.mbarrier.*``), PTX ISA 9.7.13.15.

An mbarrier (``MBarrier``, keyed by its CTA and shared byte address) has a phase, a pending
arrival count and a transaction count. A phase completes when both are zero; then the pending
count is reset to the expected count and the phase advances. ``expect_tx`` raises the
transaction count, a TMA load's ``complete_tx`` lowers it (it may go below zero first).
``try_wait.parity P`` is true once the phase of parity ``P`` has completed, i.e. while the
current phase's parity differs from ``P`` (a fresh barrier counts its "previous" phase, of parity
1, as complete). Arrivals release (the arriving thread's clock joins the phase), a successful
wait acquires (PTX ISA 8 memory model: mbarrier arrive has release, test/try_wait acquire
semantics).

Hazards: an arrival or wait on a barrier never initialised (or initialised by another thread with
no barrier ordering the init before the use), a re-init while a phase has
arrivals or transactions outstanding, a thread arriving twice in one phase of a barrier that
expects several arrivals (over-arrival), and a thread waiting on a phase it has already observed
(a wrong parity).
"""
from __future__ import annotations

import numpy as np

from .core import Pointer, Suspend
from .errors import InterpreterError
from .registry import THREAD_SEMANTICS

__all__ = ["MBarrier", "barrier_at"]


class MBarrier:
    def __init__(self, cta, address, count, op):
        self.cta, self.address = cta, address
        self.count = count
        self.pending = count
        self.tx = 0
        self.phase = 0
        self.arrivers = set()
        self.clock = np.zeros(len(cta.m._threads), np.int64)
        self.seen = set()
        self.completed = {}      # phase -> (clock, seen) of that phase
        self.init_op = op
        self.init_thread = cta.m.current
        self.init_epoch = int(self.init_thread.clock[self.init_thread.index]) if self.init_thread else -1

    def check_async_visible(self, op):
        """PTX ISA 9.7.13.15.x: an mbarrier.init is visible to the async proxy (a TMA load's
        complete_tx) only after a fence (fence.mbarrier_init or fence.proxy.async) by the thread that
        initialised it."""
        th = self.init_thread
        if th is not None and th.init_fenced < self.init_epoch:
            self.cta.m.hazard("mbarrier init not fenced for the async proxy",
                              "a TMA load signals an mbarrier whose initialisation no fence.mbarrier_init or "
                              "fence.proxy.async has made visible to the async proxy",
                              [("the init", self.init_op.loc), ("the TMA load", op.loc)])

    def arrive(self, thread, op, count=1):
        m = self.cta.m
        if thread is not None:
            if thread.index in self.arrivers and self.count > 1:
                m.hazard("mbarrier over-arrival",
                         f"a thread arrives twice in phase {self.phase} of an mbarrier expecting {self.count} "
                         f"arrivals", [("the barrier's init", self.init_op.loc), ("the second arrival", op.loc)])
            self.arrivers.add(thread.index)
            self.clock = np.maximum(self.clock, thread.clock)
            self.seen |= thread.seen
            thread.clock[thread.index] += 1
        self.pending -= count
        self._check_phase()

    def expect_tx(self, nbytes):
        self.tx += nbytes

    def complete_tx(self, nbytes, aop):
        self.tx -= nbytes
        self.seen.add(aop.id)
        self._check_phase()

    def _check_phase(self):
        if self.pending < 0:
            self.cta.m.hazard("mbarrier over-arrival", f"more arrivals than the {self.count} expected in a phase",
                              [("the barrier's init", self.init_op.loc)])
        if self.pending <= 0 and self.tx == 0:
            self.completed[self.phase] = (self.clock, self.seen)
            self.completed.pop(self.phase - 2, None)
            self.phase += 1
            self.pending = self.count
            self.arrivers = set()
            self.clock = np.zeros_like(self.clock)
            self.seen = set()

    def test(self, thread, parity, op, blocking):
        """``try_wait.parity``: True (and acquire) once the phase of ``parity`` has completed."""
        if (self.phase & 1) == (parity & 1):
            return False
        k = self.phase - 1
        if k >= 0:
            clock, seen = self.completed.get(k, (None, set()))
            if clock is not None:
                np.maximum(thread.clock, clock, out=thread.clock)
            thread.seen |= seen
            if blocking:
                last = thread.observed.get(id(self), -2)
                if last == k:
                    self.cta.m.hazard("mbarrier wrong parity",
                                      f"a thread waits with parity {parity & 1} for phase {k}, which it has already "
                                      f"observed: the wait does not wait for the next phase",
                                      [("the barrier's init", self.init_op.loc), ("the wait", op.loc)])
                thread.observed[id(self)] = k
        return True


def barrier_at(thread, ptr, op, init=False) -> MBarrier:
    cta = ptr.buffer.cta
    if cta is None:
        raise InterpreterError(f"{op.loc}: an mbarrier must be in shared memory")
    address = ptr.offset * ptr.elem.itemsize
    if address % 8:
        raise InterpreterError(f"{op.loc}: an mbarrier needs 8-byte alignment, address {address}")
    bar = cta.mbarriers.get(address)
    if bar is None and not init:
        cta.m.hazard("mbarrier not initialised", f"{op.name} on shared address {address}, which no mbarrier.init "
                     f"initialised", [("the use", op.loc)])
        raise InterpreterError(f"{op.loc}: {op.name} on an uninitialised mbarrier")
    if not init and bar.init_thread is not None and thread is not bar.init_thread \
            and thread.clock[bar.init_thread.index] < bar.init_epoch:
        # PTX ISA 9.7.13.15 with the memory consistency model: mbarrier.init is a write of the barrier's
        # shared bytes, so another thread's operation on it must be ordered after the init (a CTA or
        # cluster barrier between them), whichever thread the scheduler happens to run first
        cta.m.hazard("mbarrier not initialised",
                     f"{op.name} on an mbarrier that another thread initialised with no barrier ordering the init "
                     f"before this use", [("the init", bar.init_op.loc), ("the use", op.loc)])
    return bar


def _init(th, op, ins, t):
    ptr, count = ins
    if not 0 < count < (1 << 20):
        raise InterpreterError(f"{op.loc}: mbarrier.init count {count} is outside 1 .. 2^20 - 1")
    old = barrier_at(th, ptr, op, init=True)
    if old is not None and (old.pending != old.count or old.tx != 0):
        th.m.hazard("mbarrier re-initialised in use",
                    f"mbarrier.init while phase {old.phase} has {old.count - old.pending} arrivals and {old.tx} "
                    f"transaction bytes outstanding", [("the first init", old.init_op.loc), ("the re-init", op.loc)])
    address = ptr.offset * ptr.elem.itemsize
    ptr.buffer.cta.mbarriers[address] = MBarrier(ptr.buffer.cta, address, int(count), op)


def _arrive(th, op, ins, t):
    bar = barrier_at(th, ins[0], op)
    state = bar.phase
    bar.arrive(th, op)
    return state


def _arrive_cluster(th, op, ins, t):
    """``mapa`` + remote arrive: the barrier at the same shared offset in CTA ``rank`` of the cluster."""
    ptr, rank = ins[0], int(ins[1])
    peers = th.m.cluster_ctas(th.cta)
    cta = next((c for c in peers if c.rank == rank), None)
    if cta is None:
        raise InterpreterError(f"{op.loc}: mbarrier_arrive_cluster to CTA rank {rank}, outside the cluster of "
                               f"{len(peers)} CTA(s)")
    if ptr.buffer.cta is None:
        raise InterpreterError(f"{op.loc}: an mbarrier must be in shared memory")
    cta.check_alive("a remote mbarrier arrive", op.loc)
    barrier_at(th, Pointer(cta.smem, ptr.offset, ptr.elem), op).arrive(th, op)


def _arrive_expect_tx(th, op, ins, t):
    bar = barrier_at(th, ins[0], op)
    state = bar.phase
    bar.expect_tx(int(ins[1]))
    bar.arrive(th, op)
    return state


def _expect_tx(th, op, ins, t):
    barrier_at(th, ins[0], op).expect_tx(int(ins[1]))


SPIN_LIMIT = 100_000   # try_wait failures in a row before a spinning thread counts as hung


def _try_wait(th, op, ins, t):
    bar = barrier_at(th, ins[0], op)
    if bar.test(th, int(ins[1]), op, False):
        th.spins = 0
        return True
    # false: the thread yields to the scheduler (the hardware's bounded wait), so that a spin loop lets
    # the other threads and the asynchronous units progress
    th.spins = getattr(th, "spins", 0) + 1
    if th.spins > SPIN_LIMIT:
        th.m.hazard("deadlock", f"a thread has spun on mbarrier.try_wait {SPIN_LIMIT} times without the phase "
                    f"completing", [("the try_wait", op.loc), ("the barrier's init", bar.init_op.loc)])
    return Suspend(("wait", lambda: False, op))


def _wait(th, op, ins, t):
    bar = barrier_at(th, ins[0], op)
    parity = int(ins[1])
    return Suspend(("wait", lambda: True if bar.test(th, parity, op, True) else None, op))


THREAD_SEMANTICS.add("nv.mbarrier.init", _init)
THREAD_SEMANTICS.add("nv.mbarrier.arrive", _arrive)
THREAD_SEMANTICS.add("nv.mbarrier.arrive_cluster", _arrive_cluster)
THREAD_SEMANTICS.add("nv.mbarrier.arrive_expect_tx", _arrive_expect_tx)
THREAD_SEMANTICS.add("nv.mbarrier.expect_tx", _expect_tx)
THREAD_SEMANTICS.add("nv.mbarrier.try_wait", _try_wait)
THREAD_SEMANTICS.add("nv.mbarrier.wait", _wait)
