"""The IR passes against the IR before them (issue 16, item 13): small random scalar kernels
mixing runtime parameters and constants of many types, with casts, arithmetic, abs, min/max and
selects, run in the reference interpreter before and after constant folding, CSE and DCE; the
stored bits must be identical. A deterministic seeded slice (the fuzzers cover more)."""
import importlib.util
import random

import numpy as np
import pytest

from tylo.interpreter import run

TYPES = ["i8", "i32", "i64", "u8", "u32", "u64", "f16", "bf16", "f32", "f64"]
PARAMS = {"a": "f32", "b": "i32", "c": "f16", "d": "bf16", "e": "f64", "g": "i64", "h": "u8"}
CONSTANTS = ["tylo.f32(0.1)", "tylo.f32(-0.0)", "tylo.f32(1e39)", "tylo.f16(0.1)", "tylo.f16(65519.99)",
             "tylo.bf16(1.0078125)", "tylo.f64(1.00390625000000093)", "tylo.f32(3.4e38)", "tylo.f64(-2.5)",
             "tylo.i64(1152921573326323713)", "tylo.i32(16842753)", "tylo.u64(18446744073709551615)",
             "tylo.i8(-128)", "tylo.u8(3)", "tylo.i32(-7)"]
LITERALS = ["0.1", "-0.0", "1e39", "16842753", "3", "-7", "2.5", "65519.99"]


def expression(rng: random.Random, depth: int, constant_only: bool) -> str:
    """An expression whose type is fixed by an outer ``.to``; leaves are parameters or constants."""
    if depth == 0 or rng.random() < 0.25:
        if constant_only or rng.random() < 0.5:
            return rng.choice(CONSTANTS)
        return rng.choice(sorted(PARAMS))
    kind = rng.random()
    t = rng.choice(TYPES)
    if kind < 0.45:
        floats = ["+", "-", "*", "/", "%", "//"]
        op = rng.choice(floats if t in ("f16", "bf16", "f32", "f64") else ["+", "-", "*", "&", "^"])
        left = f"({expression(rng, depth - 1, constant_only)}).to(tylo.{t})"
        right = f"({expression(rng, depth - 1, constant_only)}).to(tylo.{t})"
        if op in ("+", "-", "*", "/") and rng.random() < 0.3:  # a weakly typed Python literal
            right = rng.choice(LITERALS)
        return f"({left} {op} {right})"
    if kind < 0.6:
        if t in ("f16", "bf16", "f32") and rng.random() < 0.5:
            fn = rng.choice(["sqrt", "floor", "ceil", "exp", "tanh"])
            return f"tylo.{fn}(({expression(rng, depth - 1, constant_only)}).to(tylo.{t}))"
        return f"abs(({expression(rng, depth - 1, constant_only)}).to(tylo.{t}))"
    if kind < 0.75:
        fn = rng.choice(["min", "max"])
        return (f"{fn}(({expression(rng, depth - 1, constant_only)}).to(tylo.{t}), "
                f"({expression(rng, depth - 1, constant_only)}).to(tylo.{t}))")
    if kind < 0.85:
        return (f"tylo.where(({expression(rng, depth - 1, constant_only)}).to(tylo.f32) < "
                f"({expression(rng, depth - 1, constant_only)}).to(tylo.f32), "
                f"({expression(rng, depth - 1, constant_only)}).to(tylo.{t}), "
                f"({expression(rng, depth - 1, constant_only)}).to(tylo.{t}))")
    return f"({expression(rng, depth - 1, constant_only)}).to(tylo.{t})"


def kernel_source(seed: int) -> tuple[str, list[str]]:
    rng = random.Random(seed)
    outs = [rng.choice(TYPES + ["bool"]) for _ in range(6)]
    lines = []
    for j, t in enumerate(outs):
        e = expression(rng, rng.randint(1, 4), constant_only=j % 2 == 0)
        target = "bool_" if t == "bool" else t
        lines.append(f"    o{j}[0] = ({e}).to(tylo.{target})")
    params = ", ".join([f"o{j}" for j in range(len(outs))] + sorted(PARAMS))
    return f"import tylo\n\n@tylo.jit\ndef k({params}):\n" + "\n".join(lines) + "\n", outs


NP = {"i8": np.int8, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u32": np.uint32, "u64": np.uint64,
      "f16": np.float16, "f32": np.float32, "f64": np.float64, "bool": np.uint8}


def _np(t):
    if t == "bf16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return NP[t]


@pytest.mark.parametrize("seed", range(80))
def test_passes_preserve_the_bits_of_random_scalar_kernels(tmp_path, seed):
    source, outs = kernel_source(seed)
    path = tmp_path / f"rand_{seed}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"rand_{seed}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sig = ", ".join([f"*{t}" for t in outs] + [PARAMS[p] for p in sorted(PARAMS)])
    rng = np.random.default_rng(seed)
    args = {"a": float(np.float32(rng.normal() * 100)), "b": int(rng.integers(-2**31, 2**31)),
            "c": float(np.float16(rng.normal() * 10)), "d": 1.0078125, "e": float(rng.normal()) * 1e20,
            "g": int(rng.integers(-2**63, 2**63)), "h": int(rng.integers(0, 256))}
    bits = []
    for passes in (False, True):
        buffers = [np.zeros(1, _np(t)) for t in outs]
        run(mod.k.lower(signature=sig, passes=passes), buffers + [args[p] for p in sorted(PARAMS)])
        bits.append([b.view(np.uint8).tobytes() for b in buffers])
    assert bits[0] == bits[1], f"the passes changed a result of\n{source}\nunfolded {bits[0]}\nfolded {bits[1]}"


SIGNED_ZEROS = """
import tylo

@tylo.jit
def k(o: tylo.Ptr[tylo.f32], h: tylo.Ptr[tylo.f16]):
    o[0] = tylo.f32(-0.0) * 2.0
    o[1] = tylo.f32(-0.0) + tylo.f32(-0.0)
    o[2] = tylo.f32(-0.0) - tylo.f32(0.0)
    o[3] = tylo.f32(1.5) - tylo.f32(1.5)
    o[4] = tylo.f32(-1e-30) * tylo.f32(1e-30)
    h[0] = tylo.f16(-0.0) * tylo.f16(3.0)
    h[1] = tylo.f16(-1e-4) * tylo.f16(1e-4)
"""


def test_folding_keeps_the_sign_of_zero(tmp_path):
    """IEEE signs of zero results survive folding (exact rational arithmetic alone loses them)."""
    path = tmp_path / "signed_zeros.py"
    path.write_text(SIGNED_ZEROS)
    spec = importlib.util.spec_from_file_location("signed_zeros", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    want = [-0.0, -0.0, -0.0, 0.0, -0.0]
    for passes in (False, True):
        o, h = np.full(5, 7, np.float32), np.full(2, 7, np.float16)
        run(mod.k.lower(passes=passes), [o, h])
        assert list(np.signbit(o)) == [np.signbit(w) for w in want] and not o.any()
        assert list(np.signbit(h)) == [True, True] and not h.any()
