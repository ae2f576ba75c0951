"""Warp-level MMA (``mma.sync``, sm_80 / sm_89): the ``nv.mma.sync`` op and the ISA's atoms.

``MMAAtom(shape, a_dtype, b_dtype, acc_dtype)`` is one ``mma.sync.aligned.mMnNkK.row.col``
instruction; ``.a_ownership`` / ``.b_ownership`` / ``.c_ownership`` say which lane holds which
element of A ``(M, K)``, B ``(K, N)`` and C/D ``(M, N)`` (the PTX ISA figures "Matrix Fragments
for mma.m16n8kK"), with value slots in PTX register-element order: slot ``i`` is element ``a_i``
of the ISA (register ``i // elements_per_reg``, the low half / lowest byte first within a 32-bit
register). These fragment tables are the op's meaning: the interpreter places values through
them, ``tylo.lang.mma`` builds tiled plans on them.

TF32: multiplicands are given as the marker ``tf32``; their registers hold f32 bit patterns (the
hardware ignores the low 13 mantissa bits). ``f32`` itself is rejected as a multiplicand type so
that the precision loss is always spelled out.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...layouts import Layout, Ownership
from .. import types as T
from ..opdef import Attr, OpDef
from ..ops import define_ops
from ..types import ScalarType

__all__ = ["DEFINITIONS", "tf32", "TF32", "MMAAtom", "MMA_ATOMS"]


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


# -- the IR op ------------------------------------------------------------------------------------

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


DEFINITIONS = define_ops(
    OpDef("nv.mma.sync", None, None, True, _check_mma,
          (Attr("shape", (tuple,)), Attr("types", (tuple,)), Attr("a", (int,)), Attr("b", (int,)), Attr("c", (int,))),
          convergent=True,
          doc="*a, *b, *c registers -> d registers: mma.sync.aligned.mMnNkK.row.col (pure: a function of its inputs)"),
)
