"""IR passes: constant folding, common-subexpression elimination, dead code.

Each pass mutates the kernel in place; ``run_passes`` verifies after each.
Folding follows the target's semantics exactly (fixed-width wrap-around,
C-style truncating division), so a folded program computes what the
unfolded one would have.
"""
from __future__ import annotations

import math

from .core import Block, Kernel, Op, Value
from .intmath import cdiv as _cdiv, wrap_int as _wrap
from .ops import op_info
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
    op = v.owner
    if isinstance(op, Op) and op.name == "arith.constant":
        return op.attrs["value"]
    return None


def _np_float(name):
    import numpy as np  # lazily: importing numpy costs more than compiling a small kernel

    return {"f32": np.float32, "f64": np.float64}[name]


def _fold(op: Op):
    """The constant value of ``op``'s result, or None when it does not fold."""
    name = op.name
    if name in ("arith.constant",) or op.blocks or len(op.results) != 1:
        return None
    vals = [_const(v) for v in op.operands]
    if any(v is None for v in vals) or not vals:
        return None
    t = op.results[0].type
    if not isinstance(t, ScalarType):
        return None
    src_t = op.operands[0].type
    if isinstance(src_t, ScalarType) and (src_t.is_int or src_t.is_bool):
        a = vals[0]
        b = vals[1] if len(vals) > 1 else None
        if name == "arith.cmp":
            pred = op.attrs["pred"]
            return {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b, "ne": a != b}[pred]
        if name == "arith.cast" and (t.is_int or t.is_bool):
            return _wrap(int(a), t) if not t.is_bool else bool(a)
        if name == "arith.cast" and t.name in ("f32", "f64"):
            return float(_np_float(t.name)(a))
        if name == "arith.select":
            return vals[1] if a else vals[2]
        fns = {
            "arith.add": lambda: a + b, "arith.sub": lambda: a - b, "arith.mul": lambda: a * b,
            "arith.and": lambda: a & b, "arith.or": lambda: a | b, "arith.xor": lambda: a ^ b,
            "arith.min": lambda: min(a, b), "arith.max": lambda: max(a, b),
            "arith.neg": lambda: -a, "arith.not": lambda: (not a) if t.is_bool else ~a,
        }
        if name in fns:
            return _wrap(int(fns[name]()), t)
        if name in ("arith.idiv", "arith.irem") and b != 0:
            q = _cdiv(a, b)
            return _wrap(q if name == "arith.idiv" else a - q * b, t)
        if name in ("arith.shl", "arith.shr") and 0 <= b < t.bits:
            if name == "arith.shl":
                return _wrap(a << b, t)
            return a >> b if t.is_signed else (a & ((1 << t.bits) - 1)) >> b
        return None
    if isinstance(src_t, ScalarType) and src_t.name in ("f32", "f64") and t.name in ("f32", "f64"):
        import numpy as np

        f = _np_float(t.name)
        if name == "arith.cast":
            return float(f(vals[0]))
        ops = {"arith.add": np.add, "arith.sub": np.subtract, "arith.mul": np.multiply}
        if name in ops:
            with np.errstate(all="ignore"):
                return float(ops[name](f(vals[0]), f(vals[1])))
    if name == "arith.select" and vals[0] is not None:
        return vals[1] if vals[0] else vals[2]
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
                key = (op.name, tuple(id(v) for v in op.operands), tuple(sorted(op.attrs.items())),
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
                if op_info(op.name).pure and not op.blocks and not any(id(r) in used for r in op.results):
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
