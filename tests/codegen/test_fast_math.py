"""Fast math (tylo.exp2(x, fast=True), tylo.rcp, tylo.fdiv) on scalars and fragments: the PTX for sm_90a
through nvJitLink, the interpreter's semantics (exact values, subnormals flushed), and the
WGMMASerializationWarning that names an IEEE division as the reason ptxas serialised the WGMMAs."""
import re
import warnings

import numpy as np
import pytest

import tylo
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo import Layout, Ownership
from tylo.ir import print_kernel
from tylo.ir import types as T


@tylo.jit
def scalar_math(out, x, y, FAST: tylo.constexpr):
    i = tylo.thread_idx.x
    out[4 * i] = tylo.exp2(x[i], fast=FAST)
    out[4 * i + 1] = tylo.rcp(x[i], fast=FAST)
    out[4 * i + 2] = tylo.fdiv(x[i], y[i], fast=FAST)
    out[4 * i + 3] = tylo.exp2(x[i])


def _count(ptx, text):
    return len(re.findall(re.escape(text), ptx))


def test_fast_forms_are_one_instruction_each():
    ck = scalar_math.compile(signature="*f32, *f32, *f32", constexprs=dict(FAST=True), arch="sm_90a", block=32)
    assert _count(ck.ptx, "ex2.approx.ftz.f32") == 1
    assert _count(ck.ptx, "ex2.approx.f32") == 1                # the default exp2 is unchanged
    assert _count(ck.ptx, "rcp.approx.ftz.f32") == 1
    assert _count(ck.ptx, "div.full.ftz.f32") == 1
    assert "div.rn.f32" not in ck.ptx and "rcp.rn.f32" not in ck.ptx
    ir = print_kernel(scalar_math.lower(signature="*f32, *f32, *f32", constexprs=dict(FAST=True), block=32))
    assert "math.exp2 %5 {fast = true}" in ir and re.search(r"math\.rcp %\d+ \{fast = true\}", ir)
    assert re.search(r"arith\.div %\d+, %\d+ \{fast = true\}", ir)


def test_default_forms_are_ieee():
    ck = scalar_math.compile(signature="*f32, *f32, *f32", constexprs=dict(FAST=False), arch="sm_90a", block=32)
    assert "ftz" not in ck.ptx
    assert _count(ck.ptx, "rcp.rn.f32") == 1 and _count(ck.ptx, "div.rn.f32") == 1


def test_fast_is_a_compile_time_bool():
    with pytest.raises(tylo.CompileError, match="fast= must be a compile-time bool"):
        scalar_math.compile(signature="*f32, *f32, *f32", constexprs=dict(FAST=1), arch="sm_90a", block=32)


def _interpret(fast, x, y):
    out = np.full(4 * x.size, np.nan, np.float32)
    tylo.jit(scalar_math.fn, interpret=True)[1, x.size](out, x, y, fast)
    return out.reshape(-1, 4)


def test_interpreter_values_and_flushed_subnormals():
    rng = np.random.default_rng()
    x = rng.uniform(-20, 20, 32).astype(np.float32)
    y = rng.uniform(0.5, 4, 32).astype(np.float32) * rng.choice([-1, 1], 32).astype(np.float32)
    x[0], x[1], x[2], x[3] = 1e-40, -5e-39, -140.0, 1.0  # subnormal inputs; 2^-140 is a subnormal result
    y[3] = 3e38                                          # 1/3e38 is a subnormal result
    got = _interpret(True, x, y)
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    ref_exp2, ref_rcp, ref_div = np.exp2(xd), 1 / xd, xd / yd
    ok = slice(4, None)
    np.testing.assert_allclose(got[ok, 0], ref_exp2[ok], rtol=2e-7)
    np.testing.assert_allclose(got[ok, 1], ref_rcp[ok], rtol=2e-7)
    np.testing.assert_allclose(got[ok, 2], ref_div[ok], rtol=2e-7)
    assert got[0, 0] == 1.0 and got[1, 0] == 1.0           # ftz: 2^(+-0) is 1
    assert got[0, 2] == 0.0 and got[1, 2] == 0.0           # ftz: 0 / y
    assert got[0, 1] == np.inf and got[1, 1] == -np.inf    # ftz: 1/(+-0)
    assert got[2, 0] == 0.0                                # 2^-140 flushes
    assert got[2, 3] > 0.0                                 # the default exp2 keeps the subnormal
    assert got[3, 2] == 0.0                                # the subnormal quotient flushes
    ieee = _interpret(False, x, y)
    assert ieee[1, 1] == np.float32(1 / np.float32(-5e-39)) and ieee[2, 0] > 0 and ieee[3, 2] > 0  # IEEE keeps them


OWN = Ownership.local((32, 4), axis=1)


@tylo.jit
def fragment_math(out, x, FAST: tylo.constexpr):
    t = tylo.GlobalTile(x, Layout((32, 4), (4, 1)))
    f = tylo.load(t, OWN)
    g = tylo.exp2(f, fast=FAST) + tylo.rcp(f, fast=FAST) + tylo.fdiv(f, 3.0, fast=FAST) + tylo.fdiv(1.0, f, fast=FAST)
    tylo.store(tylo.GlobalTile(out, Layout((32, 4), (4, 1))), g)


def test_fragments_slot_by_slot():
    ck = fragment_math.compile(signature="*f32, *f32", constexprs=dict(FAST=True), arch="sm_90a", block=32)
    assert _count(ck.ptx, "ex2.approx.ftz.f32") == 4
    assert _count(ck.ptx, "rcp.approx.ftz.f32") == 4
    assert _count(ck.ptx, "div.full.ftz.f32") == 8
    rng = np.random.default_rng()
    x = rng.uniform(0.5, 8, (32, 4)).astype(np.float32)
    out = np.full((32, 4), np.nan, np.float32)
    tylo.jit(fragment_math.fn, interpret=True)[1, 32](out, x, True)
    xd = x.astype(np.float64)
    np.testing.assert_allclose(out, np.exp2(xd) + 1 / xd + xd / 3 + 1 / xd, rtol=1e-6)


@tylo.jit
def wgmma_then(out, d, PLAN: tylo.constexpr, AT: tylo.constexpr, BT: tylo.constexpr, FAST: tylo.constexpr):
    sa = tylo.shared_array(PLAN.dtype, (AT.shape[0] * AT.shape[1],), align=1024)
    sb = tylo.shared_array(PLAN.dtype, (BT.shape[0] * BT.shape[1],), align=1024)
    a = wg.wgmma_operand(PLAN, wg.OperandA, tma.shared_tile(AT, sa), (0, 0))
    b = wg.wgmma_operand(PLAN, wg.OperandB, tma.shared_tile(BT, sb))
    f = wg.finish_mma(wg.wait_mma(wg.mma_async(PLAN, a, b, tylo.zero_accumulator(PLAN))))
    tylo.store(tylo.GlobalTile(out, Layout((64, PLAN.n), (PLAN.n, 1))), tylo.fdiv(f, d, fast=FAST))


def _compile_wgmma(fast):
    plan = wg.WGMMA64(T.bf16, n=64, k=64)
    at = bt = tma.TMATile(T.bf16, (64, 64))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wgmma_then.compile(signature="*f32, f32", constexprs=dict(PLAN=plan, AT=at, BT=bt, FAST=fast),
                           arch="sm_90a", block=128)
    return [w for w in caught if issubclass(w.category, tylo.WGMMASerializationWarning)]


def test_ieee_division_serialises_wgmma_and_tylo_says_why():
    found = _compile_wgmma(False)
    assert len(found) == 1, found
    text = str(found[0].message)
    assert "wgmma_then" in text and "C7509" in text
    assert "div.rn.f32" in text and "tylo.fdiv(a, b, fast=True)" in text


def test_fast_division_keeps_wgmma_async():
    assert _compile_wgmma(True) == []
