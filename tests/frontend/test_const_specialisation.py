"""An int argument equal to 1 is specialised to a constant, but the kernel types it exactly as when it
is not 1 (found by scripts/fuzz_gpu.py on the H200: `n.to(tylo.f32)` failed with "int 1 has no
attribute 'to'" for launches with n == 1, and a loop-carried u8 mixed with n changed its type only then)."""
import numpy as np
import pytest

import tylo
from tylo.interpreter import run


@tylo.jit
def uses_n(out, x, n):
    v = n.to(tylo.f32)
    acc = tylo.i32(0)
    for _ in range(n):
        acc = acc + n
    out[0] = x[0] * v + acc.to(tylo.f32)


@tylo.jit
def u8_meets_n(out, n):
    acc = tylo.u8(0)
    for _ in range(n):
        acc = acc + n
    out[0] = acc


@pytest.mark.parametrize("spec,n", [("i32=1", 1), ("i32", 1), ("i32", 3)])
def test_the_specialised_one_types_like_any_int(spec, n):
    kernel_ir = uses_n.lower(f"*f32:16, *f32:16, {spec}", arch="sm_90a")
    x = np.array([2.5], np.float32)
    out = np.full(1, np.nan, np.float32)
    run(kernel_ir, [out, x, n], block=(1,))
    assert out[0] == np.float32(2.5 * n + n * n)
    assert uses_n.compile(f"*f32:16, *f32:16, {spec}", arch="sm_90a").resources.spill_store_bytes == 0


@pytest.mark.parametrize("spec", ["i32=1", "i32"])
def test_the_same_typing_error_with_and_without_the_specialisation(spec):
    with pytest.raises(tylo.CompileError, match="changes type across the loop back-edge: u8 before the loop, i32"):
        u8_meets_n.lower(f"*u8:16, {spec}", arch="sm_90a")
