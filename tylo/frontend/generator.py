"""The AST visitor: Python kernel source -> typed IR, in one walk.

Compile-time values are plain Python objects and are evaluated as Python;
runtime values are IR ``Value``s and Python operators on them call
``tylo.lang`` to emit typed ops. Control flow on runtime conditions becomes
structured IR (``scf.if``/``scf.for``/``scf.while``); every variable live
across a join or a back-edge is flattened (``frontend.values``) and its
static parts must agree. ``break``/``continue``/``return`` set flag
variables, and the statements after one run under ``if not flag``: the same
join mechanism carries the flags, so no special control flow is needed.
"""
from __future__ import annotations

import ast
import builtins
import inspect
from dataclasses import dataclass, field

from ..ir import types as T
from ..ir.builder import Builder
from ..ir.core import Block, Kernel, Location, Value
from ..ir.types import ScalarType
from ..lang import core as L
from ..lang.base import Context, LangError, is_builtin
from ..lang.indexing import accepts_runtime_ints, wrap_tree
from .errors import CompileError
from .source import FunctionSource, function_source
from .values import flatten, unflatten

__all__ = ["generate_kernel", "Undefined"]

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
           ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^",
           ast.BitAnd: "&", ast.MatMult: "@"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_UNARY = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~", ast.Not: "not"}

_PY_BINOPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
    "//": lambda a, b: a // b, "%": lambda a, b: a % b, "**": lambda a, b: a ** b, "<<": lambda a, b: a << b,
    ">>": lambda a, b: a >> b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "&": lambda a, b: a & b,
    "@": lambda a, b: a @ b,
}
_PY_CMP = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
           ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}

_UNSUPPORTED = {
    ast.ClassDef: "class definitions", ast.Lambda: "lambdas", ast.Try: "try statements",
    ast.With: "with statements", ast.AsyncWith: "async with", ast.AsyncFor: "async for",
    ast.AsyncFunctionDef: "async functions", ast.FunctionDef: "nested function definitions",
    ast.Global: "global declarations", ast.Nonlocal: "nonlocal declarations", ast.Import: "imports",
    ast.ImportFrom: "imports", ast.Yield: "generators (yield)", ast.YieldFrom: "generators (yield from)",
    ast.Await: "await", ast.Delete: "del", ast.Raise: "raise", ast.NamedExpr: "assignment expressions (:=)",
    ast.Set: "set literals", ast.SetComp: "set comprehensions", ast.DictComp: "dict comprehensions",
}
if hasattr(ast, "TryStar"):
    _UNSUPPORTED[ast.TryStar] = "try statements"
if hasattr(ast, "Match"):
    _UNSUPPORTED[ast.Match] = "match statements"

_MISSING = object()
_RET = "%ret"
_RETVAL = "%retval"


class Undefined:
    """A name that is not usable here (assigned in only one branch, or loop-local)."""

    def __init__(self, reason: str):
        self.reason = reason


class _BoundMethod:
    """``value.to`` and friends: a method of a runtime value, called with the context."""

    def __init__(self, name: str, value: Value):
        self.name = name
        self.value = value


@dataclass
class _Loop:
    brk: str
    cont: str
    exits: list = field(default_factory=list)  # flag names that end the loop


def _jumps(stmt, kinds) -> bool:
    """Does ``stmt`` contain a jump of ``kinds`` that leaves it (not inside an inner loop for break/continue)?"""
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, kinds):
            return True
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.For, ast.While)) and kinds != (ast.Return,):
                # break/continue inside an inner loop belong to it; returns still leave
                if ast.Return in kinds:
                    stack.extend(n for n in ast.walk(child) if isinstance(n, ast.Return))
                continue
            if isinstance(child, (ast.FunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            stack.append(child)
    return False


def _assigned_names(stmts) -> list[str]:
    """Names bound anywhere in ``stmts`` (assignment targets, for targets), in first-seen order."""
    names: dict[str, None] = {}

    def targets(t):
        if isinstance(t, ast.Name):
            names[t.id] = None
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                targets(e)
        elif isinstance(t, ast.Starred):
            targets(t.value)

    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    targets(t)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets(node.target)
            elif isinstance(node, ast.For):
                targets(node.target)
    return list(names)


class Generator(ast.NodeVisitor):
    def __init__(self, src: FunctionSource, kernel: Kernel, builder: Builder, ctx: Context, scope: dict,
                 is_helper: bool = False, depth: int = 0):
        self.src = src
        self.kernel = kernel
        self.builder = builder
        self.ctx = ctx
        self.scope = scope
        self.is_helper = is_helper
        self.depth = depth
        self.loops: list[_Loop] = []
        self.node_stack: list[ast.AST] = []

    # -- errors and locations ------------------------------------------------------

    def error(self, node, reason: str) -> CompileError:
        lineno, col = self.src.location(node)
        end = getattr(node, "end_col_offset", None)
        end_line = getattr(node, "end_lineno", None)
        end_col = end + self.src.col_offset if end is not None and end_line == getattr(node, "lineno", None) else None
        return CompileError(reason, self.src.filename, lineno, col, self.src.source_line(lineno), end_col)

    def visit(self, node):
        self.node_stack.append(node)
        lineno, col = self.src.location(node)
        saved = self.builder.loc
        self.builder.loc = Location(self.src.filename, lineno, col)
        try:
            kind = _UNSUPPORTED.get(type(node))
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

    # -- names -------------------------------------------------------------------------

    def lookup(self, node, name: str):
        value = self.scope.get(name, _MISSING)
        if value is _MISSING:
            value = self.src.closure.get(name, _MISSING)
        if value is _MISSING:
            value = self.src.globals.get(name, _MISSING)
        if value is _MISSING:
            value = _PY_BUILTINS.get(name, _MISSING)
        if value is _MISSING:
            raise self.error(node, f"name '{name}' is not defined; define it before use, pass it as a parameter, "
                                   f"or make it a module-level constant")
        if isinstance(value, Undefined):
            raise self.error(node, value.reason)
        return value

    # -- statements ---------------------------------------------------------------------

    def visit_body(self, stmts):
        for idx, stmt in enumerate(stmts):
            if self._finished():
                return
            self.visit(stmt)
            rest = stmts[idx + 1:]
            if rest and _jumps(stmt, (ast.Break, ast.Continue, ast.Return)):
                guard = self._guard()
                if guard is True:
                    continue
                if guard is False:
                    return
                self._runtime_if(guard, lambda: self.visit_body(rest), None, rest[0])
                return

    def _flags(self) -> list[str]:
        flags = [_RET]
        if self.loops:
            flags += [self.loops[-1].brk, self.loops[-1].cont]
        return flags

    def _finished(self) -> bool:
        return any(self.scope.get(f) is True for f in self._flags())

    def _guard(self):
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
        self.visit(node.value)

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
        op = _BINOPS[type(node.op)]
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
                raise self.error(target, f"cannot unpack {self._describe(value)} into {len(target.elts)} names; "
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
            self.scope[_RETVAL] = value
        if self.loops and self.is_helper:
            raise self.error(node, "return inside a runtime loop of a @tylo.func helper is not supported")
        self.scope[_RET] = True  # loops that contain a return also exit on this flag

    def _at_top_level_path(self) -> bool:
        return not self.loops and not getattr(self, "_in_runtime_if", 0)

    def visit_Break(self, node):
        if not self.loops:
            raise self.error(node, "'break' outside a loop")
        self.scope[self.loops[-1].brk] = True

    def visit_Continue(self, node):
        if not self.loops:
            raise self.error(node, "'continue' outside a loop")
        self.scope[self.loops[-1].cont] = True

    def visit_Assert(self, node):
        cond = self.visit(node.test)
        if isinstance(cond, Value):
            raise self.error(node, "assert needs a compile-time condition; use tylo.static_assert for compile-time "
                                   "checks or an if statement for runtime ones")
        if not cond:
            msg = self.visit(node.msg) if node.msg is not None else ""
            raise self.error(node, f"assertion failed{': ' + str(msg) if msg != '' else ''}")

    # -- if -------------------------------------------------------------------------------

    def visit_If(self, node):
        cond = self.visit(node.test)
        if isinstance(cond, Value) or (hasattr(type(cond), "__tylo_flatten__")):
            cond = self.condition(node.test, cond)
            self._runtime_if(cond, lambda: self.visit_body(node.body),
                             (lambda: self.visit_body(node.orelse)) if node.orelse else None, node)
        else:
            self.visit_body(node.body if self._truth(node.test, cond) else node.orelse)

    def _truth(self, node, value) -> bool:
        try:
            return bool(value)
        except Exception as exc:
            raise self.error(node, f"cannot use {self._describe(value)} as a condition: {exc}") from None

    def condition(self, node, value) -> Value:
        if not isinstance(value, Value) or not isinstance(value.type, ScalarType):
            raise self.error(node, f"cannot use {self._describe(value)} as a runtime condition")
        return L.to_bool(self.ctx, value)

    def _runtime_if(self, cond: Value, then_fn, else_fn, node, want_result=False):
        """Emit ``scf.if`` and merge the variables both branches leave behind."""
        before = dict(self.scope)
        blocks = [Block(), Block()]
        scopes = []
        results = []
        self._in_runtime_if = getattr(self, "_in_runtime_if", 0) + 1
        try:
            for blk, fn in zip(blocks, (then_fn, else_fn)):
                self.scope = dict(before)
                with self.builder.at(blk):
                    r = fn() if fn is not None else None
                scopes.append(self.scope)
                results.append(r)
        finally:
            self._in_runtime_if -= 1
        self.scope = before
        names = [n for n in dict.fromkeys(list(scopes[0]) + list(scopes[1]))]
        merged, pairs = [], []
        for name in names:
            a, b = scopes[0].get(name, _MISSING), scopes[1].get(name, _MISSING)
            if a is b:
                if a is not _MISSING:
                    self.scope[name] = a
                continue
            if name in (_RET,) or name.startswith("%brk") or name.startswith("%cont"):
                a = False if a is _MISSING else a
                b = False if b is _MISSING else b
            elif a is _MISSING or b is _MISSING or isinstance(a, Undefined) or isinstance(b, Undefined):
                line = self.src.location(node)[0]
                self.scope[name] = Undefined(
                    f"'{name}' is assigned in only one branch of the if at line {line}; assign it before the if "
                    f"or in both branches")
                continue
            merged.append(name)
            pairs.append((a, b))
        if want_result:
            merged.append("%result")
            pairs.append(tuple(results))
        joined = self._join(node, merged, pairs, blocks, what="branch")
        trees, leaves = joined
        for blk, side_leaves in zip(blocks, leaves):
            with self.builder.at(blk):
                self.builder.create("scf.yield", side_leaves)
        types = [v.type for v in leaves[0]]
        op = self.builder.create("scf.if", [cond], types, blocks=blocks)
        values = self._rebuild(merged, trees, op.results)
        for name, v in values.items():
            if name != "%result":
                self.scope[name] = v
        return values.get("%result")

    def _join(self, node, names, pairs, blocks, what):
        """Reconcile each (a, b) pair of values; emit conversions at the end of each block.

        Returns the tree definitions and the leaves of each side.
        """
        trees, leaves_a, leaves_b = [], [], []
        for name, (a, b) in zip(names, pairs):
            with self.builder.at(blocks[0]):
                a2 = self._reconcile(node, name, a, b, what)
            with self.builder.at(blocks[1]):
                b2 = self._reconcile(node, name, b, a2, what)
            la, ta = flatten(a2)
            lb, tb = flatten(b2)
            if ta != tb:
                raise self.error(node, f"variable '{name}' is {ta.describe()} in one {what} and {tb.describe()} in "
                                       f"the other; its static structure (layout, shape, dtype) must be the same")
            for x, y in zip(la, lb):
                if x.type != y.type:
                    raise self.error(node, f"variable '{name}' has type {x.type} in the then-branch and {y.type} in "
                                           f"the else-branch; convert one side with .to(tylo.{x.type}) so both agree")
            trees.append(ta)
            leaves_a.extend(la)
            leaves_b.extend(lb)
        return trees, (leaves_a, leaves_b)

    def _reconcile(self, node, name, mine, other, what):
        """Make ``mine`` structurally compatible with ``other`` by materialising Python scalars."""
        if isinstance(mine, (tuple, list)) and isinstance(other, (tuple, list)) and len(mine) == len(other):
            items = [self._reconcile(node, name, m, o, what) for m, o in zip(mine, other)]
            return tuple(items) if isinstance(mine, tuple) else items
        if isinstance(mine, L.PY_SCALARS) and not isinstance(mine, Value):
            if isinstance(other, Value) and isinstance(other.type, ScalarType):
                return L.to_value(self.ctx, mine, L.literal_type(mine, other.type))
            if isinstance(other, L.PY_SCALARS) and (other != mine or type(other) is not type(mine)):
                t = T.promote(L.default_type(mine), L.default_type(other))
                return L.to_value(self.ctx, mine, t)
        return mine

    def _rebuild(self, names, trees, results) -> dict:
        out = {}
        pos = 0
        for name, tree in zip(names, trees):
            n = _count_leaves(tree)
            out[name] = unflatten(tree, list(results[pos:pos + n]))
            pos += n
        return out

    # -- loops ------------------------------------------------------------------------------

    def visit_For(self, node):
        if node.orelse:
            raise self.error(node, "for ... else is not supported in kernels")
        it = node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, (ast.Name, ast.Attribute)):
            fn = self.visit(it.func)
            if fn is range:
                args = [self.visit(a) for a in it.args]
                if it.keywords:
                    raise self.error(it, "range() takes no keyword arguments")
                if not 1 <= len(args) <= 3:
                    raise self.error(it, "range() takes 1 to 3 arguments")
                return self._runtime_range(node, args)
            iterable = self._call(it, fn)
        else:
            iterable = self.visit(it)
        if isinstance(iterable, Value):
            raise self.error(it, "cannot iterate over a runtime value; use range(n) for a runtime loop")
        try:
            items = list(iterable)
        except TypeError:
            raise self.error(it, f"cannot iterate over {self._describe(iterable)}") from None
        self._unrolled(node, items)

    def _unrolled(self, node, items):
        loop = self._push_loop()
        try:
            self.scope[loop.brk] = False
            for item in items:
                brk = self.scope.get(loop.brk)
                if brk is True or self.scope.get(_RET) is True:
                    break
                if isinstance(brk, Value) or isinstance(self.scope.get(_RET), Value):
                    guard = self._guard_exits(loop)
                    self._runtime_if(guard, lambda item=item: self._unrolled_iteration(node, loop, item), None, node)
                else:
                    self._unrolled_iteration(node, loop, item)
        finally:
            self._pop_loop(loop)

    def _unrolled_iteration(self, node, loop, item):
        self.scope[loop.cont] = False
        self.assign(node.target, item)
        self.visit_body(node.body)

    def _guard_exits(self, loop):
        cond = True
        for f in (loop.brk, _RET):
            v = self.scope.get(f, False)
            if isinstance(v, Value):
                nv = L.unary(self.ctx, "not", v)
                cond = nv if cond is True else L.binary(self.ctx, "&", cond, nv)
        return cond

    def _push_loop(self) -> _Loop:
        n = len(self.loops)
        loop = _Loop(f"%brk{n}", f"%cont{n}")
        self.loops.append(loop)
        return loop

    def _pop_loop(self, loop):
        self.loops.pop()
        self.scope.pop(loop.brk, None)
        self.scope.pop(loop.cont, None)

    def _range_values(self, node, args):
        if len(args) == 1:
            lb, ub, step = 0, args[0], 1
        elif len(args) == 2:
            lb, ub, step = args[0], args[1], 1
        else:
            lb, ub, step = args
        vals = (lb, ub, step)
        for v in vals:
            if isinstance(v, Value):
                if not isinstance(v.type, ScalarType) or not v.type.is_int:
                    raise self.error(node.iter, f"range() needs integers, got a runtime {v.type}")
            elif not isinstance(v, int) or isinstance(v, bool):
                raise self.error(node.iter, f"range() needs integers, got {v!r}")
        if isinstance(step, int) and step == 0:
            raise self.error(node.iter, "range() step must not be zero")
        t = None
        for v in vals:
            if isinstance(v, Value):
                t = v.type if t is None else T.promote(t, v.type)
        if t is None:
            t = T.i32 if all(-(2**31) <= v < 2**31 for v in vals) else T.i64
        return [L.to_value(self.ctx, v, t) for v in vals], step

    def _carried(self, body, extra=()):
        """Names defined before a loop and assigned inside it (their values flow around the back-edge)."""
        names = []
        for name in list(_assigned_names(body)) + list(extra):
            if name in names:
                continue
            v = self.scope.get(name, _MISSING)
            if v is _MISSING or isinstance(v, Undefined):
                continue
            names.append(name)
        return names

    def _flatten_carried(self, carried):
        """The loop's initial leaves and the static structure of each carried variable."""
        leaves, trees = [], []
        for name in carried:
            lv, tr = flatten(self._materialize(self.scope[name]))
            leaves += lv
            trees.append(tr)
        return leaves, trees

    def _materialize(self, value):
        """Loop-carried Python scalars become runtime values of their default type."""
        if isinstance(value, (tuple, list)):
            items = [self._materialize(v) for v in value]
            return tuple(items) if isinstance(value, tuple) else items
        if isinstance(value, L.PY_SCALARS):
            return L.to_value(self.ctx, value)
        return value

    def _runtime_range(self, node, args):
        (lb, ub, step), static_step = self._range_values(node, args)
        has_break = any(_jumps(s, (ast.Break,)) for s in node.body)
        has_return = any(_jumps(s, (ast.Return,)) for s in node.body)
        loop = self._push_loop()
        try:
            if has_break or has_return:
                self._while_loop(node, loop, has_return, induction=(lb, ub, step, static_step))
            else:
                self._for_loop(node, loop, lb, ub, step)
        finally:
            self._pop_loop(loop)

    def _for_loop(self, node, loop, lb, ub, step):
        carried = self._carried(node.body)
        before = dict(self.scope)
        init_leaves, trees = self._flatten_carried(carried)
        body = Block([lb.type] + [v.type for v in init_leaves])
        self.scope = dict(before)
        self.scope.update(self._rebuild(carried, trees, body.args[1:]))
        self.scope[loop.cont] = False
        with self.builder.at(body):
            self.assign(node.target, body.args[0])
            self.visit_body(node.body)
            final = self._back_edge(node, carried, trees, init_leaves)
            self.builder.create("scf.yield", final)
        body_scope = self.scope
        self.scope = before
        op = self.builder.create("scf.for", [lb, ub, step, *init_leaves], [v.type for v in init_leaves], blocks=[body])
        self.scope.update(self._rebuild(carried, trees, op.results))
        self._mark_loop_locals(node, body_scope, before, node.target)

    def _mark_loop_locals(self, node, body_scope, before, target):
        line = self.src.location(node)[0]
        for name in body_scope:
            if name.startswith("%") or name in before:
                continue
            self.scope[name] = Undefined(
                f"'{name}' is assigned only inside the runtime loop at line {line}; define it before the loop "
                f"to use it afterwards")

    def _back_edge(self, node, carried, trees, init_leaves):
        leaves = []
        pos = 0
        for name, tree in zip(carried, trees):
            n = _count_leaves(tree)
            expected = init_leaves[pos:pos + n]
            pos += n
            cur = self.scope.get(name, _MISSING)
            if cur is _MISSING or isinstance(cur, Undefined):
                raise self.error(node, f"'{name}' is not defined at the end of the loop body")
            start = unflatten(tree, expected)
            cur = self._reconcile(node, name, cur, start, "iteration")
            lv, tr = flatten(cur)
            if tr != tree:
                raise self.error(node, f"variable '{name}' is {tree.describe()} before the loop and {tr.describe()} at "
                                       f"the end of its body; its static structure must not change across iterations")
            for x, y in zip(expected, lv):
                if x.type != y.type:
                    raise self.error(node, f"variable '{name}' changes type across the loop back-edge: {x.type} before "
                                           f"the loop, {y.type} at the end of the body; initialise it with the loop's "
                                           f"type (e.g. 0.0 for floats) or convert with .to(tylo.{x.type})")
            leaves += lv
        return leaves

    def _while_loop(self, node, loop, has_return, induction=None, test=None):
        """``scf.while`` for ``while`` statements and for ``range`` loops that can break."""
        has_break = any(_jumps(s, (ast.Break,)) for s in node.body)
        exits = ([loop.brk] if has_break else []) + ([_RET] if has_return else [])
        self.scope[loop.brk] = False
        if has_return:
            self.scope.setdefault(_RET, False)
        extra = list(exits)
        if induction is not None:
            self.scope["%iv"] = induction[0]
            extra.append("%iv")
        carried = self._carried(node.body, extra)
        before = dict(self.scope)
        init_leaves, trees = self._flatten_carried(carried)
        types = [v.type for v in init_leaves]
        cond_block = Block(types)
        body = Block(types)
        # before-region: evaluate the condition on the carried values
        self.scope = dict(before)
        self.scope.update(self._rebuild(carried, trees, cond_block.args))
        with self.builder.at(cond_block):
            if induction is not None:
                _, ub, step, static_step = induction
                iv = self.scope["%iv"]
                if isinstance(static_step, int):
                    cond = L.compare(self.ctx, "<" if static_step > 0 else ">", iv, ub)
                else:
                    up = L.binary(self.ctx, "&", L.compare(self.ctx, ">", step, 0), L.compare(self.ctx, "<", iv, ub))
                    down = L.binary(self.ctx, "&", L.compare(self.ctx, "<", step, 0), L.compare(self.ctx, ">", iv, ub))
                    cond = L.binary(self.ctx, "|", up, down)
            else:
                cond = self.condition(test, self.visit(test))
            for f in exits:
                fv = self.scope.get(f)
                if isinstance(fv, Value):
                    cond = L.binary(self.ctx, "&", cond, L.unary(self.ctx, "not", fv))
            self.builder.create("scf.condition", [cond, *cond_block.args])
        # after-region: the body
        self.scope = dict(before)
        self.scope.update(self._rebuild(carried, trees, body.args))
        self.scope[loop.cont] = False
        with self.builder.at(body):
            if induction is not None:
                self.assign(node.target, self.scope["%iv"])
            self.visit_body(node.body)
            if induction is not None:
                # the increment runs unless the loop is exiting anyway
                self.scope["%iv"] = L.binary(self.ctx, "+", self.scope["%iv"], induction[2])
            final = self._back_edge(node, carried, trees, init_leaves)
            self.builder.create("scf.yield", final)
        body_scope = self.scope
        self.scope = before
        op = self.builder.create("scf.while", init_leaves, types, blocks=[cond_block, body])
        self.scope.update(self._rebuild(carried, trees, op.results))
        self.scope.pop("%iv", None)
        self._mark_loop_locals(node, body_scope, before, getattr(node, "target", None))

    def visit_While(self, node):
        if node.orelse:
            raise self.error(node, "while ... else is not supported in kernels")
        has_return = any(_jumps(s, (ast.Return,)) for s in node.body)
        # Try to run the loop in the compiler while its condition is a compile-time value. If the
        # condition becomes a runtime value (a flag set under a runtime if), roll back what the
        # iterations emitted and emit a runtime loop instead.
        snapshot = (len(self.builder.block.ops), dict(self.scope), len(self.kernel.attrs["shared"]))
        cond = self.visit(node.test)
        if not isinstance(cond, Value) and self._compile_time_while(node, cond):
            return
        n_ops, scope, n_shared = snapshot
        del self.builder.block.ops[n_ops:]
        del self.kernel.attrs["shared"][n_shared:]
        self.scope = scope
        loop = self._push_loop()
        try:
            self._while_loop(node, loop, has_return, test=node.test)
        finally:
            self._pop_loop(loop)

    # -- expressions --------------------------------------------------------------------

    def _compile_time_while(self, node, cond) -> bool:
        """Unroll a while loop whose condition is known at compile time; False if it turns runtime."""
        loop = self._push_loop()
        try:
            self.scope[loop.brk] = False
            count = 0
            while self._truth(node.test, cond):
                count += 1
                if count > 100_000:
                    raise self.error(node, "compile-time while loop ran 100000 iterations; is it infinite?")
                self.scope[loop.cont] = False
                self.visit_body(node.body)
                flag = self.scope.get(loop.brk)
                if flag is True or self.scope.get(_RET) is True:
                    break
                if isinstance(flag, Value) or isinstance(self.scope.get(_RET), Value):
                    return False
                cond = self.visit(node.test)
                if isinstance(cond, Value):
                    return False
        finally:
            self._pop_loop(loop)
        return True

    def visit_Constant(self, node):
        return node.value

    def visit_Name(self, node):
        return self.lookup(node, node.id)

    def visit_Tuple(self, node):
        return tuple(self._elements(node.elts))

    def visit_List(self, node):
        return list(self._elements(node.elts))

    def _elements(self, elts):
        out = []
        for e in elts:
            if isinstance(e, ast.Starred):
                v = self.visit(e.value)
                if isinstance(v, Value):
                    raise self.error(e, "cannot unpack a runtime value with *")
                out.extend(v)
            else:
                out.append(self.visit(e))
        return out

    def visit_Dict(self, node):
        keys = [self.visit(k) if k is not None else None for k in node.keys]
        vals = [self.visit(v) for v in node.values]
        if any(isinstance(k, Value) for k in keys):
            raise self.error(node, "dict keys must be compile-time values")
        return dict(zip(keys, vals))

    def visit_JoinedStr(self, node):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            else:
                x = self.visit(v.value)
                if isinstance(x, Value):
                    raise self.error(v, "f-strings can only format compile-time values")
                spec = self.visit(v.format_spec) if v.format_spec is not None else ""
                if v.conversion == ord("r"):
                    x = repr(x)
                elif v.conversion == ord("s"):
                    x = str(x)
                parts.append(format(x, spec))
        return "".join(parts)

    def visit_FormattedValue(self, node):
        return self.visit_JoinedStr(ast.JoinedStr(values=[node]))

    def visit_BinOp(self, node):
        return self.binop(node, _BINOPS[type(node.op)], self.visit(node.left), self.visit(node.right))

    def binop(self, node, op, a, b):
        for x, y, reflected in ((a, b, False), (b, a, True)):
            hook = getattr(type(x), "__tylo_binary__", None)
            if hook is not None:
                return x.__tylo_binary__(self.ctx, op, y, reflected)
        if not isinstance(a, Value) and not isinstance(b, Value):
            try:
                return _PY_BINOPS[op](a, b)
            except Exception as exc:
                raise self.error(node, f"{self._describe(a)} {op} {self._describe(b)} failed at compile time: "
                                       f"{type(exc).__name__}: {exc}") from None
        return L.binary(self.ctx, op, a, b)

    def visit_UnaryOp(self, node):
        op = _UNARY[type(node.op)]
        v = self.visit(node.operand)
        hook = getattr(type(v), "__tylo_unary__", None)
        if hook is not None:
            return v.__tylo_unary__(self.ctx, op)
        if not isinstance(v, Value):
            return {"-": lambda x: -x, "+": lambda x: +x, "~": lambda x: ~x, "not": lambda x: not x}[op](v)
        return L.unary(self.ctx, op, v)

    def visit_Compare(self, node):
        left = self.visit(node.left)
        result = True
        for op_node, right_node in zip(node.ops, node.comparators):
            right = self.visit(right_node)
            if isinstance(op_node, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                if isinstance(left, Value) or isinstance(right, Value):
                    raise self.error(node, "'is' and 'in' only work on compile-time values")
                r = {ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
                     ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}[type(op_node)](left, right)
            else:
                op = _CMPOPS[type(op_node)]
                hook = getattr(type(left), "__tylo_compare__", None)
                if hook is not None:
                    r = left.__tylo_compare__(self.ctx, op, right)
                elif isinstance(left, Value) or isinstance(right, Value):
                    r = L.compare(self.ctx, op, left, right)
                else:
                    r = _PY_CMP[op](left, right)
            result = r if result is True else self._and(result, r)
            if result is False:
                return False
            left = right
        return result

    def _and(self, a, b):
        if not isinstance(a, Value) and not isinstance(b, Value):
            return a and b
        if not isinstance(a, Value):
            return L.to_bool(self.ctx, b) if a else a
        if not isinstance(b, Value):
            return L.to_bool(self.ctx, a) if b else b
        return L.binary(self.ctx, "&", L.to_bool(self.ctx, a), L.to_bool(self.ctx, b))

    def visit_BoolOp(self, node):
        # Runtime operands are both evaluated (no short circuit); compile-time ones short-circuit.
        is_and = isinstance(node.op, ast.And)
        result = None
        for value_node in node.values:
            v = self.visit(value_node)
            if result is None:
                result = v
            elif isinstance(result, Value) or isinstance(v, Value):
                a = L.to_bool(self.ctx, result)
                if not isinstance(v, Value):
                    if bool(v) == is_and:
                        continue
                    return v
                result = L.binary(self.ctx, "&" if is_and else "|", a, L.to_bool(self.ctx, v))
                continue
            else:
                result = v
            if not isinstance(result, Value) and bool(result) != is_and:
                return result
        return result

    def visit_IfExp(self, node):
        cond = self.visit(node.test)
        if not isinstance(cond, Value):
            return self.visit(node.body if self._truth(node.test, cond) else node.orelse)
        cond = self.condition(node.test, cond)
        return self._runtime_if(cond, lambda: self.visit(node.body), lambda: self.visit(node.orelse), node,
                                want_result=True)

    def visit_Attribute(self, node):
        obj = self.visit(node.value)
        hook = getattr(type(obj), "__tylo_getattr__", None)
        if hook is not None:
            return obj.__tylo_getattr__(self.ctx, node.attr)
        if isinstance(obj, Value):
            if node.attr == "dtype":
                return obj.type.elem if isinstance(obj.type, T.PointerType) else obj.type
            if node.attr in _VALUE_METHODS:
                return _BoundMethod(node.attr, obj)
            raise self.error(node, f"a runtime {obj.type} has no attribute '{node.attr}'")
        try:
            return getattr(obj, node.attr)
        except AttributeError:
            raise self.error(node, f"{self._describe(obj)} has no attribute '{node.attr}'") from None

    def visit_Subscript(self, node):
        container = self.visit(node.value)
        index = self.visit(node.slice)
        return self.getitem(node, container, index)

    def visit_Slice(self, node):
        parts = [self.visit(p) if p is not None else None for p in (node.lower, node.upper, node.step)]
        if any(isinstance(p, Value) for p in parts):
            raise self.error(node, "slices must have compile-time bounds")
        return slice(*parts)

    def getitem(self, node, container, index):
        hook = getattr(type(container), "__tylo_getitem__", None)
        if hook is not None:
            return container.__tylo_getitem__(self.ctx, index)
        if isinstance(container, Value):
            if not isinstance(container.type, T.PointerType):
                raise self.error(node, f"cannot index a runtime {container.type}; only pointers are indexable")
            if isinstance(index, tuple):
                raise self.error(node, "a pointer takes one index; use a tile for multi-dimensional indexing")
            return L.load(self.ctx, L.offset(self.ctx, container, index))
        if isinstance(index, Value):
            raise self.error(node, f"cannot index {self._describe(container)} with a runtime value; tuples need "
                                   f"compile-time indices")
        try:
            return container[index]
        except Exception as exc:
            raise self.error(node, f"indexing {self._describe(container)} with {index!r} failed: {exc}") from None

    def setitem(self, node, container, index, value):
        hook = getattr(type(container), "__tylo_setitem__", None)
        if hook is not None:
            return container.__tylo_setitem__(self.ctx, index, value)
        if isinstance(container, Value) and isinstance(container.type, T.PointerType):
            if isinstance(index, tuple):
                raise self.error(node, "a pointer takes one index")
            L.store(self.ctx, L.offset(self.ctx, container, index), value)
            return
        raise self.error(node, f"cannot assign into {self._describe(container)}; only pointers, shared arrays "
                               f"and tiles are writable")

    def visit_ListComp(self, node):
        return self._comprehension(node, list)

    def visit_GeneratorExp(self, node):
        return self._comprehension(node, tuple)

    def _comprehension(self, node, kind):
        out = []
        saved = dict(self.scope)

        def loop(gens):
            if not gens:
                out.append(self.visit(node.elt))
                return
            g = gens[0]
            iterable = self.visit(g.iter)
            if isinstance(iterable, Value):
                raise self.error(g.iter, "comprehensions over runtime values are not supported; use a for loop "
                                         "with range(...)")
            for item in iterable:
                self.assign(g.target, item)
                ok = True
                for cond_node in g.ifs:
                    c = self.visit(cond_node)
                    if isinstance(c, Value):
                        raise self.error(cond_node, "comprehension conditions must be compile-time values")
                    ok = ok and bool(c)
                if ok:
                    loop(gens[1:])

        try:
            loop(node.generators)
        finally:
            self.scope = saved
        return kind(out)

    # -- calls ---------------------------------------------------------------------------

    def visit_Call(self, node):
        fn = self.visit(node.func)
        return self._call(node, fn)

    def _call(self, node, fn):
        args = self._elements(node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                v = self.visit(kw.value)
                if not isinstance(v, dict):
                    raise self.error(kw, "** needs a compile-time dict")
                kwargs.update(v)
            else:
                kwargs[kw.arg] = self.visit(kw.value)
        if isinstance(fn, _BoundMethod):
            return _VALUE_METHODS[fn.name](self.ctx, fn.value, *args, **kwargs)
        if is_builtin(fn):
            return fn(*args, _ctx=self.ctx, **kwargs)
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
        runtime = any(flatten(a)[0] for a in args) or any(flatten(v)[0] for v in kwargs.values())
        if fn in _RUNTIME_PY_BUILTINS and runtime:
            return _RUNTIME_PY_BUILTINS[fn](self, node, *args, **kwargs)
        if runtime and accepts_runtime_ints(fn):
            args = [wrap_tree(self.ctx, a) for a in args]
            kwargs = {k: wrap_tree(self.ctx, v) for k, v in kwargs.items()}
            try:
                return fn(*args, **kwargs)
            except (ValueError, TypeError) as exc:
                raise self.error(node, f"{getattr(fn, '__qualname__', fn)}: {exc}") from None
        if runtime:
            name = getattr(fn, "__qualname__", repr(fn))
            raise self.error(node, f"{name} is called with runtime values but is neither a tylo builtin nor a "
                                   f"@tylo.func helper; decorate it with @tylo.func to inline it into the kernel")
        if not callable(fn):
            raise self.error(node, f"{self._describe(fn)} is not callable")
        try:
            return fn(*args, **kwargs)
        except CompileError:
            raise
        except Exception as exc:
            name = getattr(fn, "__qualname__", repr(fn))
            raise self.error(node, f"calling {name} at compile time raised {type(exc).__name__}: {exc}") from None

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
        gen = Generator(src, self.kernel, self.builder, self.ctx, scope, is_helper=True, depth=self.depth + 1)
        try:
            gen.visit_body(src.tree.body)
        except CompileError as exc:
            lineno, _ = self.src.location(node)
            if "(inlined from" not in exc.reason:
                exc.reason += f" (inlined from {self.src.filename}:{lineno})"
                exc.args = (exc._format(),)
            raise
        ret = gen.scope.get(_RET)
        if isinstance(ret, Value):
            if gen.scope.get(_RETVAL) is not None:
                raise self.error(node, f"{fn.__name__} returns a value under a runtime condition; assign to a "
                                       f"variable and return once at the end")
        return gen.scope.get(_RETVAL)

    def _describe(self, x) -> str:
        if isinstance(x, Value):
            return f"a runtime {x.type}"
        return f"{type(x).__name__} {x!r}"


def _count_leaves(tree) -> int:
    if tree.kind == "leaf":
        return 1
    if tree.kind == "const":
        return 0
    if tree.kind == "struct":
        return tree.children[0]
    return sum(_count_leaves(c) for c in tree.children)


# Methods callable on runtime values: value.to(dtype), value.astype(dtype).
def _method_to(ctx, value, dtype):
    return L.cast(value, dtype, _ctx=ctx)


_VALUE_METHODS = {"to": _method_to, "astype": _method_to}


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


_RUNTIME_PY_BUILTINS = {
    range: _rt_range,
    min: _rt_min,
    max: _rt_max,
    abs: lambda gen, node, x: L.abs(x, _ctx=gen.ctx),
    float: lambda gen, node, x: L.cast(x, T.f32, _ctx=gen.ctx),
    int: lambda gen, node, x: L.cast(x, T.i32, _ctx=gen.ctx),
    bool: lambda gen, node, x: L.to_bool(gen.ctx, x),
    print: lambda gen, node, *a: gen._print(node, *a),
}

_PY_BUILTINS = {name: getattr(builtins, name) for name in dir(builtins) if not name.startswith("_")}


def _print(self, node, *args):
    fmt = " ".join("%f" if isinstance(a, Value) and a.type.is_float else "%d" if isinstance(a, Value)
                   else str(a).replace("%", "%%") for a in args)
    L.printf(fmt + "\n", *[a for a in args if isinstance(a, Value)], _ctx=self.ctx)


Generator._print = _print


def generate_kernel(fn, name: str, params: list, arch: str, maxntid=None) -> Kernel:
    """Build the IR kernel for ``fn``.

    ``params``: ``(name, binding)`` in signature order. A binding is an IR type
    (a runtime parameter), ``("runtime", type, hints)`` with hints ``align16``
    (pointers) or ``div16`` (integers), ``("const", value, type)`` for a runtime
    parameter specialised to a constant (kept in the signature, bound to the
    Python value), or ``("constexpr", value)``.
    """
    src = function_source(fn)
    norm = []
    for pname, b in params:
        if isinstance(b, T.Type):
            b = ("runtime", b, ())
        norm.append((pname, b))
    ir_params = [(pname, b[1] if b[0] == "runtime" else b[2]) for pname, b in norm if b[0] in ("runtime", "const")]
    from ..lang.base import BLOB_KINDS
    lineno, col = src.location(src.tree)
    kernel = Kernel(name, ir_params, Location(src.filename, lineno, col))
    kernel.attrs["maxntid"] = tuple(maxntid) if maxntid else None
    builder = Builder(kernel.body)
    ctx = Context(builder, kernel, arch)
    scope = {}
    args = iter(kernel.body.args)
    for pname, b in norm:
        if b[0] == "runtime":
            scope[pname] = next(args)
            t = b[1]
            if isinstance(t, T.ParamBlobType) and t.kind in BLOB_KINDS:
                scope[pname] = BLOB_KINDS[t.kind](ctx, scope[pname], t.static)
            if "align16" in b[2]:
                kernel.attrs["param_align"][pname] = 16
            if "div16" in b[2]:
                kernel.attrs["divisible_by_16"].append(pname)
        elif b[0] == "const":
            next(args)
            scope[pname] = b[1]
        else:
            scope[pname] = b[1]
    gen = Generator(src, kernel, builder, ctx, scope)
    gen.visit_body(src.tree.body)
    return kernel
