"""Pure functions on integer tuples (CuTe's ``IntTuple``).

An *int tuple* is either a leaf or a tuple of int tuples.  A leaf is

* a **static** leaf: a Python ``int`` (``bool`` is rejected; numpy integers
  are normalised to ``int``), or
* a **dynamic** leaf: any other object that supports the integer operators
  (``+ * // % ^ & >> <<``), for example an SSA value of the frontend or a
  numpy array used for vectorised evaluation on the host.

Every arithmetic helper here only applies operators to leaves and
short-circuits static zeros and ones, so it produces small runtime code when
the frontend passes SSA values through it.
"""

from __future__ import annotations

import numbers
from typing import Any

__all__ = [
    "is_int",
    "is_static",
    "is_tuple",
    "normalize",
    "flatten",
    "rank",
    "depth",
    "product",
    "congruent",
    "unflatten",
    "add",
    "mul",
    "fmt",
]

_OPS = ("__add__", "__mul__", "__floordiv__", "__mod__")


def is_int(x: Any) -> bool:
    """True for a static integer leaf (a Python ``int`` that is not ``bool``)."""
    return type(x) is int


def is_tuple(x: Any) -> bool:
    return type(x) is tuple


def is_static(t: Any) -> bool:
    """True when every leaf of ``t`` is a static ``int``."""
    if type(t) is tuple:
        return all(is_static(e) for e in t)
    return type(t) is int


def _leaf(x: Any, what: str) -> Any:
    if type(x) is int:
        return x
    if isinstance(x, bool):
        raise ValueError(f"{what}: leaves must be integers, got bool {x!r}")
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, (numbers.Number, str, bytes)):
        raise ValueError(
            f"{what}: leaves must be integers (static int or a runtime integer value), "
            f"got {type(x).__name__} {x!r}"
        )
    if x is None or not all(hasattr(x, op) for op in _OPS):
        raise ValueError(
            f"{what}: leaves must be integers (static int or a runtime integer value), "
            f"got {type(x).__name__} {x!r}"
        )
    return x


def normalize(t: Any, what: str = "int tuple") -> Any:
    """Validate ``t`` and return it with lists turned into tuples and numpy
    integers turned into ``int``.  Raises ``ValueError`` naming ``what``."""
    if isinstance(t, (tuple, list)):
        if len(t) == 0:
            raise ValueError(f"{what}: empty tuples are not allowed")
        return tuple(normalize(e, what) for e in t)
    return _leaf(t, what)


def flatten(t: Any) -> tuple:
    """Leaves of ``t`` in order, as a flat tuple (a leaf gives a 1-tuple)."""
    if type(t) is not tuple:
        return (t,)
    out: list = []

    def walk(x):
        for e in x:
            if type(e) is tuple:
                walk(e)
            else:
                out.append(e)
    walk(t)
    return tuple(out)


def rank(t: Any) -> int:
    """Number of top-level modes (1 for a leaf)."""
    return len(t) if type(t) is tuple else 1


def depth(t: Any) -> int:
    """Nesting depth: 0 for a leaf, 1 for a flat tuple, ..."""
    if type(t) is not tuple:
        return 0
    return 1 + max(depth(e) for e in t)


def mul(a: Any, b: Any) -> Any:
    """``a * b`` with static zeros and ones short-circuited."""
    if type(a) is int:
        if a == 0:
            return 0
        if a == 1:
            return b
        if type(b) is int:
            return a * b
    if type(b) is int:
        if b == 0:
            return 0
        if b == 1:
            return a
    return a * b


def add(a: Any, b: Any) -> Any:
    """``a + b`` with static zeros short-circuited."""
    if type(a) is int and a == 0:
        return b
    if type(b) is int and b == 0:
        return a
    return a + b


def product(t: Any) -> Any:
    """Product of the leaves of ``t`` (static when all leaves are static)."""
    r: Any = 1
    for x in flatten(t):
        r = mul(r, x)
    return r


def congruent(a: Any, b: Any) -> bool:
    """Same tree structure (leaves may differ)."""
    if type(a) is tuple:
        return type(b) is tuple and len(a) == len(b) and all(
            congruent(x, y) for x, y in zip(a, b)
        )
    return type(b) is not tuple


def unflatten(flat: tuple, profile: Any) -> Any:
    """Rebuild a tree with the structure of ``profile`` from flat leaves."""
    it = iter(flat)

    def build(p):
        if type(p) is tuple:
            return tuple(build(e) for e in p)
        return next(it)

    out = build(profile)
    return out


def fmt(t: Any) -> str:
    """CuTe-style text: ``(128,(2,4))``."""
    if type(t) is tuple:
        return "(" + ",".join(fmt(e) for e in t) + ")"
    if type(t) is int:
        return str(t)
    name = getattr(t, "name", None)
    return str(name) if isinstance(name, str) else str(t)
