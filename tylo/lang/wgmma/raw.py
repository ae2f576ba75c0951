"""The raw WGMMA builtins: one IR op each, on u64 descriptors and tuples of f32 accumulator values.

``wgmma_fence``, ``wgmma_mma_async``, ``wgmma_commit_group``, ``wgmma_wait_group``,
``zero_accumulators``. The accumulators pass *through* the fence and the wait as tied register
operands, so no arithmetic on them moves across either.
"""
from __future__ import annotations

from ...ir import types as T
from ...ir.core import Value
from ...ir.nv.wgmma import ORDERED_TYPES
from ..base import LangError, builtin
from .plan import WGMMA64, wgmma_instruction

__all__ = [
    "wgmma_fence", "wgmma_mma_async", "wgmma_commit_group", "wgmma_wait_group", "zero_accumulators",
]


# -- kernel side ------------------------------------------------------------------------


def _acc_values(accs, what: str) -> list:
    if not isinstance(accs, (tuple, list)):
        raise LangError(f"{what}: accumulators must be a tuple of f32 values, got {accs!r}")
    for v in accs:
        if not isinstance(v, Value) or v.type != T.f32:
            raise LangError(f"{what}: accumulators must be runtime f32 values, got {v!r}")
    return list(accs)


def require_sm90a(ctx, what: str):
    if ctx.arch != "sm_90a":
        raise LangError(f"{what} needs sm_90a (wgmma is architecture-specific); the target is {ctx.arch}")


@builtin
def zero_accumulators(count: int, *, _ctx):
    """A tuple of ``count`` f32 zeros (one partition of an m64nN accumulator has n/2)."""
    if not isinstance(count, int) or count <= 0:
        raise LangError(f"zero_accumulators: count must be a positive compile-time int, got {count!r}")
    zero = _ctx.builder.constant(0.0, T.f32)
    return tuple(zero for _ in range(count))


@builtin
def wgmma_fence(accs=(), *, _ctx):
    """``wgmma.fence.sync.aligned``; the accumulators pass through (returned) so their
    register writes stay ordered before the fence."""
    require_sm90a(_ctx, "wgmma_fence")
    accs = _acc_values(accs, "wgmma_fence")
    op = _ctx.builder.create("nv.wgmma.fence", accs, [T.f32] * len(accs))
    return tuple(op.results)


@builtin
def wgmma_mma_async(plan, desc_a, desc_b, accs, scale_d=True, a_major: str = "K", b_major: str = "K", *, _ctx):
    """Issue one ``wgmma.mma_async`` of ``plan`` (its K is ``plan.instr_k``; issue
    ``plan.instructions`` of these per plan) on u64 descriptors; returns the new accumulators.

    ``scale_d``: False (or a runtime 0) computes D = A*B, ignoring ``accs``' values.
    """
    from ..core import to_value

    require_sm90a(_ctx, "wgmma_mma_async")
    if not isinstance(plan, WGMMA64):
        raise LangError(f"wgmma_mma_async: the first argument must be a WGMMA64 plan, got {plan!r}")
    ins = wgmma_instruction(plan, a_major, b_major)
    accs = _acc_values(accs, "wgmma_mma_async")
    if len(accs) != ins.accumulators:
        raise LangError(f"wgmma_mma_async: m64n{plan.n} needs {ins.accumulators} accumulators, got {len(accs)}")
    da, db = (to_value(_ctx, d, T.u64) for d in (desc_a, desc_b))
    if isinstance(scale_d, Value):
        from ..core import cast
        scale = cast(scale_d, T.i32, _ctx=_ctx)
    else:
        scale = _ctx.builder.constant(1 if scale_d else 0, T.i32)
    op = _ctx.builder.create("nv.wgmma.mma_async", [da, db, scale, *accs], [T.f32] * len(accs),
                             {"shape": ins.shape, "dtype": ins.dtype, "n": plan.n, "immediates": ins.immediates})
    return tuple(op.results)


@builtin
def wgmma_commit_group(*, _ctx):
    """``wgmma.commit_group.sync.aligned``: close the group of issued wgmma ops. Returns the group's
    mark (its block and index there), which ``wait_mma`` uses to tell whether a wait completes it."""
    require_sm90a(_ctx, "wgmma_commit_group")
    _ctx.builder.create("nv.wgmma.commit_group", [], [])
    return _ctx.count_commit("wgmma")


@builtin
def wgmma_wait_group(n: int, accs=(), *, after=(), _ctx):
    """``wgmma.wait_group.sync.aligned n``; returns ``accs`` passed through the wait
    (use the returned values: arithmetic on them cannot move above the wait). ``after``: 32-bit scalar
    values (f32, i32, u32) computed before the wait (``nv.wgmma.order_before_wait``), with everything they
    depend on: work to overlap with the groups waited for, which ptxas could otherwise schedule after the wait."""
    require_sm90a(_ctx, "wgmma_wait_group")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise LangError(f"wgmma_wait_group: n must be a non-negative compile-time int, got {n!r}")
    accs = _acc_values(accs, "wgmma_wait_group")
    after = list(after)
    for v in after:
        if not isinstance(v, Value) or v.type not in ORDERED_TYPES:
            raise LangError(f"wgmma_wait_group: after= takes runtime 32-bit scalars (f32, i32, u32), got {v!r}")
    if after:
        _ctx.builder.create("nv.wgmma.order_before_wait", after, [])
    op = _ctx.builder.create("nv.wgmma.wait_group", accs, [T.f32] * len(accs), {"n": n})
    return tuple(op.results)
