"""Expressions: literals, names, containers, operators, comparisons, ``and``/``or``, subscripts.

Operators on compile-time operands are evaluated as Python; on runtime operands they emit typed
ops through ``tylo.lang.core``; a structured value takes part through its ``__tylo_*__`` hooks
(``tylo.lang.protocols``).
"""
from __future__ import annotations

import ast

from ..ir import types as T
from ..ir.core import Value
from ..ir.types import ScalarType
from ..lang import core as L
from .calls import VALUE_METHODS, BoundMethod

__all__ = ["ExpressionsMixin", "BINOPS", "CMPOPS", "UNARY"]

BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
           ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^",
           ast.BitAnd: "&", ast.MatMult: "@"}

CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}

UNARY = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~", ast.Not: "not"}


PY_BINOPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
    "//": lambda a, b: a // b, "%": lambda a, b: a % b, "**": lambda a, b: a ** b, "<<": lambda a, b: a << b,
    ">>": lambda a, b: a >> b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "&": lambda a, b: a & b,
    "@": lambda a, b: a @ b,
}

PY_CMP = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
           ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


class ExpressionsMixin:
    """Expression visitors of the Generator."""

    def visit_Constant(self, node):
        return node.value

    def visit_Name(self, node):
        return self.lookup(node, node.id)

    def visit_Tuple(self, node):
        return tuple(self.elements(node.elts))

    def visit_List(self, node):
        return list(self.elements(node.elts))

    def elements(self, elts):
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
                try:
                    parts.append(format(x, spec))
                except (TypeError, ValueError) as exc:
                    raise self.error(v, f"formatting {self.describe(x)} with '{spec}' failed: {exc}") from None
        return "".join(parts)

    def visit_FormattedValue(self, node):
        return self.visit_JoinedStr(ast.JoinedStr(values=[node]))

    def visit_BinOp(self, node):
        return self.binop(node, BINOPS[type(node.op)], self.visit(node.left), self.visit(node.right))

    def binop(self, node, op, a, b):
        for x, y, reflected in ((a, b, False), (b, a, True)):
            hook = getattr(type(x), "__tylo_binary__", None)
            if hook is not None:
                return x.__tylo_binary__(self.ctx, op, y, reflected)
        if not isinstance(a, Value) and not isinstance(b, Value):
            try:
                return PY_BINOPS[op](a, b)
            except Exception as exc:
                raise self.error(node, f"{self.describe(a)} {op} {self.describe(b)} failed at compile time: "
                                       f"{type(exc).__name__}: {exc}") from None
        return L.binary(self.ctx, op, a, b)

    def visit_UnaryOp(self, node):
        op = UNARY[type(node.op)]
        v = self.visit(node.operand)
        hook = getattr(type(v), "__tylo_unary__", None)
        if hook is not None:
            return v.__tylo_unary__(self.ctx, op)
        if not isinstance(v, Value):
            try:
                return {"-": lambda x: -x, "+": lambda x: +x, "~": lambda x: ~x, "not": lambda x: not x}[op](v)
            except Exception as exc:
                raise self.error(node, f"{op}{self.describe(v)} failed at compile time: {type(exc).__name__}: "
                                       f"{exc}") from None
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
                op = CMPOPS[type(op_node)]
                hook = getattr(type(left), "__tylo_compare__", None)
                if hook is not None:
                    r = left.__tylo_compare__(self.ctx, op, right)
                elif isinstance(left, Value) or isinstance(right, Value):
                    r = L.compare(self.ctx, op, left, right)
                else:
                    try:
                        r = PY_CMP[op](left, right)
                    except Exception as exc:
                        raise self.error(node, f"{self.describe(left)} {op} {self.describe(right)} failed at compile "
                                               f"time: {type(exc).__name__}: {exc}") from None
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
        """Python's ``and``/``or``: the value of the operand that decides (``x and y`` is ``y if x else x``),
        evaluated left to right with short circuit. Compile-time operands decide in the compiler."""
        is_and = isinstance(node.op, ast.And)
        result = self.visit(node.values[0])
        for value_node in node.values[1:]:
            if isinstance(result, Value):
                result = self._runtime_bool_op(node, result, value_node, is_and)
                continue
            if self.truth(node, result) != is_and:
                return result
            result = self.visit(value_node)
        return result

    def _runtime_bool_op(self, node, left, right_node, is_and):
        """``left and right`` / ``left or right`` for a runtime ``left``."""
        if not isinstance(left.type, ScalarType):
            raise self.error(node, f"cannot use a runtime {left.type} as an operand of '{'and' if is_and else 'or'}'")
        cond = L.to_bool(self.ctx, left)
        if not _has_effects(right_node):
            # evaluating a right operand without effects early is unobservable: a select, no branch
            right = self.visit(right_node)
            if left.type.is_bool and isinstance(right, bool):
                return left if right == is_and else right  # x and True is x; x and False is False
            if left.type.is_bool and isinstance(right, Value) and right.type == left.type:
                return L.binary(self.ctx, "&" if is_and else "|", left, right)
            if not isinstance(right, Value) and not isinstance(right, L.PY_SCALARS) or \
                    isinstance(right, Value) and not isinstance(right.type, ScalarType):
                raise self.error(right_node, f"cannot combine a runtime {left.type} with {self.describe(right)} "
                                             f"in '{'and' if is_and else 'or'}'; both operands must be scalars")
            return L.where(cond, right, left, _ctx=self.ctx) if is_and else L.where(cond, left, right, _ctx=self.ctx)
        # a right operand with effects (loads, calls, division) runs only when it decides, as in Python
        def right():
            return self.visit(right_node)

        def keep():
            return left

        return self.runtime_if(cond, right if is_and else keep, keep if is_and else right, node, want_result=True,
                               promote_result=True)

    def visit_IfExp(self, node):
        cond = self.visit(node.test)
        if not isinstance(cond, Value):
            return self.visit(node.body if self.truth(node.test, cond) else node.orelse)
        cond = self.condition(node.test, cond)
        return self.runtime_if(cond, lambda: self.visit(node.body), lambda: self.visit(node.orelse), node,
                                want_result=True)

    def visit_Attribute(self, node):
        obj = self.visit(node.value)
        hook = getattr(type(obj), "__tylo_getattr__", None)
        if hook is not None:
            return obj.__tylo_getattr__(self.ctx, node.attr)
        if isinstance(obj, Value):
            if node.attr == "dtype":
                return obj.type.elem if isinstance(obj.type, T.PointerType) else obj.type
            if node.attr in VALUE_METHODS:
                return BoundMethod(node.attr, obj)
            raise self.error(node, f"a runtime {obj.type} has no attribute '{node.attr}'")
        try:
            return getattr(obj, node.attr)
        except AttributeError:
            hint = ""
            if getattr(obj, "__name__", None) == "tylo" and type(obj).__name__ == "module":
                hint = f" (its scalar types are {', '.join(T.SCALAR_TYPES)})"
            raise self.error(node, f"{self.describe(obj)} has no attribute '{node.attr}'{hint}") from None

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
            raise self.error(node, f"cannot index {self.describe(container)} with a runtime value; tuples need "
                                   f"compile-time indices")
        try:
            return container[index]
        except Exception as exc:
            raise self.error(node, f"indexing {self.describe(container)} with {index!r} failed: {exc}") from None

    def setitem(self, node, container, index, value):
        hook = getattr(type(container), "__tylo_setitem__", None)
        if hook is not None:
            return container.__tylo_setitem__(self.ctx, index, value)
        if isinstance(container, Value) and isinstance(container.type, T.PointerType):
            if isinstance(index, tuple):
                raise self.error(node, "a pointer takes one index")
            L.store(self.ctx, L.offset(self.ctx, container, index), value)
            return
        raise self.error(node, f"cannot assign into {self.describe(container)}; only pointers, shared arrays "
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


def _has_effects(node) -> bool:
    """Might evaluating ``node`` do something observable besides producing its value (a load, a call, a
    division that could trap)? Such operands of ``and``/``or`` are evaluated only when they decide."""
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Call, ast.Subscript, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            return True
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, (ast.Div, ast.FloorDiv, ast.Mod)):
            return True
    return False
