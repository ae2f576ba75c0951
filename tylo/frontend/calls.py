"""Calls: tylo builtins, scalar-type casts, inlining of ``@tylo.func`` helpers, Python functions.

A call whose arguments are all compile-time values runs as Python; a builtin gets the emission
context as ``_ctx``; a ``@tylo.func`` helper is inlined by a fresh visitor over its source with
its arguments bound in a new scope; a few Python builtins (``min``, ``max``, ``abs``, ``float``,
``int``, ``bool``, ``print``) have runtime meanings (the tables at the end).
"""
from __future__ import annotations

import inspect

from ..ir import types as T
from ..ir.core import Value
from ..ir.types import ScalarType
from ..lang import core as L
from ..lang.base import is_builtin
from ..lang.indexing import accepts_runtime_ints, wrap_tree
from .errors import CompileError
from .scopes import RET, RETVAL
from .source import function_source
from .values import flatten

__all__ = ["CallsMixin", "BoundMethod", "VALUE_METHODS", "RUNTIME_PY_BUILTINS"]


class BoundMethod:
    """``value.to`` and friends: a method of a runtime value, called with the context."""

    def __init__(self, name: str, value: Value):
        self.name = name
        self.value = value


class CallsMixin:
    """Call visitors of the Generator."""

    def visit_Call(self, node):
        fn = self.visit(node.func)
        return self.call(node, fn)

    def call(self, node, fn):
        args = self.elements(node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                v = self.visit(kw.value)
                if not isinstance(v, dict):
                    raise self.error(kw, "** needs a compile-time dict")
                kwargs.update(v)
            else:
                kwargs[kw.arg] = self.visit(kw.value)
        if isinstance(fn, BoundMethod):
            method = VALUE_METHODS[fn.name]
            self._bind(node, method, f"{fn.name}()", (self.ctx, fn.value, *args), kwargs, skip=2)
            return method(self.ctx, fn.value, *args, **kwargs)
        if is_builtin(fn):
            return self._call_builtin(node, fn, args, kwargs)
        if isinstance(fn, ScalarType):
            if len(args) != 1 or kwargs:
                raise self.error(node, f"tylo.{fn.name}(x) takes exactly one value to convert")
            return L.cast(args[0], fn, _ctx=self.ctx)
        helper = getattr(fn, "__tylo_func__", None)
        if helper is not None:
            return self._inline(node, helper, args, kwargs)
        if getattr(fn, "__tylo_kernel_fn__", None) is not None:
            raise self.error(node, "a @tylo.jit kernel cannot be called from a kernel; decorate the callee with "
                                   "@tylo.func to inline it")
        if not callable(fn):
            raise self.error(node, f"{self.describe(fn)} is not callable")
        runtime = any(flatten(a)[0] for a in args) or any(flatten(v)[0] for v in kwargs.values())
        if fn in RUNTIME_PY_BUILTINS and runtime:
            handler = RUNTIME_PY_BUILTINS[fn]
            self._bind(node, handler, f"{fn.__name__}() on runtime values", (self, node, *args), kwargs, skip=2)
            return handler(self, node, *args, **kwargs)
        if runtime and accepts_runtime_ints(fn):
            args = [wrap_tree(self.ctx, a) for a in args]
            kwargs = {k: wrap_tree(self.ctx, v) for k, v in kwargs.items()}
            try:
                return fn(*args, **kwargs)
            except (ValueError, TypeError) as exc:
                raise self.error(node, f"{getattr(fn, '__qualname__', fn)}: {exc}") from None
        if runtime and getattr(fn, "__module__", "").startswith("tylo."):
            hint = "; use range(...) for a loop with runtime bounds" if fn is L.static_range else ""
            raise self.error(node, f"tylo.{fn.__name__} takes compile-time arguments only, got "
                                   f"{self.describe(_first_runtime(args, kwargs))}{hint}")
        if runtime:
            name = getattr(fn, "__qualname__", repr(fn))
            raise self.error(node, f"{name} is called with runtime values but is neither a tylo builtin nor a "
                                   f"@tylo.func helper; decorate it with @tylo.func to inline it into the kernel")
        try:
            return fn(*args, **kwargs)
        except CompileError:
            raise
        except Exception as exc:
            name = getattr(fn, "__qualname__", repr(fn))
            raise self.error(node, f"calling {name} at compile time raised {type(exc).__name__}: {exc}") from None

    def _call_builtin(self, node, fn, args, kwargs):
        """A tylo builtin: its arguments are bound against its Python signature first, so a wrong count or
        keyword is the user's error; a TypeError/ValueError/ArithmeticError while it computes on compile-time
        values only (``tylo.log(-1.0)``) is too. With runtime arguments such an exception is tylo's bug."""
        name = f"tylo.{getattr(fn, '__name__', type(fn).__name__)}"
        self._bind(node, fn, f"{name}()", args, dict(kwargs, _ctx=self.ctx))
        if any(flatten(a)[0] for a in args) or any(flatten(v)[0] for v in kwargs.values()):
            return fn(*args, _ctx=self.ctx, **kwargs)
        try:
            return fn(*args, _ctx=self.ctx, **kwargs)
        except (TypeError, ValueError, ArithmeticError) as exc:
            shown = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
            raise self.error(node, f"{name}({shown}) failed at compile time: {exc}") from None

    def _bind(self, node, fn, what, args, kwargs, skip=0):
        """Check ``fn(*args, **kwargs)`` against ``fn``'s signature; the first ``skip`` positional parameters and
        ``_ctx`` are the compiler's, not shown in the message."""
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):  # no signature to check (a C function): the call itself will say
            return
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            params = [p for p in list(sig.parameters.values())[skip:] if p.name != "_ctx"]
            shown = sig.replace(parameters=params, return_annotation=inspect.Signature.empty)
            raise self.error(node, f"{what}: {exc}; it takes {shown}") from None

    def _inline(self, node, fn, args, kwargs):
        if self.depth > 64:
            raise self.error(node, "helpers nest too deeply (recursive @tylo.func helpers are not supported)")
        src = function_source(fn)
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as exc:
            raise self.error(node, f"bad arguments for {fn.__name__}: {exc}") from None
        bound.apply_defaults()
        scope = dict(bound.arguments)
        gen = type(self)(src, self.kernel, self.builder, self.ctx, scope, is_helper=True, depth=self.depth + 1,
                         inlined_at=self.builder.loc)   # the call's position (visit set it)
        try:
            gen.visit_body(src.tree.body)
        except CompileError as exc:
            lineno, _ = self.src.location(node)
            if "(inlined from" not in exc.reason:
                exc.extend_reason(f" (inlined from {self.src.filename}:{lineno})")
            raise
        ret = gen.scope.get(RET)
        if isinstance(ret, Value):
            if gen.scope.get(RETVAL) is not None:
                raise self.error(node, f"{fn.__name__} returns a value under a runtime condition; assign to a "
                                       f"variable and return once at the end")
        return gen.scope.get(RETVAL)

    def print_values(self, node, *args):
        for a in args:
            if isinstance(a, Value) and not isinstance(a.type, ScalarType):
                raise self.error(node, f"print() in a kernel prints scalars and compile-time values, got a runtime "
                                       f"{a.type}")
        fmt = " ".join("%f" if isinstance(a, Value) and a.type.is_float else "%d" if isinstance(a, Value)
                       else str(a).replace("%", "%%") for a in args)
        L.printf(fmt + "\n", *[a for a in args if isinstance(a, Value)], _ctx=self.ctx)


# Methods callable on runtime values: value.to(dtype), value.astype(dtype).
def _method_to(ctx, value, dtype):
    return L.cast(value, dtype, _ctx=ctx)


VALUE_METHODS = {"to": _method_to, "astype": _method_to}


def _fold(name, combine):
    """Python's ``min``/``max`` over runtime values: a chain of tylo.minimum/maximum."""

    def fold(gen, node, *args):
        if len(args) < 2:
            raise gen.error(node, f"{name}() of runtime values needs at least two arguments")
        out = args[0]
        for a in args[1:]:
            out = combine(out, a, _ctx=gen.ctx)
        return out

    return fold


_rt_min = _fold("min", L.minimum)
_rt_max = _fold("max", L.maximum)


def _rt_range(gen, node, *args):
    raise gen.error(node, "range() with runtime bounds can only drive a for loop; comprehensions over runtime "
                          "values are not supported")


RUNTIME_PY_BUILTINS = {
    range: _rt_range,
    min: _rt_min,
    max: _rt_max,
    abs: lambda gen, node, x: L.abs(x, _ctx=gen.ctx),
    float: lambda gen, node, x: L.cast(x, T.f32, _ctx=gen.ctx),
    int: lambda gen, node, x: L.cast(x, T.i32, _ctx=gen.ctx),
    bool: lambda gen, node, x: L.to_bool(gen.ctx, x),
    print: lambda gen, node, *values: gen.print_values(node, *values),
}


def _first_runtime(args, kwargs):
    return next(x for x in [*args, *kwargs.values()] if flatten(x)[0])
