"""Warp-level MMA (``mma.sync``, sm_80 / sm_89): atoms, their fragment ownership, tiled geometry.

Host side (pure, no IR):

* ``MMAAtom(shape, a_dtype, b_dtype, acc_dtype)``: one ``mma.sync.aligned.mMnNkK.row.col``
  instruction. ``.a_ownership`` / ``.b_ownership`` / ``.c_ownership`` say which lane holds
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
from ..ir.ops import register_op
from ..ir.types import ScalarType
from ..layouts import Layout, Ownership
from .base import LangError, builtin

__all__ = ["tf32", "TF32", "MMAAtom", "TiledMMA", "mma_sync", "MMA_ATOMS"]


@dataclass(frozen=True)
class TF32:
    """Marker dtype for TF32 multiplicands (stored as f32 bits, 19 bits used)."""

    name: str = "tf32"
    bits: int = 32

    def __repr__(self) -> str:
        return "tf32"


tf32 = TF32()

_INT8 = (T.i8, T.u8)
_FP8 = (T.f8e4m3, T.f8e5m2)

# (family, M, N, K) -> (A tv layout, B tv layout) in the column-major index of A (M, K) and
# B (K, N). Thread mode ((4, 8)) is lane = t + 4 * g (t = threadID_in_group, g = groupID);
# the value mode follows the ISA's element index. Derived from the PTX ISA fragment
# formulas, e.g. m16n8k16 f16 A: a_i at row g + 8*((i >> 1) & 1), col 2t + (i & 1) + 8*(i >> 2)
# gives index g + 8h + 16 * (2t + b + 8q) = (t: 32, g: 1) x (b: 16, h: 8, q: 128).
_OPERANDS = {
    ("16bit", 16, 8, 8): (Layout(((4, 8), (2, 2)), ((32, 1), (16, 8))),
                          Layout(((4, 8), 2), ((2, 8), 1))),
    ("16bit", 16, 8, 16): (Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128))),
                           Layout(((4, 8), (2, 2)), ((2, 16), (1, 8)))),
    ("tf32", 16, 8, 4): (Layout(((4, 8), 2), ((16, 1), 8)),
                         Layout(((4, 8), 1), ((1, 4), 0))),
    ("tf32", 16, 8, 8): (Layout(((4, 8), (2, 2)), ((16, 1), (8, 64))),
                         Layout(((4, 8), 2), ((1, 8), 4))),
    ("8bit", 16, 8, 16): (Layout(((4, 8), (4, 2)), ((64, 1), (16, 8))),
                          Layout(((4, 8), 4), ((4, 16), 1))),
    ("8bit", 16, 8, 32): (Layout(((4, 8), (4, 2, 2)), ((64, 1), (16, 8, 256))),
                          Layout(((4, 8), (4, 2)), ((4, 32), (1, 16)))),
}
# C/D (16, 8), any accumulator type: c_i at row g + 8*(i >> 1), col 2t + (i & 1).
_ACC = Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))


def _family(a) -> str | None:
    if a == tf32:
        return "tf32"
    if a in (T.f16, T.bf16):
        return "16bit"
    if a in _INT8 or a in _FP8:
        return "8bit"
    return None


@dataclass(frozen=True)
class MMAAtom:
    """One ``mma.sync.aligned.mMnNkK.row.col`` instruction of sm_80 / sm_89.

    >>> from tylo.ir.types import bf16, f32
    >>> atom = MMAAtom((16, 8, 16), bf16, bf16, f32)
    >>> atom.types
    ('bf16', 'bf16', 'f32')
    >>> atom.a_regs, atom.b_regs, atom.c_regs, atom.elements_per_reg, atom.min_sm
    (4, 2, 4, 2, 80)
    >>> atom.c_ownership.coord(5, 3)
    (9, 3)
    """

    shape: tuple
    a_dtype: object
    b_dtype: object
    acc_dtype: ScalarType

    def __post_init__(self):
        shape = tuple(self.shape) if isinstance(self.shape, (tuple, list)) else self.shape
        object.__setattr__(self, "shape", shape)
        rule = _validate(shape, self.a_dtype, self.b_dtype, self.acc_dtype)
        if rule:
            raise ValueError(f"MMAAtom{_fmt(self)}: {rule}")

    # -- geometry -------------------------------------------------------------------
    @property
    def M(self) -> int:
        return self.shape[0]

    @property
    def N(self) -> int:
        return self.shape[1]

    @property
    def K(self) -> int:
        return self.shape[2]

    @property
    def elements_per_reg(self) -> int:
        """Multiplicand (A and B) elements per 32-bit register: 2 (16-bit), 4 (8-bit), 1 (tf32)."""
        return 32 // self.a_dtype.bits

    @property
    def acc_elements_per_reg(self) -> int:
        """Accumulator elements per 32-bit register: 2 for f16 (packed f16x2), else 1."""
        return 32 // self.acc_dtype.bits

    @property
    def a_regs(self) -> int:
        return self.M * self.K // 32 // self.elements_per_reg

    @property
    def b_regs(self) -> int:
        return self.K * self.N // 32 // self.elements_per_reg

    @property
    def c_regs(self) -> int:
        return self.M * self.N // 32 // self.acc_elements_per_reg

    @property
    def min_sm(self) -> int:
        """The oldest SM that executes this shape and type (PTX ISA target notes)."""
        if self.a_dtype in _FP8:
            return 89
        if self.shape == (16, 8, 8) and self.a_dtype == T.f16:
            return 75
        return 80

    @property
    def min_ptx(self) -> int:
        """The oldest PTX ISA version (x10) that has this instruction (fp8: 8.4)."""
        return 84 if self.a_dtype in _FP8 else 70

    @property
    def types(self) -> tuple:
        """Names of the A, B and accumulator types (the IR op's attribute; codegen spells the PTX)."""
        return (self.a_dtype.name, self.b_dtype.name, self.acc_dtype.name)

    # -- register types -----------------------------------------------------------------
    @property
    def ab_reg_types(self) -> tuple:
        """IR types accepted for one A/B register: packed u32/i32, or f32 too for tf32."""
        return (T.f32, T.u32, T.i32) if self.a_dtype == tf32 else (T.u32, T.i32)

    @property
    def c_reg_types(self) -> tuple:
        """IR types accepted for one C register (D has the same types as C)."""
        if self.acc_dtype == T.f32:
            return (T.f32,)
        if self.acc_dtype == T.i32:
            return (T.i32, T.u32)
        return (T.u32, T.i32)  # f16x2

    # -- ownership ----------------------------------------------------------------------
    @property
    def a_ownership(self) -> Ownership:
        """A ``(M, K)`` over 32 lanes; slot ``i`` is element ``a_i`` of the ISA figure."""
        tv = _OPERANDS[(_family(self.a_dtype), *self.shape)][0]
        return Ownership((self.M, self.K), tv, f"{self._tag()}.A")

    @property
    def b_ownership(self) -> Ownership:
        """B ``(K, N)`` over 32 lanes; slot ``i`` is element ``b_i`` of the ISA figure."""
        tv = _OPERANDS[(_family(self.a_dtype), *self.shape)][1]
        return Ownership((self.K, self.N), tv, f"{self._tag()}.B")

    @property
    def c_ownership(self) -> Ownership:
        """C/D ``(M, N)`` over 32 lanes; slot ``i`` is element ``c_i`` (f16: two per register)."""
        return Ownership((self.M, self.N), _ACC, f"{self._tag()}.C")

    def _tag(self) -> str:
        return f"mma.m{self.M}n{self.N}k{self.K}.{self.a_dtype.name}.{self.b_dtype.name}.{self.acc_dtype.name}"

    def __str__(self) -> str:
        return self._tag()


def _fmt(atom) -> str:
    return f"({atom.shape!r}, {atom.a_dtype!r}, {atom.b_dtype!r}, {atom.acc_dtype!r})"


def _validate(shape, a, b, acc) -> str | None:
    """The rule that (shape, a, b, acc) breaks, or None for a valid sm_80/sm_89 mma.sync."""
    if not (type(shape) is tuple and len(shape) == 3 and all(type(x) is int for x in shape)):
        return "shape must be a tuple (M, N, K) of ints"
    for what, t in (("a_dtype", a), ("b_dtype", b)):
        if t == T.f32:
            return f"{what} f32: f32 multiplicands run as TF32; pass tylo.lang.mma.tf32 to say so"
        if _family(t) is None:
            return (f"{what} {t!r} is not an mma.sync multiplicand type "
                    "(f16, bf16, tf32, i8, u8, f8e4m3, f8e5m2)")
    fa = _family(a)
    same = (a in _INT8 and b in _INT8) or (a in _FP8 and b in _FP8) or (fa != "8bit" and a == b)
    if not same:
        return f"A and B types must match (or both be 8-bit integers, or both fp8), got {a!r} and {b!r}"
    if a in _FP8:
        if shape != (16, 8, 32):
            return f"fp8 mma.sync has shape (16, 8, 32) only, got {shape}"
        if acc != T.f32:
            return f"fp8 mma.sync accumulates in f32, got {acc!r}"
        return None
    shapes = {"16bit": ((16, 8, 8), (16, 8, 16)), "tf32": ((16, 8, 4), (16, 8, 8)),
              "8bit": ((16, 8, 16), (16, 8, 32))}[fa]
    if shape not in shapes:
        return f"{a!r} mma.sync shapes are {', '.join(map(str, shapes))}, got {shape}"
    if fa == "8bit":
        return None if acc == T.i32 else f"8-bit integer mma.sync accumulates in i32, got {acc!r}"
    if a == T.f16:
        return None if acc in (T.f32, T.f16) else f"f16 mma.sync accumulates in f32 or f16, got {acc!r}"
    return None if acc == T.f32 else f"{a!r} mma.sync accumulates in f32, got {acc!r}"


def _all_atoms() -> tuple:
    out = []
    for k in (8, 16):
        out += [MMAAtom((16, 8, k), T.f16, T.f16, T.f32), MMAAtom((16, 8, k), T.f16, T.f16, T.f16),
                MMAAtom((16, 8, k), T.bf16, T.bf16, T.f32)]
    out += [MMAAtom((16, 8, k), tf32, tf32, T.f32) for k in (4, 8)]
    out += [MMAAtom((16, 8, k), a, b, T.i32) for k in (16, 32) for a in _INT8 for b in _INT8]
    out += [MMAAtom((16, 8, 32), a, b, T.f32) for a in _FP8 for b in _FP8]
    return tuple(out)


MMA_ATOMS = _all_atoms()
"""Every valid atom (all shape and type combinations of sm_80 / sm_89 ``mma.sync``)."""


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

def _check_mma(op):
    na, nb, nc = (op.attrs.get(x) for x in ("a", "b", "c"))
    if not all(type(n) is int and n > 0 for n in (na, nb, nc)) or len(op.attrs.get("shape", ())) != 3 \
            or len(op.attrs.get("types", ())) != 3:
        return "needs attrs shape (M, N, K), types (a, b, acc) and a, b, c (register counts)"
    if len(op.operands) != na + nb + nc:
        return f"has {len(op.operands)} operands, attrs say {na} + {nb} + {nc}"
    if len(op.results) != nc:
        return f"has {len(op.results)} results, expected {nc} (one per C register)"
    for v in op.operands:
        if v.type not in (T.u32, T.i32, T.f32):
            return f"registers must be 32-bit (u32, i32, f32), got {v.type}"
    cs = op.operands[na + nb:]
    if [r.type for r in op.results] != [v.type for v in cs]:
        return "D registers must have the types of the C registers"
    return None


register_op("nv.mma.sync", None, None, True, _check_mma)


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
    from .fragment import Fragment, PackedFragment, pack_bits
    from ..layouts import same_distribution

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
        raise LangError(f"mma: the accumulator has ownership {c.ownership.name or c.ownership!r}, expected {c_own.name}")
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
