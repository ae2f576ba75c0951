"""Codegen through llvmlite and nvJitLink for sm_80, sm_90a and sm_100a, with assertions on the PTX."""
import re

import pytest
from simt_kernels import GOLDEN, loops, shared_atomics

import tylo
from tylo.codegen import TARGETS, get_target

ARCHS = ["sm_80", "sm_90a", "sm_100a"]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_kernels_assemble(arch, name):
    kernel, signature, constexprs = GOLDEN[name]
    ck = kernel.compile(signature=signature, arch=arch, constexprs=constexprs)
    t = get_target(arch)
    assert f".target {arch}" in ck.ptx
    assert f".version {t.ptx_isa}" in ck.ptx
    assert f".entry {name}(" in ck.ptx
    assert ".local" not in ck.ptx and "call.uni" not in ck.ptx
    assert len(ck.cubin) > 0 and ck.cubin[:4] == b"\x7fELF"
    assert ck.resources.registers > 0 and ck.resources.spill_bytes == 0 and ck.resources.stack_bytes == 0


def test_target_table_is_complete():
    assert set(TARGETS) == {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_120a"}
    assert get_target("sm_90a").ptx_version >= 80 and get_target("sm_100a").ptx_version >= 86


def test_saxpy_ptx_is_the_expected_instructions():
    ck = GOLDEN["saxpy"][0].compile(signature="*f32:16, *f32:16, *f32:16, f32, i32", arch="sm_90a",
                                    constexprs={"BLOCK": 256}, block=256)
    ptx = ck.ptx
    assert ".maxntid 256, 1, 1" in ptx
    assert ".align 16" in ptx  # 16-byte aligned pointer parameters
    assert len(re.findall(r"ld\.global", ptx)) == 2 and len(re.findall(r"st\.global", ptx)) == 1
    assert re.search(r"(fma\.rn\.f32|mul\.rn\.f32)", ptx)


def test_warp_reduction_emits_five_butterfly_shuffles():
    ck = GOLDEN["helpers"][0].compile(signature="*f32, *f32, i32", arch="sm_80")
    assert len(re.findall(r"shfl\.sync\.bfly\.b32", ck.ptx)) == 5


def test_shared_memory_and_atomics():
    ck = shared_atomics.compile(signature="*i32, *i32, *f32, i32", arch="sm_90a", constexprs={"BLOCK": 128})
    assert "bar.sync 0" in ck.ptx
    assert re.search(r"atom\.shared(\.\w+)*\.add\.(u32|s32)", ck.ptx)
    assert re.search(r"atom\.global(\.\w+)*\.max\.s32", ck.ptx)
    assert ck.shared_bytes == 16  # four i32 in dynamic shared memory, set on the launch


def test_loop_with_break_is_a_single_loop_without_local_memory():
    ck = loops.compile(signature="*f32, *f32, i32, i32", arch="sm_90a")
    assert ".local" not in ck.ptx and ck.resources.spill_bytes == 0


@tylo.jit
def fp8_roundtrip(out, x, n):
    i = tylo.thread_idx.x
    if i < n:
        out[i] = x[i].to(tylo.f8e4m3).to(tylo.f32) + x[i].to(tylo.f8e5m2).to(tylo.f32)


def test_fp8_conversions_use_cvt_and_need_sm89():
    ck = fp8_roundtrip.compile(signature="*f32, *f32, i32", arch="sm_90a")
    assert "cvt.rn.satfinite.e4m3x2.f32" in ck.ptx and "cvt.rn.f16x2.e5m2x2" in ck.ptx
    with pytest.raises(tylo.CompileError, match="needs sm_89 or newer"):
        fp8_roundtrip.compile(signature="*f32, *f32, i32", arch="sm_80")


@tylo.jit
def math_fns(out, x, n):
    i = tylo.thread_idx.x
    if i < n:
        v = x[i]
        out[i] = tylo.exp(v) + tylo.exp2(v) + tylo.log(tylo.abs(v) + 1.0) + tylo.sqrt(tylo.abs(v)) + \
            tylo.rsqrt(tylo.abs(v) + 1.0) + tylo.fma(v, v, 1.0) + tylo.log2(tylo.abs(v) + 2.0)


def test_math_functions_lower_to_hardware_instructions():
    ptx = math_fns.compile(signature="*f32, *f32, i32", arch="sm_90a").ptx
    for instr in ("ex2.approx.f32", "lg2.approx.f32", "sqrt.rn.f32", "rsqrt.approx.f32", "fma.rn.f32"):
        assert instr in ptx, instr


@tylo.jit
def half_math(out, x, n):
    i = tylo.thread_idx.x
    if i < n:
        out[i] = x[i] * 2 + tylo.exp(x[i])


@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_half_precision_kernels(dt):
    ck = half_math.compile(signature=f"*{dt}, *{dt}, i32", arch="sm_90a")
    assert "ex2.approx.f32" in ck.ptx and ck.resources.spill_bytes == 0


@tylo.jit
def f64_kernel(out, x, n):
    i = tylo.thread_idx.x
    if i < n:
        out[i] = tylo.sqrt(x[i]) * 2.0 + x[i] // 3.0


def test_f64():
    ptx = f64_kernel.compile(signature="*f64, *f64, i32", arch="sm_80").ptx
    assert "sqrt.rn.f64" in ptx and "div.rn.f64" in ptx


def test_a_codegen_failure_points_at_the_source_line(monkeypatch):
    from tylo.codegen import llvm

    def broken(self, op):
        raise ValueError("simulated lowering bug")

    monkeypatch.setattr(llvm._Lowering, "op_nv_barrier", broken)
    from simt_kernels import shared_atomics
    with pytest.raises(tylo.CompileError) as info:
        shared_atomics.compile(signature="*i32, *i32, *f32, i32", arch="sm_80", constexprs={"BLOCK": 64})
    err = info.value
    assert "internal compiler error" in err.reason and "nv.barrier" in err.reason
    assert err.filename.endswith("simt_kernels.py") and "sync_threads" in err.source_line
