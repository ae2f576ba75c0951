"""Builder: appends ops at an insertion point and stamps their source location."""
from __future__ import annotations

from contextlib import contextmanager

from .core import UNKNOWN_LOC, Block, Location, Op, Value
from .types import ScalarType

__all__ = ["Builder"]


class Builder:
    def __init__(self, block: Block):
        self.block = block
        self.loc: Location = UNKNOWN_LOC

    def create(self, name: str, operands=(), result_types=(), attrs=None, blocks=None) -> Op:
        for v in operands:
            if not isinstance(v, Value):
                raise TypeError(f"{name}: operand {v!r} is not an IR value")
        op = Op(name, operands, result_types, attrs, blocks, self.loc)
        self.block.ops.append(op)
        return op

    def value(self, name: str, operands, result_type, **attrs) -> Value:
        """Create a single-result op and return its result."""
        return self.create(name, operands, [result_type], attrs).results[0]

    def constant(self, value, type: ScalarType) -> Value:
        return self.create("arith.constant", (), [type], {"value": value}).results[0]

    @contextmanager
    def at(self, block: Block):
        """Temporarily append to another block (the body of an scf op)."""
        saved = self.block
        self.block = block
        try:
            yield self
        finally:
            self.block = saved

    @contextmanager
    def location(self, loc: Location):
        saved = self.loc
        self.loc = loc
        try:
            yield
        finally:
            self.loc = saved
