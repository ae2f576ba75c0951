"""A seeded generator of valid scalar kernels and their expected outputs.

``generate(seed)`` builds a small typed syntax tree (expressions and statements of the scalar
subset of docs/language.md), renders it as Python source of a ``@tylo.jit`` kernel (with
``@tylo.func`` helpers, constexpr parameters and a module-level constant), picks inputs, and
evaluates the tree with the independent model in ``semantics`` to get the expected outputs. A
tree whose evaluation hits an undefined case (division by zero, an over-wide shift) is thrown
away and regenerated from the next sub-seed, so every returned case has one defined answer.
"""
from __future__ import annotations

import importlib.util
import math
import os
import random
import sys
from dataclasses import dataclass, field

import numpy as np
from semantics import (
    ALL_TYPES,
    APPROX,
    FLOAT_TYPES,
    FP8_TYPES,
    INT_TYPES,
    NP_DTYPE,
    TYPES,
    Undefined,
    approx_reference,
    convert,
    default_int_type,
    fits,
    float_binary,
    floor_ceil,
    fma_float,
    int_binary,
    int_range,
    is_float,
    is_int,
    literal_type,
    min_max,
    promote,
    round_float,
    shift,
    sqrt_float,
    wrap,
)

SLOTS = 8           # elements of each output array
MAX_STEPS = 20000   # model steps before a case is thrown away (keeps interpreter time bounded)


# -- the tree ------------------------------------------------------------------------------------
@dataclass
class Ex:
    kind: str
    ty: str                 # a type name, or 'py' for a compile-time Python value
    args: list = field(default_factory=list)
    v: object = None        # operator, name, literal, (type, style), ...
    pv: object = None       # the Python value of a compile-time node known at generation


@dataclass
class St:
    kind: str
    a: list = field(default_factory=list)


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    def __init__(self, value=None):
        self.value = value


# -- typing shared by the generator and the evaluator -------------------------------------------
ARITH = ("+", "-", "*")
DIVS = ("/", "//", "%")
BITS = ("&", "|", "^")
SHIFTS = ("<<", ">>")
CMPS = ("<", "<=", ">", ">=", "==", "!=")


def operand_types(op, ta, tb, a=None, b=None):
    """(operand type, result type) of a binary op; ta/tb are type names or 'py' (then a/b are values)."""
    if ta == "py":
        ta = literal_type(a, tb)
    if tb == "py":
        tb = literal_type(b, ta)
    if op in SHIFTS:
        return ta, ta
    ot = promote(ta, tb)
    if op in CMPS:
        return ot, "bool"
    if op == "/" and not is_float(ot):
        ot = "f32"
    if ot == "bool" and op in ARITH + DIVS:
        ot = "i32"   # arithmetic on two bools gives i32
    return ot, ot


def py_binary(op, a, b):
    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "//": lambda: a // b,
            "%": lambda: a % b, "/": lambda: a / b, "&": lambda: a & b, "|": lambda: a | b,
            "^": lambda: a ^ b, "<<": lambda: a << b, ">>": lambda: a >> b, "<": lambda: a < b,
            "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b, "==": lambda: a == b,
            "!=": lambda: a != b}[op]()


def binary_value(op, ta, a, tb, b):
    """(type, value) of ``a op b`` under the documented rules."""
    if ta == "py" and tb == "py":
        return "py", py_binary(op, a, b)
    ot, rt = operand_types(op, ta, tb, a, b)
    if op in SHIFTS:
        count = b if tb == "py" else b
        return rt, shift(op, a, ta, int(count))
    x = convert(a, ta if ta != "py" else "py", ot) if ta != ot else a
    y = convert(b, tb if tb != "py" else "py", ot) if tb != ot else b
    if op in CMPS:
        if is_float(ot) and (math.isnan(x) or math.isnan(y)):
            return "bool", 1 if op == "!=" else 0
        return "bool", 1 if py_binary(op, x, y) else 0
    if is_float(ot):
        return rt, float_binary(op, float(x), float(y), ot)
    return rt, int_binary(op, int(x), int(y), ot)


def _uses_name(e: Ex) -> bool:
    """Whether a compile-time expression reads a name (a loop variable, a helper's compile-time
    parameter): its value at generation is only one of the values it takes."""
    return e.kind == "cname" or e.kind == "var" and e.ty == "py" or any(_uses_name(a) for a in e.args)


# -- rendering -------------------------------------------------------------------------------------
def tyname(t):
    return "tylo." + t


def render(e: Ex) -> str:
    k = e.kind
    if k in ("var", "cname"):
        return e.v
    if k == "lit":
        return repr(e.v) if e.v >= 0 and not (isinstance(e.v, float) and math.copysign(1, e.v) < 0) \
            else f"({e.v!r})"
    if k in ("bin", "cmp"):
        return f"({render(e.args[0])} {e.v} {render(e.args[1])})"
    if k == "bool":
        return f"({render(e.args[0])} {e.v} {render(e.args[1])})"
    if k == "un":
        return f"(not {render(e.args[0])})" if e.v == "not" else f"({e.v}{render(e.args[0])})"
    if k == "call":
        name = e.v if e.v in ("abs", "min", "max") and e.pv == "builtin" else f"tylo.{e.v}"
        return f"{name}({', '.join(render(a) for a in e.args)})"
    if k == "cast":
        t, style = e.v
        x = render(e.args[0])
        return {"to": f"{x}.to({tyname(t)})", "astype": f"{x}.astype({tyname(t)})",
                "call": f"{tyname(t)}({x})", "cast": f"tylo.cast({x}, {tyname(t)})"}[style]
    if k == "ifexp":
        c, a, b = e.args
        return f"({render(a)} if {render(c)} else {render(b)})"
    if k == "helper":
        return f"{e.v}({', '.join(render(a) for a in e.args)})"
    if k == "load":
        return f"{e.v}[{e.pv}]"
    raise AssertionError(k)


def render_if(ind, cond, body, elifs, orelse):
    """``if cond:`` body, ``elif c:`` b for each rendered condition c of ``elifs``, ``else:`` orelse if any."""
    pad = "    " * ind
    out = [f"{pad}if {cond}:", *render_block(body, ind + 1)]
    for c, b in elifs:
        out += [f"{pad}elif {c}:", *render_block(b, ind + 1)]
    if orelse:
        out += [f"{pad}else:", *render_block(orelse, ind + 1)]
    return out


def render_counting_while(ind, name, start, limit, body, count_first):
    """``name = start``, ``while name < limit:`` with ``name += 1`` before the body or after it (a
    ``continue`` would then skip the count: the compile-time loop's body has no break or continue)."""
    pad = "    " * ind
    count, inner = [f"{pad}    {name} += 1"], render_block(body, ind + 1)
    return [f"{pad}{name} = {start}", f"{pad}while {name} < {limit}:", *(count + inner if count_first else inner + count)]


def render_block(stmts, ind):
    pad = "    " * ind
    out = []
    for s in stmts or [St("pass")]:
        k = s.kind
        if k == "pass":
            out.append(f"{pad}pass")
        elif k == "assign":
            out.append(f"{pad}{s.a[0]} = {render(s.a[1])}")
        elif k == "aug":
            out.append(f"{pad}{s.a[0]} {s.a[1]}= {render(s.a[2])}")
        elif k == "swap":
            out.append(f"{pad}{s.a[0]}, {s.a[1]} = {s.a[1]}, {s.a[0]}")
        elif k == "store":
            out.append(f"{pad}{s.a[0]}[{s.a[1]}] = {render(s.a[2])}")
        elif k == "if":
            cond, body, elifs, orelse = s.a
            out += render_if(ind, render(cond), body, [(render(c), b) for c, b in elifs], orelse)
        elif k == "ctif":
            cond_text, _, body, orelse = s.a
            out += render_if(ind, cond_text, body, [], orelse)
        elif k == "for":
            iv, start, stop, step, body = s.a
            args = [render(start), render(stop)] + ([str(step)] if step != 1 else [])
            if start.kind == "lit" and start.v == 0 and step == 1:
                args = [render(stop)]
            out.append(f"{pad}for {iv} in range({', '.join(args)}):")
            out += render_block(body, ind + 1)
        elif k == "while":
            w, limit, body = s.a
            out += render_counting_while(ind, w, "tylo.i32(0)", render(limit), body, count_first=True)
        elif k == "sfor":
            name, values, style, body = s.a
            it = f"tylo.static_range({len(values)})" if style == "static_range" else repr(tuple(values))
            out.append(f"{pad}for {name} in {it}:")
            out += render_block(body, ind + 1)
        elif k == "ctwhile":
            name, count, body = s.a
            out += render_counting_while(ind, name, "0", count, body, count_first=False)
        elif k in ("break", "continue", "return"):
            out.append(f"{pad}{k}")
        elif k == "retval":
            out.append(f"{pad}return {render(s.a[0])}")
        else:
            raise AssertionError(k)
    return out


# -- the case --------------------------------------------------------------------------------------
@dataclass
class Param:
    name: str
    kind: str       # out, in, n, scalar, constexpr
    ty: str         # element / scalar type ('py' for constexpr)
    value: object   # model values (list for arrays)


@dataclass
class Helper:
    name: str
    params: list    # (name, type or 'py')
    body: list
    uses_ct: bool


@dataclass
class Case:
    seed: int
    source: str
    kernel_name: str
    params: list
    globals_: dict
    helpers: list
    body: list
    expected: dict           # array name -> model values
    approx: dict             # array name -> list of (slot, fn, arg, type) or None per slot
    uses_fp8: bool
    features: set

    @property
    def signature(self):
        parts = []
        for p in self.params:
            if p.kind in ("out", "in"):
                parts.append("*" + p.ty)
            elif p.kind in ("n", "scalar"):
                parts.append(p.ty)
        return ", ".join(parts)

    @property
    def constexprs(self):
        return {p.name: p.value for p in self.params if p.kind == "constexpr"}

    def numpy_args(self):
        """Fresh arguments for a run: poisoned outputs, inputs, scalars (constexprs excluded)."""
        args = []
        for p in self.params:
            if p.kind in ("out", "in"):
                args.append(np.array(p.value, dtype=NP_DTYPE[p.ty]))
            elif p.kind in ("n", "scalar"):
                args.append(p.value if not is_int(p.ty) and p.ty != "bool" else int(p.value))
        return args

    def array_names(self):
        return [p.name for p in self.params if p.kind in ("out", "in")]


def poison(t):
    if is_float(t) or t in FP8_TYPES:
        return round_float(-99.0, t)
    if t == "bool":
        return 1
    return wrap(0x5A5A5A5A5A5A5A5A, t)


# -- the generator ----------------------------------------------------------------------------------
class Generator:
    def __init__(self, seed: int, attempt: int):
        self.seed = seed
        self.r = random.Random(seed * 7919 + attempt)
        self.counter = 0
        self.outputs: dict[str, str] = {}       # array name -> element type
        self.approx_outputs: dict[str, str] = {}
        self.approx_slots: dict[str, list] = {}
        self.slot_use: dict[str, int] = {}
        self.helpers: list[Helper] = []
        self.features: set = set()
        self.uses_fp8 = False
        self.nest = 0

    def fresh(self, prefix="v"):
        self.counter += 1
        return f"{prefix}{self.counter}"

    # literals -----------------------------------------------------------
    def int_literal(self):
        return self.r.choice([0, 1, 2, 3, 5, 7, 100, 255, 300, -1, -3, 1000, 65535, 70000, 2**31 - 1, -2**31,
                              2**33, 12345])

    def float_literal(self):
        return self.r.choice([0.5, 1.0, 2.0, -1.5, 0.1, 3.25, 1e-3, 100.0, -0.0, 0.3333, 65504.0, 1e-8, 7.0])

    def random_value(self, t):
        r = self.r
        if t == "bool":
            return r.randint(0, 1)
        if is_int(t):
            lo, hi = int_range(t)
            choice = r.random()
            if choice < 0.3:
                return max(lo, min(hi, r.randint(-5, 5)))
            if choice < 0.4:
                return r.choice([lo, hi, lo + 1, hi - 1])
            return r.randint(lo, hi)
        choice = r.random()
        if choice < 0.3:
            x = float(r.randint(-8, 8)) / r.choice([1, 2, 4])
        elif choice < 0.85:
            x = r.gauss(0, 1) * 10 ** r.randint(-3, 3)
        elif choice < 0.95:
            x = r.choice([1e-6, -2e-5, 3e4, -6e4, 1.5e38 if t in ("f32", "bf16", "f64") else 6e4, 1e-30])
        else:
            x = r.choice([-0.0, 0.0])
        return round_float(x, t)

    # expressions ----------------------------------------------------------
    def leaf(self, scope, want=None):
        r = self.r
        cands = [(n, t) for n, t in scope.vars.items() if want is None or t == want]
        if cands and r.random() < 0.75:
            n, t = r.choice(cands)
            return Ex("var", t, v=n)
        if scope.cts and r.random() < 0.3:
            n, val = r.choice(list(scope.cts.items()))
            return Ex("cname", "py", v=n, pv=val)
        if r.random() < 0.7:
            v = self.int_literal()
        else:
            v = self.float_literal()
        return Ex("lit", "py", v=v, pv=v)

    def runtime_leaf(self, scope, kinds=None):
        cands = [(n, t) for n, t in scope.vars.items() if kinds is None or TYPES[t].kind in kinds]
        if not cands:
            return None
        n, t = self.r.choice(cands)
        return Ex("var", t, v=n)

    def cast(self, e, t):
        if e.ty == t:
            return e
        self.features.add("cast")
        if t in FP8_TYPES or e.ty in FP8_TYPES:
            self.uses_fp8 = True
        if e.ty == "py":
            if isinstance(e.pv, float) and (is_int(t) or t == "bool") and self.r.random() < 0.8:
                e = Ex("lit", "py", v=int(e.pv), pv=int(e.pv))   # tylo.i8(1.5): see FINDINGS.md (F-float-typed-int)
            if _uses_name(e) and is_int(t) and t != "i64" and e.kind != "cname":
                # its value at generation is one of several: go through i64 so every value converts
                return Ex("cast", t, [Ex("cast", "i64", [e], v=("i64", "call"))], v=(t, "call"))
            if isinstance(e.pv, int) and is_int(t) and not fits(e.pv, t):
                # docs/language.md does not say whether tylo.u8(300) wraps: go through the literal's type
                wide = default_int_type(e.pv)
                return self.cast(Ex("cast", wide, [e], v=(wide, "call")), t)
            self.features.add("typed_constant")
            return Ex("cast", t, [e], v=(t, "call"))
        return Ex("cast", t, [e], v=(t, self.r.choice(["to", "to", "astype", "call", "cast"])))

    def expr(self, scope, depth, want=None):
        e = self._expr(scope, depth)
        if e.ty == "py" and want is None:
            if isinstance(e.pv, float):
                e = self.cast(e, self.r.choice(["f32", "f64", "f16", "bf16"]))
            else:
                e = self.cast(e, self.r.choice(["i32", "i64", "u8", "i16", "u32", "f32", "f16"]))
        if want is not None and e.ty != want:
            if e.ty in FP8_TYPES and want == "bool":
                self.features.add("fp8_to_bool")
            e = self.cast(e, want)
        return e

    def numeric(self, scope, depth, kinds=("int", "uint", "float", "bool")):
        """An expression whose type is runtime and not fp8 (fp8 is storage-only)."""
        e = self._expr(scope, depth)
        if e.ty in FP8_TYPES:
            e = self.cast(e, self.r.choice(["f16", "f32", "bf16", "f64"]))
        return e

    def _expr(self, scope, depth):
        r = self.r
        if depth <= 0 or r.random() < 0.2:
            return self.leaf(scope)
        k = r.random()
        if k < 0.35:
            return self.binary(scope, depth)
        if k < 0.45:
            return self.compare(scope, depth)
        if k < 0.52:
            return self.unary(scope, depth)
        if k < 0.68:
            return self.call(scope, depth)
        if k < 0.80:
            x = self.numeric(scope, depth - 1) if r.random() < 0.8 else self._expr(scope, depth - 1)
            if x.ty == "py":
                return x
            return self.cast(x, r.choice(ALL_TYPES))
        if k < 0.86:
            c = self.condition(scope, depth - 1)
            a = self.numeric(scope, depth - 1)
            if a.ty == "py":
                a = self.cast(a, "i32" if isinstance(a.pv, int) else "f32")
            b = self.expr(scope, depth - 1, want=a.ty)
            self.features.add("ifexp")
            return Ex("ifexp", a.ty, [c, a, b])
        if k < 0.93 and self.helpers:
            return self.helper_call(scope, depth)
        if k < 0.96:
            a = self.condition(scope, depth - 1)
            b = self.condition(scope, depth - 1)
            self.features.add("boolop")
            return Ex("bool", "bool", [a, b], v=r.choice(["and", "or"]))
        return self.leaf(scope)

    def helper_call(self, scope, depth):
        h = self.r.choice(self.helpers)
        args = []
        for _, t in h.params:
            if t == "py":
                v = self.r.randint(0, 3)
                args.append(Ex("lit", "py", v=v, pv=v))
            else:
                args.append(self.expr(scope, depth - 1, want=t))
        self.features.add("helper")
        return Ex("helper", h.ret, args, v=h.name)

    def condition(self, scope, depth):
        r = self.r
        if r.random() < 0.6 or depth <= 0:
            return self.compare(scope, max(depth, 1))
        e = self.expr(scope, depth, want="bool")
        return e

    def compare(self, scope, depth):
        a = self.numeric(scope, depth - 1)
        b = self.numeric(scope, depth - 1)
        if a.ty == "py" and b.ty == "py":
            a = self.cast(a, "i32" if isinstance(a.pv, int) else "f32")
        a, b = self.no_literal_next_to_bool(a, b)
        self.features.add("compare")
        return Ex("cmp", "bool", [a, b], v=self.r.choice(CMPS))

    def no_literal_next_to_bool(self, a, b):
        # docs/language.md does not say what an int literal next to a bool becomes: not generated
        if a.ty == "bool" and b.ty == "py":
            b = self.cast(b, "i32" if isinstance(b.pv, int) else "f32")
        if b.ty == "bool" and a.ty == "py":
            a = self.cast(a, "i32" if isinstance(a.pv, int) else "f32")
        return a, b

    def binary(self, scope, depth):
        r = self.r
        op = r.choice(ARITH * 3 + DIVS * 2 + BITS * 2 + SHIFTS * 2)
        if op in BITS:
            a = self.int_or_bool(scope, depth - 1)
            b = self.int_or_bool(scope, depth - 1)
            if a.ty == "bool" and b.ty == "bool":
                b = self.cast(b, r.choice(INT_TYPES))   # bool & bool: the docs do not say (i32 or bool)
        elif op in SHIFTS:
            a = self.int_expr(scope, depth - 1, runtime=True)
            b = self.int_expr(scope, depth - 1)
            bits = TYPES[a.ty].bits
            if b.ty == "py":
                b = Ex("lit", "py", v=b.pv % bits, pv=b.pv % bits)
            elif r.random() < 0.85:   # counts >= width are undefined: mostly masked, else rejected if hit
                if b.ty == "py":
                    b = Ex("lit", "py", v=b.pv % bits, pv=b.pv % bits)
                else:
                    b = Ex("bin", b.ty, [b, Ex("lit", "py", v=bits - 1, pv=bits - 1)], v="&")
            self.features.add("shift")
        else:
            a = self.numeric(scope, depth - 1)
            b = self.numeric(scope, depth - 1)
            if op in ("//", "%") and r.random() < 0.5 and b.ty != "py" and is_int(b.ty):
                # a non-zero divisor most of the time (zero is undefined: such cases are rejected)
                b = Ex("bin", b.ty, [b, Ex("lit", "py", v=1, pv=1)], v="|")
        a, b = self.no_literal_next_to_bool(a, b)
        if a.ty == "py" and b.ty == "py":
            if op in DIVS + SHIFTS and _uses_name(b):
                op = "+"   # a loop variable's value differs per iteration: never divide by it at compile time
            try:
                val = py_binary(op, a.pv, b.pv)
            except (ZeroDivisionError, ValueError, OverflowError):
                return a
            if isinstance(val, bool) or not isinstance(val, (int, float)) or abs(val) > 2**62 \
                    or (isinstance(val, float) and not math.isfinite(val)):
                return a
            self.features.add("compile_time_arith")
            return Ex("bin", "py", [a, b], v=op, pv=val)
        _, rt = operand_types(op, a.ty, b.ty, a.pv, b.pv)
        self.features.add("op" + op)
        return Ex("bin", rt, [a, b], v=op)

    def int_or_bool(self, scope, depth):
        e = self.numeric(scope, depth)
        if e.ty == "py":
            if isinstance(e.pv, float):
                return Ex("lit", "py", v=int(e.pv), pv=int(e.pv))
            return e
        if is_float(e.ty):
            return self.cast(e, self.r.choice(INT_TYPES))
        return e

    def int_expr(self, scope, depth, runtime=False):
        e = self.int_or_bool(scope, depth)
        if e.ty == "bool":
            e = self.cast(e, self.r.choice(INT_TYPES))
        if runtime and e.ty == "py":
            e = self.cast(e, self.r.choice(INT_TYPES) if fits(e.pv, "u8") else default_int_type(e.pv))
        return e

    def float_expr(self, scope, depth, allow_f64=True):
        e = self.numeric(scope, depth)
        types = FLOAT_TYPES if allow_f64 else FLOAT_TYPES[:3]
        if e.ty == "py" or not is_float(e.ty) or e.ty not in types:
            e = self.cast(e, self.r.choice(types))
        return e

    def unary(self, scope, depth):
        r = self.r
        op = r.choice(["-", "~", "not"])
        if op == "~":
            a = self.int_expr(scope, depth - 1, runtime=True)
        else:
            a = self.numeric(scope, depth - 1)
            if a.ty == "py":
                a = self.cast(a, "i32" if isinstance(a.pv, int) else "f32")
            if op == "-" and a.ty == "bool":
                a = self.cast(a, "i32")
        self.features.add("unary" + op)
        return Ex("un", "bool" if op == "not" else a.ty, [a], v=op)

    def call(self, scope, depth):
        r = self.r
        fn = r.choice(["abs", "min", "max", "fma", "where", "sqrt", "floor", "ceil"])
        self.features.add("fn_" + fn)
        if fn == "abs":
            a = self.numeric(scope, depth - 1)
            if a.ty in ("py", "bool"):
                a = self.cast(a, r.choice(["i32", "i8", "i64", "f32", "f16"]) if a.ty == "bool" or isinstance(
                    a.pv, int) and fits(a.pv, "i8") else ("f32" if isinstance(a.pv, float) else default_int_type(a.pv)))
            return Ex("call", a.ty, [a], v="abs", pv=r.choice(["builtin", "tylo"]))
        if fn in ("min", "max"):
            a = self.numeric(scope, depth - 1)
            b = self.numeric(scope, depth - 1)
            if a.ty == "py" and b.ty == "py":
                a = self.cast(a, "i32" if isinstance(a.pv, int) else "f32")
            a, b = self.no_literal_next_to_bool(a, b)
            ot, _ = operand_types("+", a.ty, b.ty, a.pv, b.pv)
            if a.ty == "bool" or b.ty == "bool":   # min/max of bools: the docs do not say (bool or i32)
                a, b = self.cast(a, "i32") if a.ty == "bool" else a, self.cast(b, "i32") if b.ty == "bool" else b
                ot, _ = operand_types("+", a.ty, b.ty, a.pv, b.pv)
            return Ex("call", ot, [a, b], v=fn, pv=r.choice(["builtin", "tylo"]))
        if fn == "fma":
            a = self.float_expr(scope, depth - 1)
            b = self.expr(scope, depth - 1, want=a.ty)
            c = self.expr(scope, depth - 1, want=a.ty)
            return Ex("call", a.ty, [a, b, c], v="fma")
        if fn == "where":
            c = self.condition(scope, depth - 1)
            a = self.numeric(scope, depth - 1)
            if a.ty == "py":
                a = self.cast(a, "i32" if isinstance(a.pv, int) else "f32")
            b = self.expr(scope, depth - 1, want=a.ty)
            return Ex("call", a.ty, [c, a, b], v="where")
        a = self.float_expr(scope, depth - 1)
        return Ex("call", a.ty, [a], v=fn)

    # statements -----------------------------------------------------------
    def block(self, scope, n, loop_depth, in_loop, in_helper=False):
        out = []
        for _ in range(n):
            out.append(self.statement(scope, loop_depth, in_loop, in_helper))
        return out

    def statement(self, scope, loop_depth, in_loop, in_helper):
        self.nest += 1
        try:
            return self._statement(scope, loop_depth, in_loop, in_helper)
        finally:
            self.nest -= 1

    def _statement(self, scope, loop_depth, in_loop, in_helper):
        r = self.r
        k = r.random()
        if self.nest > 3:   # keep kernels small enough to read and to interpret quickly
            k = r.choice([0.1, 0.3, 0.45 if not in_helper else 0.1])
        if k < 0.22 or not scope.vars:
            return self.assign_new(scope)
        if k < 0.38:
            return self.reassign(scope)
        if k < 0.52 and not in_helper:
            return self.store(scope)
        if k < 0.62:
            return self.if_stmt(scope, loop_depth, in_loop, in_helper)
        if k < 0.72 and loop_depth < 2:
            return self.for_stmt(scope, loop_depth, in_helper)
        if k < 0.77 and loop_depth < 2:
            return self.while_stmt(scope, loop_depth, in_helper)
        if k < 0.81 and loop_depth < 2:
            return self.static_loop(scope, loop_depth, in_loop, in_helper)
        if k < 0.85 and in_loop:
            self.features.add("break_continue")
            return St("if", [self.condition(scope, 1), [St(r.choice(["break", "continue"]))], [], []])
        if k < 0.87 and not in_helper:
            self.features.add("early_return")
            return St("if", [self.condition(scope, 1), [St("return")], [], []])
        if k < 0.90 and scope.cts:
            return self.ct_if(scope, loop_depth, in_loop, in_helper)
        if k < 0.92:
            same = [(a, b) for a in scope.vars for b in scope.vars
                    if a < b and scope.vars[a] == scope.vars[b] and a not in scope.readonly and b not in scope.readonly]
            if same:
                self.features.add("tuple_swap")
                return St("swap", list(r.choice(same)))
        if not in_helper and r.random() < 0.3:
            return self.approx_store(scope)
        return self.assign_new(scope)

    def assign_new(self, scope):
        e = self.expr(scope, self.r.randint(1, 3))
        name = self.fresh()
        scope.vars[name] = e.ty
        return St("assign", [name, e])

    def reassign(self, scope):
        r = self.r
        names = [n for n in scope.vars if n not in scope.readonly]
        if not names:
            return self.assign_new(scope)
        n = r.choice(names)
        t = scope.vars[n]
        if r.random() < 0.5 and t not in FP8_TYPES:
            op = r.choice(ARITH + ("//", "%", "&", "|", "^", "<<", ">>") if is_int(t) else ARITH + ("/",))
            if op in SHIFTS:
                rhs = Ex("lit", "py", v=r.randint(0, TYPES[t].bits - 1), pv=0)
                rhs.pv = rhs.v
            else:
                rhs = self.expr(scope, 1)
            if rhs.ty not in FP8_TYPES:
                try:
                    _, rt = operand_types(op, t, rhs.ty, None, rhs.pv)
                except Undefined:
                    rt = None
                if rt == t and not (t == "bool"):
                    self.features.add("augassign")
                    return St("aug", [n, op, rhs])
        return St("assign", [n, self.expr(scope, 2, want=t)])

    def out_array(self, t):
        name = f"o_{t}"
        self.outputs.setdefault(name, t)
        return name

    def store(self, scope):
        r = self.r
        e = self.expr(scope, r.randint(1, 3))
        t = e.ty
        if r.random() < 0.25:   # store conversion (never a float into an integer pointer: that is an error)
            choices = [u for u in ALL_TYPES if not ((is_float(t) or t in FP8_TYPES) and (is_int(u) or u == "bool"))]
            t = r.choice(choices)
            if t in FP8_TYPES or e.ty in FP8_TYPES:
                self.uses_fp8 = True
            self.features.add("store_conversion")
        name = self.out_array(t)
        slot = r.randrange(SLOTS)
        return St("store", [name, slot, e])

    def approx_store(self, scope):
        r = self.r
        fn = r.choice(APPROX)
        a = self.float_expr(scope, r.randint(0, 2), allow_f64=False)
        name = f"r_{a.ty}"
        self.approx_outputs.setdefault(name, a.ty)
        slot = r.randrange(SLOTS)
        self.features.add("approx_" + fn)
        return St("store", [name, slot, Ex("call", a.ty, [a], v=fn)])

    def if_stmt(self, scope, loop_depth, in_loop, in_helper):
        r = self.r
        cond = self.condition(scope, 2)
        body = self.block(scope.child(), r.randint(1, 3), loop_depth, in_loop, in_helper)
        elifs = []
        for _ in range(r.choice([0, 0, 1, 2])):
            elifs.append((self.condition(scope, 2),
                          self.block(scope.child(), r.randint(1, 2), loop_depth, in_loop, in_helper)))
        orelse = self.block(scope.child(), r.randint(1, 2), loop_depth, in_loop, in_helper) \
            if r.random() < 0.5 else []
        self.features.add("if" + ("_elif" if elifs else "") + ("_else" if orelse else ""))
        return St("if", [cond, body, elifs, orelse])

    def ct_if(self, scope, loop_depth, in_loop, in_helper):
        r = self.r
        n, v = r.choice(list(scope.cts.items()))
        lim = r.randint(0, 3)
        text = f"{n} > {lim}"
        body = self.block(scope.child(), r.randint(1, 2), loop_depth, in_loop, in_helper)
        orelse = self.block(scope.child(), 1, loop_depth, in_loop, in_helper) if r.random() < 0.5 else []
        self.features.add("constexpr_if")
        return St("ctif", [text, (n, lim), body, orelse])

    def loop_bound(self, scope):
        r = self.r
        k = r.random()
        if k < 0.35:
            v = r.randint(0, 4)
            return Ex("lit", "py", v=v, pv=v)
        has_n = "n" in scope.vars
        if k < 0.6 and has_n:
            return Ex("var", "i32", v="n")
        ints = [(nm, t) for nm, t in scope.vars.items() if is_int(t)]
        if ints and (k < 0.85 or not has_n):
            nm, t = r.choice(ints)
            masked = Ex("bin", t, [Ex("var", t, v=nm), Ex("lit", "py", v=3, pv=3)], v="&")
            return self.cast(masked, "i32")
        if not has_n:
            return Ex("lit", "py", v=2, pv=2)
        return Ex("bin", "i32", [Ex("var", "i32", v="n"), Ex("lit", "py", v=1, pv=1)], v="-")

    def for_stmt(self, scope, loop_depth, in_helper):
        r = self.r
        iv = self.fresh("i")
        start, stop = self.loop_bound(scope), self.loop_bound(scope)
        step = r.choice([1, 1, 1, 2, -1])
        if step < 0:
            start, stop = stop, start
        if start.ty == "py" and stop.ty == "py":
            stop = Ex("var", "i32", v="n") if "n" in scope.vars else self.cast(stop, "i32")
        inner = scope.child()
        inner.vars[iv] = "i32"
        inner.readonly.add(iv)
        body = self.block(inner, r.randint(1, 4), loop_depth + 1, True, in_helper)
        self.features.add("for" if loop_depth == 0 else "nested_loop")
        return St("for", [iv, start, stop, step, body])

    def while_stmt(self, scope, loop_depth, in_helper):
        r = self.r
        w = self.fresh("w")
        limit = self.loop_bound(scope)
        if limit.ty != "py" and limit.ty != "i32":
            limit = self.cast(limit, "i32")
        inner = scope.child()
        inner.vars[w] = "i32"
        inner.readonly.add(w)
        body = self.block(inner, r.randint(1, 3), loop_depth + 1, True, in_helper)
        self.features.add("while" if loop_depth == 0 else "nested_loop")
        return St("while", [w, limit, body])

    def static_loop(self, scope, loop_depth, in_loop, in_helper):
        r = self.r
        name = self.fresh("s")
        inner = scope.child()
        k = r.random()
        if k < 0.35:
            values = list(range(r.randint(1, 3)))
            inner.cts[name] = 0
            body = self.block(inner, r.randint(1, 2), loop_depth + 1, True, in_helper)
            self.features.add("static_range")
            return St("sfor", [name, values, "static_range", body])
        if k < 0.7:
            values = [r.randint(0, 5) for _ in range(r.randint(1, 3))]
            inner.cts[name] = 0
            body = self.block(inner, r.randint(1, 2), loop_depth + 1, True, in_helper)
            self.features.add("tuple_loop")
            return St("sfor", [name, values, "tuple", body])
        count = r.randint(1, 3)
        inner.cts[name] = 0
        body = self.block(inner, r.randint(1, 2), loop_depth + 1, False, in_helper)
        self.features.add("compile_time_while")
        return St("ctwhile", [name, count, body])

    def make_helper(self, scope_types, ct_param):
        r = self.r
        name = f"h{len(self.helpers)}_{self.seed}"
        params = [(f"p{i}", t) for i, t in enumerate(scope_types)]
        if ct_param:
            params.append(("m", "py"))
        scope = Scope({p: t for p, t in params if t != "py"}, {"m": 0} if ct_param else {}, set())
        body = self.block(scope, r.randint(0, 3), 0, False, in_helper=True)
        ret = self.numeric(scope, 2)
        if ret.ty == "py":
            ret = self.cast(ret, "i32" if isinstance(ret.pv, int) else "f32")
        if ct_param and r.random() < 0.7:
            early = self.expr(scope, 2, want=ret.ty)
            body.append(St("ctif", [f"m > {r.randint(0, 2)}", None, [St("retval", [early])], []]))
            self.features.add("helper_constexpr_return")
        body.append(St("retval", [ret]))
        h = Helper(name, params, body, ct_param)
        h.ret = ret.ty
        self.helpers.append(h)


class Scope:
    def __init__(self, vars_, cts, readonly):
        self.vars = dict(vars_)
        self.cts = dict(cts)
        self.readonly = set(readonly)

    def child(self):
        return Scope(self.vars, self.cts, self.readonly)


# -- the model's evaluator ---------------------------------------------------------------------------
class Evaluator:
    def __init__(self, case_parts):
        self.helpers = {h.name: h for h in case_parts["helpers"]}
        self.arrays = case_parts["arrays"]      # name -> (type, list of values)
        self.array_types = {n: t for n, (t, _) in self.arrays.items()}
        self.approx_record = case_parts["approx_record"]
        self.steps = 0

    def tick(self):
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise Undefined("too many steps")

    def ev(self, e: Ex, env):
        self.tick()
        k = e.kind
        if k == "var":
            return env[e.v]
        if k == "cname":
            return env[e.v]
        if k == "lit":
            return "py", e.v
        if k == "bin":
            ta, a = self.ev(e.args[0], env)
            tb, b = self.ev(e.args[1], env)
            if ta == "py" and tb == "py":
                return "py", py_binary(e.v, a, b)
            if e.v in SHIFTS:
                return ta, shift(e.v, a, ta, int(b))
            return binary_value(e.v, ta, a, tb, b)
        if k == "cmp":
            ta, a = self.ev(e.args[0], env)
            tb, b = self.ev(e.args[1], env)
            return binary_value(e.v, ta, a, tb, b)
        if k == "bool":   # runtime and/or: both sides evaluated, the result is a bool
            _, a = self.ev(e.args[0], env)
            _, b = self.ev(e.args[1], env)
            return "bool", (1 if (a and b) else 0) if e.v == "and" else (1 if (a or b) else 0)
        if k == "un":
            t, a = self.ev(e.args[0], env)
            if e.v == "not":
                return "bool", 1 if a == 0 else 0
            if e.v == "~":
                return t, wrap(~a, t)
            if is_float(t):
                return t, -a
            return t, wrap(-a, t)
        if k == "cast":
            t, a = self.ev(e.args[0], env)
            return e.v[0], convert(a, t, e.v[0])
        if k == "ifexp":
            _, c = self.ev(e.args[0], env)
            return self.ev(e.args[1] if c else e.args[2], env)
        if k == "helper":
            return self.call_helper(e, env)
        if k == "call":
            return self.call(e, env)
        raise AssertionError(k)

    def call(self, e, env):
        fn = e.v
        vals = [self.ev(a, env) for a in e.args]
        if fn == "abs":
            t, a = vals[0]
            return t, (abs(a) if is_float(t) else wrap(abs(a), t))
        if fn in ("min", "max"):
            (ta, a), (tb, b) = vals
            ot, _ = operand_types("+", ta, tb, a, b)
            x, y = convert(a, ta, ot) if ta != ot else a, convert(b, tb, ot) if tb != ot else b
            return ot, min_max(fn, x, y, ot)
        if fn == "fma":
            t = e.ty
            a, b, c = (convert(v, tv, t) if tv != t else v for tv, v in vals)
            return t, fma_float(a, b, c, t)
        if fn == "where":
            (_, c), (ta, a), (tb, b) = vals
            return ta, a if c else (convert(b, tb, ta) if tb != ta else b)
        t, a = vals[0]
        if fn == "sqrt":
            return t, sqrt_float(a, t)
        if fn in ("floor", "ceil"):
            return t, floor_ceil(fn, a)
        if fn in APPROX:
            return t, ("approx", fn, a, approx_reference(fn, a, t))
        raise AssertionError(fn)

    def call_helper(self, e, env):
        h = self.helpers[e.v]
        inner = {}
        for (pname, pty), arg in zip(h.params, e.args):
            inner[pname] = self.ev(arg, env)
        try:
            self.block(h.body, inner)
        except _Return as r:
            return r.value
        raise AssertionError("helper without return")

    def block(self, stmts, env):
        for s in stmts:
            self.stmt(s, env)

    def iteration(self, body, env) -> bool:
        """One pass of a loop body (``continue`` ends it early); False when it ``break``s out of the loop."""
        try:
            self.block(body, env)
        except _Continue:
            pass
        except _Break:
            return False
        return True

    def stmt(self, s, env):
        self.tick()
        k = s.kind
        if k == "pass":
            return
        if k == "assign":
            env[s.a[0]] = self.ev(s.a[1], env)
        elif k == "aug":
            n, op, rhs = s.a
            t, a = env[n]
            tb, b = self.ev(rhs, env)
            if op in SHIFTS:
                env[n] = (t, shift(op, a, t, int(b)))
            else:
                rt, v = binary_value(op, t, a, tb, b)
                assert rt == t, (rt, t)
                env[n] = (t, v)
        elif k == "swap":
            a, b = s.a
            env[a], env[b] = env[b], env[a]
        elif k == "store":
            name, slot, e = s.a
            t, v = self.ev(e, env)
            at, values = self.arrays[name]
            if isinstance(v, tuple) and v and v[0] == "approx":
                values[slot] = v[3]
                self.approx_record[name][slot] = (v[1], v[2], at)
                return
            self.approx_record.get(name, {}).pop(slot, None)
            values[slot] = convert(v, t, at) if t != at else v
        elif k == "if":
            cond, body, elifs, orelse = s.a
            if self.ev(cond, env)[1]:
                self.block(body, env)
                return
            for c, b in elifs:
                if self.ev(c, env)[1]:
                    self.block(b, env)
                    return
            self.block(orelse, env)
        elif k == "ctif":
            text, _, body, orelse = s.a
            name, op, lim = text.split()
            if env[name][1] > int(lim):
                self.block(body, env)
            else:
                self.block(orelse, env)
        elif k == "for":
            iv, start, stop, step, body = s.a
            lo = self.ev(start, env)[1]
            hi = self.ev(stop, env)[1]
            for i in range(int(lo), int(hi), step):
                env[iv] = ("i32", i)
                if not self.iteration(body, env):
                    break
        elif k == "while":
            w, limit, body = s.a
            env[w] = ("i32", 0)
            while True:
                lt, lv = self.ev(limit, env)
                if not binary_value("<", "i32", env[w][1], lt, lv)[1]:
                    break
                env[w] = ("i32", wrap(env[w][1] + 1, "i32"))
                if not self.iteration(body, env):
                    break
        elif k == "sfor":
            name, values, style, body = s.a
            for v in values:
                env[name] = ("py", v)
                if not self.iteration(body, env):
                    break
        elif k == "ctwhile":
            name, count, body = s.a
            for v in range(count):
                env[name] = ("py", v)
                self.block(body, env)
        elif k == "break":
            raise _Break()
        elif k == "continue":
            raise _Continue()
        elif k == "return":
            raise _Return()
        elif k == "retval":
            raise _Return(self.ev(s.a[0], env))
        else:
            raise AssertionError(k)


# -- putting a case together ----------------------------------------------------------------------------
def _try_generate(seed: int, attempt: int) -> Case:
    g = Generator(seed, attempt)
    r = g.r
    # parameters: input arrays of a few types, the loop bound n, annotated scalars, constexprs
    in_types = r.sample(ALL_TYPES, r.randint(2, 5))
    if r.random() < 0.3 and not any(t in FP8_TYPES for t in in_types):
        in_types.append(r.choice(FP8_TYPES))
    inputs = {f"x_{t}": (t, [g.random_value(t) for _ in range(4)]) for t in in_types}
    scalars = {f"a_{t}": (t, g.random_value(t)) for t in r.sample(["i32", "f32", "f16", "i64", "u8", "f64", "bool"],
                                                                   r.randint(0, 2))}
    n_value = r.randint(0, 4)
    constexprs = {f"C{i}": r.randint(0, 4) for i in range(r.randint(0, 2))}
    global_value = r.randint(1, 9)
    for t in in_types:
        if t in FP8_TYPES:
            g.uses_fp8 = True
    # helpers first (they may call earlier helpers)
    top_types = [t for t in ALL_TYPES if t not in FP8_TYPES]
    for _ in range(r.choice([0, 1, 1, 2, 3])):
        g.make_helper(r.sample(top_types, r.randint(1, 2)), ct_param=r.random() < 0.4)
    # the kernel body: loads into variables, then statements
    scope = Scope({}, {**{k: v for k, v in constexprs.items()}, f"G{seed}": global_value}, set())
    body = []
    for name, (t, _) in inputs.items():
        for j in range(r.randint(1, 2)):
            v = g.fresh()
            body.append(St("assign", [v, Ex("load", t, v=name, pv=r.randrange(4))]))
            scope.vars[v] = t
    for name, (t, _) in scalars.items():
        scope.vars[name] = t
        scope.readonly.add(name)
    scope.vars["n"] = "i32"
    scope.readonly.add("n")
    body += g.block(scope, r.randint(3, 9), 0, False)
    # make sure something is stored: the last value of a few variables
    for v in r.sample(sorted(scope.vars), min(3, len(scope.vars))):
        t = scope.vars[v]
        body.append(St("store", [g.out_array(t), r.randrange(SLOTS), Ex("var", t, v=v)]))
    if r.random() < 0.3:
        g.features.add("final_return")
        body.append(St("return"))

    # model evaluation
    arrays = {}
    for name, t in sorted(g.outputs.items()) + sorted(g.approx_outputs.items()):
        arrays[name] = (t, [poison(t)] * SLOTS)
    for name, (t, vals) in inputs.items():
        arrays[name] = (t, list(vals))
    approx_record = {name: {} for name in g.approx_outputs}
    ev = Evaluator({"helpers": g.helpers, "arrays": arrays, "approx_record": approx_record})
    env = {k: ("py", v) for k, v in constexprs.items()}
    env[f"G{seed}"] = ("py", global_value)
    env["n"] = ("i32", n_value)
    for name, (t, v) in scalars.items():
        env[name] = (t, v)

    def load_ev(e, env_, _orig=ev.ev):
        if e.kind == "load":
            t, vals = arrays[e.v]
            return t, vals[e.pv]
        return _orig(e, env_)
    ev.ev = load_ev
    try:
        ev.block(body, env)
    except _Return:
        pass
    except (_Break, _Continue):
        raise AssertionError("break outside a loop")
    except (ZeroDivisionError, OverflowError, RecursionError) as exc:
        raise Undefined(str(exc))

    # parameters in order
    params = []
    for name, t in sorted(g.outputs.items()) + sorted(g.approx_outputs.items()):
        params.append(Param(name, "out", t, [poison(t)] * SLOTS))
    for name, (t, vals) in inputs.items():
        params.append(Param(name, "in", t, vals))
    params.append(Param("n", "n", "i32", n_value))
    for name, (t, v) in scalars.items():
        params.append(Param(name, "scalar", t, v))
    for name, v in constexprs.items():
        params.append(Param(name, "constexpr", "py", v))

    kname = f"k_{seed}"
    lines = ["import tylo", "", f"G{seed} = {global_value}", ""]
    for h in g.helpers:
        lines += ["", "@tylo.func", f"def {h.name}({', '.join(p for p, _ in h.params)}):"]
        lines += render_block(h.body, 1)
    plist = []
    for p in params:
        if p.kind == "scalar":
            plist.append(f"{p.name}: tylo.{p.ty}")
        elif p.kind == "constexpr":
            plist.append(f"{p.name}: tylo.constexpr")
        else:
            plist.append(p.name)
    lines += ["", "", "@tylo.jit", f"def {kname}({', '.join(plist)}):"]
    lines += render_block(body, 1)
    source = "\n".join(lines) + "\n"
    expected = {name: arrays[name][1] for name in arrays}
    approx = {name: dict(rec) for name, rec in approx_record.items()}
    return Case(seed, source, kname, params, {f"G{seed}": global_value}, g.helpers, body, expected, approx,
                g.uses_fp8, g.features)


def generate(seed: int) -> Case:
    """The valid kernel of ``seed`` (deterministic), with its expected outputs."""
    last = None
    for attempt in range(50):
        try:
            return _try_generate(seed, attempt)
        except Undefined as exc:
            last = exc
    raise RuntimeError(f"seed {seed}: no defined kernel in 50 attempts ({last})")


def load_generated(source: str, module_name: str, kernel_name: str, folder: str):
    """Write a generated kernel's ``source`` to ``folder/module_name.py`` (tylo reads kernels' source from
    their file), import it as ``module_name`` and return ``(the kernel, the file's path)``."""
    path = os.path.join(folder, f"{module_name}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return getattr(module, kernel_name), path
