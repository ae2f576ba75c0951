"""Types of the tylo IR: scalars, pointers and the constexpr marker.

Scalar types are interned singletons (compare with ``is`` or ``==``). Their
names are the ones users write (``tylo.f32``) and the ones the IR printer and
signatures use (``*f32`` is a global pointer to f32).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Type", "ScalarType", "PointerType", "ParamBlobType", "Ptr", "constexpr", "ConstexprMarker",
    "bool_", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
    "f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2",
    "SCALAR_TYPES", "scalar_type", "promote", "int_type_for",
]


class Type:
    """Base class of IR types."""


@dataclass(frozen=True, eq=True)
class ScalarType(Type):
    """A scalar dtype. ``kind`` is one of 'bool', 'int', 'uint', 'float', 'fp8'."""

    name: str
    kind: str
    bits: int

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def is_int(self) -> bool:
        """Integer (signed or unsigned), not bool."""
        return self.kind in ("int", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind == "int"

    @property
    def is_float(self) -> bool:
        """An arithmetic float type (fp8 is storage-only and excluded)."""
        return self.kind == "float"

    @property
    def is_fp8(self) -> bool:
        return self.kind == "fp8"

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __call__(self, value):
        """``tylo.f32(x)`` in a kernel is a cast; on the host it is an error."""
        raise TypeError(f"tylo.{self.name}(...) is a cast and only works inside a kernel")


@dataclass(frozen=True, eq=True)
class PointerType(Type):
    """A typed pointer. ``space`` is 'global', 'shared' or 'generic'."""

    elem: ScalarType
    space: str = "global"

    def __repr__(self) -> str:
        prefix = {"global": "*", "shared": "*shared ", "generic": "*generic "}[self.space]
        return f"{prefix}{self.elem.name}"

    __str__ = __repr__


bool_ = ScalarType("bool", "bool", 1)
i8 = ScalarType("i8", "int", 8)
i16 = ScalarType("i16", "int", 16)
i32 = ScalarType("i32", "int", 32)
i64 = ScalarType("i64", "int", 64)
u8 = ScalarType("u8", "uint", 8)
u16 = ScalarType("u16", "uint", 16)
u32 = ScalarType("u32", "uint", 32)
u64 = ScalarType("u64", "uint", 64)
f16 = ScalarType("f16", "float", 16)
bf16 = ScalarType("bf16", "float", 16)
f32 = ScalarType("f32", "float", 32)
f64 = ScalarType("f64", "float", 64)
f8e4m3 = ScalarType("f8e4m3", "fp8", 8)
f8e5m2 = ScalarType("f8e5m2", "fp8", 8)

SCALAR_TYPES: dict[str, ScalarType] = {
    t.name: t for t in (bool_, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, f8e4m3, f8e5m2)
}


def scalar_type(name: str) -> ScalarType:
    try:
        return SCALAR_TYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; expected one of {', '.join(SCALAR_TYPES)}") from None


class _PtrFactory:
    """``tylo.Ptr[tylo.bf16]`` annotates a parameter as a global pointer to bf16."""

    def __getitem__(self, elem) -> PointerType:
        if not isinstance(elem, ScalarType):
            raise TypeError(f"Ptr[...] takes a tylo dtype, got {elem!r}")
        return PointerType(elem, "global")

    def __repr__(self) -> str:
        return "tylo.Ptr"


Ptr = _PtrFactory()


@dataclass(frozen=True, eq=True)
class ParamBlobType(Type):
    """A kernel parameter passed by value as ``nbytes`` opaque bytes (a TMA descriptor).

    Its IR value is the blob's generic address (``cvta.param``); ``kind`` and ``static``
    (hashable, e.g. the TMA plan) tell the feature that reads it what it holds.
    """

    kind: str
    nbytes: int
    align: int
    static: object = None

    def __repr__(self) -> str:
        return f"blob<{self.kind}, {self.nbytes}B>"

    __str__ = __repr__


class ConstexprMarker:
    """Annotation marking a parameter as a compile-time constant (part of the cache key)."""

    def __repr__(self) -> str:
        return "tylo.constexpr"


constexpr = ConstexprMarker()


def int_type_for(value: int) -> ScalarType:
    """The type a Python int argument takes: i32 when it fits, else i64, else u64."""
    if -(2**31) <= value < 2**31:
        return i32
    if -(2**63) <= value < 2**63:
        return i64
    if 0 <= value < 2**64:
        return u64
    raise OverflowError(f"integer {value} does not fit in 64 bits")


def promote(a: ScalarType, b: ScalarType) -> ScalarType:
    """Result type of a binary arithmetic op on two runtime scalars (docs/language.md).

    * equal types: that type;
    * bool with anything: the other type;
    * two floats: the wider; f16 with bf16 gives f32;
    * int with float: the float;
    * two ints (C rules): the wider; at equal width, unsigned wins.
    fp8 types are storage-only: callers reject them before promoting.
    """
    if a == b:
        return a
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.is_float and b.is_float:
        if a.bits == b.bits:  # f16 vs bf16
            return f32
        return a if a.bits > b.bits else b
    if a.is_float:
        return a
    if b.is_float:
        return b
    # both integers
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if not a.is_signed else b
