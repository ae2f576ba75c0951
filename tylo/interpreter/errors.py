"""The interpreter's errors: ``InterpreterError`` (a kernel the interpreter cannot run) and
``HazardError`` (a synchronisation bug the hazard checker found, naming the source of each side)."""
from __future__ import annotations

__all__ = ["InterpreterError", "HazardError"]


class InterpreterError(RuntimeError):
    pass


class HazardError(InterpreterError):
    """A data race or synchronisation error; ``kind`` names the rule, ``sides`` the ops involved
    as ``(what, location)`` pairs."""

    def __init__(self, kind: str, message: str, sides=()):
        self.kind = kind
        self.sides = tuple(sides)
        where = "".join(f"\n  {what}: {loc}" for what, loc in self.sides)
        super().__init__(f"hazard ({kind}): {message}{where}")
