"""Structured values: flattening to SSA leaves and rebuilding (like a pytree).

At control-flow joins and loop back-edges every live variable is flattened
into runtime leaves plus a static description (``TreeDef``). Static parts
must agree on both sides; Python scalars that differ become runtime values.
A structured kernel value (tile, fragment, shared array) takes part by
defining ``__tylo_flatten__() -> (leaves, static)`` and the classmethod
``__tylo_unflatten__(static, leaves, ctx)`` (``tylo.lang.protocols.StructuredValue``);
``ctx`` is the emission context, passed at rebuild time so no static part holds it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Value

__all__ = ["TreeDef", "flatten", "unflatten", "LEAF"]


@dataclass(frozen=True)
class TreeDef:
    kind: str  # 'leaf', 'tuple', 'list', 'struct', 'const'
    payload: object = None
    children: tuple = ()

    def describe(self) -> str:
        if self.kind == "leaf":
            return "a runtime value"
        if self.kind == "const":
            return f"the compile-time value {self.payload!r}"
        if self.kind in ("tuple", "list"):
            return f"a {self.kind} of {len(self.children)} items"
        cls, static = self.payload
        describe = getattr(static, "describe", None)
        if describe is not None:
            return describe()
        return f"a {cls.__name__} with static part {static!r}"


LEAF = TreeDef("leaf")


def flatten(obj) -> tuple[list[Value], TreeDef]:
    if isinstance(obj, Value):
        return [obj], LEAF
    if isinstance(obj, (tuple, list)):
        leaves: list[Value] = []
        defs = []
        for item in obj:
            lv, d = flatten(item)
            leaves.extend(lv)
            defs.append(d)
        return leaves, TreeDef("tuple" if isinstance(obj, tuple) else "list", None, tuple(defs))
    hook = getattr(type(obj), "__tylo_flatten__", None)
    if hook is not None:
        leaves, static = obj.__tylo_flatten__()
        return list(leaves), TreeDef("struct", (type(obj), static), (len(leaves),))
    return [], TreeDef("const", obj)


def unflatten(tree: TreeDef, leaves: list[Value], ctx):
    """Rebuild the value ``tree`` describes from ``leaves``; ``ctx`` is the emission context."""
    it = iter(leaves)
    result = _build(tree, it, ctx)
    rest = list(it)
    assert not rest, "unflatten: leftover leaves"
    return result


def _build(tree: TreeDef, it, ctx):
    if tree.kind == "leaf":
        return next(it)
    if tree.kind == "const":
        return tree.payload
    if tree.kind in ("tuple", "list"):
        items = [_build(c, it, ctx) for c in tree.children]
        return tuple(items) if tree.kind == "tuple" else items
    cls, static = tree.payload
    leaves = [next(it) for _ in range(tree.children[0])]
    return cls.__tylo_unflatten__(static, leaves, ctx)
