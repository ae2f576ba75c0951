"""The op table: every IR op's name, arity, purity and typing rule.

One ``OpInfo`` per op name. The verifier checks ops against it; the passes
read ``pure`` (may be removed when unused, may be merged by CSE). Hardware
features add their ops here under their own prefix (``nv.wgmma.*`` ...).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .types import PointerType, ScalarType, bool_

__all__ = ["OpInfo", "OPS", "op_info", "register_op"]


@dataclass(frozen=True)
class OpInfo:
    name: str
    operands: int | None  # None: variadic
    results: int | None
    pure: bool
    check: Callable | None = None  # check(op) -> error message or None


OPS: dict[str, OpInfo] = {}


def register_op(name, operands, results, pure, check=None):
    OPS[name] = OpInfo(name, operands, results, pure, check)


def op_info(name: str) -> OpInfo:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown IR op {name!r}") from None


# -- typing rules -----------------------------------------------------------

def _same_types(op):
    types = {v.type for v in op.operands} | {r.type for r in op.results}
    if len(types) != 1:
        return f"operand and result types differ: {sorted(map(str, types))}"
    (t,) = types
    if not isinstance(t, ScalarType) or t.is_fp8:
        return f"expects an arithmetic scalar type, got {t}"
    return None


def _float_only(op):
    return _same_types(op) or (None if op.results[0].type.is_float else f"expects floats, got {op.results[0].type}")


def _int_only(op):
    err = _same_types(op)
    if err:
        return err
    t = op.results[0].type
    return None if (t.is_int or t.is_bool) else f"expects integers, got {t}"


def _shift(op):
    a, b = op.operands
    if a.type != op.results[0].type or not a.type.is_int or not b.type.is_int:
        return f"shift expects integers of one type, got {a.type} and {b.type}"
    return None


def _cmp(op):
    a, b = op.operands
    if a.type != b.type:
        return f"compares {a.type} with {b.type}"
    if op.results[0].type != bool_:
        return "result must be bool"
    if op.attrs.get("pred") not in ("lt", "le", "gt", "ge", "eq", "ne"):
        return f"bad predicate {op.attrs.get('pred')!r}"
    return None


def _select(op):
    c, a, b = op.operands
    if c.type != bool_:
        return "condition must be bool"
    if not (a.type == b.type == op.results[0].type):
        return f"branches differ: {a.type} vs {b.type}"
    return None


def _ptr_offset(op):
    p, i = op.operands
    if not isinstance(p.type, PointerType) or p.type != op.results[0].type:
        return "expects a pointer and returns the same pointer type"
    if not isinstance(i.type, ScalarType) or not i.type.is_int:
        return f"offset must be an integer, got {i.type}"
    return None


def _load(op):
    (p,) = op.operands
    if not isinstance(p.type, PointerType) or p.type.elem != op.results[0].type:
        return "load result must be the pointee type"
    return None


def _store(op):
    p, v = op.operands
    if not isinstance(p.type, PointerType) or p.type.elem != v.type:
        return f"stores {v.type} through {p.type}"
    return None


def _atomic(op):
    p = op.operands[0]
    if not isinstance(p.type, PointerType):
        return "atomic needs a pointer"
    for v in op.operands[1:]:
        if v.type != p.type.elem:
            return f"atomic value {v.type} does not match {p.type}"
    if op.results[0].type != p.type.elem:
        return "atomic returns the old value of the pointee type"
    return None


for _name in ("arith.add", "arith.sub", "arith.mul", "arith.min", "arith.max"):
    register_op(_name, 2, 1, True, _same_types)
register_op("arith.div", 2, 1, True, _float_only)
register_op("arith.frem", 2, 1, True, _float_only)
for _name in ("arith.idiv", "arith.irem", "arith.and", "arith.or", "arith.xor"):
    register_op(_name, 2, 1, True, _int_only)
register_op("arith.shl", 2, 1, True, _shift)
register_op("arith.shr", 2, 1, True, _shift)
register_op("arith.neg", 1, 1, True, _same_types)
register_op("arith.not", 1, 1, True, _int_only)
register_op("arith.cmp", 2, 1, True, _cmp)
register_op("arith.select", 3, 1, True, _select)
register_op("arith.constant", 0, 1, True)
register_op("arith.cast", 1, 1, True)
register_op("arith.bitcast", 1, 1, True)
for _name in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "sin", "cos", "floor", "ceil", "tanh"):
    register_op(f"math.{_name}", 1, 1, True, _same_types)
register_op("math.fma", 3, 1, True, _float_only)

register_op("ptr.offset", 2, 1, True, _ptr_offset)
register_op("ptr.to_int", 1, 1, True)
register_op("ptr.cast", 1, 1, True)  # the same address as a pointer to another element type
register_op("mem.load", 1, 1, False, _load)
register_op("mem.store", 2, 0, False, _store)
register_op("mem.shared_alloc", 0, 1, True)

register_op("nv.sreg", 0, 1, True)
register_op("nv.barrier", 0, 0, False)
register_op("nv.shfl", 2, 1, False)
register_op("nv.atomic", None, 1, False, _atomic)
register_op("nv.assume", 1, 0, False)
register_op("nv.printf", None, 0, False)

register_op("nv.pack2", 2, 1, True)      # two f32 -> one word of bf16x2/f16x2 (attr dtype)
register_op("nv.unpack2", 1, 2, True)    # one word -> two 16-bit values, low half first
register_op("mem.vload", 1, None, False)  # a vector load: results are the elements
register_op("mem.vstore", None, 0, False)  # a vector store: ptr, elements

register_op("scf.if", 1, None, False)
register_op("scf.for", None, None, False)
register_op("scf.while", None, None, False)
register_op("scf.yield", None, 0, False)
register_op("scf.condition", None, 0, False)
