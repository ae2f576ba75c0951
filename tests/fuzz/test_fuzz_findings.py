"""One minimal reproducer per root cause the fuzzers found (tests/fuzz/FINDINGS.md).

Each test asserts what docs/language.md (or docs/cache.md, DESIGN.md) promises. All of them are fixed
now (findings.FIXED says where) and stay as regression tests. A new finding's reproducer goes here with
``pytest.mark.xfail(strict=True, reason="<finding id>")`` until its fix merges: the test then XPASSes,
fails the run, and the mark must be removed.
"""
import os
import subprocess
import sys
import warnings

import ml_dtypes
import numpy as np
import pytest

import tylo
from tylo.interpreter import run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def interpret(kernel, signature, outs, *args):
    run(kernel.lower(signature=signature), [*outs, *args], grid=(1,), block=(1,))
    return outs


def compile_all(kernel, signature):
    for arch in ("sm_90a", "sm_80", "sm_100a"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kernel.compile(signature=signature, arch=arch)


# -- valid kernels that do not compile --------------------------------------------------------------
@tylo.jit
def nested_breaks(out, n):
    acc = 0
    for i in range(n):
        for j in range(n):
            if j > 1:
                break
            acc += 1
        if i > 2:
            break
    out[0] = acc


def test_f01_nested_runtime_loops_that_both_break():
    out = np.zeros(1, np.int32)
    interpret(nested_breaks, "*i32, i32", [out], 6)
    assert out[0] == 8  # 4 outer iterations (i = 0..3), 2 inner each
    compile_all(nested_breaks, "*i32, i32")


@tylo.jit
def static_break_then_while(out, x, n):
    count = 0
    for i in range(n):
        for s in tylo.static_range(1):
            if x > 0:
                break
        w = tylo.i32(0)
        while w < 1:
            w += 1
            count += 1
    out[0] = count


def test_f02_unrolled_loop_with_break_then_runtime_while():
    out = np.zeros(1, np.int32)
    interpret(static_break_then_while, "*i32, i32, i32", [out], 1, 3)
    assert out[0] == 3
    compile_all(static_break_then_while, "*i32, i32, i32")


@tylo.jit
def integer_abs(out, x, y):
    out[0] = abs(x) + abs(y).to(tylo.i32)


def test_f03_integer_abs_compiles():
    compile_all(integer_abs, "*i32, i32, i64")


@tylo.jit
def huge_f32_literal(out, x):
    out[0] = x * 1e39


def test_f04_f32_literal_out_of_range_is_not_an_llvm_error():
    try:
        compile_all(huge_f32_literal, "*f32, f32")
    except tylo.CompileError as exc:   # refusing it clearly is fine too
        assert "internal compiler error" not in exc.reason


@tylo.jit
def fp8_to_bool(out, x):
    out[0] = x[0].to(tylo.bool)
    out[1] = x[1].to(tylo.bool)


def test_f05_fp8_to_bool():
    x = np.array([0.0, -1.5], ml_dtypes.float8_e4m3fn)
    out = np.array([True, False])
    interpret(fp8_to_bool, "*bool, *f8e4m3", [out], x)
    assert list(out) == [False, True]
    fp8_to_bool.compile(signature="*bool, *f8e4m3", arch="sm_90a")


MOD_CAST_SOURCE = '''
import tylo

@tylo.jit
def mod_cast(out, x, y):
    out[0] = (x % y).to(tylo.bf16)

try:
    mod_cast.compile(signature="*bf16, f16, bf16", arch="sm_90a")
except tylo.CompileError as exc:
    assert "internal compiler error" not in exc.reason, exc.reason
print("survived")
'''


def test_f06_f16_mod_bf16_to_bf16_does_not_kill_the_process(tmp_path):
    path = tmp_path / "mod_cast_kernel.py"
    path.write_text(MOD_CAST_SOURCE)
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0 and "survived" in proc.stdout, (proc.returncode, proc.stderr[-500:])


# -- wrong values -----------------------------------------------------------------------------------------
@tylo.jit
def folded_f32_to_f64(out):
    out[0] = tylo.f32(0.1).to(tylo.f64)


def test_f07_folded_f32_constant_is_rounded_to_f32():
    out = np.zeros(1, np.float64)
    interpret(folded_f32_to_f64, "*f64", [out])
    assert out[0] == float(np.float32(0.1))


@tylo.jit
def folded_i64_to_f32(out):
    out[0] = tylo.i64(2**60 + 2**36 + 1).to(tylo.f32)


def test_f08_folded_i64_to_f32_rounds_once():
    out = np.zeros(1, np.float32)
    interpret(folded_i64_to_f32, "*f32", [out])
    assert out.view(np.uint32)[0] == 0x5D800001


@tylo.jit
def loop_variable_after_loop(out, n):
    i = 0
    for i in range(n):
        pass
    out[0] = i


def test_f09_loop_variable_keeps_its_last_value_or_is_rejected():
    out = np.zeros(1, np.int32)
    try:
        interpret(loop_variable_after_loop, "*i32, i32", [out], 5)
    except tylo.CompileError as exc:
        assert "internal compiler error" not in exc.reason
        return
    assert out[0] == 4


@tylo.jit
def and_of_int(out, x):
    out[0] = x and True
    out[1] = x or False


def test_f10_and_or_on_non_bool_runtime_values():
    out = np.zeros(2, np.int32)
    try:
        interpret(and_of_int, "*i32, i32", [out], 5)
    except tylo.CompileError as exc:
        assert "internal compiler error" not in exc.reason
        return
    assert list(out) == [1, 5]   # Python: (5 and True) is True, (5 or False) is 5


@tylo.jit
def divide(out, x, y):
    out[0] = x / y


def test_f11_interpreter_divides_by_negative_zero():
    out = np.zeros(1, np.float32)
    interpret(divide, "*f32, f32, f32", [out], 1.0, -0.0)
    assert out[0] == -np.inf


@tylo.jit
def int_abs_then_invert(out, x):
    a = abs(x)
    out[0] = a
    out[1] = ~a


def test_f12_interpreter_integer_abs_is_exact():
    out = np.zeros(2, np.int32)
    interpret(int_abs_then_invert, "*i32, i32", [out], -16777217)
    assert list(out) == [16777217, ~16777217]


@tylo.jit
def u64_to_bf16(out, a):
    out[0] = a.to(tylo.bf16)


def test_f13_interpreter_converts_large_unsigned_to_bf16():
    out = np.zeros(1, ml_dtypes.bfloat16)
    interpret(u64_to_bf16, "*bf16, u64", [out], 2**63 + 5)
    assert float(out[0]) == 2.0**63


# -- documented forms that tylo rejects ------------------------------------------------------------------
@tylo.jit
def bool_arithmetic(out, a, b):
    out[0] = (a > 0) // (b > 0)
    out[1] = (a > 0) % (b > 0)
    out[2] = (a > 0) // (b > 0) + (a > 0) % (b > 0)


def test_f14_floor_division_and_modulo_of_two_bools_give_i32():
    out = np.zeros(3, np.int32)
    interpret(bool_arithmetic, "*i32, i32, i32", [out], 1, 1)
    assert list(out) == [1, 0, 1]
    compile_all(bool_arithmetic, "*i32, i32, i32")


@tylo.jit
def store_into_bool(out, a, b):
    out[0] = a
    out[1] = b
    out[2] = 7


def test_f15_storing_an_int_into_a_bool_pointer_converts():
    out = np.array([False, True, False])
    interpret(store_into_bool, "*bool, i32, i64", [out], 7, 0)
    assert list(out) == [True, False, True]
    out = np.array([True, True, False])
    interpret(store_into_bool, "*bool, i32, i64", [out], 0, -(2**40))   # x != 0, not the low bits
    assert list(out) == [False, True, True]
    compile_all(store_into_bool, "*bool, i32, i64")


@tylo.jit
def typed_constants(out_f8, out_i):
    out_f8[0] = tylo.f8e4m3(1.5)
    out_f8[1] = tylo.f8e4m3(1000.0)    # saturates to 448
    out_f8[2] = tylo.cast(-1e6, tylo.f8e4m3)
    out_f8[3] = tylo.f8e4m3(17)        # an int rounds to nearest even: 16
    out_i[0] = tylo.i32(2.5)           # truncates toward zero
    out_i[1] = tylo.i32(-2.9)
    out_i[2] = tylo.i8(65504.0)        # saturates to 127
    out_i[3] = tylo.u8(-3.5)           # saturates to 0
    out_i[4] = tylo.i32(float("nan"))  # NaN gives 0
    out_i[5] = tylo.cast(1e20, tylo.i32)


def test_f16_dtype_conversion_of_a_python_constant_follows_the_conversion_rules():
    f8 = np.zeros(4, ml_dtypes.float8_e4m3fn)
    i = np.zeros(6, np.int32)
    interpret(typed_constants, "*f8e4m3, *i32", [f8, i])
    assert [float(v) for v in f8] == [1.5, 448.0, -448.0, 16.0]
    assert list(i) == [2, -2, 127, 0, 0, 2**31 - 1]
    for arch in ("sm_90a", "sm_100a"):
        typed_constants.compile(signature="*f8e4m3, *i32", arch=arch)
    with pytest.raises(tylo.CompileError) as err:   # fp8 conversions need sm_89: a clean error, not ICE
        typed_constants.compile(signature="*f8e4m3, *i32", arch="sm_80")
    assert "sm_89" in err.value.reason and "internal" not in err.value.reason


@tylo.jit
def mixed_sign_true_division(out, a, b, c, d):
    out[0] = a / b
    out[1] = c / d
    out[2] = a / 8
    out[3] = (a > 0) / (b > 0)


def test_f17_true_division_converts_each_int_operand_to_f32():
    # docs/language.md: "/ is true division: ints are converted to f32 first"; promoting first would
    # make i8 -20 the u8 236 and u64 / i32 -4 a division by 2**64 - 4
    out = np.zeros(4, np.float32)
    interpret(mixed_sign_true_division, "*f32, i8, u8, u64, i32", [out], -20, 4, 2**40, -4)
    assert list(out) == [-5.0, np.float32(2.0**40 / -4), -2.5, 0.0]
    compile_all(mixed_sign_true_division, "*f32, i8, u8, u64, i32")


def test_every_finding_is_fixed_or_open():
    from findings import FINDINGS, FIXED
    assert set(FIXED) <= set(FINDINGS)
    assert set(FINDINGS) - set(FIXED) <= {"F26"}   # F26 names a category (misc. invalid kernels that compile)
