"""Typed op definitions: what an IR op is, before any backend gives it a meaning.

An ``OpDef`` says how many operands and results an op has (``None``: variadic),
which attributes it carries (names and Python types), its effects, and the
typing rule the verifier applies. Codegen and the interpreter register their
lowering and semantics against these definitions (``tylo.ir.registry``); a test
holds every definition to both.

Effects:

* ``pure``: the op has no effect besides its results, so DCE may drop it when
  they are unused and CSE may merge two identical ones.
* ``convergent``: a collective (``.sync.aligned``, ``bar``, ``elect``): every
  participating thread executes it together; it must not be duplicated into or
  sunk under divergent control flow.
* ``memory``: what it does to memory other ops can observe: ``none``, ``read``,
  ``write`` or ``read_write`` (barriers, fences and waits order memory: they
  count as ``read_write``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["Attr", "OpDef", "MEMORY_EFFECTS", "one_of"]

MEMORY_EFFECTS = ("none", "read", "write", "read_write")


@dataclass(frozen=True)
class Attr:
    """One attribute of an op: its name, the Python types its value may have, whether it must be there."""

    name: str
    types: tuple
    required: bool = True

    def check(self, attrs: dict) -> str | None:
        if self.name not in attrs:
            return f"needs attribute {self.name!r}" if self.required else None
        value = attrs[self.name]
        # bool is an int in Python: an int attribute does not accept True/False unless bool is listed
        if isinstance(value, bool) and bool not in self.types:
            ok = False
        else:
            ok = isinstance(value, self.types)
        if not ok:
            names = " or ".join(t.__name__ for t in self.types)
            return f"attribute {self.name!r} must be {names}, got {value!r}"
        return None


@dataclass(frozen=True)
class OpDef:
    """The definition of one IR op (see the module docstring for the effect fields)."""

    name: str
    operands: int | None        # None: variadic
    results: int | None         # None: variadic
    pure: bool
    check: Callable | None = None   # check(op) -> error message or None
    attrs: tuple = ()           # Attr entries; an op carries no attribute outside them
    convergent: bool = False
    memory: str = "none"
    doc: str = ""

    def __post_init__(self):
        if self.memory not in MEMORY_EFFECTS:
            raise ValueError(f"op {self.name}: memory effect must be one of {MEMORY_EFFECTS}, got {self.memory!r}")
        if self.pure and self.memory != "none":
            raise ValueError(f"op {self.name}: a pure op has no memory effect")
        object.__setattr__(self, "attrs", tuple(self.attrs))

    @property
    def attr_names(self) -> tuple:
        return tuple(a.name for a in self.attrs)

    def check_attrs(self, attrs: dict) -> str | None:
        """The first way ``attrs`` breaks this op's attribute schema, or None."""
        known = self.attr_names
        for name in attrs:
            if name not in known:
                return f"unexpected attribute {name!r} (the op takes {', '.join(known) or 'none'})"
        for a in self.attrs:
            err = a.check(attrs)
            if err:
                return err
        return None


def one_of(name: str, values: tuple):
    """A check: attribute ``name`` is one of ``values``."""
    def check(op):
        v = op.attrs.get(name)
        return None if v in values else f"attribute {name!r} must be one of {values}, got {v!r}"

    return check
