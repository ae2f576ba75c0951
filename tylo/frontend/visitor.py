"""The visitor core: dispatch with source locations and error conversion, name lookup, statements.

Compile-time values are plain Python objects and are evaluated as Python; runtime values are
IR ``Value``s and Python operators on them call ``tylo.lang`` to emit typed ops.
``break``/``continue``/``return`` set flag variables (``frontend.scopes``), and the statements
after one run under ``if not flag``: the join mechanism of ``frontend.control_flow`` carries the
flags, so no special control flow is needed. Expressions, control flow and calls are the
mixins in the sibling modules; ``frontend.generator.Generator`` puts them together.
"""
from __future__ import annotations

import ast
import re
from contextlib import contextmanager
from dataclasses import dataclass

from ..ir.builder import Builder
from ..ir.core import Kernel, Location, Value
from ..ir.types import ScalarType
from ..lang import core as L
from ..lang.base import Context, LangError, describe_object
from ..lang.debug import device_assert, emit_assert
from .errors import CompileError
from .expressions import BINOPS
from .scopes import MISSING, PY_BUILTINS, RET, RETVAL, Undefined, jumps
from .source import FunctionSource

__all__ = ["VisitorCore", "UNSUPPORTED"]

UNSUPPORTED = {
    ast.ClassDef: "class definitions", ast.Lambda: "lambdas", ast.Try: "try statements",
    ast.With: "with statements", ast.AsyncWith: "async with", ast.AsyncFor: "async for",
    ast.AsyncFunctionDef: "async functions", ast.FunctionDef: "nested function definitions",
    ast.Global: "global declarations", ast.Nonlocal: "nonlocal declarations", ast.Import: "imports",
    ast.ImportFrom: "imports", ast.Yield: "generators (yield)", ast.YieldFrom: "generators (yield from)",
    ast.Await: "await", ast.Delete: "del", ast.Raise: "raise", ast.NamedExpr: "assignment expressions (:=)",
    ast.Set: "set literals", ast.SetComp: "set comprehensions", ast.DictComp: "dict comprehensions",
}

if hasattr(ast, "TryStar"):
    UNSUPPORTED[ast.TryStar] = "try statements"
if hasattr(ast, "Match"):
    UNSUPPORTED[ast.Match] = "match statements"


_VALUE_REPR = re.compile(r"<Value ([^:<>]*): ([^<>]+)>")
_OBJECT_REPR = re.compile(r"<([\w.]+) object at 0x[0-9a-fA-F]+>")


def in_words(reason: str) -> str:
    """A message with Python object reprs that slipped in (from a builtin's f-string) put in words:
    ``<Value n: i32>`` becomes "a runtime i32 (n)", ``<pkg.Cls object at 0x...>`` "a Cls object"."""
    reason = _VALUE_REPR.sub(lambda m: f"a runtime {m.group(2)}" + (f" ({m.group(1)})" if m.group(1) else ""), reason)
    return _OBJECT_REPR.sub(lambda m: f"a {m.group(1).rsplit('.', 1)[-1]} object", reason)


@dataclass
class Region:
    """A nested region being visited (a branch or a loop body); ``scope`` is its scope, as it left it."""

    scope: dict


class VisitorCore(ast.NodeVisitor):
    """State of one function being generated (the kernel or an inlined helper) and its statements.

    ``scope``: the variables (``frontend.scopes``); ``loops``: the enclosing runtime or unrolled
    loops, innermost last; ``runtime_if_depth``: how many runtime ``if`` branches enclose the
    current statement (a helper may return a value only outside them).
    """

    def __init__(self, src: FunctionSource, kernel: Kernel, builder: Builder, ctx: Context, scope: dict,
                 is_helper: bool = False, depth: int = 0, inlined_at: Location | None = None):
        self.src = src
        self.inlined_at = inlined_at  # a helper's call site: its ops' locations carry it
        self.kernel = kernel
        self.builder = builder
        self.ctx = ctx
        self.scope = scope
        self.is_helper = is_helper
        self.depth = depth
        self.loops = []  # Loop records (frontend.control_flow), innermost last
        self.runtime_if_depth = 0
        self.node_stack: list[ast.AST] = []

    def error(self, node, reason: str) -> CompileError:
        lineno, col = self.src.location(node)
        end = getattr(node, "end_col_offset", None)
        end_line = getattr(node, "end_lineno", None)
        end_col = end + self.src.col_offset if end is not None and end_line == getattr(node, "lineno", None) else None
        return CompileError(in_words(reason), self.src.filename, lineno, col, self.src.source_line(lineno), end_col)

    @contextmanager
    def region(self, block, bindings=None):
        """Visit a nested region (a branch, a loop's condition or body) in ``block`` with its own scope: a copy of
        the enclosing scope plus ``bindings``. On exit the enclosing scope is current again, unchanged; the
        yielded Region's ``scope`` holds the variables as the region left them, for the join or the back-edge."""
        outer = self.scope
        region = Region(dict(outer))
        if bindings:
            region.scope.update(bindings)
        self.scope = region.scope
        try:
            with self.builder.at(block):
                yield region
        finally:
            region.scope = self.scope  # a statement may have replaced it (a rolled-back compile-time while)
            self.scope = outer

    def visit(self, node):
        self.node_stack.append(node)
        lineno, col = self.src.location(node)
        saved = self.builder.loc
        self.builder.loc = Location(self.src.filename, lineno, col, self.inlined_at)
        try:
            kind = UNSUPPORTED.get(type(node))
            if kind is not None:
                raise self.error(node, f"{kind} are not supported in tylo kernels")
            method = getattr(self, "visit_" + type(node).__name__, None)
            if method is None:
                raise self.error(node, f"Python syntax '{type(node).__name__}' is not supported in tylo kernels")
            return method(node)
        except CompileError:
            raise
        except LangError as exc:
            raise self.error(node, str(exc)) from None
        except RecursionError:
            raise self.error(node, "recursion too deep (recursive @tylo.func helpers are not supported)") from None
        except Exception as exc:  # an internal error still points at the user's line
            raise self.error(node, f"internal compiler error: {type(exc).__name__}: {exc}") from exc
        finally:
            self.builder.loc = saved
            self.node_stack.pop()

    def generic_visit(self, node):
        raise self.error(node, f"Python syntax '{type(node).__name__}' is not supported in tylo kernels")

    def lookup(self, node, name: str):
        value = self.scope.get(name, MISSING)
        if value is MISSING:
            value = self.src.closure.get(name, MISSING)
        if value is MISSING:
            value = self.src.globals.get(name, MISSING)
        if value is MISSING:
            value = PY_BUILTINS.get(name, MISSING)
        if value is MISSING:
            raise self.error(node, f"name '{name}' is not defined; define it before use, pass it as a parameter, "
                                   f"or make it a module-level constant")
        if isinstance(value, Undefined):
            raise self.error(node, value.reason)
        return value

    def visit_body(self, stmts):
        for idx, stmt in enumerate(stmts):
            if self.finished():
                return
            self.visit(stmt)
            rest = stmts[idx + 1:]
            if rest and jumps(stmt, (ast.Break, ast.Continue, ast.Return)):
                guard = self.jump_guard()
                if guard is True:
                    continue
                if guard is False:
                    return
                self.runtime_if(guard, lambda: self.visit_body(rest), None, rest[0])  # noqa: B023 - called here
                return

    def _flags(self) -> list[str]:
        flags = [RET]
        if self.loops:
            flags += [self.loops[-1].brk, self.loops[-1].cont]
        return flags

    def finished(self) -> bool:
        return any(self.scope.get(f) is True for f in self._flags())

    def jump_guard(self):
        """``not (any jump flag)``: True/False at compile time, else a runtime bool."""
        cond = True
        for f in self._flags():
            v = self.scope.get(f, False)
            if v is True:
                return False
            if isinstance(v, Value):
                nv = L.unary(self.ctx, "not", v)
                cond = nv if cond is True else L.binary(self.ctx, "&", cond, nv)
        return cond

    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        if self._is_device_assert(node.value):
            with self._assert_code():
                self.visit(node.value)
            return
        self.visit(node.value)

    def _is_device_assert(self, node) -> bool:
        """``node`` calls ``tylo.device_assert`` (by name or attribute: looking it up emits nothing)."""
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "device_assert"
                or isinstance(func, ast.Name) and func.id == "device_assert"):
            return False
        return self.visit(func) is device_assert

    @contextmanager
    def _assert_code(self):
        """Around an assert's evaluation: outside debug compiles, drop the ops its condition and
        message emitted, so a runtime assert costs no code (nor a line in the line table); a
        compile-time condition has been checked by then."""
        block = self.builder.block
        mark = len(block.ops)
        yield
        if not self.ctx.kernel.attrs.get("debug"):
            del block.ops[mark:]

    def visit_Pass(self, node):
        pass

    def visit_Assign(self, node):
        value = self.visit(node.value)
        for target in node.targets:
            self.assign(target, value)

    def visit_AnnAssign(self, node):
        if node.value is None:
            return
        value = self.visit(node.value)
        ann = self.visit(node.annotation)
        if isinstance(ann, ScalarType):
            value = L.cast(value, ann, _ctx=self.ctx) if isinstance(value, Value) else L.to_value(self.ctx, value, ann)
        self.assign(node.target, value)

    def visit_AugAssign(self, node):
        op = BINOPS[type(node.op)]
        if isinstance(node.target, ast.Name):
            current = self.lookup(node.target, node.target.id)
            self.scope[node.target.id] = self.binop(node, op, current, self.visit(node.value))
        elif isinstance(node.target, ast.Subscript):
            container = self.visit(node.target.value)
            index = self.visit(node.target.slice)
            current = self.getitem(node.target, container, index)
            self.setitem(node.target, container, index, self.binop(node, op, current, self.visit(node.value)))
        else:
            raise self.error(node, "augmented assignment needs a name or a subscript target")

    def assign(self, target, value):
        if isinstance(target, ast.Name):
            if target.id.startswith("%"):
                raise self.error(target, "invalid name")
            self.scope[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, Value) or not hasattr(value, "__iter__"):
                raise self.error(target, f"cannot unpack {self.describe(value)} into {len(target.elts)} names; "
                                         f"only tuples unpack")
            items = list(value)
            if len(items) != len(target.elts):
                raise self.error(target, f"cannot unpack {len(items)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, items):
                self.assign(t, v)
        elif isinstance(target, ast.Subscript):
            container = self.visit(target.value)
            index = self.visit(target.slice)
            self.setitem(target, container, index, value)
        elif isinstance(target, ast.Attribute):
            raise self.error(target, "assigning to attributes is not supported in kernels")
        else:
            raise self.error(target, f"cannot assign to {type(target).__name__}")

    def visit_Return(self, node):
        value = self.visit(node.value) if node.value is not None else None
        if not self.is_helper:
            if value is not None:
                raise self.error(node, "kernels cannot return values; store results through a pointer")
        else:
            if not self._at_top_level_path():
                if value is not None:
                    raise self.error(node, "a @tylo.func helper can return a value only at the end of its body or "
                                           "under compile-time conditions; assign to a variable and return it once")
            self.scope[RETVAL] = value
        if self.loops and self.is_helper:
            raise self.error(node, "return inside a runtime loop of a @tylo.func helper is not supported")
        self.scope[RET] = True  # loops that contain a return also exit on this flag

    def _at_top_level_path(self) -> bool:
        return not self.loops and not self.runtime_if_depth

    def visit_Break(self, node):
        if not self.loops:
            raise self.error(node, "'break' outside a loop")
        self.scope[self.loops[-1].brk] = True

    def visit_Continue(self, node):
        if not self.loops:
            raise self.error(node, "'continue' outside a loop")
        self.scope[self.loops[-1].cont] = True

    def visit_Assert(self, node):
        """A compile-time condition is checked now; a runtime one becomes ``nv.assert`` in debug
        compiles (``tylo.lang.debug``) and emits nothing otherwise. The message is evaluated only
        when it is needed, as Python does."""
        with self._assert_code():
            cond = self.visit(node.test)
        if isinstance(cond, Value):
            if not self.ctx.kernel.attrs.get("debug"):
                return
            msg = self.visit(node.msg) if node.msg is not None else ""
            if not isinstance(msg, str):
                raise self.error(node.msg, f"the assert message must be a compile-time string, got "
                                           f"{self.describe(msg)}")
            emit_assert(self.ctx, cond, msg)  # at the assert's line: visit() set the builder's location
            return
        if not cond:
            msg = self.visit(node.msg) if node.msg is not None else ""
            raise self.error(node, f"assertion failed{': ' + str(msg) if msg != '' else ''}")

    def describe(self, x) -> str:
        """``x`` in words for a message: its runtime type, or its Python type and repr (never an address)."""
        if isinstance(x, Value):
            return f"a runtime {x.type}"
        return describe_object(x)
