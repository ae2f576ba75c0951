"""The interpreter's registries, the same ``Registry`` shape codegen uses for lowerings.

* ``THREAD_SEMANTICS``: ops one thread executes alone: ``fn(thread, op, inputs, result_type)``
  returns the (single) result value, or None.
* ``WARP_SEMANTICS``: warp collectives, run once every live lane of the warp has arrived:
  ``fn(machine, op, {lane: inputs}) -> {lane: results}``.
* ``WARPGROUP_SEMANTICS``: warpgroup collectives (WGMMA), run once every live thread of the
  warpgroup (4 warps, 128 threads) has arrived: ``fn(machine, op, {index in warpgroup: inputs},
  threads) -> {index: results}``.
* ``NOT_MODELLED``: ops the interpreter does not execute yet, each with the reason; running
  one raises ``InterpreterError`` quoting it.

Each ``interpreter/<feature>.py`` fills them for its feature's ops (named as in ``tylo/ir/nv``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.registry import Registry

__all__ = ["THREAD_SEMANTICS", "WARP_SEMANTICS", "WARPGROUP_SEMANTICS", "NOT_MODELLED", "NotModelled", "not_modelled"]

THREAD_SEMANTICS = Registry("interpreter semantics (one thread)")
WARP_SEMANTICS = Registry("interpreter semantics (warp collective)")
WARPGROUP_SEMANTICS = Registry("interpreter semantics (warpgroup collective)")
NOT_MODELLED = Registry("not modelled by the interpreter yet")


@dataclass(frozen=True)
class NotModelled:
    """Why the interpreter does not execute an op yet, and which module says so."""

    reason: str
    module: str

    def __str__(self) -> str:
        return self.reason


def not_modelled(reason: str, *op_names: str, module: str) -> None:
    """Record that the interpreter does not model ``op_names`` yet, and why (``module``: the caller's ``__name__``)."""
    if not reason.strip():
        raise ValueError("a not-modelled entry needs a reason")
    for name in op_names:
        if name in THREAD_SEMANTICS or name in WARP_SEMANTICS or name in WARPGROUP_SEMANTICS:
            raise ValueError(f"{name} has semantics; it cannot also be listed as not modelled")
        NOT_MODELLED.add(name, NotModelled(reason, module))
