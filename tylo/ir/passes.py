"""IR passes: constant folding, common-subexpression elimination, dead code.

Each pass mutates the kernel in place; ``run_passes`` verifies after each.
Folding follows the target's semantics exactly (fixed-width wrap-around,
C-style truncating division, every float rounded once to its type: see
ir/scalars.py), so a folded program computes what the unfolded one would
have.
"""
from __future__ import annotations

import math
from fractions import Fraction

from .core import Block, Kernel, Op, Value
from .ops import op_info
from .scalars import c_div, c_rem, convert, round_float, wrap_int
from .types import ScalarType, bool_
from .verifier import verify

__all__ = ["fold_constants", "cse", "dce", "run_passes", "DEFAULT_PIPELINE"]


# -- helpers ----------------------------------------------------------------

def _substitute(block: Block, mapping: dict[int, Value]) -> None:
    """Replace every use of a key of ``mapping`` (by id) with its value."""
    if not mapping:
        return
    for op in block.walk():
        ops = op.operands
        for i, v in enumerate(ops):
            r = mapping.get(id(v))
            while r is not None:
                ops[i] = r
                r = mapping.get(id(r))


def _const(v: Value):
    """The value of a constant operand, rounded to its type (a float constant is built from a
    Python float: ``tylo.f32(0.1)`` holds 0.1, whose f32 value is 0.100000001490116...)."""
    op = v.owner
    if not (isinstance(op, Op) and op.name == "arith.constant"):
        return None
    value = op.attrs["value"]
    t = v.type
    if isinstance(t, ScalarType) and t.is_float and value is not None:
        return round_float(value, t)
    return value



_FLOAT_BINARY = {"arith.add": lambda a, b: a + b, "arith.sub": lambda a, b: a - b,
                 "arith.mul": lambda a, b: a * b}


def _fold(op: Op):
    """The constant value of ``op``'s result, or None when it does not fold.

    Every folded float is rounded to its type after each operation (ir/scalars.py), so the
    folded program computes the bits the unfolded one computes on the GPU.
    """
    name = op.name
    if name in ("arith.constant",) or op.blocks or len(op.results) != 1:
        return None
    vals = [_const(v) for v in op.operands]
    if any(v is None for v in vals) or not vals:
        return None
    t = op.results[0].type
    if not isinstance(t, ScalarType) or t.is_fp8:
        return None  # fp8 is storage-only: there are no fp8 constants to fold into
    src_t = op.operands[0].type
    if not isinstance(src_t, ScalarType) or src_t.is_fp8:
        return None
    if name == "arith.cast":
        return convert(vals[0], src_t, t)
    if name == "arith.select":
        return vals[1] if vals[0] else vals[2]
    if src_t.is_int or src_t.is_bool:
        a = vals[0]
        b = vals[1] if len(vals) > 1 else None
        if name == "arith.cmp":
            pred = op.attrs["pred"]
            return {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b, "ne": a != b}[pred]
        fns = {
            "arith.add": lambda: a + b, "arith.sub": lambda: a - b, "arith.mul": lambda: a * b,
            "arith.and": lambda: a & b, "arith.or": lambda: a | b, "arith.xor": lambda: a ^ b,
            "arith.min": lambda: min(a, b), "arith.max": lambda: max(a, b),
            "arith.neg": lambda: -a, "arith.not": lambda: (not a) if t.is_bool else ~a,
        }
        if name in fns:
            return wrap_int(int(fns[name]()), t)
        if name in ("arith.idiv", "arith.irem") and b != 0:
            return wrap_int(c_div(a, b) if name == "arith.idiv" else c_rem(a, b), t)
        if name in ("arith.shl", "arith.shr") and 0 <= b < t.bits:
            if name == "arith.shl":
                return wrap_int(a << b, t)
            return a >> b if t.is_signed else (a & ((1 << t.bits) - 1)) >> b
        return None
    if t.is_float and name in _FLOAT_BINARY and all(math.isfinite(v) for v in vals):
        # exact in rationals, then one rounding: what IEEE add/sub/mul of the type computes
        # (f16/bf16 on the GPU compute in f32 and round once, which is the same: f32 holds
        # more than twice their precision)
        fn = _FLOAT_BINARY[name]
        exact = fn(Fraction(vals[0]), Fraction(vals[1]))
        # a zero result takes IEEE's sign (-0.0 * 2 is -0.0, -0.0 + -0.0 is -0.0), which rationals lose
        return round_float(exact, t) if exact != 0 else fn(vals[0], vals[1])
    return None


# -- passes -----------------------------------------------------------------

def fold_constants(kernel: Kernel) -> None:
    """Fold ops whose operands are constants; simplify x+0, x*1, x*0, select(c)."""
    mapping: dict[int, Value] = {}

    def visit(block: Block):
        for op in block.ops:
            for i, v in enumerate(op.operands):
                r = mapping.get(id(v))
                if r is not None:
                    op.operands[i] = r
            for blk in op.blocks:
                visit(blk)
            value = _fold(op)
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                t = op.results[0].type
                op.name, op.operands, op.attrs = "arith.constant", [], {"value": value if t != bool_ else bool(value)}
                continue
            _simplify(op, mapping)

    visit(kernel.body)


def _simplify(op: Op, mapping: dict[int, Value]) -> None:
    if op.name == "ptr.offset" and _const(op.operands[1]) == 0:
        mapping[id(op.results[0])] = op.operands[0]
        return
    if len(op.operands) != 2 or len(op.results) != 1:
        if op.name == "arith.select" and _const(op.operands[0]) is not None:
            mapping[id(op.results[0])] = op.operands[1] if _const(op.operands[0]) else op.operands[2]
        return
    t = op.results[0].type
    if not isinstance(t, ScalarType) or not (t.is_int or t.is_bool):
        return  # float identities are not exact (signed zeros, NaN)
    a, b = op.operands
    ca, cb = _const(a), _const(b)
    r = op.results[0]
    if op.name == "arith.add":
        if cb == 0 and cb is not None:
            mapping[id(r)] = a
        elif ca == 0 and ca is not None:
            mapping[id(r)] = b
    elif op.name == "arith.sub" and cb == 0 and cb is not None:
        mapping[id(r)] = a
    elif op.name == "arith.mul":
        if cb == 1:
            mapping[id(r)] = a
        elif ca == 1:
            mapping[id(r)] = b
    elif op.name == "arith.idiv" and cb == 1:
        mapping[id(r)] = a


_NO_CSE = {"mem.shared_alloc"}


def _attr_key(attrs: dict):
    """Attributes as a hashable key in which equal keys mean identical ops: floats by their bits,
    since 0.0 == -0.0 (two constants that must stay apart)."""
    return [(k, ("float", v.hex()) if isinstance(v, float) else v) for k, v in attrs.items()]


def cse(kernel: Kernel) -> None:
    """Merge identical pure ops; a value computed outside a block is reused inside it."""
    mapping: dict[int, Value] = {}

    def visit(block: Block, table: dict):
        table = dict(table)
        for op in block.ops:
            for i, v in enumerate(op.operands):
                r = mapping.get(id(v))
                if r is not None:
                    op.operands[i] = r
            for blk in op.blocks:
                visit(blk, table)
            if op.blocks or not op_info(op.name).pure or op.name in _NO_CSE:
                continue
            try:
                key = (op.name, tuple(id(v) for v in op.operands), tuple(sorted(_attr_key(op.attrs))),
                       tuple(r.type for r in op.results))
                hash(key)
            except TypeError:
                continue
            prior = table.get(key)
            if prior is None:
                table[key] = op
            else:
                for r, p in zip(op.results, prior.results):
                    mapping[id(r)] = p

    visit(kernel.body, {})


def _mark_uses(block: Block, used: set) -> None:
    for op in block.walk():
        used.update(id(v) for v in op.operands)


def dce(kernel: Kernel) -> None:
    """Remove pure ops whose results are unused, to a fixed point."""
    changed = True
    while changed:
        changed = False
        used: set[int] = set()
        _mark_uses(kernel.body, used)

        def sweep(block: Block):
            nonlocal changed
            keep = []
            for op in block.ops:
                for blk in op.blocks:
                    sweep(blk)
                if op_info(op.name).pure and not op.blocks and not any(id(r) in used for r in op.results):  # noqa: B023
                    changed = True
                    continue
                keep.append(op)
            block.ops[:] = keep

        sweep(kernel.body)


DEFAULT_PIPELINE = (fold_constants, cse, dce)


def run_passes(kernel: Kernel, pipeline=DEFAULT_PIPELINE) -> Kernel:
    verify(kernel)
    for p in pipeline:
        p(kernel)
        verify(kernel)
    return kernel
