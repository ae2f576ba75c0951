"""Thread synchronisation beyond the CTA barrier (sm_90+): named barriers, elect, warpgroups, setmaxnreg,
thread-block clusters.

==============================  ============================================================
builtin                         PTX
==============================  ============================================================
named_barrier_sync(id, count)   ``bar.sync id, count``
named_barrier_arrive(id, count) ``bar.arrive id, count``
elect_one() -> bool             ``elect.sync _|P, 0xffffffff`` (one lane of the warp)
warpgroup_idx() -> i32          linear thread index // 128
setmaxnreg_inc(n)/_dec(n)       ``setmaxnreg.{inc,dec}.sync.aligned.u32 n``
cluster_arrive()/_wait()        ``barrier.cluster.arrive.release`` / ``.wait.acquire``
cluster_ctarank(), _size()      ``%cluster_ctarank``, ``%cluster_nctarank``
wait_at_least(ptr, v, polls)    spin on ``ld.relaxed.gpu`` until ``*ptr - v >= 0`` (one thread; bounded: -> bool)
grid_dependency_wait()          ``griddepcontrol.wait`` (programmatic dependent launch)
launch_dependents()             ``griddepcontrol.launch_dependents``
==============================  ============================================================
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.core import Value
from ..ir.nv.sync import is_counter_pointer
from .base import LangError, builtin
from .hw_args import i32_operand, require_sm

__all__ = [
    "cluster_ctarank", "cluster_size", "cluster_arrive", "cluster_wait", "cluster_sync",
    "named_barrier_sync", "named_barrier_arrive", "elect_one", "warpgroup_idx", "setmaxnreg_inc",
    "setmaxnreg_dec", "wait_at_least", "grid_dependency_wait", "launch_dependents",
]


def _named(ctx, kind, barrier_id, count):
    if isinstance(barrier_id, int) and not 0 <= barrier_id < 16:
        raise LangError(f"named barrier id must be in 0..15, got {barrier_id}")
    if isinstance(count, int) and (count <= 0 or count % 32):
        raise LangError(f"named barrier thread count must be a positive multiple of 32, got {count}")
    operands = [i32_operand(ctx, barrier_id, "the barrier id"), i32_operand(ctx, count, "the count")]
    ctx.builder.create("nv.named_barrier", operands,
                       [], {"kind": kind})


@builtin
def named_barrier_sync(barrier_id, count, *, _ctx):
    """``bar.sync id, count``: wait until ``count`` threads have arrived at barrier ``id``."""
    _named(_ctx, "sync", barrier_id, count)


@builtin
def named_barrier_arrive(barrier_id, count, *, _ctx):
    """``bar.arrive id, count``: arrive at barrier ``id`` without waiting."""
    _named(_ctx, "arrive", barrier_id, count)


@builtin
def elect_one(*, _ctx):
    """True in exactly one active lane of the (fully active) warp."""
    require_sm(_ctx, 90, "elect_one")
    return _ctx.builder.value("nv.elect_one", [], T.bool_)


@builtin
def warpgroup_idx(*, _ctx):
    """The warpgroup of the thread: linear thread index // 128.

    ptxas cannot prove the result warp-uniform, so values computed from it (ring positions, shared
    addresses, WGMMA descriptors) stay in vector registers. Where the whole warp is active, taking it
    from lane 0 (``shfl_sync(warpgroup_idx(), 0)``) lets them live in uniform registers (docs/hopper.md,
    "The K loop's instruction cost")."""
    from .core import binary, warp_id

    return binary(_ctx, ">>", warp_id(_ctx=_ctx), 2)


def _setmaxnreg(ctx, action, n):
    require_sm(ctx, 90, f"setmaxnreg_{action}")
    if ctx.arch not in ("sm_90a", "sm_100a"):
        raise LangError(f"setmaxnreg_{action} needs an architecture-specific target (sm_90a, sm_100a), got {ctx.arch}")
    if not isinstance(n, int) or isinstance(n, bool) or not 24 <= n <= 256 or n % 8:
        raise LangError(f"setmaxnreg_{action}: the register count must be a compile-time multiple of 8 "
                        f"in 24..256, got {n!r}")
    ctx.builder.create("nv.setmaxnreg", [], [], {"action": action, "count": n})


@builtin
def setmaxnreg_inc(n, *, _ctx):
    """Raise this warpgroup's per-thread register limit to ``n``."""
    _setmaxnreg(_ctx, "inc", n)


@builtin
def setmaxnreg_dec(n, *, _ctx):
    """Lower this warpgroup's per-thread register limit to ``n``."""
    _setmaxnreg(_ctx, "dec", n)


# -- thread-block clusters (launch with kernel.launch(..., cluster=(x, y, z))) --------------------------

@builtin
def cluster_ctarank(*, _ctx):
    """This CTA's rank in its cluster (``%cluster_ctarank``)."""
    require_sm(_ctx, 90, "cluster_ctarank")
    return _ctx.builder.value("nv.sreg", [], T.i32, reg="cluster.ctarank")


@builtin
def cluster_size(*, _ctx):
    """The number of CTAs in the cluster (``%cluster_nctarank``)."""
    require_sm(_ctx, 90, "cluster_size")
    return _ctx.builder.value("nv.sreg", [], T.i32, reg="cluster.nctarank")


@builtin
def cluster_arrive(relaxed=False, *, _ctx):
    """``barrier.cluster.arrive``: this thread reached the cluster barrier. By default a release (the waiters
    see this thread's earlier writes; on sm_90a ptxas puts a GPU-scope memory barrier before it); ``relaxed=True``
    (``.relaxed``) orders nothing, for a barrier that only counts arrivals, e.g. after ``fence_mbarrier_init``,
    which publishes the barriers' initialisation to the cluster by itself."""
    require_sm(_ctx, 90, "cluster_arrive")
    if not isinstance(relaxed, bool):
        raise LangError(f"cluster_arrive: relaxed must be a compile-time bool, got {relaxed!r}")
    _ctx.builder.create("nv.cluster.barrier", [], [], {"kind": "arrive_relaxed" if relaxed else "arrive"})


@builtin
def cluster_wait(*, _ctx):
    """``barrier.cluster.wait`` (acquire): wait until every thread of the cluster arrived."""
    require_sm(_ctx, 90, "cluster_wait")
    _ctx.builder.create("nv.cluster.barrier", [], [], {"kind": "wait"})


@builtin
def cluster_sync(relaxed=False, *, _ctx):
    """Arrive (``relaxed``: see ``cluster_arrive``) and wait: every thread of every CTA in the cluster meets
    here."""
    cluster_arrive(relaxed, _ctx=_ctx)
    cluster_wait(_ctx=_ctx)


# -- a counter between CTAs ------------------------------------------------------------------------------

@builtin
def wait_at_least(ptr, value, polls=0, *, _ctx):
    """Spin until the i32 at global ``ptr`` is at least ``value`` in serial-number order (``*ptr - value``, wrapping,
    is non-negative as a signed 32-bit number, so a counter may wrap around): the waiting half of a counter that
    other CTAs raise with ``atomic_add``. The loads are relaxed at GPU scope, so follow the wait with
    ``fence_acq_rel("gpu")`` to see what the writers stored before their (fenced) increments. The writers must be
    able to run while this thread waits: size the grid so every CTA is resident at once (the interpreter then runs
    them together), or a CTA waits for one that cannot start until it exits; or bound the wait: ``polls`` > 0 (a
    compile-time count) gives up after that many loads. Returns whether the value was reached (a bool; always
    true without a bound)."""
    if not (isinstance(ptr, Value) and is_counter_pointer(ptr.type)):
        raise LangError(f"wait_at_least waits on a global *i32 pointer, got "
                        f"{ptr.type if isinstance(ptr, Value) else repr(ptr)}")
    if not isinstance(polls, int) or isinstance(polls, bool) or polls < 0:
        raise LangError(f"wait_at_least: polls is a compile-time count (0: no bound), got {polls!r}")
    return _ctx.builder.value("nv.wait_at_least", [ptr, i32_operand(_ctx, value, "wait_at_least's value")], T.bool_,
                              polls=polls)


# -- programmatic dependent launch ------------------------------------------------------------------------------

@builtin
def grid_dependency_wait(*, _ctx):
    """``griddepcontrol.wait``: block until the grids this launch depends on (the kernels before it on its stream)
    have completed and their memory is visible. A kernel that contains it is launched with programmatic stream
    serialization (``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION``): it may start while the kernel before
    it finishes, so everything above the wait (barrier set-up, descriptor prefetch, index math) overlaps that
    kernel's tail. Put it before the kernel's first access of global memory that an earlier kernel may write, or
    that an earlier kernel may still read (this kernel's outputs); every thread that makes such accesses must wait
    (or be ordered after a thread that did, by a barrier). Without a dependency it returns at once. The interpreter
    reports global accesses of a waiting kernel that are not ordered after a wait (docs/language.md)."""
    require_sm(_ctx, 90, "grid_dependency_wait")
    _ctx.builder.create("nv.griddepcontrol", [], [], {"kind": "wait"})


@builtin
def launch_dependents(*, _ctx):
    """``griddepcontrol.launch_dependents``: the next kernel on the stream (if it waits with
    ``grid_dependency_wait``) may be scheduled once every CTA of this grid has called it or exited; its CTAs then
    take SMs as they free up and run up to their own wait. It orders no memory (the dependent's wait does that), so
    it may come anywhere; without it the next kernel is scheduled as this grid's CTAs exit. Early is not always
    better: called first in the Hopper GEMM it cost up to 12% on HBM-bound shapes, for a cause not yet profiled
    (docs/hopper.md, "Programmatic dependent launch")."""
    require_sm(_ctx, 90, "launch_dependents")
    _ctx.builder.create("nv.griddepcontrol", [], [], {"kind": "launch_dependents"})
