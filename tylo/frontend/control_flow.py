"""Control flow: ``if``, ``for``, ``while``, their joins and loop-carried values.

Control flow on compile-time conditions runs in the compiler (unrolled loops, one branch).
On runtime conditions it becomes structured IR (``scf.if``/``scf.for``/``scf.while``): every
variable live across a join or a back-edge is flattened (``frontend.values``) into SSA leaves
plus its static part, and the static parts must agree on both sides. Loops that can ``break``
or ``return`` become ``scf.while`` with the jump flags carried around the back-edge.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from ..ir import types as T
from ..ir.core import Block, Value
from ..ir.types import ScalarType
from ..lang import core as L
from .scopes import MISSING, RET, Undefined, assigned_names, is_jump_flag, jumps
from .values import flatten, unflatten

__all__ = ["ControlFlowMixin", "Loop", "count_leaves"]


@dataclass
class Loop:
    """The scope names of one loop's jump flags and (range loops that can break) its induction variable;
    numbered by nesting depth so an inner loop never touches an outer loop's names."""

    brk: str
    cont: str
    iv: str


def _scalar_value(x) -> bool:
    return isinstance(x, Value) and isinstance(x.type, ScalarType)


def count_leaves(tree) -> int:
    if tree.kind == "leaf":
        return 1
    if tree.kind == "const":
        return 0
    if tree.kind == "struct":
        return tree.children[0]
    return sum(count_leaves(c) for c in tree.children)


class ControlFlowMixin:
    """Control-flow visitors of the Generator."""

    def visit_If(self, node):
        cond = self.visit(node.test)
        if isinstance(cond, Value) or (hasattr(type(cond), "__tylo_flatten__")):
            cond = self.condition(node.test, cond)
            self.runtime_if(cond, lambda: self.visit_body(node.body),
                             (lambda: self.visit_body(node.orelse)) if node.orelse else None, node)
        else:
            self.visit_body(node.body if self.truth(node.test, cond) else node.orelse)

    def truth(self, node, value) -> bool:
        try:
            return bool(value)
        except Exception as exc:
            raise self.error(node, f"cannot use {self.describe(value)} as a condition: {exc}") from None

    def condition(self, node, value) -> Value:
        if not isinstance(value, Value) or not isinstance(value.type, ScalarType):
            raise self.error(node, f"cannot use {self.describe(value)} as a runtime condition")
        return L.to_bool(self.ctx, value)

    def runtime_if(self, cond: Value, then_fn, else_fn, node, want_result=False, promote_result=False):
        """Emit ``scf.if`` and merge the variables both branches leave behind; with ``want_result``, return the
        join of the two branch functions' results (promoted to a common scalar type if ``promote_result``)."""
        blocks = [Block(), Block()]
        scopes = []
        results = []
        self.runtime_if_depth += 1
        try:
            for blk, fn in zip(blocks, (then_fn, else_fn)):
                with self.region(blk) as branch:
                    r = fn() if fn is not None else None
                scopes.append(branch.scope)
                results.append(r)
        finally:
            self.runtime_if_depth -= 1
        names = [n for n in dict.fromkeys(list(scopes[0]) + list(scopes[1]))]
        merged, pairs = [], []
        for name in names:
            a, b = scopes[0].get(name, MISSING), scopes[1].get(name, MISSING)
            if a is b:
                if a is not MISSING:
                    self.scope[name] = a
                continue
            if is_jump_flag(name):
                a = False if a is MISSING else a
                b = False if b is MISSING else b
            elif a is MISSING or b is MISSING or isinstance(a, Undefined) or isinstance(b, Undefined):
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
        joined = self._join(node, merged, pairs, blocks, what="if",
                            promote=("%result",) if promote_result else ())
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

    def _join(self, node, names, pairs, blocks, what, promote=()):
        """Reconcile each (a, b) pair of values; emit conversions at the end of each block.

        Returns the tree definitions and the leaves of each side.
        """
        trees, leaves_a, leaves_b = [], [], []
        for name, (a, b) in zip(names, pairs):
            with self.builder.at(blocks[0]):
                a2 = self._reconcile(node, name, a, b, what)
            with self.builder.at(blocks[1]):
                b2 = self._reconcile(node, name, b, a2, what)
            if name in promote and _scalar_value(a2) and _scalar_value(b2) and a2.type != b2.type:
                t = T.promote(a2.type, b2.type)
                with self.builder.at(blocks[0]):
                    a2 = L.cast(a2, t, _ctx=self.ctx)
                with self.builder.at(blocks[1]):
                    b2 = L.cast(b2, t, _ctx=self.ctx)
            la, ta = flatten(a2)
            lb, tb = flatten(b2)
            if ta != tb:
                raise self.error(node, f"variable '{name}' is {ta.describe()} when the condition holds and "
                                       f"{tb.describe()} when it does not; both sides of the {what} must leave it "
                                       f"with the same static structure (layout, shape, dtype, ownership)")
            for x, y in zip(la, lb):
                if x.type != y.type and name == "%result":
                    raise self.error(node, f"the two possible values of this expression have types {x.type} and "
                                           f"{y.type}; convert one with .to(tylo.{x.type}) so both agree")
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
            n = count_leaves(tree)
            out[name] = unflatten(tree, list(results[pos:pos + n]), self.ctx)
            pos += n
        return out

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
            iterable = self.call(it, fn)
        else:
            iterable = self.visit(it)
        if isinstance(iterable, Value):
            raise self.error(it, "cannot iterate over a runtime value; use range(n) for a runtime loop")
        try:
            items = list(iterable)
        except TypeError:
            raise self.error(it, f"cannot iterate over {self.describe(iterable)}") from None
        self._unrolled(node, items)

    def _unrolled(self, node, items):
        loop = self._push_loop()
        try:
            self.scope[loop.brk] = False
            for item in items:
                brk = self.scope.get(loop.brk)
                if brk is True or self.scope.get(RET) is True:
                    break
                if isinstance(brk, Value) or isinstance(self.scope.get(RET), Value):
                    guard = self._guard_exits(loop)
                    self.runtime_if(guard, lambda item=item: self._unrolled_iteration(node, loop, item), None, node)
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
        for f in (loop.brk, RET):
            v = self.scope.get(f, False)
            if isinstance(v, Value):
                nv = L.unary(self.ctx, "not", v)
                cond = nv if cond is True else L.binary(self.ctx, "&", cond, nv)
        return cond

    def _push_loop(self) -> Loop:
        n = len(self.loops)
        loop = Loop(f"%brk{n}", f"%cont{n}", f"%iv{n}")
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
        for name in list(assigned_names(body)) + list(extra):
            if name in names:
                continue
            v = self.scope.get(name, MISSING)
            if v is MISSING or isinstance(v, Undefined):
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
        has_break = any(jumps(s, (ast.Break,)) for s in node.body)
        has_return = any(jumps(s, (ast.Return,)) for s in node.body)
        targets = self._targets_defined_before(node, lb.type)
        loop = self._push_loop()
        try:
            if has_break or has_return:
                self._while_loop(node, loop, has_return, induction=(lb, ub, step, static_step), targets=targets)
            else:
                self._for_loop(node, loop, lb, ub, step, targets)
        finally:
            self._pop_loop(loop)

    def _targets_defined_before(self, node, iv_type):
        """Loop target names that already hold a value: they are carried around the loop, so after it they hold
        the last value the body left (n - 1 for ``for i in range(n)``), or the value from before the loop when
        it ran no iteration, as in Python. A Python int there becomes a runtime value of the induction type."""
        names = []
        for name in assigned_names([ast.Assign(targets=[node.target], value=None)]):
            value = self.scope.get(name, MISSING)
            if value is MISSING or isinstance(value, Undefined):
                continue
            if isinstance(value, int) and not isinstance(value, bool):
                self.scope[name] = L.to_value(self.ctx, value, iv_type)
            names.append(name)
        return names

    def _for_loop(self, node, loop, lb, ub, step, targets=()):
        carried = self._carried(node.body, targets)
        before = dict(self.scope)
        init_leaves, trees = self._flatten_carried(carried)
        body = Block([lb.type] + [v.type for v in init_leaves])
        bindings = self._rebuild(carried, trees, body.args[1:])
        bindings[loop.cont] = False
        with self.region(body, bindings) as body_region:
            self.assign(node.target, body.args[0])
            self.visit_body(node.body)
            final = self._back_edge(node, carried, trees, init_leaves)
            self.builder.create("scf.yield", final)
        op = self.builder.create("scf.for", [lb, ub, step, *init_leaves], [v.type for v in init_leaves], blocks=[body])
        self.scope.update(self._rebuild(carried, trees, op.results))
        self._mark_loop_locals(node, body_region.scope, before, node.target)

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
            n = count_leaves(tree)
            expected = init_leaves[pos:pos + n]
            pos += n
            cur = self.scope.get(name, MISSING)
            if cur is MISSING or isinstance(cur, Undefined):
                raise self.error(node, f"'{name}' is not defined at the end of the loop body")
            start = unflatten(tree, expected, self.ctx)
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

    def _while_loop(self, node, loop, has_return, induction=None, test=None, targets=()):
        """``scf.while`` for ``while`` statements and for ``range`` loops that can break."""
        has_break = any(jumps(s, (ast.Break,)) for s in node.body)
        exits = ([loop.brk] if has_break else []) + ([RET] if has_return else [])
        self.scope[loop.brk] = False
        if has_return:
            self.scope.setdefault(RET, False)
        extra = list(exits) + list(targets)
        if induction is not None:
            self.scope[loop.iv] = induction[0]
            extra.append(loop.iv)
        carried = self._carried(node.body, extra)
        before = dict(self.scope)
        init_leaves, trees = self._flatten_carried(carried)
        types = [v.type for v in init_leaves]
        cond_block = Block(types)
        body = Block(types)
        # before-region: evaluate the condition on the carried values
        with self.region(cond_block, self._rebuild(carried, trees, cond_block.args)):
            if induction is not None:
                _, ub, step, static_step = induction
                iv = self.scope[loop.iv]
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
        bindings = self._rebuild(carried, trees, body.args)
        bindings[loop.cont] = False
        with self.region(body, bindings) as body_region:
            if induction is not None:
                self.assign(node.target, self.scope[loop.iv])
            self.visit_body(node.body)
            if induction is not None:
                # the increment runs unless the loop is exiting anyway
                self.scope[loop.iv] = L.binary(self.ctx, "+", self.scope[loop.iv], induction[2])
            final = self._back_edge(node, carried, trees, init_leaves)
            self.builder.create("scf.yield", final)
        op = self.builder.create("scf.while", init_leaves, types, blocks=[cond_block, body])
        self.scope.update(self._rebuild(carried, trees, op.results))
        self.scope.pop(loop.iv, None)
        self._mark_loop_locals(node, body_region.scope, before, getattr(node, "target", None))

    def visit_While(self, node):
        if node.orelse:
            raise self.error(node, "while ... else is not supported in kernels")
        has_return = any(jumps(s, (ast.Return,)) for s in node.body)
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

    def _compile_time_while(self, node, cond) -> bool:
        """Unroll a while loop whose condition is known at compile time; False if it turns runtime."""
        loop = self._push_loop()
        try:
            self.scope[loop.brk] = False
            count = 0
            while self.truth(node.test, cond):
                count += 1
                if count > 100_000:
                    raise self.error(node, "compile-time while loop ran 100000 iterations; is it infinite?")
                self.scope[loop.cont] = False
                self.visit_body(node.body)
                flag = self.scope.get(loop.brk)
                if flag is True or self.scope.get(RET) is True:
                    break
                if isinstance(flag, Value) or isinstance(self.scope.get(RET), Value):
                    return False
                cond = self.visit(node.test)
                if isinstance(cond, Value):
                    return False
        finally:
            self._pop_loop(loop)
        return True
