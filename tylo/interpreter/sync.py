"""Semantics of named and cluster barriers, elect and setmaxnreg (PTX ISA 9.7.13.1 bar/barrier,
9.7.13.2 barrier.cluster, 9.7.12.x elect.sync, 9.7.17.1 setmaxnreg).

* ``bar.sync id, count`` waits until ``count`` threads (a multiple of 32) have arrived at barrier
  ``id`` (``bar.arrive`` counts without waiting); threads of one phase giving different counts
  are a hazard. The scheduler (``machine.py``) serves it.
* ``barrier.cluster.arrive`` / ``wait``: the wait returns once every live thread of the cluster
  arrived in the current phase; a ``.relaxed`` arrival publishes none of the thread's accesses (its
  thread still acquires the others' at the wait), except, after a ``fence.mbarrier_init``, what
  preceded that fence (the fence's release pattern, ``fence.py``).
* ``elect.sync``: true in the lowest live lane of the warp.
* ``setmaxnreg``: checked (24 .. 256, a multiple of 8), no other effect.
* ``nv.wait_at_least``: returns true once the i32 it watches is at least the value in serial-number order (their
  wrapping difference is non-negative); a bounded one (``polls`` > 0) returns false when every live thread is
  blocked (its loads would run out before anything changed). The CTAs that write it must run
  alongside the waiter: ``run`` runs every CTA of a grid at once when its kernel waits so (``machine.py``), and
  a wait no CTA can end is reported as a deadlock.
* ``griddepcontrol.wait`` / ``.launch_dependents``: the interpreter runs one launch after another, so the grids a
  launch depends on have completed before it starts; but in a kernel that waits, a thread's access to global
  memory (loads, stores, atomics, TMA loads and stores) before its own wait, or before a barrier that orders it
  after another thread's wait, is a hazard: on the GPU it may race with the kernel before it
  (``Machine.check_grid_waited``).
"""
from __future__ import annotations

from .core import Suspend
from .errors import InterpreterError
from .registry import THREAD_SEMANTICS, WARP_SEMANTICS

__all__ = []


def _named_barrier(th, op, ins, t):
    bid, count = int(ins[0]), int(ins[1])
    if not 0 <= bid < 16:
        raise InterpreterError(f"{op.loc}: barrier id {bid} is outside 0..15")
    if op.attrs["kind"] == "arrive":
        th.m.named_arrive(th, bid, count, op)
        return None
    return Suspend(("named", bid, count, op))


def _elect(machine, op, lanes):
    first = min(lanes)
    return {lane: (lane == first,) for lane in lanes}


def _setmaxnreg(th, op, ins, t):
    n = op.attrs["count"]
    if not 24 <= n <= 256 or n % 8:
        raise InterpreterError(f"{op.loc}: setmaxnreg.{op.attrs['action']} {n}: the count must be a multiple of 8 "
                               f"in 24..256 (PTX ISA 9.7.17.1)")


def _cluster_barrier(th, op, ins, t):
    m = th.m
    if len(m.cluster_ctas(th.cta)) != len(m.ctas):
        raise InterpreterError(f"{op.loc}: a cluster barrier in a grid run whole (the kernel waits on a counter, "
                               f"wait_at_least) is not modelled: the interpreter's cluster barrier spans the CTAs "
                               f"running together")
    if op.attrs["kind"] != "wait":
        if th in m.cluster_arrived:
            raise InterpreterError(f"{op.loc}: barrier.cluster.arrive twice without a wait")
        th.cluster_phase = m.cluster_phase
        m.cluster_arrived.add(th)
        if op.attrs["kind"] == "arrive_relaxed":
            m.cluster_relaxed.add(th)
            if th.init_release is not None:      # a fence.mbarrier_init before it
                m.cluster_released.append(th.init_release)
        th.init_release = None
        return None
    phase = getattr(th, "cluster_phase", None)
    if phase is None:
        raise InterpreterError(f"{op.loc}: barrier.cluster.wait without a preceding arrive")
    th.cluster_phase = None
    return Suspend(("wait", lambda: True if m.cluster_phase > phase else None, op))


def _wait_at_least(th, op, ins, t):
    ptr, value = ins[0], int(ins[1])
    m = th.m
    # serial-number order: the wrapping 32-bit difference is non-negative; a bounded wait gives up (false) when
    # nothing else can move (the scheduler's stall: ``machine.py``)
    return Suspend(("wait", lambda: True if (int(m.load(ptr)) - value) % 2 ** 32 < 2 ** 31 else None, op,
                    False if op.attrs["polls"] else None))


def _griddepcontrol(th, op, ins, t):
    if op.attrs.get("kind") == "wait":
        th.grid_waited = True
        if th.clock is not None:     # a new epoch: threads whose clocks reach it are ordered after this wait
            th.clock[th.index] += 1
            th.m.grid_wait_marks.append((th.index, int(th.clock[th.index])))
    return None


THREAD_SEMANTICS.add("nv.named_barrier", _named_barrier)
THREAD_SEMANTICS.add("nv.griddepcontrol", _griddepcontrol)
THREAD_SEMANTICS.add("nv.wait_at_least", _wait_at_least)
WARP_SEMANTICS.add("nv.elect_one", _elect)
THREAD_SEMANTICS.add("nv.setmaxnreg", _setmaxnreg)
THREAD_SEMANTICS.add("nv.cluster.barrier", _cluster_barrier)
