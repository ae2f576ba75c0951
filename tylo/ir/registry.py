"""One registry shape for everything a backend attaches to IR ops.

A ``Registry`` maps op names to one implementation each (a lowering in codegen, a semantics
in the interpreter, a "not modelled yet" reason). It accepts only names defined in
``tylo.ir.ops.OPS`` and each name once, so a typo or a duplicate fails at import time instead
of when a kernel first uses the op. Backends fill their registries from one module per feature
(``codegen/ptx/<feature>.py``, ``interpreter/<feature>.py``).
"""
from __future__ import annotations

from collections.abc import Mapping

from .ops import OPS

__all__ = ["Registry"]


class Registry(Mapping):
    """``name -> implementation`` for defined IR ops; ``what`` names the registry in errors."""

    def __init__(self, what: str):
        self.what = what
        self._entries: dict = {}

    def add(self, op_name: str, impl) -> None:
        if op_name not in OPS:
            raise ValueError(f"{self.what}: {op_name!r} is not a defined IR op (define it in tylo/ir/ops.py or "
                             f"tylo/ir/nv/<feature>.py first)")
        if op_name in self._entries:
            raise ValueError(f"{self.what}: {op_name} is registered twice")
        self._entries[op_name] = impl

    def register(self, op_name: str):
        """Decorator: ``@registry.register("nv.mma.sync")`` adds the function under that op name."""

        def decorate(fn):
            self.add(op_name, fn)
            return fn

        return decorate

    __setitem__ = add

    def __getitem__(self, op_name: str):
        return self._entries[op_name]

    def __iter__(self):
        return iter(self._entries)

    def __contains__(self, op_name) -> bool:  # direct: the interpreter asks once per op it runs
        return op_name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"<Registry {self.what}: {len(self)} ops>"
