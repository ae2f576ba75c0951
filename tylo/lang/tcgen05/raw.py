"""The raw tcgen05 builtins: one ``nv.tcgen05.*`` op each (TMEM allocation, ld/st and their waits,
fences, mma, commit). Codegen is ``tylo.codegen.ptx.tcgen05``. Nothing here inserts a wait, fence or
barrier that the kernel did not ask for.
"""
from __future__ import annotations

from ...ir import types as T
from ...ir.core import Value
from ...ir.types import PointerType
from ..base import LangError, builtin
from ..tmem import TmemAccess, slots_per_word
from .plan import Tcgen05MMA, tmem_columns

__all__ = [
    "tmem_alloc", "tmem_dealloc", "tmem_relinquish_alloc_permit", "tcgen05_ld", "tcgen05_st",
    "tcgen05_wait_ld", "tcgen05_wait_st", "fence_before_thread_sync", "fence_after_thread_sync", "tcgen05_mma",
    "tcgen05_commit",
]


# --------------------------------------------------------------------------
# builtins (the ops they emit are defined in tylo.ir.nv.tcgen05)


def require_sm100a(ctx, what):
    if ctx.sm < 100 or not ctx.arch.endswith("a"):
        raise LangError(f"{what} needs sm_100a (tcgen05); this kernel targets {ctx.arch}")


def checked_cta_group(cta_group):
    if cta_group not in (1, 2):
        raise LangError(f"cta_group must be 1 or 2, got {cta_group!r}")
    return cta_group


def u32_operand(ctx, x, what) -> Value:
    from .. import core as L

    if isinstance(x, int) and not isinstance(x, bool):
        return L.to_value(ctx, x, T.u32)
    x = getattr(x, "value", x) if type(x).__name__ == "RuntimeInt" else x
    if not isinstance(x, Value) or not isinstance(x.type, T.ScalarType) or not x.type.is_int:
        raise LangError(f"{what} must be a 32-bit integer TMEM address, got {x!r}")
    return x if x.type.bits == 32 else L.cast(x, T.u32, _ctx=ctx)


def shared_pointer_operand(x, what) -> Value:
    ptr = getattr(x, "ptr", x)
    if not isinstance(ptr, Value) or not isinstance(ptr.type, PointerType) or ptr.type.space != "shared":
        raise LangError(f"{what} needs a shared-memory pointer (or shared array), got {x!r}")
    return ptr


@builtin
def tmem_alloc(columns, slot, cta_group=1, *, _ctx):
    """``tcgen05.alloc``: allocate ``columns`` TMEM columns (power of two,
    32..512) and write the base address to shared memory at ``slot`` (a u32
    shared array or pointer). One whole warp executes it."""
    dst = slot
    require_sm100a(_ctx, "tmem_alloc")
    try:
        tmem_columns(columns)
    except ValueError as e:
        raise LangError(str(e)) from None
    _ctx.builder.create("nv.tcgen05.alloc", [shared_pointer_operand(dst, "tmem_alloc")], [],
                        {"columns": columns, "cta_group": checked_cta_group(cta_group)})


@builtin
def tmem_dealloc(taddr, columns, cta_group=1, *, _ctx):
    """``tcgen05.dealloc`` of ``columns`` columns at ``taddr`` (the allocating warp)."""
    require_sm100a(_ctx, "tmem_dealloc")
    try:
        tmem_columns(columns)
    except ValueError as e:
        raise LangError(str(e).replace("tmem_alloc", "tmem_dealloc")) from None
    _ctx.builder.create("nv.tcgen05.dealloc", [u32_operand(_ctx, taddr, "tmem_dealloc")], [],
                        {"columns": columns, "cta_group": checked_cta_group(cta_group)})


@builtin
def tmem_relinquish_alloc_permit(cta_group=1, *, _ctx):
    """``tcgen05.relinquish_alloc_permit``: this CTA allocates no more TMEM."""
    require_sm100a(_ctx, "tmem_relinquish_alloc_permit")
    _ctx.builder.create("nv.tcgen05.relinquish_alloc_permit", [], [], {"cta_group": checked_cta_group(cta_group)})


def _access_address(ctx, access: TmemAccess, taddr) -> Value:
    from .. import core as L

    if not isinstance(access, TmemAccess):
        raise LangError(f"expected a TMEM access from partition(transfer, view), got {access!r}")
    addr = access.address
    if taddr is None:
        return u32_operand(ctx, addr, "the access address")
    base = u32_operand(ctx, taddr, "taddr")
    if isinstance(addr, int) and addr == 0:
        return base
    return L.binary(ctx, "+", base, u32_operand(ctx, addr, "the access address"))


def register_type(access: TmemAccess):
    dt = access.dtype
    return T.f32 if (slots_per_word(dt) == 1 and dt.is_float) else T.i32


def _ld_attrs(access: TmemAccess) -> dict:
    attrs = {"shape": access.atom, "num": access.num, "pack": False}
    if access.split is not None:
        attrs["split"] = access.split
    return attrs


@builtin
def tcgen05_ld(access, taddr=None, *, _ctx):
    """``tcgen05.ld.sync.aligned<access.instruction>.b32``: start the load of
    this warp's registers (a tuple of Values: f32 for 32-bit float tiles,
    i32 words otherwise; 16-bit tiles come packed two per word, low half
    first).  ``taddr``: runtime TMEM base added to ``access.address``.  The
    registers are not ready until ``tcgen05_wait_ld`` passes them through."""
    require_sm100a(_ctx, "tcgen05_ld")
    addr = _access_address(_ctx, access, taddr)
    rt = register_type(access)
    op = _ctx.builder.create("nv.tcgen05.ld", [addr], [rt] * access.registers, _ld_attrs(access))
    return tuple(op.results)


@builtin
def tcgen05_wait_ld(values, *, _ctx):
    """``tcgen05.wait::ld``: completes prior loads and returns ``values``
    through a compiler dependency (use the returned registers)."""
    require_sm100a(_ctx, "tcgen05_wait_ld")
    values = tuple(values)
    if not all(isinstance(v, Value) for v in values):
        raise LangError("tcgen05_wait_ld takes the tuple of registers returned by tcgen05_ld")
    op = _ctx.builder.create("nv.tcgen05.wait_ld", list(values), [v.type for v in values])
    return tuple(op.results)


@builtin
def tcgen05_st(access, values, taddr=None, *, _ctx):
    """``tcgen05.st.sync.aligned<access.instruction>.b32``: store this warp's
    registers (``access.registers`` 32-bit values) to the access's TMEM."""
    require_sm100a(_ctx, "tcgen05_st")
    from .. import core as L

    values = tuple(values)
    if len(values) != access.registers:
        raise LangError(
            f"tcgen05_st: {access.instruction} stores {access.registers} registers per thread, got {len(values)}"
        )
    regs = []
    for v in values:
        v = L.to_value(_ctx, v, register_type(access)) if not isinstance(v, Value) else v
        if not isinstance(v.type, T.ScalarType) or v.type.bits != 32:
            raise LangError(f"tcgen05_st: registers must be 32-bit, got {v.type}")
        regs.append(v)
    addr = _access_address(_ctx, access, taddr)
    _ctx.builder.create("nv.tcgen05.st", [addr, *regs], [], _ld_attrs(access))


@builtin
def tcgen05_wait_st(*, _ctx):
    """``tcgen05.wait::st``: completes this thread's prior TMEM stores."""
    require_sm100a(_ctx, "tcgen05_wait_st")
    _ctx.builder.create("nv.tcgen05.wait_st", [], [])


@builtin
def fence_before_thread_sync(*, _ctx):
    """``tcgen05.fence::before_thread_sync`` (order prior tcgen05 ops before a barrier)."""
    require_sm100a(_ctx, "fence_before_thread_sync")
    _ctx.builder.create("nv.tcgen05.fence_before", [], [])


@builtin
def fence_after_thread_sync(*, _ctx):
    """``tcgen05.fence::after_thread_sync`` (order later tcgen05 ops after a barrier)."""
    require_sm100a(_ctx, "fence_after_thread_sync")
    _ctx.builder.create("nv.tcgen05.fence_after", [], [])


@builtin
def tcgen05_mma(plan, d_taddr, a, b_desc, enable_input_d, a_tmem=False, *, _ctx):
    """``tcgen05.mma.cta_group::G.kind::K [d], a, b_desc, idesc, p`` with the
    plan's instruction descriptor.  ``a``: a 64-bit shared-memory descriptor,
    or a 32-bit TMEM address with ``a_tmem=True``; ``enable_input_d``: bool
    (False overwrites D).  Issued by one thread; completion via tcgen05_commit."""
    require_sm100a(_ctx, "tcgen05_mma")
    from .. import core as L

    if not isinstance(plan, Tcgen05MMA):
        raise LangError(f"tcgen05_mma needs a Tcgen05MMA plan, got {plan!r}")
    d = u32_operand(_ctx, d_taddr, "d_taddr")
    a_v = u32_operand(_ctx, a, "a (TMEM address)") if a_tmem else L.to_value(_ctx, a, T.u64)
    b_v = L.to_value(_ctx, b_desc, T.u64)
    idesc = L.to_value(_ctx, plan.idesc, T.u32)
    if isinstance(enable_input_d, Value):
        en = L.to_bool(_ctx, enable_input_d)
    else:
        en = L.to_value(_ctx, bool(enable_input_d), T.bool_)
    _ctx.builder.create("nv.tcgen05.mma", [d, a_v, b_v, idesc, en], [],
                        {"kind": plan.kind, "cta_group": plan.cta_group, "a_tmem": bool(a_tmem)})


@builtin
def tcgen05_commit(mbarrier, cta_group=1, *, _ctx):
    """``tcgen05.commit...mbarrier::arrive::one``: the mbarrier at the shared
    pointer ``mbarrier`` gets one arrival when this thread's prior async
    tcgen05 ops complete."""
    require_sm100a(_ctx, "tcgen05_commit")
    _ctx.builder.create("nv.tcgen05.commit", [shared_pointer_operand(mbarrier, "tcgen05_commit")], [],
                        {"cta_group": checked_cta_group(cta_group)})
