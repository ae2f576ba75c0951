"""tylo.device_assert and runtime asserts: checked in debug compiles (print file:line and the
message, then trap), no code at all otherwise; compile-time conditions are checked at compile time."""
import os
import re

import numpy as np
import pytest

import tylo
from tylo.interpreter import InterpreterError, run

HERE = os.path.abspath(__file__)
SIG = "*f32:16, *f32:16, i32"


def marker_line(name):
    with open(HERE) as f:
        for n, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# LINE:{name}"):
                return n
    raise AssertionError(name)


def checked(x, out, n):
    i = tylo.thread_idx.x
    tylo.device_assert(i < n, "i < n, 100% sure")  # LINE:device_assert
    assert x[i] > 0.0, "x must be positive"  # LINE:assert
    out[i] = x[i]


def unchecked(x, out, n):  # the same lines as `checked` without the asserts
    i = tylo.thread_idx.x
    pass
    pass
    out[i] = x[i]


def printf_strings(ptx):
    """The vprintf format strings of a PTX module, decoded from their .global byte arrays."""
    arrays = re.findall(r"\.global \.align 1 \.b8 \S+\[\d+\] = \{([\d, ]+)\};", ptx)
    return [bytes(int(b) for b in a.split(",")).rstrip(b"\0").decode() for a in arrays]


def relative(ptx, fn):
    """PTX with the kernel's name replaced and its .loc lines counted from the function's first line."""
    first = fn.__code__.co_firstlineno

    def shift(m):
        line = int(m.group(2))
        return f"{m.group(1)}{line - first if line else 0}{m.group(3)}"
    return re.sub(r"(\.loc\s+\d+\s+)(\d+)(\s)", shift, ptx.replace(fn.__name__, "K"))


@pytest.mark.parametrize("lineinfo", [False, True])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_off_by_default_and_free(arch, lineinfo):
    a = tylo.jit(lineinfo=lineinfo)(checked).compile(SIG, arch=arch)
    b = tylo.jit(lineinfo=lineinfo)(unchecked).compile(SIG, arch=arch)
    assert "nv.assert" not in a.ir and "trap" not in a.ptx and "vprintf" not in a.ptx
    if not lineinfo:
        assert a.ptx.replace("checked", "K") == b.ptx.replace("unchecked", "K")  # byte for byte
    else:  # the same, line for line, counted from each kernel's first line
        assert relative(a.ptx, checked) == relative(b.ptx, unchecked)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_debug_prints_location_and_message_then_traps(arch):
    ck = tylo.jit(debug=True)(checked).compile(SIG, arch=arch)
    assert ck.ir.count("nv.assert") == 2
    assert ck.ptx.count("trap;") == 2 and "vprintf" in ck.ptx
    formats = printf_strings(ck.ptx)
    assert (f"{HERE}:{marker_line('device_assert')}: block [%d,%d,%d], thread [%d,%d,%d]: device assertion failed: "
            f"i < n, 100%% sure\n") in formats
    assert f"{HERE}:{marker_line('assert')}: block [%d,%d,%d], thread [%d,%d,%d]: device assertion failed: " \
           f"x must be positive\n" in formats
    assert ck.resources.spill_bytes == 0


def test_knob_turns_debug_on_and_enters_the_key(monkeypatch):
    kernel = tylo.jit(checked)
    off = kernel.compile(SIG, arch="sm_90a")
    monkeypatch.setenv("TYLO_DEBUG", "1")
    on = kernel.compile(SIG, arch="sm_90a")
    explicit = tylo.jit(debug=True)(checked).compile(SIG, arch="sm_90a")
    assert off.key != on.key and "trap;" in on.ptx and "trap;" not in off.ptx
    assert on.ptx == explicit.ptx
    # an explicit option wins over the knob
    assert "trap;" not in tylo.jit(debug=False)(checked).compile(SIG, arch="sm_90a").ptx


def test_interpreter_names_file_line_and_message():
    ir = tylo.jit(debug=True)(checked).lower(SIG, arch="sm_90a")
    x = np.array([1.0, 2.0, -3.0, 4.0], np.float32)
    out = np.zeros(4, np.float32)
    run(ir, [x[:2].copy(), out, 2], block=(2, 1, 1))  # every check holds
    with pytest.raises(InterpreterError, match=rf"{re.escape(HERE)}:{marker_line('assert')}: "
                                               r"device assertion failed: x must be positive \(block \(0, 0, 0\), "
                                               r"thread \(2, 0, 0\)\)"):
        run(ir, [x, out, 4], block=(4, 1, 1))
    with pytest.raises(InterpreterError, match=rf":{marker_line('device_assert')}: .*i < n, 100% sure"):
        run(ir, [np.ones(4, np.float32), out, 3], block=(4, 1, 1))


def test_interpreted_launch_keeps_debug_asserts():
    """``jit(interpret=True, debug=True)`` interprets the kernel as the debug GPU build is compiled: with its
    asserts (they were dropped before); without ``debug`` the same launch runs through."""
    x = np.array([1.0, 2.0, -3.0, 4.0], np.float32)
    with pytest.raises(InterpreterError, match=rf":{marker_line('assert')}: device assertion failed: x must be "
                                               r"positive"):
        tylo.jit(interpret=True, debug=True)(checked)[1, 4](x, np.zeros(4, np.float32), 4)
    out = np.full(4, np.nan, np.float32)
    tylo.jit(interpret=True, debug=False)(checked)[1, 4](x, out, 4)
    assert not np.isnan(out).any()


def test_compile_time_conditions_are_checked_at_compile_time():
    @tylo.jit(debug=True)
    def fine(out, n: tylo.constexpr):
        tylo.device_assert(n > 0, "n positive")
        assert n > 0
        out[0] = 1.0

    assert "nv.assert" not in fine.compile("*f32", constexprs={"n": 4}, arch="sm_80").ir
    for debug in (False, True):
        @tylo.jit(debug=debug)
        def bad_device_assert(out, n: tylo.constexpr):
            tylo.device_assert(n > 0, "n positive")

        with pytest.raises(tylo.CompileError, match=r"test_device_assert.py:\d+:\d+: .*assertion failed: n positive"):
            bad_device_assert.compile("*f32", constexprs={"n": 0}, arch="sm_80")

        @tylo.jit(debug=debug)
        def bad_assert(out, n: tylo.constexpr):
            assert n > 0, "need n > 0"

        with pytest.raises(tylo.CompileError, match="assertion failed: need n > 0"):
            bad_assert.compile("*f32", constexprs={"n": 0}, arch="sm_80")

    @tylo.jit
    def static(out, n: tylo.constexpr):
        tylo.static_assert(n > 0, "static")

    with pytest.raises(tylo.CompileError, match="static_assert failed: static"):
        static.compile("*f32", constexprs={"n": 0}, arch="sm_80")


def test_bad_assert_arguments_are_compile_errors():
    @tylo.jit(debug=True)
    def float_cond(x):
        tylo.device_assert(x[0], "float")

    with pytest.raises(tylo.CompileError, match="bool or integer condition, got a runtime f32"):
        float_cond.compile("*f32", arch="sm_80")

    @tylo.jit(debug=True)
    def runtime_message(x, n):
        assert n > 0, n

    with pytest.raises(tylo.CompileError, match="message must be a compile-time string"):
        runtime_message.compile("*f32, i32", arch="sm_80")

    @tylo.jit(debug=True)
    def int_cond(x, n):
        tylo.device_assert(n, "n nonzero")

    assert "nv.assert" in int_cond.compile("*f32, i32", arch="sm_80").ir


def test_debug_option_must_be_a_bool():
    with pytest.raises(TypeError, match="debug"):
        tylo.jit(debug=1)(checked)


@tylo.func
def checked_load(p, i, n):
    tylo.device_assert(i < n, "helper bound")  # LINE:helper_assert
    return p[i]


def via_helper(x, out, n):
    i = tylo.thread_idx.x
    out[i] = checked_load(x, i, n)  # LINE:helper_call


def test_assert_in_a_helper_names_the_helper_line_and_the_kernel_line_that_inlined_it():
    where = f"{HERE}:{marker_line('helper_assert')} (inlined at {HERE}:{marker_line('helper_call')})"
    on = tylo.jit(debug=True)(via_helper).compile(SIG, arch="sm_90a")
    assert any(f.startswith(f"{where}: ") and f.endswith("helper bound\n") for f in printf_strings(on.ptx))
    with pytest.raises(InterpreterError, match=re.escape(f"{where}: device assertion failed: helper bound")):
        run(tylo.jit(debug=True)(via_helper).lower(SIG, arch="sm_90a"),
            [np.ones(4, np.float32), np.zeros(4, np.float32), 3], block=(4, 1, 1))
    off = tylo.jit(via_helper).compile(SIG, arch="sm_90a")
    assert "nv.assert" not in off.ir and "trap;" not in off.ptx
