"""The op table: every IR op's definition (``OpDef``), core ops here, hardware ops in ``ir/nv``.

One ``OpDef`` per op name (``tylo.ir.opdef``): arity, attribute schema, effects and typing
rule. The verifier checks ops against it; the passes read ``pure`` (may be removed when
unused, may be merged by CSE); codegen and the interpreter register a lowering and semantics
for each (``tylo.ir.registry``). Hardware features define their ops under their own prefix
(``nv.wgmma.*`` ...) in ``tylo/ir/nv/<feature>.py``; ``tylo.ir`` imports them all, so ``OPS``
is complete once ``tylo.ir`` is imported.
"""
from __future__ import annotations

from .opdef import Attr, OpDef
from .types import PointerType, ScalarType, bool_

__all__ = ["OpDef", "OpInfo", "OPS", "op_info", "define_ops", "register_op"]

OpInfo = OpDef  # the former name of an op definition

OPS: dict[str, OpDef] = {}


def define_ops(*defs: OpDef) -> tuple:
    """Add op definitions to ``OPS`` (a name is defined once); returns them."""
    for d in defs:
        if not isinstance(d, OpDef):
            raise TypeError(f"define_ops takes OpDef entries, got {d!r}")
        if d.name in OPS:
            raise ValueError(f"IR op {d.name} is defined twice")
        OPS[d.name] = d
    return defs


def register_op(name, operands, results, pure, check=None, **fields):
    """``define_ops(OpDef(name, operands, results, pure, check, **fields))``."""
    define_ops(OpDef(name, operands, results, pure, check, **fields))


def op_info(name: str) -> OpDef:
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


_RW = dict(memory="read_write")

define_ops(*(OpDef(n, 2, 1, True, _same_types) for n in ("arith.add", "arith.sub", "arith.mul", "arith.min",
                                                          "arith.max")))
# ``fast``: the approximate forms (``ex2.approx.ftz``, ``rcp.approx.ftz``, ``div.full.ftz``) of f32 math,
# which flush subnormals to zero and never call the IEEE slow path (docs/language.md, "Fast math")
_FAST = (Attr("fast", (bool,), False),)
define_ops(OpDef("arith.div", 2, 1, True, _float_only, _FAST), OpDef("arith.frem", 2, 1, True, _float_only))
define_ops(*(OpDef(n, 2, 1, True, _int_only) for n in ("arith.idiv", "arith.irem", "arith.and", "arith.or",
                                                         "arith.xor")))
define_ops(
    OpDef("arith.shl", 2, 1, True, _shift),
    OpDef("arith.shr", 2, 1, True, _shift),
    OpDef("arith.neg", 1, 1, True, _same_types),
    OpDef("arith.not", 1, 1, True, _int_only),
    OpDef("arith.cmp", 2, 1, True, _cmp, (Attr("pred", (str,)),)),
    OpDef("arith.select", 3, 1, True, _select),
    OpDef("arith.constant", 0, 1, True, attrs=(Attr("value", (bool, int, float)),)),
    OpDef("arith.cast", 1, 1, True),
    OpDef("arith.bitcast", 1, 1, True),
)
define_ops(*(OpDef(f"math.{n}", 1, 1, True, _same_types, _FAST if n in ("exp2", "rcp") else ())
             for n in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "sin", "cos", "floor", "ceil", "tanh",
                       "rcp")))
define_ops(
    OpDef("math.fma", 3, 1, True, _float_only),

    OpDef("ptr.offset", 2, 1, True, _ptr_offset),
    OpDef("ptr.to_int", 1, 1, True),
    OpDef("ptr.cast", 1, 1, True, doc="the same address as a pointer to another element type"),
    OpDef("mem.load", 1, 1, False, _load, memory="read"),
    OpDef("mem.store", 2, 0, False, _store, memory="write"),
    OpDef("mem.shared_alloc", 0, 1, True, attrs=(Attr("symbol", (str,)),),
          doc="the base of a static shared array (kernel.attrs['shared'])"),
    OpDef("mem.vload", 1, None, False, attrs=(Attr("align", (int,)),), memory="read",
          doc="a vector load: results are the elements"),
    OpDef("mem.vstore", None, 0, False, attrs=(Attr("align", (int,)),), memory="write",
          doc="a vector store: ptr, elements"),

    OpDef("nv.sreg", 0, 1, True, attrs=(Attr("reg", (str,)),), doc="a special register (tid.x, laneid, ...)"),
    OpDef("nv.barrier", 0, 0, False, attrs=(Attr("kind", (str,)),), convergent=True, doc="bar.sync 0", **_RW),
    OpDef("nv.shfl", 2, 1, False, attrs=(Attr("mode", (str,)), Attr("width", (int,))), convergent=True,
          doc="value, lane or delta: shfl.sync.{mode}"),
    OpDef("nv.atomic", None, 1, False, _atomic, (Attr("op", (str,)),), doc="ptr, value(s) -> old value", **_RW),
    OpDef("nv.assume", 1, 0, False, doc="a bool the optimiser may assume true"),
    OpDef("nv.printf", None, 0, False, attrs=(Attr("format", (str,)),), memory="write", doc="vprintf"),
    OpDef("nv.pack2", 2, 1, True, attrs=(Attr("dtype", (str,)),),
          doc="two f32 -> one word of bf16x2/f16x2, low half first"),
    OpDef("nv.unpack2", 1, 2, True, doc="one word -> two 16-bit values, low half first"),
)
# Structured control flow: the effects are those of the ops in their blocks.
define_ops(
    OpDef("scf.if", 1, None, False, **_RW),
    OpDef("scf.for", None, None, False, **_RW),
    OpDef("scf.while", None, None, False, **_RW),
    OpDef("scf.yield", None, 0, False),
    OpDef("scf.condition", None, 0, False),
)
