"""Random integer expressions over runtime i32 values: the frontend's typing and the IR passes must
give C semantics (wrap-around, truncating division), checked in the reference interpreter."""
import importlib.util
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.interpreter import run

MASK = (1 << 32) - 1


def wrap32(x):
    x &= MASK
    return x - (1 << 32) if x >> 31 else x


def cdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


# expression trees: (op, left, right) or a variable name
LEAVES = st.sampled_from(["a", "b", "c"])
OPS = st.sampled_from(["+", "-", "*", "&", "|", "^", "<<", ">>", "//", "%", "min", "max"])
EXPR = st.recursive(LEAVES, lambda inner: st.tuples(OPS, inner, inner), max_leaves=8)


def source(e, shift_mask=31):
    """Kernel source of an expression; shift counts are masked below the narrowest operand width."""
    if isinstance(e, str):
        return e
    op, l, r = e
    ls, rs = source(l, shift_mask), source(r, shift_mask)
    if op in ("<<", ">>"):
        return f"({ls} {op} ({rs} & {shift_mask}))"
    if op in ("//", "%"):
        return f"({ls} {op} (({rs} & 255) | 1))"  # a positive, non-zero divisor
    if op in ("min", "max"):
        return f"{op}({ls}, {rs})"
    return f"({ls} {op} {rs})"


def evaluate(e, env):
    if isinstance(e, str):
        return env[e]
    op, l, r = e
    a, b = evaluate(l, env), evaluate(r, env)
    if op == "<<":
        return wrap32(a << (b & 31))
    if op == ">>":
        return a >> (b & 31)
    if op in ("//", "%"):
        d = (b & 255) | 1
        return cdiv(a, d) if op == "//" else a - cdiv(a, d) * d
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    return wrap32({"+": a + b, "-": a - b, "*": a * b, "&": a & b, "|": a | b, "^": a ^ b}[op])


@settings(max_examples=40, derandomize=True)
@given(EXPR, st.lists(st.integers(-(2**31), 2**31 - 1), min_size=3, max_size=3))
def test_random_i32_expressions(tmp_path_factory, expr, values):
    path = tmp_path_factory.mktemp("fuzz") / "fuzz_kernel.py"
    path.write_text("import tylo\n\n@tylo.jit\ndef k(out, x):\n    a = x[0]\n    b = x[1]\n    c = x[2]\n"
                    f"    out[0] = {source(expr)}\n")
    spec = importlib.util.spec_from_file_location(f"fuzz_{abs(hash(str(expr)))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    out = np.zeros(1, np.int32)
    run(module.k.lower(signature="*i32, *i32"), [out, np.array(values, np.int32)], block=(1,))
    assert int(out[0]) == evaluate(expr, dict(zip("abc", values))), source(expr)


# -- mixed integer types: the promotion rules of docs/language.md --------------------------------------

from tylo.ir import types as T  # noqa: E402
from tylo.ir.scalars import wrap_int as _wrap  # noqa: E402

TYPES = {"a": T.i32, "b": T.u32, "c": T.i64, "d": T.u8, "e": T.i16}


def typed_eval(e, env):
    """(value, type) of an expression under tylo's promotion rules and C arithmetic."""
    if isinstance(e, str):
        return env[e], TYPES[e]
    op, l, r = e
    (a, ta), (b, tb) = typed_eval(l, env), typed_eval(r, env)
    if op in ("<<", ">>"):
        s = _wrap(b, tb) & 7  # the narrowest type is 8 bits: larger counts are undefined
        if op == "<<":
            return _wrap(a << s, ta), ta
        return (a >> s if ta.is_signed else (a & ((1 << ta.bits) - 1)) >> s), ta
    if op in ("//", "%"):
        # divisor: ((b & 255) | 1) in b's type, then promoted with a
        d = _wrap((b & 255) | 1, tb)
        t = T.promote(ta, tb)
        a, d = _wrap(a, t), _wrap(d, t)
        q = cdiv(a, d)
        return _wrap(q if op == "//" else a - q * d, t), t
    t = T.promote(ta, tb)
    a, b = _wrap(a, t), _wrap(b, t)
    if op == "min":
        return min(a, b), t
    if op == "max":
        return max(a, b), t
    return _wrap({"+": a + b, "-": a - b, "*": a * b, "&": a & b, "|": a | b, "^": a ^ b}[op], t), t


MIXED = st.recursive(st.sampled_from(list(TYPES)), lambda inner: st.tuples(OPS, inner, inner), max_leaves=6)


@settings(max_examples=40, derandomize=True)
@given(MIXED, st.integers(0, 2**32 - 1))
def test_random_mixed_type_expressions(tmp_path_factory, expr, seed):
    r = np.random.default_rng(seed)
    env = {}
    arrays = []
    for name, t in TYPES.items():
        dt = np.dtype({"i32": np.int32, "u32": np.uint32, "i64": np.int64, "u8": np.uint8, "i16": np.int16}[t.name])
        info = np.iinfo(dt)
        v = r.integers(info.min, info.max, 1, dtype=dt, endpoint=True)
        arrays.append(v)
        env[name] = int(v[0])
    value, t = typed_eval(expr, env)
    path = tmp_path_factory.mktemp("fuzz") / "fuzz_mixed.py"
    loads = "".join(f"    {n} = p{n}[0]\n" for n in TYPES)
    path.write_text("import tylo\n\n@tylo.jit\ndef k(out, " + ", ".join(f"p{n}" for n in TYPES) + "):\n" + loads +
                    f"    out[0] = {source(expr, 7)}\n")
    spec = importlib.util.spec_from_file_location(f"fuzzm_{abs(hash((str(expr), seed)))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    ir = module.k.lower(signature=f"*{t.name}, *i32, *u32, *i64, *u8, *i16")
    out = np.zeros(1, {"i32": np.int32, "u32": np.uint32, "i64": np.int64, "u8": np.uint8, "i16": np.int16}[t.name])
    run(ir, [out, *arrays], block=(1,))
    assert int(out[0]) == value, (source(expr, 7), t)
