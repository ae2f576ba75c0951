"""Conversions between every pair of scalar types (issue 16, items 5-8, 13 and the sweep): the
constant folder, the reference interpreter (on the IR before and after the passes) and an
independent model of docs/language.md (tests/conversion_reference.py) agree bit for bit on tricky
values: ties, values just past a tie, overflow, subnormals, signed zeros, NaN, saturation."""
import importlib.util
import math
from fractions import Fraction

import conversion_reference as ref
import numpy as np
import pytest

import tylo
from tylo.interpreter import run
from tylo.ir import types as T
from tylo.ir.scalars import round_float

ARITH = [t for t in ref.SCALARS if t not in ("f8e4m3", "f8e5m2")]  # fp8 has no constants


def _module(tmp_path, name, source):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _py(x, t):
    """A numpy element of dtype ``t`` as a Python bool/int/float."""
    if t == "bool":
        return bool(x)
    return int(x) if ref.is_int(t) else float(x)


def _outputs(dsts, n):
    return {d: np.zeros(n, ref.NP[d] if d != "bool" else np.uint8) for d in dsts}


def _literal(x, t):
    if t == "bool":
        return repr(bool(x))
    if ref.is_int(t):
        return repr(int(x))
    return f"float({str(float(x))!r})" if not math.isfinite(x) else repr(float(x))


@pytest.mark.parametrize("src", ARITH)
def test_folded_constant_casts_match_the_model_and_the_unfolded_program(tmp_path, src):
    """``tylo.<src>(v).to(<dst>)`` for each tricky v and each dst: folded, unfolded, model."""
    values = [_py(v, src) for v in ref.values_of(src)]
    dsts = [d for d in ref.SCALARS if d != src]
    params = ", ".join(f"o_{d}" for d in dsts)
    spelled = {"bool": "bool_"}
    body = [f"    o_{d}[{j}] = tylo.{spelled.get(src, src)}({_literal(v, src)}).to(tylo.{spelled.get(d, d)})"
            for d in dsts for j, v in enumerate(values)]
    src_text = f"import tylo\n\n@tylo.jit\ndef k({params}):\n" + "\n".join(body) + "\n"
    kernel = _module(tmp_path, f"fold_{src}", src_text).k
    sig = ", ".join(f"*{d}" for d in dsts)
    results = {}
    for passes in (True, False):
        outs = _outputs(dsts, len(values))
        run(kernel.lower(signature=sig, arch="sm_90a", passes=passes), [outs[d] for d in dsts])
        results[passes] = outs
    for d in dsts:
        for j, v in enumerate(values):
            want = ref.convert(v, src, d)
            folded, unfolded = (_py(results[p][d][j], d) for p in (True, False))
            assert ref.same(folded, want), f"folded {src}({v!r}) -> {d}: {folded!r}, documented {want!r}"
            assert ref.same(unfolded, want), f"interpreted {src}({v!r}) -> {d}: {unfolded!r}, documented {want!r}"


@pytest.mark.parametrize("src", ref.SCALARS)
def test_runtime_casts_in_the_interpreter_match_the_model(tmp_path, src):
    """``x[i].to(<dst>)`` on runtime values of every scalar type (fp8 included) to every other."""
    xs = ref.values_of(src)
    dsts = [d for d in ref.SCALARS if d != src and not (d in ref.FP8_MAX and src in ref.FP8_MAX)] + \
        [d for d in ref.FP8_MAX if d != src and src in ref.FP8_MAX]
    params = ", ".join(f"o_{d}" for d in dsts)
    body = "\n".join(f"    o_{d}[i] = v.to(tylo.{d if d != 'bool' else 'bool_'})" for d in dsts)
    text = f"import tylo\n\n@tylo.jit\ndef k(x, {params}):\n    i = tylo.thread_idx.x\n    v = x[i]\n{body}\n"
    kernel = _module(tmp_path, f"rt_{src}", text).k
    sig = ", ".join(f"*{t}" for t in [src] + dsts)
    outs = _outputs(dsts, len(xs))
    data = xs.astype(np.uint8) if src == "bool" else xs
    run(kernel.lower(signature=sig, arch="sm_90a"), [data] + [outs[d] for d in dsts], block=(len(xs),))
    for d in dsts:
        for j, x in enumerate(xs):
            want = ref.convert(_py(x, src), src, d)
            got = _py(outs[d][j], d)
            assert ref.same(got, want), f"{src}({_py(x, src)!r}) -> {d}: interpreter {got!r}, documented {want!r}"


def test_the_issue_examples():
    """Items 6 and 7 exactly: (double)0.1f, and i64 -> f32 rounded once."""
    @tylo.jit
    def k(out: tylo.Ptr[tylo.f64], o32: tylo.Ptr[tylo.f32]):
        out[0] = tylo.f32(0.1).to(tylo.f64)
        o32[0] = tylo.i64(2**60 + 2**36 + 1).to(tylo.f32)
        o32[1] = tylo.i32(16842753).to(tylo.bf16).to(tylo.f32)

    for passes in (True, False):
        out, o32 = np.zeros(1), np.zeros(2, np.float32)
        run(k.lower(passes=passes), [out, o32])
        assert out.view(np.uint64)[0] == 0x3FB99999A0000000
        assert o32.view(np.uint32)[0] == 0x5D800001
        assert o32[1] == 16908288.0  # one rounding (f32 first would give 16777216)


def test_sm80_int_to_bf16_sequence_rounds_once():
    """The sm_80 lowering of i32/i64/u32/u64 -> bf16 (codegen/llvm.py): cvt.rz.f32 (toward zero),
    set the last bit when inexact, then cvt.rn.bf16.f32. Modelled with exact integer arithmetic and
    compared with the single correct rounding on every value near a bf16 tie that an int can hold."""

    def cvt_rz_f32(x):  # truncate to 24 significant bits
        drop = max(0, abs(x).bit_length() - 24)
        return (abs(x) >> drop << drop) * (1 if x >= 0 else -1)

    def sequence(x):
        f = cvt_rz_f32(x)
        if f != x:  # the sticky bit: f's last significand bit
            drop = max(0, abs(x).bit_length() - 24)
            f = (abs(f) | (1 << drop)) * (1 if x >= 0 else -1)
        return float(np.float32(f).astype(tylo_bf16()))

    tested = 0
    for e in range(9, 64):  # bf16 ulp is 2**(e-7) at 2**e
        for m in (0x80, 0xA5, 0xFF):
            base = m << (e - 7)
            half = 1 << (e - 8)
            for delta in (-2, -1, 0, 1, 2):
                for x in (base + half + delta, base - half + delta, base + delta):
                    for v in (x, -x):
                        if -2**63 <= v < 2**64:
                            assert sequence(v) == round_float(v, T.bf16), v
                            tested += 1
    assert tested > 2000


def tylo_bf16():
    import ml_dtypes
    return ml_dtypes.bfloat16


def test_round_float_is_one_rounding_on_random_rationals():
    rng = np.random.default_rng(1234)
    for name in ("f16", "bf16", "f32"):
        t = T.scalar_type(name)
        fmt_bits = {"f16": 11, "bf16": 8, "f32": 24}[name]
        for _ in range(300):
            x = Fraction(int(rng.integers(1, 2**62)), int(rng.integers(1, 2**40)))
            r = round_float(x, t)
            if math.isinf(r):
                # past the largest finite value by half an ulp or more
                assert x >= {"f16": 65520, "bf16": 2**128 - 2**119, "f32": 2**128 - 2**103}[name]
                continue
            # within half an ulp of x: no representable neighbour is closer
            e = math.frexp(r)[1]
            ulp = Fraction(2) ** (e - fmt_bits)
            assert abs(Fraction(r) - x) <= ulp / 2
