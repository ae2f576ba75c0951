"""Warp-level MMA (``mma.sync``, sm_80 / sm_89): atoms, their fragment ownership, tiled geometry.

Host side (pure, no IR):

* ``MMAAtom(shape, a_dtype, b_dtype, acc_dtype)``: one ``mma.sync.aligned.mMnNkK.row.col``
  instruction (ISA data, defined beside its op in ``tylo.ir.nv.mma``). ``.a_ownership`` / ``.b_ownership`` /
  ``.c_ownership`` say which lane holds
  which element of A ``(M, K)``, B ``(K, N)`` and C/D ``(M, N)`` (the PTX ISA figures
  "Matrix Fragments for mma.m16n8kK"), with value slots in PTX register-element order:
  slot ``i`` is element ``a_i`` of the ISA (register ``i // elements_per_reg``, the low
  half / lowest byte first within a 32-bit register).
* ``TiledMMA(atom, warps=(wm, wn), repeats=(rm, rn), k=K)``: the CTA tile built from one
  atom (thread and slot order documented on the class).

Kernel side: ``mma_sync(atom, a, b, c)`` emits the IR op ``nv.mma.sync`` (lowered to inline
PTX by ``tylo.codegen.ptx.mma``) on tuples of 32-bit register values.

TF32: multiplicands are given as the marker ``tf32`` (``MMAAtom((16, 8, 8), tf32, tf32, f32)``);
their registers hold f32 bit patterns (the hardware ignores the low 13 mantissa bits), so
kernels pass ``f32`` (or ``u32``/``i32``) values. ``f32`` itself is rejected as a
multiplicand type so that the precision loss is always spelled out.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import types as T
from ..ir.core import Value
from ..ir.nv.mma import MMA_ATOMS, TF32, MMAAtom, tf32
from ..layouts import Layout, Ownership
from .base import LangError, builtin

__all__ = ["tf32", "TF32", "MMAAtom", "TiledMMA", "mma_sync", "MMA_ATOMS"]


# -- tiled geometry ---------------------------------------------------------------------------

def _place(tv: Layout, rows: int, big_rows: int) -> tuple:
    """Re-express strides of an atom layout indexing a column-major ``(rows, *)`` matrix in a
    column-major ``(big_rows, *)`` matrix: a stride below ``rows`` moves along rows, a multiple
    of ``rows`` along columns (true of every atom layout here)."""
    def f(s, d):
        if isinstance(s, tuple):
            return tuple(f(x, y) for x, y in zip(s, d))
        if s == 1 or d < rows:
            return d
        if d % rows:
            raise AssertionError(f"atom stride {d} mixes rows and columns")
        return d // rows * big_rows
    return f(tv.shape, tv.stride)


@dataclass(frozen=True)
class TiledMMA:
    """A CTA tile ``(wm * rm * M, wn * rn * N) x k`` built from one ``MMAAtom``.

    Threads: ``thread = lane + 32 * warp`` with ``warp = wi + wm * wj`` (warp grid
    column-major, M fastest), ``threads = 32 * wm * wn``.

    Placement (CuTe's interleaved order): repeat ``(ri, rj)`` of warp ``(wi, wj)`` computes
    the atom tile at rows ``M * (ri * wm + wi)``, columns ``N * (rj * wn + wj)``; so the
    warps tile an ``(wm * M, wn * N)`` block and the repeats step over such blocks.

    Slot order: accumulator slot ``c + C * (ri + rm * rj)`` (atom slot fastest, then
    repeat along M, then along N; ``C = atom.c_ownership.values``). Operands for one
    k-step (``a_ownership`` ``(TM, atom.K)``, ``b_ownership`` ``(atom.K, TN)``): slot
    ``a + A * ri`` (B: ``b + B * rj``), replicated over the warps of the other axis.
    ``a_ownership_k`` / ``b_ownership_k`` cover the whole ``k`` with the k-step slowest.

    >>> from tylo.ir.types import f16, f32
    >>> t = TiledMMA(MMAAtom((16, 8, 16), f16, f16, f32), warps=(2, 2), repeats=(2, 4), k=32)
    >>> t.tile, t.threads, t.k_steps, t.c_ownership.values
    ((64, 64), 128, 2, 32)
    """

    atom: MMAAtom
    warps: tuple = (1, 1)
    repeats: tuple = (1, 1)
    k: int | None = None

    def __post_init__(self):
        if not isinstance(self.atom, MMAAtom):
            raise ValueError(f"TiledMMA: atom must be an MMAAtom, got {self.atom!r}")
        for what in ("warps", "repeats"):
            v = getattr(self, what)
            v = tuple(v) if isinstance(v, (tuple, list)) else v
            if not (type(v) is tuple and len(v) == 2 and all(type(x) is int and x > 0 for x in v)):
                raise ValueError(f"TiledMMA: {what} must be two positive ints (along M, along N), got {v!r}")
            object.__setattr__(self, what, v)
        k = self.atom.K if self.k is None else self.k
        if type(k) is not int or k <= 0 or k % self.atom.K:
            raise ValueError(f"TiledMMA: k must be a positive multiple of the atom's K = {self.atom.K}, got {k!r}")
        object.__setattr__(self, "k", k)
        if self.threads > 1024:
            raise ValueError(f"TiledMMA: {self.threads} threads exceed the 1024 of a CTA")

    @property
    def threads(self) -> int:
        return 32 * self.warps[0] * self.warps[1]

    @property
    def tile(self) -> tuple:
        """The accumulator tile ``(TM, TN)``."""
        return (self.warps[0] * self.repeats[0] * self.atom.M, self.warps[1] * self.repeats[1] * self.atom.N)

    @property
    def k_steps(self) -> int:
        return self.k // self.atom.K

    @property
    def mma_count(self) -> int:
        """``mma.sync`` instructions per warp for the whole ``k``."""
        return self.repeats[0] * self.repeats[1] * self.k_steps

    def _tv(self, atom_tv, rows, big_rows, warp_strides, rep_shape, rep_strides):
        ts, vs = atom_tv.shape
        td, vd = _place(atom_tv, rows, big_rows)
        return Layout(((ts, self.warps), (vs, rep_shape)), ((td, warp_strides), (vd, rep_strides)))

    @property
    def c_ownership(self) -> Ownership:
        a = self.atom
        (wm, wn), (rm, rn) = self.warps, self.repeats
        TM, TN = self.tile
        tv = self._tv(a.c_ownership.tv_layout, a.M, TM, (a.M, TM * a.N), (rm, rn),
                      (a.M * wm, TM * a.N * wn))
        return Ownership((TM, TN), tv, f"{self}.C")

    @property
    def a_ownership(self) -> Ownership:
        """A for one k-step: ``(TM, atom.K)``, replicated over the warps along N."""
        a = self.atom
        TM = self.tile[0]
        tv = self._tv(a.a_ownership.tv_layout, a.M, TM, (a.M, 0), self.repeats[0], a.M * self.warps[0])
        return Ownership((TM, a.K), tv, f"{self}.A")

    @property
    def b_ownership(self) -> Ownership:
        """B for one k-step: ``(atom.K, TN)``, replicated over the warps along M."""
        a = self.atom
        tv = self._tv(a.b_ownership.tv_layout, a.K, a.K, (0, a.K * a.N), self.repeats[1],
                      a.K * a.N * self.warps[1])
        return Ownership((a.K, self.tile[1]), tv, f"{self}.B")

    @property
    def a_ownership_k(self) -> Ownership:
        """A over the whole ``(TM, k)``; slot ``a + A * (ri + rm * kstep)``."""
        a = self.atom
        TM = self.tile[0]
        tv = self._tv(a.a_ownership.tv_layout, a.M, TM, (a.M, 0), (self.repeats[0], self.k_steps),
                      (a.M * self.warps[0], TM * a.K))
        return Ownership((TM, self.k), tv, f"{self}.A[k]")

    @property
    def b_ownership_k(self) -> Ownership:
        """B over the whole ``(k, TN)``; slot ``b + B * (rj + rn * kstep)``."""
        a = self.atom
        K = self.k
        tv = self._tv(a.b_ownership.tv_layout, a.K, K, (0, K * a.N), (self.repeats[1], self.k_steps),
                      (K * a.N * self.warps[1], a.K))
        return Ownership((K, self.tile[1]), tv, f"{self}.B[k]")

    def __str__(self) -> str:
        return (f"TiledMMA({self.atom}, warps={self.warps[0]}x{self.warps[1]}, "
                f"repeats={self.repeats[0]}x{self.repeats[1]}, k={self.k})")


# -- the IR op and the builtin ------------------------------------------------------------------



def _regs(x, n: int, allowed: tuple, what: str, atom: MMAAtom) -> list:
    if isinstance(x, Value) or not isinstance(x, (tuple, list)):
        raise LangError(f"mma_sync: {what} must be a tuple of {n} register values for {atom}, got {x!r}")
    if len(x) != n:
        raise LangError(f"mma_sync: {atom} takes {n} {what} registers per thread, got {len(x)}")
    for i, v in enumerate(x):
        if not isinstance(v, Value):
            raise LangError(f"mma_sync: {what}[{i}] of {atom} must be a runtime register value, got {v!r}")
        if v.type not in allowed:
            raise LangError(f"mma_sync: {what}[{i}] of {atom} is {v.type}; expected "
                            f"{' or '.join(map(str, allowed))} (32-bit registers"
                            f"{', packed' if atom.elements_per_reg > 1 and what != 'c' else ''})")
    return list(x)


@builtin
def mma_sync(atom, a, b, c, *, _ctx) -> tuple:
    """``D = A @ B + C`` for one warp: ``mma.sync.aligned.<atom>``; returns D's registers.

    ``a``/``b``/``c`` are tuples of 32-bit values laid out as ``atom.a_ownership`` etc.
    (packed ``u32``/``i32`` for 16- and 8-bit data, ``f32`` or packed bits for tf32,
    ``f32`` for f32 accumulators, ``i32`` for int accumulators, ``u32`` f16x2 for f16).
    All 32 lanes of the warp must execute it (``.aligned``).
    """
    if not isinstance(atom, MMAAtom):
        raise LangError(f"mma_sync: the first argument must be a compile-time MMAAtom, got {atom!r}")
    if _ctx.sm < atom.min_sm:
        raise LangError(f"mma_sync: {atom} needs sm_{atom.min_sm} or newer (target {_ctx.arch})")
    av = _regs(a, atom.a_regs, atom.ab_reg_types, "a", atom)
    bv = _regs(b, atom.b_regs, atom.ab_reg_types, "b", atom)
    cv = _regs(c, atom.c_regs, atom.c_reg_types, "c", atom)
    op = _ctx.builder.create("nv.mma.sync", av + bv + cv, [v.type for v in cv],
                             {"shape": atom.shape, "types": atom.types, "a": len(av), "b": len(bv), "c": len(cv)})
    return tuple(op.results)


# -- fragment-level MMA ---------------------------------------------------------------------------

def _atom_of(plan):
    if isinstance(plan, MMAAtom):
        return plan, (1, 1)
    if isinstance(plan, TiledMMA):
        return plan.atom, plan.repeats
    raise LangError(f"mma needs an MMAAtom or a TiledMMA, got {plan!r}")


def _operand_ownerships(plan):
    if isinstance(plan, MMAAtom):
        return plan.a_ownership, plan.b_ownership, plan.c_ownership
    return plan.a_ownership, plan.b_ownership, plan.c_ownership


def _operand_regs(ctx, frag, ownership, dtype, atom, what):
    from ..layouts import same_distribution
    from .fragment import Fragment, PackedFragment, pack_bits

    per = atom.elements_per_reg
    if isinstance(frag, PackedFragment):
        if per != 2 or frag.dtype != dtype:
            raise LangError(f"mma: a packed {frag.dtype} fragment cannot be the {what} operand of {atom}")
        owned = frag.ownership
        regs = list(frag.words)
    elif isinstance(frag, Fragment):
        want = T.f32 if dtype is tf32 else dtype
        if frag.dtype != want:
            raise LangError(f"mma: the {what} operand of {atom} must hold {want}, got a {frag.dtype} fragment; "
                            f"convert with .astype(tylo.{want})")
        owned = frag.ownership
        regs = list(frag.values) if per == 1 else pack_bits(ctx, list(frag.values), per)
    else:
        raise LangError(f"mma: the {what} operand must be a Fragment, got {frag!r}")
    if owned != ownership and not same_distribution(owned, ownership):
        raise LangError(f"mma: the {what} operand has ownership {owned.name or owned!r}, but {atom} needs "
                        f"{ownership.name or ownership!r}; load it with that ownership")
    return regs


@builtin
def mma(plan, a, b, c, *, _ctx, **kwargs):
    """``c + a @ b`` for an ``MMAAtom`` (one warp) or a ``TiledMMA`` (the CTA), on fragments.

    Plans with their own MMA define ``__tylo_mma__`` and take their own arguments: a tcgen05
    plan is ``mma(atom, d, a, b, accumulate=)`` with D in tensor memory.

    ``a``/``b`` are fragments with the plan's A/B ownership (16-bit inputs may also come as a
    ``PackedFragment``, e.g. an f32 accumulator packed to bf16 without any lane traffic);
    ``c`` has the C ownership. Returns the new accumulator fragment.
    """
    hook = getattr(plan, "__tylo_mma__", None)
    if hook is not None:  # plans with their own MMA (tcgen05: the accumulator lives in TMEM)
        return hook(_ctx, a, b, c, **kwargs)
    if kwargs:
        raise LangError(f"mma: {', '.join(kwargs)} apply only to plans with their own MMA (tcgen05)")
    from .fragment import Fragment

    atom, (rm, rn) = _atom_of(plan)
    if atom.acc_dtype not in (T.f32, T.i32):
        raise LangError(f"mma on fragments supports f32 and i32 accumulators; use mma_sync for {atom}")
    a_own, b_own, c_own = _operand_ownerships(plan)
    ar = _operand_regs(_ctx, a, a_own, atom.a_dtype, atom, "A")
    br = _operand_regs(_ctx, b, b_own, atom.b_dtype, atom, "B")
    if not isinstance(c, Fragment) or c.dtype != atom.acc_dtype:
        raise LangError(f"mma: the accumulator must be a {atom.acc_dtype} Fragment, got {c!r}")
    if c.ownership != c_own and not same_distribution_safe(c.ownership, c_own):
        raise LangError(f"mma: the accumulator has ownership {c.ownership.name or c.ownership!r}, "
                        f"expected {c_own.name}")
    na, nb, nc = atom.a_regs, atom.b_regs, atom.c_regs
    cv = list(c.values)
    for rj in range(rn):
        for ri in range(rm):
            base = nc * (ri + rm * rj)
            d = mma_sync(atom, tuple(ar[na * ri:na * (ri + 1)]), tuple(br[nb * rj:nb * (rj + 1)]),
                         tuple(cv[base:base + nc]), _ctx=_ctx)
            cv[base:base + nc] = d
    return Fragment(c.dtype, c.ownership, cv)


def same_distribution_safe(a, b) -> bool:
    from ..layouts import same_distribution
    try:
        return same_distribution(a, b)
    except ValueError:
        return False


@builtin
def zero_accumulator(plan, *, _ctx):
    """A zero accumulator fragment for an ``MMAAtom``/``TiledMMA`` (or a WGMMA plan that defines one)."""
    from . import core as L
    from .fragment import Fragment

    if hasattr(plan, "__tylo_zero_accumulator__"):
        return plan.__tylo_zero_accumulator__(_ctx)
    atom, _ = _atom_of(plan)
    own = _operand_ownerships(plan)[2]
    zero = L.to_value(_ctx, 0, atom.acc_dtype)
    return Fragment(atom.acc_dtype, own, [zero] * own.values)
