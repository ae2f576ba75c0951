"""Register fragments: one thread's share of a logical 2-D tile, carrying its ownership.

A ``Fragment`` is a structured value: its static part is ``(dtype,
ownership)`` (a ``tylo.layouts.Ownership``: thread x slot -> logical
coordinate), its runtime leaves are one SSA value per slot. Every collective
is derived from the ownership table: ``f.sum(axis=1)`` follows
``reduction_plan`` (a local tree, then one XOR shuffle per lane bit that
varies along the axis), broadcasting a reduced fragment back follows
``broadcast_plan``, ``window`` follows ``register_window``. Nothing here
moves a value between threads unless a plan says so, and a request the
ownership cannot serve is a compile error that names the ownership.

``PackedFragment`` holds 16-bit elements two to a 32-bit word (low half
first), as ``pack(bf16, f)`` produces and as the MMA A/B operands and TMEM
transfers consume.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import types as T
from ..ir.core import Value
from ..ir.types import ScalarType
from ..layouts import Ownership, broadcast_plan, reduction_plan, register_window, relayout_plan, same_distribution
from ..layouts import permutedims as permute_ownership
from ..layouts.ownership import ownership_name
from . import core as L
from .base import LangError, builtin

__all__ = ["Fragment", "PackedFragment", "FragmentStatic", "full", "pack", "unpack", "fragment", "relayout",
           "lane_partial_ownership"]


class _Method:
    """A fragment method (``f.sum``) callable from kernels: the frontend passes ``_ctx``."""

    __tylo_builtin__ = True

    def __init__(self, fn, obj):
        self.fn = fn
        self.obj = obj

    def __call__(self, *args, _ctx, **kwargs):
        return self.fn(self.obj, *args, _ctx=_ctx, **kwargs)


@dataclass(frozen=True)
class FragmentStatic:
    """The static part of a Fragment (or, with ``packed``, a PackedFragment): dtype and ownership."""

    dtype: ScalarType
    ownership: Ownership
    packed: bool = False

    def describe(self) -> str:
        kind = f"packed {self.dtype}" if self.packed else str(self.dtype)
        # the article as the name is spoken: "an f32", "a bf16", "a u8"
        article = "an" if kind[0] in "aefhilmnorsx" else "a"
        return f"{article} {kind} fragment with ownership {ownership_name(self.ownership)}"


class Fragment:
    """Values of a logical tile held by one thread, one SSA value per ownership slot."""

    def __init__(self, dtype: ScalarType, ownership: Ownership, values):
        values = tuple(values)
        if len(values) != ownership.values:
            raise LangError(f"a fragment of {ownership_name(ownership)} needs {ownership.values} values, "
                            f"got {len(values)}")
        self.dtype = dtype
        self.ownership = ownership
        self.values = values

    # -- structured value protocol -------------------------------------------------
    def __tylo_flatten__(self):
        return list(self.values), FragmentStatic(self.dtype, self.ownership)

    @classmethod
    def __tylo_unflatten__(cls, static, leaves, ctx):
        return cls(static.dtype, static.ownership, leaves)

    def __repr__(self):
        return f"Fragment({self.dtype}, {ownership_name(self.ownership)})"

    @property
    def shape(self):
        return self.ownership.shape

    # -- elementwise -------------------------------------------------------------------
    def _operand_values(self, ctx, other, what):
        """Per-slot values of ``other`` aligned with this fragment's slots."""
        if isinstance(other, PackedFragment):
            raise LangError(f"{what}: unpack the packed fragment first (tylo.unpack(p))")
        if isinstance(other, Fragment):
            if other.ownership == self.ownership or same_distribution(other.ownership, self.ownership):
                return other.values
            return _broadcast(other, self.ownership, what)
        if isinstance(other, (Value, bool, int, float)):
            return (other,) * len(self.values)
        raise LangError(f"{what}: cannot combine a fragment with {other!r}")

    def __tylo_binary__(self, ctx, op, other, reflected):
        # The result takes the ownership of the fuller operand: a reduced fragment (or a
        # scalar) on either side broadcasts over the other without moving values.
        target = other if isinstance(other, Fragment) and other.ownership.values > self.ownership.values else self
        mine = self.values if target is self else target._operand_values(ctx, self, op)
        theirs = other.values if target is other else target._operand_values(ctx, other, op)
        pairs = zip(theirs, mine) if reflected else zip(mine, theirs)
        if op in ("<", "<=", ">", ">=", "==", "!="):
            out = [L.compare(ctx, op, a, b) for a, b in pairs]
        else:
            out = [L.binary(ctx, op, a, b) for a, b in pairs]
        return Fragment(out[0].type, target.ownership, out)

    def __tylo_compare__(self, ctx, op, other):
        return self.__tylo_binary__(ctx, op, other, False)

    def __tylo_unary__(self, ctx, op):
        out = [L.unary(ctx, op, v) for v in self.values]
        return Fragment(out[0].type, self.ownership, out)

    def map(self, ctx, fn):
        out = [fn(v) for v in self.values]
        return Fragment(out[0].type, self.ownership, out)

    # -- methods and attributes in kernels ------------------------------------------------
    def __tylo_getattr__(self, ctx, name):
        if name in ("dtype", "ownership", "shape", "values"):
            return getattr(self, name)
        method = _METHODS.get(name)
        if method is None:
            raise LangError(f"a Fragment has no attribute '{name}' (it has: dtype, ownership, shape, values, "
                            f"{', '.join(sorted(_METHODS))})")
        return _Method(method, self)

    def __tylo_getitem__(self, ctx, index):
        if isinstance(index, int) and not isinstance(index, bool):
            return self.values[index]  # the value in slot ``index`` (static)
        raise LangError("index a fragment with a compile-time slot number, or use window(f, origin, shape)")

    def __tylo_window__(self, origin, shape, check):
        plan = register_window(self.ownership, origin, shape)
        return Fragment(self.dtype, plan.result, [self.values[s] for s in plan.slots])

    def __tylo_permutedims__(self, perm):
        return Fragment(self.dtype, permute_ownership(self.ownership, perm), self.values)


def _broadcast(reduced: Fragment, ownership: Ownership, what: str):
    axes = [i for i, (r, f) in enumerate(zip(reduced.shape, ownership.shape)) if r == 1 and f != 1]
    if len(axes) != 1 or any(r not in (1, f) for r, f in zip(reduced.shape, ownership.shape)):
        raise LangError(f"{what}: a fragment of shape {reduced.shape} does not broadcast to {ownership.shape}; "
                        f"only a fragment reduced along one axis broadcasts back over it")
    try:
        plan = broadcast_plan(ownership, reduced.ownership, axes[0])
    except ValueError as exc:
        raise LangError(f"{what}: {exc}") from None
    return tuple(reduced.values[s] for s in plan.sources)


def _reduce(frag: Fragment, axis: int, combine, what: str, *, _ctx):
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise LangError(f"{what}(axis=...) needs a compile-time axis")
    try:
        plan = reduction_plan(frag.ownership, axis)
    except ValueError as exc:
        raise LangError(f"{what}(axis={axis}) of a fragment with ownership {ownership_name(frag.ownership)}: "
                        f"{exc}") from None
    vals = list(frag.values)
    for rnd in plan.tree:
        for dst, src in rnd:
            vals[dst] = combine(vals[dst], vals[src])
    partial = [vals[g[0]] for g in plan.groups]
    for mask in plan.shuffle_masks:
        partial = [combine(p, L.shfl_xor(p, mask, _ctx=_ctx)) for p in partial]
    return Fragment(frag.dtype if not frag.dtype.is_bool else T.i32, plan.result, partial)


def lane_partial_ownership(o: Ownership, axis: int = 1) -> Ownership:
    """Where ``f.sum(axis, lanes=False)`` leaves its values: each thread's partial over its own
    slots, before the shuffles. The tile is the reduced one with ``axis`` of extent ``2 ** k``
    (``k`` shuffle masks of ``reduction_plan(o, axis)``), the lanes that share a reduced
    element side by side along it, so ``.sum(axis)`` of it finishes with exactly those shuffles and a
    reduced fragment broadcasts over it.

    >>> lane_partial_ownership(Ownership.wgmma_accumulator(64)).shape
    (64, 4)
    """
    import numpy as np

    from ..layouts import ownership_table
    from ..layouts.ownership import fit_ownership, prefix_strides

    plan = reduction_plan(o, axis)
    masks = plan.shuffle_masks
    res = ownership_table(plan.result)                      # [threads, groups, rank]
    lane = np.zeros(res.shape[0], dtype=np.int64)
    for bit, mask in enumerate(masks):
        lane += ((np.arange(res.shape[0]) & mask) != 0).astype(np.int64) << bit
    coords = res.copy()
    coords[:, :, axis] = lane[:, None]
    shape = tuple(2 ** len(masks) if i == axis else e for i, e in enumerate(plan.result.shape))
    index = sum(coords[:, :, i] * st for i, st in enumerate(prefix_strides(shape)))
    return fit_ownership(index, shape, f"{ownership_name(o)}.lane_partials(axis={axis})", "lane_partial_ownership")


def _sum(frag, axis=1, lanes=True, *, _ctx):
    """``f.sum(axis)``; ``lanes=False`` stops before the shuffles: each thread's partial, a fragment of
    ``lane_partial_ownership`` (``.sum(axis)`` of it finishes the reduction). Online softmax keeps its
    row sums so until the end."""
    if lanes is False:
        return _lane_partials(frag, axis, _ctx=_ctx)
    if lanes is not True:
        raise LangError(f"sum(lanes=...) must be a compile-time bool, got {lanes!r}")
    return _reduce(frag, axis, lambda a, b: L.binary(_ctx, "+", a, b), "sum", _ctx=_ctx)


def _lane_partials(frag, axis, *, _ctx):
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise LangError("sum(axis=...) needs a compile-time axis")
    try:
        plan = reduction_plan(frag.ownership, axis)
        own = lane_partial_ownership(frag.ownership, axis)
    except ValueError as exc:
        raise LangError(f"sum(axis={axis}, lanes=False) of a fragment with ownership "
                        f"{ownership_name(frag.ownership)}: {exc}") from None
    vals = list(frag.values)
    for rnd in plan.tree:
        for dst, src in rnd:
            vals[dst] = L.binary(_ctx, "+", vals[dst], vals[src])
    return Fragment(frag.dtype, own, [vals[g[0]] for g in plan.groups])


def _max(frag, axis=1, *, _ctx):
    return _reduce(frag, axis, lambda a, b: L.maximum(a, b, _ctx=_ctx), "max", _ctx=_ctx)


def _min(frag, axis=1, *, _ctx):
    return _reduce(frag, axis, lambda a, b: L.minimum(a, b, _ctx=_ctx), "min", _ctx=_ctx)


def _astype(frag, dtype, *, _ctx):
    return Fragment(dtype, frag.ownership, [L.cast(v, dtype, _ctx=_ctx) for v in frag.values])


_METHODS = {"sum": _sum, "max": _max, "min": _min, "astype": _astype, "to": _astype}


class PackedFragment:
    """16-bit elements packed two per 32-bit word (low half = even slot), ownership kept."""

    def __init__(self, dtype: ScalarType, ownership: Ownership, words):
        words = tuple(words)
        if ownership.values % 2 or len(words) != ownership.values // 2:
            raise LangError(f"a packed {dtype} fragment of {ownership_name(ownership)} needs "
                            f"{ownership.values // 2} words")
        self.dtype = dtype
        self.ownership = ownership
        self.words = words

    def __tylo_flatten__(self):
        return list(self.words), FragmentStatic(self.dtype, self.ownership, packed=True)

    @classmethod
    def __tylo_unflatten__(cls, static, leaves, ctx):
        return cls(static.dtype, static.ownership, leaves)

    def __tylo_getattr__(self, ctx, name):
        if name in ("dtype", "ownership", "words"):
            return getattr(self, name)
        raise LangError(f"a PackedFragment has no attribute '{name}'; unpack it first")

    def __repr__(self):
        return f"PackedFragment({self.dtype}, {ownership_name(self.ownership)})"


@builtin
def fragment(dtype, ownership, values, *, _ctx) -> Fragment:
    """A fragment from explicit per-slot values (a tuple of runtime scalars of ``dtype``)."""
    if not isinstance(ownership, Ownership):
        raise LangError(f"fragment needs an Ownership, got {ownership!r}")
    return Fragment(dtype, ownership, [L.to_value(_ctx, v, dtype) for v in values])


@builtin
def full(dtype, ownership, value, *, _ctx) -> Fragment:
    """A fragment of ``ownership`` with every slot equal to ``value``."""
    if not isinstance(ownership, Ownership):
        raise LangError(f"full needs an Ownership, got {ownership!r}")
    v = L.to_value(_ctx, value, dtype)
    return Fragment(dtype, ownership, [v] * ownership.values)


@builtin
def pack(dtype, frag, *, _ctx) -> PackedFragment:
    """Convert an f32 fragment to bf16/f16 pairs with ``cvt.rn.{bf16x2,f16x2}.f32`` (ownership kept)."""
    if dtype not in (T.bf16, T.f16):
        raise LangError(f"pack converts to bf16 or f16, not {dtype}")
    if not isinstance(frag, Fragment):
        raise LangError(f"pack needs a Fragment, got {frag!r}")
    if frag.ownership.values % 2:
        raise LangError(f"pack needs an even number of slots per thread, {ownership_name(frag.ownership)} has "
                        f"{frag.ownership.values}")
    vals = [L.cast(v, T.f32, _ctx=_ctx) for v in frag.values]
    words = [_ctx.builder.value("nv.pack2", [vals[i], vals[i + 1]], T.u32, dtype=dtype.name)
             for i in range(0, len(vals), 2)]
    return PackedFragment(dtype, frag.ownership, words)


@builtin
def unpack(packed, *, _ctx) -> Fragment:
    """The 16-bit values of a packed fragment as an ordinary Fragment of that dtype."""
    if not isinstance(packed, PackedFragment):
        raise LangError(f"unpack needs a PackedFragment, got {packed!r}")
    vals = []
    for w in packed.words:
        op = _ctx.builder.create("nv.unpack2", [w], [packed.dtype, packed.dtype], {})
        vals.extend(op.results)
    return Fragment(packed.dtype, packed.ownership, vals)


@builtin
def relayout(frag, ownership, *, _ctx):
    """The same values under another ownership of the same logical shape, by renaming registers
    within each thread (``relayout_plan``); a compile error when a value would have to move to
    another thread. This is how an MMA accumulator becomes the next MMA's A operand (the
    m16n8k16 accumulators of two adjacent n8 tiles are exactly an A fragment)."""
    if not isinstance(ownership, Ownership):
        raise LangError(f"relayout needs an Ownership, got {ownership!r}")
    if isinstance(frag, PackedFragment):
        raise LangError("relayout a fragment before packing it")
    if not isinstance(frag, Fragment):
        raise LangError(f"relayout needs a Fragment, got {frag!r}")
    try:
        plan = relayout_plan(frag.ownership, ownership)
    except ValueError as exc:
        raise LangError(f"relayout from {ownership_name(frag.ownership)} to {ownership_name(ownership)}: "
                        f"{exc}") from None
    return Fragment(frag.dtype, ownership, [frag.values[s] for s in plan.sources])


def pack_bits(ctx, values, per: int) -> list:
    """Pack ``per`` consecutive 16- or 8-bit values into 32-bit words, the lowest slot in the low bits
    (bit moves only: the register images of MMA operands and ldmatrix/stmatrix)."""
    out = []
    for i in range(0, len(values), per):
        word = None
        for j, v in enumerate(values[i:i + per]):
            bits = v.type.bits
            unsigned = T.scalar_type(f"u{bits}")
            raw = v if v.type == unsigned else ctx.builder.value("arith.bitcast", [v], unsigned)
            wide = L.cast(raw, T.u32, _ctx=ctx)
            part = L.binary(ctx, "<<", wide, bits * j) if j else wide
            word = part if word is None else L.binary(ctx, "|", word, part)
        out.append(word)
    return out
