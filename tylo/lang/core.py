"""Scalars and memory: the SIMT subset of the kernel language.

Typing rules live here (docs/language.md states them): how Python literals
meet runtime values, promotion of two runtime scalars, casts, pointer
arithmetic, loads and stores, thread indices, shared memory, shuffles and
atomics. Each function takes runtime ``Value``s (or Python scalars) and emits
IR through ``ctx.builder``; misuse raises ``LangError``.
"""
from __future__ import annotations

import math as _pymath
from dataclasses import dataclass

from ..ir import scalars
from ..ir import types as T
from ..ir.core import Value
from ..ir.types import PointerType, ScalarType
from .base import LangError, builtin, describe_object

__all__ = [
    "thread_idx", "block_idx", "block_dim", "grid_dim", "lane_id", "warp_id", "sync_threads",
    "shared_array", "SharedArray", "shfl_sync", "shfl_xor", "shfl_up", "shfl_down",
    "atomic_add", "atomic_max", "atomic_min", "atomic_cas", "atomic_exch",
    "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "floor", "ceil", "tanh", "fma", "abs",
    "rcp", "fdiv",
    "minimum", "maximum", "where", "cast", "static_assert", "static_range", "printf",
    "to_value", "binary", "compare", "unary", "to_bool", "load", "store", "offset", "is_runtime",
]

PY_SCALARS = (bool, int, float)


def is_runtime(x) -> bool:
    return isinstance(x, Value)


# -- literals and promotion -----------------------------------------------------

def default_type(py) -> ScalarType:
    """The type a Python scalar takes on its own: bool, i32 (i64 if needed), f32."""
    if isinstance(py, bool):
        return T.bool_
    if isinstance(py, int):
        return _int_type_for(py)
    if isinstance(py, float):
        return T.f32
    raise LangError(f"{py!r} ({type(py).__name__}) is not a scalar value")


def _int_text(py: int) -> str:
    text = str(py)
    return text if len(text) <= 24 else f"{text[:4]}...{text[-2:]} ({len(text.lstrip('-'))} digits)"


def _int_type_for(py: int) -> ScalarType:
    if not -(1 << 63) <= py < (1 << 64):
        raise LangError(f"the integer constant {_int_text(py)} does not fit in 64 bits, the widest tylo integer")
    return T.int_type_for(py)


def _float_of(py, t: ScalarType) -> float:
    try:
        return float(py)
    except OverflowError:
        raise LangError(f"the integer constant {_int_text(py)} is too large for {t}") from None


def _fits(py: int, t: ScalarType) -> bool:
    if t.is_bool:
        return py in (0, 1)
    lo, hi = (-(1 << (t.bits - 1)), 1 << (t.bits - 1)) if t.is_signed else (0, 1 << t.bits)
    return lo <= py < hi


def literal_type(py, other: ScalarType) -> ScalarType:
    """The type a Python literal takes next to a runtime value of type ``other`` (weak typing).

    An int literal adopts an integer or float partner's type when it fits; a
    float literal adopts a float partner's type, and is f32 next to ints; a
    bool literal adopts any partner type.
    """
    if isinstance(py, bool):
        return other if not other.is_fp8 else T.bool_
    if isinstance(py, int):
        if other.is_float:
            _float_of(py, other)
            return other
        if other.is_int and _fits(py, other):
            return other
        return _int_type_for(py)
    if isinstance(py, float):
        return other if other.is_float else T.f32
    raise LangError(f"{_describe(py)} cannot be combined with a runtime {other}")


def constant(ctx, py, t: ScalarType) -> Value:
    """A Python scalar as a constant of type ``t``; it must be representable (a literal next to a value)."""
    if t.is_fp8:
        raise LangError(f"{t} is a storage type; constants must be created in f16/f32 and cast")
    if t.is_bool:
        value = bool(py)
    elif t.is_int:
        if isinstance(py, float) and not py.is_integer():
            raise LangError(f"{py!r} is not an integer and cannot be a {t} constant")
        value = int(py)
        if not _fits(value, t):
            raise LangError(f"the constant {_int_text(value)} does not fit in {t}")
    elif isinstance(py, int) and not isinstance(py, bool):
        _float_of(py, t)
        value = scalars.round_float(py, t)  # rounded once, also for integers beyond 2**53
    else:
        value = _float_of(py, t)
    return ctx.builder.constant(value, t)


def converted_constant(ctx, py, t: ScalarType) -> Value:
    """``tylo.T(py)`` / ``tylo.cast(py, T)`` of a Python scalar: the documented conversion rules, applied
    at compile time (a float to an integer truncates and saturates, to fp8 saturates; rounded once).

    fp8 has no constants (storage only): the converted value, exact in f32, is cast at run time.
    """
    if isinstance(py, float) and t.is_int:
        return constant(ctx, scalars.convert(py, T.f64, t), t)
    if t.is_fp8:
        return cast(constant(ctx, scalars.round_float(py, t), T.f32), t, _ctx=ctx)
    return constant(ctx, py, t)


def to_value(ctx, x, t: ScalarType | None = None) -> Value:
    """Make ``x`` a runtime value (of type ``t`` when given: literals convert, values are cast)."""
    if isinstance(x, Value):
        return x if t is None or x.type == t else cast(x, t, _ctx=ctx)
    if isinstance(x, PY_SCALARS):
        return constant(ctx, x, t or default_type(x))
    raise LangError(f"{_describe(x)} is not a scalar value")


def _describe(x) -> str:
    if isinstance(x, Value):
        return f"a runtime {x.type}"
    if isinstance(x, PY_SCALARS) or x is None:
        return f"the compile-time value {x!r}"
    return describe_object(x)


def _scalar(v: Value, what: str) -> ScalarType:
    t = v.type
    if not isinstance(t, ScalarType):
        raise LangError(f"{what} expects scalars, got {t}")
    if t.is_fp8:
        raise LangError(f"{t} is a storage-only type: convert it first, e.g. x.to(tylo.f32)")
    return t


def _literal_operands(ctx, a, b, what: str):
    """Two operands (at least one runtime) as runtime scalars, a literal taking its partner's type."""
    if any(isinstance(x, Value) and isinstance(x.type, PointerType) for x in (a, b)):
        raise LangError(f"{what} is not defined on pointers (only pointer + integer and indexing are)")
    if not isinstance(a, Value):
        tb = _scalar(b, what)
        a = to_value(ctx, a, literal_type(a, tb))
    elif not isinstance(b, Value):
        ta = _scalar(a, what)
        b = to_value(ctx, b, literal_type(b, ta))
    _scalar(a, what), _scalar(b, what)
    return a, b


def _operands(ctx, a, b, what: str):
    """Convert two operands (at least one runtime) to runtime values of one promoted type."""
    a, b = _literal_operands(ctx, a, b, what)
    t = T.promote(a.type, b.type)
    return cast(a, t, _ctx=ctx), cast(b, t, _ctx=ctx), t


_ARITH = {"+": "arith.add", "-": "arith.sub", "*": "arith.mul"}
_BITWISE = {"&": "arith.and", "|": "arith.or", "^": "arith.xor"}


def binary(ctx, op: str, a, b, fast: bool = False) -> Value:
    """``a <op> b`` for Python operator symbols; one side at least is runtime. ``fast``: the
    approximate form of ``/`` (``tylo.fdiv``)."""
    if op == "+" and isinstance(a, Value) and isinstance(a.type, PointerType):
        return offset(ctx, a, b)
    if op == "+" and isinstance(b, Value) and isinstance(b.type, PointerType):
        return offset(ctx, b, a)
    if op == "-" and isinstance(a, Value) and isinstance(a.type, PointerType):
        return offset(ctx, a, unary(ctx, "-", to_value(ctx, b) if not isinstance(b, Value) else b))
    bld = ctx.builder
    if op in ("<<", ">>"):
        if not isinstance(a, Value):
            a = to_value(ctx, a, literal_type(a, _scalar(b, op)) if isinstance(b, Value) else None)
        ta = _scalar(a, op)
        if not ta.is_int:
            raise LangError(f"shift needs an integer left operand, got {ta}")
        b = to_value(ctx, b, ta) if not isinstance(b, Value) else cast(b, ta, _ctx=ctx)
        return bld.value("arith.shl" if op == "<<" else "arith.shr", [a, b], ta)
    if op == "/":
        a, b = _literal_operands(ctx, a, b, op)
        t = T.promote(a.type, b.type)
        if not t.is_float:
            # true division of ints or bools: each operand is converted to f32 in its own type (promoting
            # i8 with u8 first would make -20 the u8 236)
            t = T.f32
        a, b = cast(a, t, _ctx=ctx), cast(b, t, _ctx=ctx)
        if fast and t == T.f64:
            raise LangError("fdiv(a, b, fast=True) is an f32 instruction; the operands are f64")
        return bld.value("arith.div", [a, b], t, **({"fast": True} if fast else {}))
    a, b, t = _operands(ctx, a, b, op)
    if t.is_bool and op in ("+", "-", "*", "//", "%"):
        t = T.i32   # arithmetic on two bools gives i32
        a, b = cast(a, t, _ctx=ctx), cast(b, t, _ctx=ctx)
    if op in _ARITH:
        return bld.value(_ARITH[op], [a, b], t)
    if op in _BITWISE:
        if t.is_float:
            raise LangError(f"bitwise {op} needs integers or bools, got {t}")
        return bld.value(_BITWISE[op], [a, b], t)
    if op == "//":
        if t.is_float:
            return unary(ctx, "floor", bld.value("arith.div", [a, b], t))
        return bld.value("arith.idiv", [a, b], t)
    if op == "%":
        if t.is_float:
            return bld.value("arith.frem", [a, b], t)
        return bld.value("arith.irem", [a, b], t)
    if op in ("min", "max"):
        return bld.value(f"arith.{op}", [a, b], t)
    if op == "**":
        raise LangError("** is not supported on runtime values; use multiplication or tylo.exp2")
    if op == "@":
        raise LangError("@ is not defined on scalars")
    raise LangError(f"unsupported operator {op}")


_PRED = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}


def compare(ctx, op: str, a, b) -> Value:
    a, b, _ = _operands(ctx, a, b, op)
    return ctx.builder.value("arith.cmp", [a, b], T.bool_, pred=_PRED[op])


def to_bool(ctx, x) -> Value:
    """Truth value of a runtime scalar: ``x != 0`` for numbers."""
    x = to_value(ctx, x)
    t = _scalar(x, "a condition")
    if t.is_bool:
        return x
    return compare(ctx, "!=", x, 0 if t.is_int else 0.0)


_MATH_UNARY = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "floor", "ceil", "tanh", "rcp"}


def unary(ctx, op: str, x, fast: bool = False) -> Value:
    """``op x`` for Python's unary operators and the ``math.*`` functions; ``fast``: the
    ``.approx.ftz`` form of ``exp2`` and ``rcp`` (``tylo.exp2(x, fast=True)``)."""
    x = to_value(ctx, x)
    t = _scalar(x, op)
    bld = ctx.builder
    if op == "-":
        if t.is_bool:
            raise LangError("unary - on a bool")
        return bld.value("arith.neg", [x], t)
    if op == "+":
        return x
    if op == "~":
        if not (t.is_int or t.is_bool):
            raise LangError(f"~ needs an integer, got {t}")
        return bld.value("arith.not", [x], t)
    if op == "not":
        return bld.value("arith.not", [to_bool(ctx, x)], T.bool_)
    if op == "abs":
        if t.is_bool:
            return x
        if t.is_int and not t.is_signed:
            return x
        return bld.value("math.abs", [x], t)
    if op in _MATH_UNARY:
        if not t.is_float:
            x, t = cast(x, T.f32, _ctx=ctx), T.f32
        if t == T.f64 and op not in ("sqrt", "floor", "ceil", "rcp"):
            raise LangError(f"{op} on f64 is not available (tylo has no f64 libm yet); convert to f32 first")
        if fast and t == T.f64:
            raise LangError(f"{op}(x, fast=True) is an f32 instruction; x is f64")
        return bld.value(f"math.{op}", [x], t, **({"fast": True} if fast else {}))
    raise LangError(f"unsupported unary operator {op}")


def cast(x, dtype: ScalarType, *, _ctx) -> Value:
    """Convert a scalar to ``dtype`` (C conversion rules: float->int truncates toward zero)."""
    if not isinstance(dtype, ScalarType):
        raise LangError(f"cast target must be a tylo dtype such as tylo.i32 or tylo.f32, got {_describe(dtype)}")
    if _structured(x):
        return x.map(_ctx, lambda v: cast(v, dtype, _ctx=_ctx))
    if isinstance(x, PY_SCALARS):
        return converted_constant(_ctx, x, dtype)
    if not isinstance(x, Value):
        return to_value(_ctx, x, dtype)
    if not isinstance(x.type, ScalarType):
        raise LangError(f"cannot cast {x.type} to {dtype}")
    if x.type == dtype:
        return x
    if (x.type.is_fp8 or dtype.is_fp8) and _ctx.sm < 89:
        raise LangError(f"conversion between {x.type} and {dtype} needs sm_89 or newer (target {_ctx.arch})")
    if dtype.is_bool and not x.type.is_fp8:
        return to_bool(_ctx, x)
    return _ctx.builder.value("arith.cast", [x], dtype)


cast = builtin(cast)


def bitcast(x, dtype: ScalarType, *, _ctx) -> Value:
    """The bits of the runtime scalar ``x`` read as ``dtype`` of the same width (no conversion), e.g. an
    f32's IEEE bits as i32 for exponent arithmetic. Of a pointer (or shared array): the same address as a
    pointer to ``dtype`` elements in the same memory, e.g. a bf16 ring reused as f32 once it is free."""
    if not isinstance(dtype, ScalarType):
        raise LangError(f"bitcast target must be a tylo dtype such as tylo.i32 or tylo.f32, got {_describe(dtype)}")
    x = x.ptr if isinstance(x, SharedArray) else x
    if isinstance(x, Value) and isinstance(x.type, PointerType):
        if dtype.is_bool:
            raise LangError("bitcast of a pointer needs a non-bool element type")
        if x.type.elem == dtype:
            return x
        return _ctx.builder.value("ptr.cast", [x], PointerType(dtype, x.type.space))
    if not isinstance(x, Value) or not isinstance(x.type, ScalarType):
        raise LangError(f"bitcast needs a runtime scalar, got {_describe(x)}")
    if x.type.bits != dtype.bits or x.type.is_bool or dtype.is_bool:
        raise LangError(f"bitcast needs types of one width: {x.type} ({x.type.bits} bits) to {dtype} "
                        f"({dtype.bits} bits)")
    if x.type == dtype:
        return x
    return _ctx.builder.value("arith.bitcast", [x], dtype)


bitcast = builtin(bitcast)
__all__ += ["bitcast"]  # noqa: PLE0605 - kept apart from the list above (one new name)


# -- pointers and memory ----------------------------------------------------------

def offset(ctx, ptr: Value, index) -> Value:
    if not isinstance(index, Value):
        if not isinstance(index, int) or isinstance(index, bool):
            raise LangError(f"pointer offsets must be integers, got {index!r}")
        index = constant(ctx, index, T.i32 if _fits(index, T.i32) else T.i64)
    t = _scalar(index, "pointer offset") if isinstance(index.type, ScalarType) else None
    if t is None or not t.is_int:
        raise LangError(f"pointer offsets must be integers, got {index.type}")
    return ctx.builder.value("ptr.offset", [ptr, index], ptr.type)


def load(ctx, ptr: Value) -> Value:
    if not isinstance(ptr, Value) or not isinstance(ptr.type, PointerType):
        raise LangError(f"cannot load from {_describe(ptr)}: indexing needs a pointer")
    return ctx.builder.value("mem.load", [ptr], ptr.type.elem)


def store_truncates(vt: ScalarType, elem: ScalarType) -> bool:
    """Would storing a ``vt`` value as ``elem`` silently drop its fraction (float into int or bool)? Such a
    store is an error for scalars, fragments and tiles alike: the kernel must convert explicitly."""
    return vt.is_float and (elem.is_int or elem.is_bool)


def store_converts(vt: ScalarType, elem: ScalarType) -> bool:
    """May a ``vt`` value be stored as ``elem`` with an implicit conversion (widening, rounding a float to a
    narrower float, int to float, int to bool (``x != 0``), bool to anything, to or from fp8 storage)?"""
    if vt == elem:
        return True
    if store_truncates(vt, elem):
        return False
    return (vt.is_float and elem.is_float) or vt.is_fp8 or elem.is_fp8 or (vt.is_int and elem.is_int) or \
        vt.is_bool or (vt.is_int and elem.is_float) or (vt.is_int and elem.is_bool)


def store(ctx, ptr: Value, value) -> None:
    if not isinstance(ptr, Value) or not isinstance(ptr.type, PointerType):
        raise LangError(f"cannot store through {_describe(ptr)}: indexing needs a pointer")
    elem = ptr.type.elem
    if isinstance(value, Value):
        vt = value.type
        if not isinstance(vt, ScalarType):
            raise LangError(f"cannot store {vt} into {ptr.type}")
        if vt != elem:
            if store_truncates(vt, elem):
                raise LangError(f"storing a {vt} value into a {ptr.type} pointer would truncate it; "
                                f"convert explicitly with .to(tylo.{elem.name})")
            if not store_converts(vt, elem):
                raise LangError(f"cannot store {vt} into {ptr.type}")
            value = cast(value, elem, _ctx=ctx)  # narrowing float stores round (documented)
    else:
        if isinstance(value, float) and (elem.is_int or elem.is_bool):
            raise LangError(f"storing the float {value!r} into a {ptr.type} pointer would truncate it")
        value = to_value(ctx, value, elem if not elem.is_fp8 else T.f32)
        if value.type != elem:
            value = cast(value, elem, _ctx=ctx)
    ctx.builder.create("mem.store", [ptr, value])


@dataclass(frozen=True)
class SharedArrayStatic:
    """The static part of a SharedArray: its row-major shape and element type."""

    shape: tuple
    dtype: ScalarType

    def describe(self) -> str:
        return f"a shared {self.dtype} array of shape {self.shape}"


class SharedArray:
    """A statically sized shared-memory array: a shared pointer and a row-major shape.

    ``s[i]`` / ``s[i, j]`` load and store; ``s.ptr`` is the element pointer.
    A structured value: its pointer is the runtime leaf, shape and dtype are static.
    """

    def __init__(self, ptr: Value, shape: tuple, dtype: ScalarType):
        self.ptr = ptr
        self.shape = shape
        self.dtype = dtype

    def __tylo_flatten__(self):
        return [self.ptr], SharedArrayStatic(self.shape, self.dtype)

    @classmethod
    def __tylo_unflatten__(cls, static, leaves, ctx):
        return cls(leaves[0], static.shape, static.dtype)

    def _element(self, ctx, index) -> Value:
        idx = index if isinstance(index, tuple) else (index,)
        if len(idx) != len(self.shape):
            raise LangError(f"shared array of shape {self.shape} indexed with {len(idx)} indices")
        linear = 0
        stride = 1
        for i, extent in reversed(list(zip(idx, self.shape))):
            if isinstance(i, int) and not isinstance(i, bool) and not 0 <= i < extent:
                raise LangError(f"index {i} is out of range for extent {extent}")
            term = i if stride == 1 else (binary(ctx, "*", i, stride) if isinstance(i, Value) else i * stride)
            linear = term if isinstance(linear, int) and linear == 0 else (
                binary(ctx, "+", linear, term) if isinstance(linear, Value) or isinstance(term, Value)
                else linear + term)
            stride *= extent
        return offset(ctx, self.ptr, linear)

    def __tylo_getitem__(self, ctx, index):
        return load(ctx, self._element(ctx, index))

    def __tylo_setitem__(self, ctx, index, value):
        store(ctx, self._element(ctx, index), value)

    def __len__(self):
        return self.shape[0]


@builtin
def shared_array(dtype, shape, align: int = 16, *, _ctx) -> SharedArray:
    """Allocate a statically sized shared array (row-major ``shape``), aligned to ``align`` bytes."""
    if not isinstance(dtype, ScalarType) or dtype.is_bool:
        raise LangError(f"shared_array needs a numeric tylo dtype, got {dtype!r}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if not shape or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape):
        shown = "(" + ", ".join(f"a runtime {s.type}" if isinstance(s, Value) else repr(s) for s in shape) + ")"
        raise LangError(f"shared_array shape must be positive compile-time integers (its size is fixed when the "
                        f"kernel is compiled; pass sizes as tylo.constexpr parameters), got {shown}")
    if align < 1 or align & (align - 1):
        raise LangError(f"alignment must be a power of two, got {align}")
    count = _pymath.prod(shape)
    allocs = _ctx.kernel.attrs["shared"]
    symbol = f"__shared_{len(allocs)}"
    allocs.append((symbol, dtype, count, max(align, dtype.itemsize)))
    ptr = _ctx.builder.value("mem.shared_alloc", [], PointerType(dtype, "shared"), symbol=symbol)
    return SharedArray(ptr, shape, dtype)


# -- thread geometry ----------------------------------------------------------------

class _Dim3:
    """``thread_idx.x`` etc.: each axis reads a PTX special register."""

    def __init__(self, reg: str):
        self.reg = reg

    def __tylo_getattr__(self, ctx, name):
        if name not in ("x", "y", "z"):
            raise LangError(f"{self!r} has axes x, y, z, not {name!r}")
        return ctx.builder.value("nv.sreg", [], T.i32, reg=f"{self.reg}.{name}")

    def __repr__(self):
        return {"tid": "tylo.thread_idx", "ctaid": "tylo.block_idx", "ntid": "tylo.block_dim",
                "nctaid": "tylo.grid_dim"}[self.reg]


thread_idx = _Dim3("tid")
block_idx = _Dim3("ctaid")
block_dim = _Dim3("ntid")
grid_dim = _Dim3("nctaid")


@builtin
def lane_id(*, _ctx) -> Value:
    """The thread's lane within its warp (0..31)."""
    return _ctx.builder.value("nv.sreg", [], T.i32, reg="laneid")


def linear_thread_index(ctx) -> Value:
    """The thread's linear index in its block (x fastest): ``tid.x`` when the block is known to be
    1-D (the launch geometry is part of the specialisation), else ``tid.x + ntid.x * (tid.y +
    ntid.y * tid.z)``."""
    def sreg(name):
        return ctx.builder.value("nv.sreg", [], T.i32, reg=name)

    tid = sreg("tid.x")
    block = ctx.kernel.attrs.get("maxntid")
    if block is not None and block[1] == 1 and block[2] == 1:
        return tid
    rest = binary(ctx, "+", sreg("tid.y"), binary(ctx, "*", sreg("ntid.y"), sreg("tid.z")))
    return binary(ctx, "+", tid, binary(ctx, "*", sreg("ntid.x"), rest))


@builtin
def warp_id(*, _ctx) -> Value:
    """The warp index within the block: linear thread index // 32 (not the volatile %warpid)."""
    return binary(_ctx, ">>", linear_thread_index(_ctx), 5)


@builtin
def sync_threads(*, _ctx) -> None:
    """``bar.sync 0``: every thread of the block waits here."""
    _ctx.builder.create("nv.barrier", [], [], {"kind": "sync"})


# -- warp shuffles ---------------------------------------------------------------------

_SHFL_TYPES = {"i32", "u32", "f32", "i64", "u64", "f64", "i16", "u16", "i8", "u8", "f16", "bf16", "bool"}


def _shfl(ctx, mode: str, value, lane, width: int):
    value = to_value(ctx, value)
    t = _scalar(value, "shuffle")
    if t.name not in _SHFL_TYPES:
        raise LangError(f"cannot shuffle {t}")
    if width not in (1, 2, 4, 8, 16, 32):
        raise LangError(f"shuffle width must be a power of two up to 32, got {width}")
    lane = to_value(ctx, lane, T.i32)
    return ctx.builder.value("nv.shfl", [value, lane], t, mode=mode, width=width)


@builtin
def shfl_sync(value, src_lane, width: int = 32, *, _ctx):
    """Read ``value`` from lane ``src_lane`` (all 32 lanes participate)."""
    return _shfl(_ctx, "idx", value, src_lane, width)


@builtin
def shfl_xor(value, lane_mask, width: int = 32, *, _ctx):
    """Butterfly shuffle: read from lane ``lane_id ^ lane_mask``."""
    return _shfl(_ctx, "bfly", value, lane_mask, width)


@builtin
def shfl_up(value, delta, width: int = 32, *, _ctx):
    return _shfl(_ctx, "up", value, delta, width)


@builtin
def shfl_down(value, delta, width: int = 32, *, _ctx):
    return _shfl(_ctx, "down", value, delta, width)


# -- atomics --------------------------------------------------------------------------

_ATOMIC_TYPES = {
    "add": {"i32", "u32", "i64", "u64", "f32", "f64"},
    "max": {"i32", "u32", "i64", "u64"},
    "min": {"i32", "u32", "i64", "u64"},
    "exch": {"i32", "u32", "i64", "u64", "f32", "f64"},
    "cas": {"i32", "u32", "i64", "u64"},
}


def _atomic(ctx, op: str, ptr, *values):
    if not isinstance(ptr, Value) or not isinstance(ptr.type, PointerType):
        raise LangError(f"atomic_{op} needs a pointer, got {_describe(ptr)}")
    elem = ptr.type.elem
    if elem.name not in _ATOMIC_TYPES[op]:
        raise LangError(f"atomic_{op} is not available on {elem} (supported: {', '.join(sorted(_ATOMIC_TYPES[op]))})")
    vals = []
    for v in values:
        if isinstance(v, Value) and v.type != elem:
            if isinstance(v.type, ScalarType) and v.type.is_float and not elem.is_float:
                raise LangError(f"atomic_{op} would truncate a {v.type} value into {ptr.type}")
            v = cast(v, elem, _ctx=ctx)
        vals.append(to_value(ctx, v, elem))
    return ctx.builder.value("nv.atomic", [ptr, *vals], elem, op=op)


@builtin
def atomic_add(ptr, value, *, _ctx):
    """Atomically ``*ptr += value``; returns the old value. Global or shared pointers."""
    return _atomic(_ctx, "add", ptr, value)


@builtin
def atomic_max(ptr, value, *, _ctx):
    return _atomic(_ctx, "max", ptr, value)


@builtin
def atomic_min(ptr, value, *, _ctx):
    return _atomic(_ctx, "min", ptr, value)


@builtin
def atomic_exch(ptr, value, *, _ctx):
    return _atomic(_ctx, "exch", ptr, value)


@builtin
def atomic_cas(ptr, compare, value, *, _ctx):
    """If ``*ptr == compare`` store ``value``; returns the old value."""
    return _atomic(_ctx, "cas", ptr, compare, value)


# -- math -------------------------------------------------------------------------------

def _structured(x) -> bool:
    """A structured value (a fragment) that applies scalar functions slot by slot."""
    return hasattr(type(x), "__tylo_flatten__") and hasattr(type(x), "map")


def _math1(name):
    def fn(x, *, _ctx):
        if _structured(x):
            return x.map(_ctx, lambda v: unary(_ctx, name, v))
        if not isinstance(x, Value):
            return _host_math(name, x)
        return unary(_ctx, name, x)

    fn.__name__ = name
    fn.__doc__ = f"{name} of a float scalar (ints convert to f32); on compile-time values, Python's math."
    return builtin(fn)


def _host_math(name, x):
    x = float(x)
    return {"exp": _pymath.exp, "exp2": lambda v: 2.0 ** v, "log": _pymath.log, "log2": _pymath.log2,
            "sqrt": _pymath.sqrt, "rsqrt": lambda v: 1.0 / _pymath.sqrt(v), "sin": _pymath.sin, "cos": _pymath.cos,
            "floor": _pymath.floor, "ceil": _pymath.ceil, "tanh": _pymath.tanh}[name](x)


exp = _math1("exp")
log = _math1("log")
log2 = _math1("log2")
sqrt = _math1("sqrt")
rsqrt = _math1("rsqrt")
sin = _math1("sin")
cos = _math1("cos")
floor = _math1("floor")
ceil = _math1("ceil")
tanh = _math1("tanh")


def _fast_unary(ctx, name, x, fast):
    """``math.<name>``, with ``fast=True`` its ``.approx.ftz`` form; slot by slot on fragments."""
    if not isinstance(fast, bool):
        raise LangError(f"{name}: fast= must be a compile-time bool, got {fast!r}")
    if _structured(x):
        return x.map(ctx, lambda v: unary(ctx, name, v, fast))
    return unary(ctx, name, x, fast)


@builtin
def exp2(x, fast=False, *, _ctx):
    """``2 ** x`` of a float scalar (ints convert to f32), slot by slot on fragments.

    Default: ``ex2.approx.f32`` (about 2 ulp; subnormals kept). ``fast=True``: ``ex2.approx.ftz.f32``,
    the one-instruction form attention kernels use (subnormal inputs and results flush to zero).
    On compile-time values, Python's math."""
    if not _structured(x) and not isinstance(x, Value):
        return 2.0 ** float(x)
    return _fast_unary(_ctx, "exp2", x, fast)


@builtin
def rcp(x, fast=False, *, _ctx):
    """``1 / x`` of a float scalar, slot by slot on fragments.

    Default: IEEE (``rcp.rn.f32``, which ptxas compiles to a subroutine: a kernel with WGMMA gets
    every wgmma serialised, see ``tylo.WGMMASerializationWarning``). ``fast=True``:
    ``rcp.approx.ftz.f32`` (1 ulp; subnormals flush to zero)."""
    if not _structured(x) and not isinstance(x, Value):
        return 1.0 / float(x)
    return _fast_unary(_ctx, "rcp", x, fast)


@builtin
def fdiv(a, b, fast=False, *, _ctx):
    """``a / b`` of floats (ints convert to f32), slot by slot when either is a fragment.

    Default: IEEE, as ``a / b``. ``fast=True``: ``div.full.ftz.f32`` (2 ulp over the full range,
    subnormals flush to zero, no IEEE slow path)."""
    if not isinstance(fast, bool):
        raise LangError(f"fdiv: fast= must be a compile-time bool, got {fast!r}")
    if _structured(a) or _structured(b):
        return _slotwise(_ctx, lambda x, y, *, _ctx: fdiv(x, y, fast, _ctx=_ctx), (a, b), "fdiv")
    if not isinstance(a, Value) and not isinstance(b, Value):
        return float(a) / float(b)
    return binary(_ctx, "/", a, b, fast)


@builtin
def abs(x, *, _ctx):  # noqa: A001 - mirrors Python's abs inside kernels
    if _structured(x):
        return x.map(_ctx, lambda v: unary(_ctx, "abs", v))
    if not isinstance(x, Value):
        return x if not isinstance(x, (int, float)) else (x if x >= 0 else -x)
    return unary(_ctx, "abs", x)


@builtin
def fma(a, b, c, *, _ctx):
    """``a * b + c`` with one rounding (floats); slot by slot on fragments."""
    if any(_structured(v) for v in (a, b, c)):
        return _slotwise(_ctx, fma, (a, b, c), "fma")
    if not any(isinstance(v, Value) for v in (a, b, c)):
        return a * b + c
    ab_t = None
    for v in (a, b, c):
        if isinstance(v, Value):
            t = _scalar(v, "fma")
            ab_t = t if ab_t is None else T.promote(ab_t, t)
    if not ab_t.is_float:
        ab_t = T.f32
    a, b, c = (to_value(_ctx, v, ab_t) for v in (a, b, c))
    return _ctx.builder.value("math.fma", [a, b, c], ab_t)


def _minmax(ctx, op, a, b):
    for x, y in ((a, b), (b, a)):
        if _structured(x):
            return x.__tylo_binary__(ctx, op, y, x is b)
    a, b, t = _operands(ctx, a, b, op)
    return ctx.builder.value(f"arith.{op}", [a, b], t)


@builtin
def minimum(a, b, *, _ctx):
    """Smaller of two values (for floats, NaN-propagation follows PTX min: the non-NaN operand);
    slot by slot on fragments."""
    if not any(isinstance(x, Value) or _structured(x) for x in (a, b)):
        return min(a, b)
    return _minmax(_ctx, "min", a, b)


@builtin
def maximum(a, b, *, _ctx):
    """Larger of two values; slot by slot on fragments."""
    if not any(isinstance(x, Value) or _structured(x) for x in (a, b)):
        return max(a, b)
    return _minmax(_ctx, "max", a, b)


@builtin
def where(cond, a, b, *, _ctx):
    """``a if cond else b`` evaluating both sides (a select, no branch); slot by slot on fragments."""
    if any(_structured(x) for x in (cond, a, b)):
        return _slotwise(_ctx, where, (cond, a, b), "where")
    if not isinstance(cond, Value):
        return a if cond else b
    cond = to_bool(_ctx, cond)
    if isinstance(a, Value) and isinstance(a.type, PointerType):
        if not isinstance(b, Value) or b.type != a.type:
            raise LangError(f"where: both pointers must have one type, got {a.type} and {getattr(b, 'type', b)}")
        return _ctx.builder.value("arith.select", [cond, a, b], a.type)
    if not isinstance(a, Value) and not isinstance(b, Value):
        t = T.promote(default_type(a), default_type(b))
        a, b = to_value(_ctx, a, t), to_value(_ctx, b, t)
    else:
        a, b, _ = _operands(_ctx, a, b, "where")
    return _ctx.builder.value("arith.select", [cond, a, b], a.type)


def _slotwise(ctx, fn, args, what):
    """``fn`` applied slot by slot: fragments give their slots, scalars are broadcast over them
    (by the first fragment's rules), and the result is a fragment of the first one's ownership."""
    like = next(x for x in args if _structured(x))
    slots = [x._operand_values(ctx, x, what) if x is like else like._operand_values(ctx, x, what) for x in args]
    out = [fn(*vals, _ctx=ctx) for vals in zip(*slots)]
    return type(like)(out[0].type, like.ownership, out)


# -- compile-time helpers -----------------------------------------------------------

class static_range:
    """``for i in tylo.static_range(n)``: unrolled at compile time; ``i`` is a Python int."""

    def __init__(self, *args):
        for a in args:
            if not isinstance(a, int) or isinstance(a, bool):
                raise LangError(f"static_range bounds must be compile-time integers, got {a!r}")
        self.range = range(*args)

    def __iter__(self):
        return iter(self.range)

    def __repr__(self):
        return f"static_range({self.range.start}, {self.range.stop}, {self.range.step})"


@builtin
def static_assert(cond, message: str = "", *, _ctx):
    """Fail compilation when the compile-time ``cond`` is false."""
    if isinstance(cond, Value):
        raise LangError("static_assert needs a compile-time condition; this one depends on runtime values")
    if not cond:
        raise LangError(f"static_assert failed{': ' + str(message) if message else ''}")


@builtin
def printf(fmt: str, *args, _ctx):
    """Device printf (``vprintf``): ``tylo.printf("%d %f\\n", i, x)``; floats print as double."""
    if not isinstance(fmt, str):
        raise LangError("printf needs a compile-time format string")
    vals = []
    for a in args:
        v = to_value(_ctx, a)
        t = _scalar(v, "printf")
        if t.is_float and t.bits < 64:
            v = cast(v, T.f64, _ctx=_ctx)
        elif (t.is_int and t.bits < 32) or t.is_bool:
            v = cast(v, T.i32, _ctx=_ctx)
        vals.append(v)
    _ctx.builder.create("nv.printf", vals, [], {"format": fmt})
