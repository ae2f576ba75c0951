"""The machine the IR runs on: the CTAs of a cluster, their shared memory, asynchronous units
and a seeded scheduler.

* Threads are generators (``core.Thread``). A thread runs until it finishes or makes a request:
  a CTA barrier, a named barrier, a warp or warpgroup collective, or a wait on a condition (an
  mbarrier phase, a bulk group). The scheduler serves the requests; with ``seed`` it also delays
  runnable threads at random, so tests can vary the interleaving deterministically.
* Asynchronous units (the TMA engine, the WGMMA unit) ``issue`` ``AsyncOp``s; each completes at
  a point the scheduler chooses (at random after any round, or when every thread is blocked), in
  order where the hardware orders them (``after``), or when a wait forces it.
* Shared memory is one byte array per CTA (``SharedBytes``), so shared pointers have addresses;
  the hazard checker (``hazards.py``) shadows it.
* The CTAs of a cluster run together (multicast, cluster barriers); clusters run one after another,
  except in a kernel that waits on a counter other CTAs raise (``nv.wait_at_least``): there every CTA of the
  grid runs at once (clusters of one CTA only), as the GPU runs a grid it can hold whole.
"""
from __future__ import annotations

import random

import numpy as np

from ..ir.core import Kernel
from ..ir.types import ParamBlobType, PointerType
from .core import WARP_OPS, Blob, Pointer, SharedBytes, Thread, element_view, numpy_dtype, to_type
from .errors import HazardError, InterpreterError
from .hazards import SharedShadow, join_clocks
from .registry import WARPGROUP_SEMANTICS

__all__ = ["Machine", "CTA", "AsyncOp", "run"]


class AsyncOp:
    """One operation of an asynchronous unit: ``effect()`` runs when it completes; ``after`` must
    complete first (units that complete in order); ``lo``/``hi`` the shared bytes it reads or
    writes, for the hazard checker; ``retired``: its issuer has waited for it."""

    _next_id = [1]

    def __init__(self, kind, op, cta, effect, after=None, lo=0, hi=0):
        self.id = AsyncOp._next_id[0]
        AsyncOp._next_id[0] += 1
        self.kind, self.op, self.cta, self.effect, self.after = kind, op, cta, effect, after
        self.lo, self.hi = lo, hi
        self.done = False
        self.retired = False

    def __repr__(self):
        return f"<{self.kind} #{self.id} at {self.op.loc}>"


class CTA:
    """One CTA: its shared memory (laid out symbol after symbol at each one's alignment), its
    mbarriers (by shared byte address), named barriers, and threads."""

    def __init__(self, machine, ctaid, rank, cluster=0):
        self.m = machine
        self.ctaid = ctaid
        self.rank = rank
        self.cluster = cluster          # which of the CTAs running together are its cluster's
        self.symbols = {}
        top = 0
        for sym, dtype, count, align in machine.kernel.attrs.get("shared", ()):
            align = max(int(align or 1), dtype.itemsize, 16)
            top = (top + align - 1) // align * align
            self.symbols[sym] = top
            top += count * dtype.itemsize
        size = max(16, (top + 1023) // 1024 * 1024)
        self.smem = np.zeros(size, np.uint8).view(SharedBytes)
        self.smem.cta = self
        self.shadow = SharedShadow(size)
        self.mbarriers = {}
        self.named = {}          # id -> {"count": n, "arrived": [(clock, seen) of each bar.arrive], "op": op}
        self.threads = []
        self.state = {}          # per-feature state (TMEM, ...)
        self.running = None      # threads not yet exited (set when the CTA starts)

    @property
    def exited(self):
        """Every thread of the CTA has returned: its shared memory (and barriers) are gone."""
        return self.running == 0

    def check_alive(self, what, loc):
        """A peer's ``what`` (at ``loc``) reaches this CTA's shared memory: a hazard once the CTA has exited
        (on the GPU its shared memory may then belong to another CTA)."""
        if self.exited:
            self.m.hazard("remote access to an exited CTA",
                          f"{what} reaches CTA {self.rank}'s shared memory after every thread of that CTA exited "
                          f"(nothing it waited for orders the access before its exit)", [(what, loc)])

    def symbol_pointer(self, symbol, elem):
        return Pointer(self.smem, self.symbols[symbol] // elem.itemsize, elem)

    def thread_access(self, lo, nbytes, write):
        self.m.shadow_access(self, lo, lo + nbytes, write)


class Machine:
    def __init__(self, kernel: Kernel, grid, block, cluster=(1, 1, 1), seed=0, hazards=True):
        self.kernel = kernel
        self.grid, self.block, self.cluster = grid, block, cluster
        self.rng = random.Random(seed)
        self.delay = 0.25 if seed is not None else 0.0
        self.hazards = hazards
        self.pending: list[AsyncOp] = []
        self.pending_values = 0
        self.current = None
        self.current_op = None
        self.blobs = {}              # generic address -> host object (TMA bindings)
        self._bases = {}
        # a kernel that waits on the grids before it (griddepcontrol.wait: programmatic dependent launch) may start
        # while they still run: each thread's global accesses before its wait are reported (``check_grid_waited``)
        self.waits_on_prior_grids = any(op.name == "nv.griddepcontrol" and op.attrs.get("kind") == "wait"
                                        for op in kernel.body.walk())
        self.grid_wait_marks = []    # (thread index, its epoch just after its wait): what orders others after it
        self.ctas = []
        self.open_cluster_phase()
        self.cluster_phase = 0

    def cluster_ctas(self, cta):
        """The running CTAs of ``cta``'s cluster (the ranks its cluster operations address)."""
        return [c for c in self.ctas if c.cluster == cta.cluster]

    def open_cluster_phase(self):
        """No thread has arrived at the cluster barrier's current phase."""
        self.cluster_arrived = set()
        self.cluster_relaxed = set()     # those that arrived .relaxed: they publish nothing ...
        self.cluster_released = []       # ... but what their fence.mbarrier_init released

    # -- addresses and memory ------------------------------------------------------------------
    def address_of(self, buffer) -> int:
        key = id(buffer.base if buffer.base is not None else buffer)
        base = self._bases.get(key)
        if base is None:
            base = self._bases[key] = (1 << 40) + (len(self._bases) << 32)
        return base

    def load(self, ptr: Pointer):
        view = element_view(ptr)
        if not 0 <= ptr.offset < view.size:
            raise InterpreterError(f"out-of-bounds load at element {ptr.offset} of a buffer of {view.size}")
        if isinstance(ptr.buffer, SharedBytes):
            n = ptr.elem.itemsize
            self.shadow_access(ptr.buffer.cta, ptr.offset * n, ptr.offset * n + n, False)
        else:
            self.check_grid_waited(self.current, "a global load", self.current_op)
        x = view[ptr.offset]
        return to_type(x, ptr.elem) if not ptr.elem.is_float and not ptr.elem.is_fp8 else x

    def store(self, ptr: Pointer, value):
        view = element_view(ptr)
        if not 0 <= ptr.offset < view.size:
            raise InterpreterError(f"out-of-bounds store at element {ptr.offset} of a buffer of {view.size}")
        if isinstance(ptr.buffer, SharedBytes):
            n = ptr.elem.itemsize
            self.shadow_access(ptr.buffer.cta, ptr.offset * n, ptr.offset * n + n, True)
        else:
            self.check_grid_waited(self.current, "a global store", self.current_op)
        view[ptr.offset] = value

    def check_grid_waited(self, th, what, op):
        """``what`` (an access to global memory by thread ``th`` at ``op``) in a kernel that calls
        ``grid_dependency_wait``: a hazard unless the thread waited, or is ordered after a thread that did (a
        barrier since: the vector clocks). Launched with programmatic stream serialization, the kernel may run
        while the kernel before it on the stream still reads and writes global memory; only the wait orders the
        two (PTX ISA, griddepcontrol)."""
        if self.waits_on_prior_grids and th is not None and not th.grid_waited:
            if th.clock is not None and any(th.clock[i] >= epoch for i, epoch in self.grid_wait_marks):
                th.grid_waited = True           # ordered after a wait: so is everything it does from now on
                return
            loc = op.loc if op is not None else "?"
            self.hazard("global access before grid_dependency_wait",
                        f"{what} at {loc} comes before this thread's grid_dependency_wait(): the kernel waits on "
                        f"the grids before it, so it may start while they still run, and this access may race "
                        f"with them (move it after the wait, or order it after a thread's wait by a barrier)",
                        [(what, loc)])

    def thread_by_index(self, i):
        return self._threads[i]

    def last_write_loc(self, i):
        return getattr(self._threads[i], "last_write_loc", "?")

    def shadow_access(self, cta, lo, hi, write):
        if self.hazards and cta is not None:
            cta.shadow.thread_access(self, self.current, self.current_op, lo, hi, write)

    def hazard(self, kind, message, sides):
        if self.hazards:
            raise HazardError(kind, message, sides)

    # -- asynchronous units ----------------------------------------------------------------------
    def issue(self, aop: AsyncOp) -> AsyncOp:
        self.pending.append(aop)
        return aop

    def complete(self, aop: AsyncOp) -> None:
        """Complete ``aop`` now (and, first, what it must follow)."""
        while aop.after is not None and not aop.after.done:
            self.complete(aop.after)
        if aop.done:
            return
        aop.done = True
        self.pending.remove(aop)
        aop.effect()

    def _complete_some(self, force: bool) -> bool:
        ready = [a for a in self.pending if a.after is None or a.after.done]
        if not ready:
            return False
        if force:
            self.complete(self.rng.choice(ready))
            return True
        for a in ready:
            if self.rng.random() < 0.3:
                self.complete(a)
        return True

    # -- the scheduler -----------------------------------------------------------------------------
    def run_cluster(self, ctaids, params, clusters=1):
        """Run the CTAs ``ctaids`` together: ``clusters`` consecutive clusters of equal size."""
        bx, by, bz = self.block
        size = len(ctaids) // clusters
        self.ctas = [CTA(self, c, i % size, i // size) for i, c in enumerate(ctaids)]
        threads = []
        for cta in self.ctas:
            for z in range(bz):
                for y in range(by):
                    for x in range(bx):
                        th = Thread(self, (x, y, z), cta.ctaid, cta, len(threads))
                        cta.threads.append(th)
                        threads.append(th)
        n = len(threads)
        self._threads = threads
        for th in threads:
            th.clock = np.zeros(n, np.int64)
            th.clock[th.index] = 1
            th.tc_clock = th.clock.copy()
            for p, v in zip(self.kernel.params, params):
                th.set(p.value, v)
        gens = [th.block(self.kernel.body) for th in threads]
        per_cta = len(threads) // len(self.ctas)
        request = [None] * n
        reply = [None] * n
        started = [False] * n
        done = [False] * n
        self.open_cluster_phase()
        for cta in self.ctas:
            cta.running = len(cta.threads)
        rng = self.rng
        # warps are what the hardware schedules: a delayed warp sleeps a few rounds, all lanes together
        warp_of = [(th.cta.rank, th.linear // 32) for th in threads]
        warps = sorted(set(warp_of))
        sleep = dict.fromkeys(warps, 0)
        while True:
            if self.delay:
                for w in warps:
                    if sleep[w]:
                        sleep[w] -= 1
                    elif rng.random() < self.delay:
                        sleep[w] = rng.randint(1, 3)
            ran = False
            runnable = False
            for i, g in enumerate(gens):
                if done[i] or request[i] is not None:
                    continue
                runnable = True
                if sleep[warp_of[i]]:
                    continue
                self.current = threads[i]
                try:
                    request[i] = g.send(reply[i]) if started[i] else next(g)
                    started[i] = True
                except StopIteration:
                    done[i] = True
                    threads[i].cta.running -= 1
                reply[i] = None
                ran = True
            live = [i for i in range(n) if not done[i]]
            if not live:
                break
            served = self._serve(threads, request, reply, done, per_cta)
            if ran or served or runnable:
                self._complete_some(force=False)
                continue
            if self._complete_some(force=True):
                continue
            if self._give_up_bounded_waits(request, reply):
                continue
            self._deadlock(threads, request, done)
        for cta in self.ctas:
            for r in cta.shadow.readers:
                # the CTA's shared memory ends with the CTA: an async read its issuer never waited for
                self.hazard("CTA exit before an async read completed",
                            f"the CTA exits while a {r.kind} issued here may still read its shared memory (no "
                            f"wait covers it)", [(f"the {r.kind}", r.op.loc)])
        while self.pending:          # the kernel has exited: the units finish what was issued
            self._complete_some(force=True)
        for hook in EXIT_HOOKS:
            hook(self)

    def _serve_collectives(self, threads, request, reply, done, c0, per_cta, kind, width, who, run) -> bool:
        """Run each group of ``width`` threads of the CTA at ``c0`` whose live members all wait at a
        ``kind`` collective; ``run(op, {member - group start: inputs}, members)`` gives the replies."""
        served = False
        unit = "warp" if kind == "warp" else "warpgroup"
        for w in range(c0, c0 + per_cta, width):
            members = [i for i in range(w, min(w + width, c0 + per_cta)) if not done[i]]
            if members and all(request[i] is not None and request[i][0] == kind for i in members):
                ops = {request[i][1].name for i in members}
                if len(ops) != 1:
                    raise InterpreterError(f"deadlock: the {who} of {unit} {(w - c0) // width} wait at different "
                                           f"collectives ({', '.join(sorted(ops))})")
                op = request[members[0]][1]
                self.current, self.current_op = threads[members[0]], op
                replies = run(op, {i - w: request[i][2] for i in members}, members)
                for i in members:
                    reply[i], request[i] = replies[i - w], None
                served = True
        return served

    def _serve(self, threads, request, reply, done, per_cta) -> bool:
        served = False
        n = len(threads)
        for c0 in range(0, n, per_cta):
            # warp collectives (every live lane of the warp) and warpgroup collectives (every live thread
            # of the 4 warps) wait at the same op
            served |= self._serve_collectives(threads, request, reply, done, c0, per_cta, "warp", 32, "lanes",
                                              lambda op, inputs, members: WARP_OPS[op.name](self, op, inputs))
            served |= self._serve_collectives(
                threads, request, reply, done, c0, per_cta, "wg", 128, "threads",
                lambda op, inputs, members: WARPGROUP_SEMANTICS[op.name](self, op, inputs,
                                                                         [threads[i] for i in members]))
            # the CTA barrier (bar.sync 0): every live thread of the CTA
            live = [i for i in range(c0, c0 + per_cta) if not done[i]]
            if live and all(request[i] is not None and request[i][0] == "barrier" for i in live):
                join_clocks([threads[i] for i in live])
                for i in live:
                    request[i], reply[i] = None, None
                served = True
            # named barriers (bar.sync id, count): PTX ISA 9.7.13.1
            waiting = {}
            for i in live:
                r = request[i]
                if r is not None and r[0] == "named":
                    waiting.setdefault(r[1], []).append(i)
            cta = threads[c0].cta
            for bid, idx in waiting.items():
                state = cta.named.setdefault(bid, {"count": None, "arrived": [], "op": None})
                for i in idx:
                    self._named_count(cta, bid, request[i][2], request[i][3])
                if len(idx) + len(state["arrived"]) >= state["count"]:
                    join_clocks([threads[i] for i in idx], state["arrived"])
                    for i in idx:
                        request[i], reply[i] = None, None
                    cta.named[bid] = {"count": None, "arrived": [], "op": None}
                    served = True
        # waits on a condition (mbarrier phases, cluster barriers)
        for i in range(n):
            r = request[i]
            if r is not None and r[0] == "wait":
                self.current, self.current_op = threads[i], r[2]
                v = r[1]()
                if v is not None:
                    request[i], reply[i] = None, v
                    served = True
        # the cluster barrier: every live thread of the cluster has arrived
        live = [i for i in range(n) if not done[i]]
        if self.cluster_arrived and all(threads[i] in self.cluster_arrived for i in live):
            join_clocks(list(self.cluster_arrived), self.cluster_released, silent=self.cluster_relaxed)
            self.open_cluster_phase()
            self.cluster_phase += 1
            served = True
        return served

    def _named_count(self, cta, bid, count, op):
        state = cta.named.setdefault(bid, {"count": None, "arrived": [], "op": None})
        if count % 32 or count <= 0:
            raise InterpreterError(f"{op.loc}: bar.sync {bid}, {count}: the thread count must be a positive "
                                   f"multiple of 32 (PTX ISA 9.7.13.1)")
        if state["count"] is None:
            state["count"], state["op"] = count, op
        elif state["count"] != count:
            self.hazard("named barrier count mismatch",
                        f"barrier {bid} is used with {state['count']} and {count} threads in one phase",
                        [(f"count {state['count']}", state["op"].loc), (f"count {count}", op.loc)])

    def named_arrive(self, thread, bid, count, op):
        """``bar.arrive id, count``: counts toward the barrier without waiting."""
        cta = thread.cta
        self._named_count(cta, bid, count, op)
        # PTX ISA 9.7.13.1: bar.arrive releases what the thread did before it (the waiters acquire it when
        # the barrier completes) and does not wait, so it acquires nothing; like mbarrier.arrive it ends
        # the thread's epoch
        cta.named[bid]["arrived"].append((thread.clock.copy(), set(thread.seen)))
        thread.clock[thread.index] += 1

    @staticmethod
    def _give_up_bounded_waits(request, reply) -> bool:
        """Everything is blocked: answer the waits that may give up (``("wait", ready, op, answer)``) with their
        answer (a bounded ``wait_at_least``: false)."""
        gave_up = False
        for i, r in enumerate(request):
            if r is not None and r[0] == "wait" and len(r) > 3 and r[3] is not None:
                request[i], reply[i] = None, r[3]
                gave_up = True
        return gave_up

    def _deadlock(self, threads, request, done):
        lines = []
        per_warp = {}
        for i, th in enumerate(threads):
            if done[i]:
                continue
            r = request[i]
            op = r[1] if r[0] in ("warp", "wg", "barrier") else r[3] if r[0] == "named" else r[2]
            key = (th.cta.rank, th.linear // 32, op.name, str(op.loc))
            per_warp[key] = per_warp.get(key, 0) + 1
        for (rank, warp, name, loc), count in sorted(per_warp.items()):
            lines.append(f"CTA {rank} warp {warp} ({count} thread{'s' if count > 1 else ''}): {name} at {loc}")
        raise HazardError("deadlock", "every live thread is blocked and no asynchronous operation is pending:\n  "
                          + "\n  ".join(lines))


EXIT_HOOKS = []   # fn(machine) run when a cluster has finished (e.g. TMEM still allocated)


def _cluster_ids(grid, cluster):
    for cz in range(0, grid[2], cluster[2]):
        for cy in range(0, grid[1], cluster[1]):
            for cx in range(0, grid[0], cluster[0]):
                yield [(cx + x, cy + y, cz + z) for z in range(cluster[2]) for y in range(cluster[1])
                       for x in range(cluster[0])]


def run(kernel: Kernel, args, grid=(1, 1, 1), block=(1, 1, 1), cluster=(1, 1, 1), seed=0, hazards=True,
        whole_grid=None) -> None:
    """Run ``kernel`` (IR from ``JITFunction.lower``) on numpy arrays (modified in place), scalars and
    TMA bindings (``prepare_tma`` of numpy arrays). ``cluster``: CTAs that run together; ``seed``:
    the scheduler's choices (None: no random delays); ``hazards``: raise ``HazardError`` on a
    synchronisation bug; ``whole_grid``: run every CTA at once (default: when the kernel waits on a counter,
    ``nv.wait_at_least``; False runs clusters one after another anyway, as a GPU busy with other work might)."""
    grid = tuple(grid) + (1,) * (3 - len(tuple(grid)))
    block = tuple(block) + (1,) * (3 - len(tuple(block)))
    cluster = tuple(cluster) + (1,) * (3 - len(tuple(cluster)))
    if any(g % c for g, c in zip(grid, cluster)):
        raise InterpreterError(f"the grid {grid} is not a whole number of clusters {cluster}")
    m = Machine(kernel, grid, block, cluster, seed, hazards)
    params = []
    for p, a in zip(kernel.params, args):
        t = p.value.type
        if isinstance(t, PointerType):
            if not isinstance(a, np.ndarray):
                raise InterpreterError(f"parameter {p.name} is a pointer: pass a numpy array")
            if a.dtype != np.dtype(numpy_dtype(t.elem)) and a.dtype.itemsize != t.elem.itemsize:
                raise InterpreterError(f"parameter {p.name} is a *{t.elem}; the array holds {a.dtype}")
            params.append(Pointer(a, 0, t.elem))
        elif isinstance(t, ParamBlobType):
            address = (1 << 48) + 256 * len(m.blobs)
            m.blobs[address] = a
            params.append(Blob(a, address))
        elif hasattr(a, "plan") and hasattr(a, "array"):
            # a TMA binding passed for an integer parameter: the kernel takes the tensor map's generic address
            address = (1 << 48) + 256 * len(m.blobs)
            m.blobs[address] = a
            params.append(to_type(address, t))
        else:
            params.append(to_type(a, t))
    groups = list(_cluster_ids(grid, cluster))
    if whole_grid is None:
        whole_grid = any(op.name == "nv.wait_at_least" for op in kernel.walk())
    if whole_grid:
        # CTAs wait for each other through global memory: the whole grid runs at once
        if len(groups[0]) > 1:
            raise InterpreterError("a kernel that waits on a counter (wait_at_least) runs its whole grid at once in "
                                   "the interpreter, which models that for clusters of one CTA only")
        m.run_cluster([ids[0] for ids in groups], params, clusters=len(groups))
        return
    for ids in groups:
        m.run_cluster(ids, params)
