"""The tylo IR: thread-level SSA values, operations and structured blocks.

An ``Op`` has operands (``Value``s), results, static attributes and nested
``Block``s (for ``scf.if``/``scf.for``/``scf.while``). Every op keeps the
source ``Location`` it came from. Ops are described by ``OpDef`` entries in
``tylo.ir.ops.OPS`` (core ops in ``ir/ops.py``, hardware ops in ``ir/nv``); the verifier checks
each op against its entry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from .types import Type

__all__ = ["Location", "Value", "Op", "Block", "Kernel", "Param"]


@dataclass(frozen=True)
class Location:
    """A source position. ``inlined_at``: for a line of an inlined ``@tylo.func`` helper, the position of
    the call that inlined it (itself possibly inside another helper), so reports can name the kernel's line."""
    filename: str
    lineno: int
    col: int = 0
    inlined_at: Location | None = None

    def __str__(self) -> str:
        text = f"{self.filename}:{self.lineno}:{self.col + 1}"
        return text if self.inlined_at is None else f"{text} (inlined at {self.inlined_at})"

    def line(self) -> str:
        """``file:line``, followed by the chain of call sites when inlined."""
        text = f"{self.filename}:{self.lineno}"
        return text if self.inlined_at is None else f"{text} (inlined at {self.inlined_at.line()})"


UNKNOWN_LOC = Location("<unknown>", 0, 0)


class Value:
    """An SSA value: a result of an op or an argument of a block."""

    __slots__ = ("type", "owner", "index", "name_hint")

    def __init__(self, type: Type, owner=None, index: int = 0, name_hint: str | None = None):
        self.type = type
        self.owner = owner  # the Op that defines it, or the Block whose argument it is
        self.index = index
        self.name_hint = name_hint

    @property
    def dtype(self):
        return self.type

    def __repr__(self) -> str:
        return f"<Value {self.name_hint or ''}: {self.type}>"


class Op:
    """One operation. ``name`` is dotted (``arith.add``, ``nv.shfl``, ``scf.for``)."""

    __slots__ = ("name", "operands", "results", "attrs", "blocks", "loc")

    def __init__(self, name: str, operands, result_types, attrs=None, blocks=None, loc: Location = UNKNOWN_LOC):
        self.name = name
        self.operands: list[Value] = list(operands)
        self.results: list[Value] = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.attrs: dict = dict(attrs or {})
        self.blocks: list[Block] = list(blocks or [])
        self.loc = loc

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, f"{self.name} has {len(self.results)} results"
        return self.results[0]

    def walk(self) -> Iterator["Op"]:
        """This op and every op nested in its blocks, in program order."""
        yield self
        for block in self.blocks:
            yield from block.walk()

    def __repr__(self) -> str:
        return f"<Op {self.name}>"


class Block:
    """A list of ops with typed arguments (loop-carried values, induction variables)."""

    __slots__ = ("args", "ops")

    def __init__(self, arg_types=(), arg_names=()):
        names = list(arg_names) + [None] * (len(arg_types) - len(arg_names))
        self.args: list[Value] = [Value(t, self, i, n) for i, (t, n) in enumerate(zip(arg_types, names))]
        self.ops: list[Op] = []

    def walk(self) -> Iterator[Op]:
        for op in self.ops:
            yield from op.walk()

    @property
    def terminator(self) -> Op | None:
        return self.ops[-1] if self.ops and self.ops[-1].name == "scf.yield" else None


@dataclass
class Param:
    """A kernel parameter of the IR: its name and the block argument that carries it."""

    name: str
    value: Value


class Kernel:
    """A kernel in IR form: parameters, one body block and kernel-level attributes.

    ``attrs`` holds: ``maxntid`` (tuple or None), ``shared`` (list of static
    shared allocations as (symbol, dtype, count, align)), ``assumptions``.
    """

    def __init__(self, name: str, params: list[tuple[str, Type]], loc: Location = UNKNOWN_LOC):
        self.name = name
        self.body = Block([t for _, t in params], [n for n, _ in params])
        self.params = [Param(n, v) for (n, _), v in zip(params, self.body.args)]
        self.attrs: dict = {"maxntid": None, "shared": [], "param_align": {}, "divisible_by_16": []}
        self.loc = loc

    def walk(self) -> Iterator[Op]:
        return self.body.walk()
