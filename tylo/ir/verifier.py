"""IR verifier: run after the frontend and after every pass.

Checks that every operand is defined before its use in an enclosing scope,
that each op matches its ``OpDef`` (arity, attribute schema, typing rule), and that structured
ops (``scf.if``/``for``/``while``) agree with their blocks' arguments and
yields.
"""
from __future__ import annotations

from .core import Block, Kernel, Op
from .ops import op_info
from .types import PointerType, ScalarType, bool_

__all__ = ["VerificationError", "verify"]


class VerificationError(Exception):
    """The IR is malformed: always a tylo bug, never a user error."""


def _types(values):
    return [v.type for v in values]


def _fail(op: Op, msg: str):
    raise VerificationError(f"{op.name} at {op.loc}: {msg}")


def _check_yield(op: Op, block: Block, expected, what="yield"):
    term = block.ops[-1] if block.ops else None
    name = "scf.condition" if what == "condition" else "scf.yield"
    if term is None or term.name != name:
        _fail(op, f"block must end with {name}")
    got = _types(term.operands[1:] if what == "condition" else term.operands)
    if got != list(expected):
        _fail(op, f"{name} types {got} do not match {list(expected)}")


def _verify_block(block: Block, defined: set):
    scope = set(defined)
    scope.update(id(a) for a in block.args)
    for i, op in enumerate(block.ops):
        info = op_info(op.name)
        for v in op.operands:
            if id(v) not in scope:
                _fail(op, f"operand {v!r} is used before it is defined")
        if info.operands is not None and len(op.operands) != info.operands:
            _fail(op, f"expects {info.operands} operands, has {len(op.operands)}")
        if info.results is not None and len(op.results) != info.results:
            _fail(op, f"expects {info.results} results, has {len(op.results)}")
        if op.name in ("scf.yield", "scf.condition") and i != len(block.ops) - 1:
            _fail(op, "terminator in the middle of a block")
        err = info.check_attrs(op.attrs)
        if err:
            _fail(op, err)
        if info.check is not None:
            err = info.check(op)
            if err:
                _fail(op, err)
        _verify_structure(op)
        for blk in op.blocks:
            _verify_block(blk, scope)
        scope.update(id(r) for r in op.results)


def _verify_structure(op: Op):
    results = _types(op.results)
    if op.name == "scf.if":
        if op.operands[0].type != bool_:
            _fail(op, "condition must be bool")
        if len(op.blocks) != 2:
            _fail(op, "needs a then and an else block")
        for blk in op.blocks:
            if blk.args:
                _fail(op, "blocks take no arguments")
            _check_yield(op, blk, results)
    elif op.name == "scf.for":
        lb, ub, step, *inits = op.operands
        if not (lb.type == ub.type == step.type) or not isinstance(lb.type, ScalarType) or not lb.type.is_int:
            _fail(op, "bounds and step must be integers of one type")
        (body,) = op.blocks
        if _types(body.args) != [lb.type] + _types(inits):
            _fail(op, "body arguments must be the induction variable then the carried values")
        if results != _types(inits):
            _fail(op, "results must match the carried values")
        _check_yield(op, body, results)
    elif op.name == "scf.while":
        before, after = op.blocks
        inits = _types(op.operands)
        if _types(before.args) != inits:
            _fail(op, "before-block arguments must match the initial values")
        _check_yield(op, before, results, what="condition")
        cond = before.ops[-1].operands[0]
        if cond.type != bool_:
            _fail(op, "scf.condition needs a bool")
        if _types(after.args) != results:
            _fail(op, "after-block arguments must match the results")
        _check_yield(op, after, inits)
    elif op.name == "arith.constant":
        t = op.results[0].type
        if not isinstance(t, ScalarType) or "value" not in op.attrs:
            _fail(op, "constant needs a scalar type and a value")
    elif op.name == "mem.shared_alloc":
        t = op.results[0].type
        if not isinstance(t, PointerType) or t.space != "shared":
            _fail(op, "shared_alloc must return a shared pointer")


def verify(kernel: Kernel) -> None:
    _verify_block(kernel.body, set())
    for op in kernel.walk():
        for blk in op.blocks:
            terminated = blk.ops and blk.ops[-1].name in ("scf.yield", "scf.condition")
            if op.name in ("scf.if", "scf.for", "scf.while") and blk.ops and not terminated:
                _fail(op, "block is not terminated")
