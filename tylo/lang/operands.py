"""Operand roles of a matrix product: ``OperandA`` and ``OperandB``, shared by WGMMA and tcgen05.

Plain markers (the class or an instance): ``wgmma_operand(plan, OperandA, tile)``,
``tcgen05_operand(plan, OperandB, tile)``. Two markers are equal when they name the same role.
"""
from __future__ import annotations

__all__ = ["OperandRole", "OperandA", "OperandB"]


class OperandRole:
    """Base of the role markers: equal by type, printed as ``OperandA()``."""

    name = ""
    axis_extent = ""

    def __repr__(self):
        return f"{self.name}()"

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))


class OperandA(OperandRole):
    """Role marker: the (m, k) A operand (mn = M)."""

    name = "OperandA"


class OperandB(OperandRole):
    """Role marker: the (n, k) B operand (mn = N)."""

    name = "OperandB"
