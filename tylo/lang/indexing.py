"""Runtime integers that take part in host-side layout arithmetic.

``tylo.layouts`` evaluates layouts with Python operators only, so a runtime
coordinate wrapped in ``RuntimeInt`` flows through the same code as a host
int and emits IR for each operation (static zeros and ones are already
short-circuited by the layout code). ``unwrap`` turns the result back into an
IR value (or leaves a Python int alone).
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.core import Value
from . import core as L

__all__ = ["RuntimeInt", "wrap", "unwrap", "wrap_tree", "accepts_runtime_ints"]


class RuntimeInt:
    __slots__ = ("ctx", "value")

    def __init__(self, ctx, value: Value):
        self.ctx = ctx
        self.value = value

    def _bin(self, op, other, reflected=False):
        o = other.value if isinstance(other, RuntimeInt) else other
        a, b = (o, self.value) if reflected else (self.value, o)
        return RuntimeInt(self.ctx, L.binary(self.ctx, op, a, b))

    def __add__(self, o):
        return self if isinstance(o, int) and o == 0 else self._bin("+", o)

    def __radd__(self, o):
        return self if isinstance(o, int) and o == 0 else self._bin("+", o, True)

    def __sub__(self, o):
        return self if isinstance(o, int) and o == 0 else self._bin("-", o)

    def __rsub__(self, o):
        return self._bin("-", o, True)

    def __mul__(self, o):
        if isinstance(o, int):
            if o == 1:
                return self
            if o == 0:
                return 0
        return self._bin("*", o)

    def __rmul__(self, o):
        return self.__mul__(o)

    def __floordiv__(self, o):
        return self if isinstance(o, int) and o == 1 else self._bin("//", o)

    def __rfloordiv__(self, o):
        return self._bin("//", o, True)

    def __mod__(self, o):
        return self._bin("%", o)

    def __rmod__(self, o):
        return self._bin("%", o, True)

    def __xor__(self, o):
        return self if isinstance(o, int) and o == 0 else self._bin("^", o)

    __rxor__ = __xor__

    def __and__(self, o):
        return self._bin("&", o)

    def __rand__(self, o):
        return self._bin("&", o, True)

    def __or__(self, o):
        return self if isinstance(o, int) and o == 0 else self._bin("|", o)

    __ror__ = __or__

    def __rshift__(self, o):
        return self if isinstance(o, int) and o == 0 else self._bin(">>", o)

    def __lshift__(self, o):
        return self if isinstance(o, int) and o == 0 else self._bin("<<", o)

    def __neg__(self):
        return RuntimeInt(self.ctx, L.unary(self.ctx, "-", self.value))

    def __bool__(self):
        raise TypeError("a runtime integer has no compile-time truth value")

    def __index__(self):
        raise TypeError("a runtime integer cannot be used as a compile-time index")

    def __repr__(self):
        return f"RuntimeInt({self.value.type})"


def wrap(ctx, x, dtype=None):
    """Wrap a runtime integer (converted to ``dtype`` when given); Python ints pass through."""
    if isinstance(x, Value):
        if not isinstance(x.type, T.ScalarType) or not x.type.is_int:
            raise L.LangError(f"coordinates must be integers, got a runtime {x.type}")
        if dtype is not None and x.type != dtype:
            x = L.cast(x, dtype, _ctx=ctx)
        return RuntimeInt(ctx, x)
    if isinstance(x, RuntimeInt):
        return wrap(ctx, x.value, dtype)
    if isinstance(x, bool) or not isinstance(x, int):
        raise L.LangError(f"coordinates must be integers, got {x!r}")
    return x


def unwrap(x):
    return x.value if isinstance(x, RuntimeInt) else x


def wrap_tree(ctx, obj):
    """Wrap every runtime integer in nested tuples/lists (for layout constructors)."""
    if isinstance(obj, Value):
        return wrap(ctx, obj)
    if isinstance(obj, (tuple, list)):
        items = [wrap_tree(ctx, x) for x in obj]
        return tuple(items) if isinstance(obj, tuple) else items
    return obj


def accepts_runtime_ints(fn) -> bool:
    """Layout constructors and algebra accept runtime integers (wrapped) as dynamic leaves."""
    module = getattr(fn, "__module__", "") or ""
    return module.startswith("tylo.layouts")
