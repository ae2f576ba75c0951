"""Compile tests (no GPU): mma.sync per atom, ldmatrix/stmatrix, cp.async; PTX and resources."""
import dataclasses
import re

import pytest
import warp_kernels as wk

import tylo
import tylo.lang.copy as cp
import tylo.lang.mma as mma
from tylo.codegen import targets
from tylo.codegen.ptx.mma import mma_opcode
from tylo.ir.types import bf16, f32

FP8 = [a for a in mma.MMA_ATOMS if a.min_sm == 89]
NON_FP8 = [a for a in mma.MMA_ATOMS if a.min_sm < 89]


def _sig(atom):
    ab = "*f32" if atom.a_dtype is mma.tf32 else "*u32"
    c = {"f32": "*f32", "i32": "*i32", "f16": "*u32"}[atom.acc_dtype.name]
    return f"{c}, {ab}, {ab}, {c}"


def _clean(ck):
    assert ".local" not in ck.ptx and "call.uni" not in ck.ptx
    assert ck.resources.spill_bytes == 0 and ck.resources.stack_bytes == 0
    assert ck.cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("atom", NON_FP8, ids=str)
def test_mma_atom_compiles_sm80(atom):
    ck = wk.mma_once.compile(signature=_sig(atom), arch="sm_80", constexprs={"ATOM": atom})
    assert len(re.findall(re.escape(mma_opcode(atom.shape, atom.types)) + r"\s", ck.ptx)) == 1
    assert "nv.mma.sync" in ck.ir
    _clean(ck)


@pytest.mark.parametrize("atom", FP8, ids=str)
def test_fp8_atom_compiles_sm100a(atom):
    ck = wk.mma_once.compile(signature=_sig(atom), arch="sm_100a", constexprs={"ATOM": atom})
    assert mma_opcode(atom.shape, atom.types) in ck.ptx
    _clean(ck)


@pytest.mark.parametrize("arch", ["sm_89", "sm_90a"])
def test_fp8_needs_ptx84(arch, monkeypatch):
    atom = FP8[0]
    if targets.get_target(arch).ptx_version >= 84:
        pytest.skip("the target table already emits PTX 8.4+")
    with pytest.raises(ValueError, match="fp8 mma.sync needs PTX ISA 8.4"):
        wk.mma_once.compile(signature=_sig(atom), arch=arch, constexprs={"ATOM": atom})
    # with the target raised to PTX 8.4 the same kernel assembles for sm_89 / sm_90a
    monkeypatch.setitem(targets.TARGETS, arch, dataclasses.replace(targets.TARGETS[arch], ptx_version=84))
    ck = wk.mma_once.compile(signature=_sig(atom), arch=arch, constexprs={"ATOM": atom})
    assert mma_opcode(atom.shape, atom.types) in ck.ptx and ".version 8.4" in ck.ptx
    _clean(ck)


def test_fp8_on_sm80_is_a_compile_error():
    with pytest.raises(tylo.CompileError, match="needs sm_89 or newer"):
        wk.mma_once.compile(signature=_sig(FP8[0]), arch="sm_80", constexprs={"ATOM": FP8[0]})


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_mma_loop_keeps_accumulators_in_registers(arch):
    atom = mma.MMAAtom((16, 8, 16), bf16, bf16, f32)
    ck = wk.mma_loop.compile(signature="*f32, *u32, *u32, i32", arch=arch, constexprs={"ATOM": atom})
    assert mma_opcode(atom.shape, atom.types) in ck.ptx
    _clean(ck)


BF16 = mma.MMAAtom((16, 8, 16), bf16, bf16, f32)


@tylo.jit
def bad_count(out, pa):
    x = pa[0]
    d = mma.mma_sync(BF16, (x, x, x), (x, x), (1.0, 1.0, 1.0, 1.0))
    out[0] = d[0]


@tylo.jit
def bad_type(out, pa, pc):
    x = pa[0]
    y = pc[0]
    d = mma.mma_sync(BF16, (x, x, x, x), (x, x), (x, y, y, y))
    out[0] = d[0]


@tylo.jit
def bad_ab_type(out, pc):
    y = pc[0]
    d = mma.mma_sync(BF16, (y, y, y, y), (y, y), (y, y, y, y))
    out[0] = d[0]


@tylo.jit
def bad_atom(out, pa):
    x = pa[0]
    d = mma.mma_sync("m16n8k16", (x,), (x,), (x,))


def test_mma_type_errors():
    with pytest.raises(tylo.CompileError, match=r"mma_sync: mma\.m16n8k16\.bf16\.bf16\.f32 takes 4 a registers per thread, got 3"):
        bad_count.compile(signature="*f32, *u32", arch="sm_80")
    with pytest.raises(tylo.CompileError, match=r"mma_sync: c\[0\] of .* is u32; expected f32"):
        bad_type.compile(signature="*f32, *u32, *f32", arch="sm_80")
    with pytest.raises(tylo.CompileError, match=r"mma_sync: a\[0\] of .* is f32; expected u32 or i32"):
        bad_ab_type.compile(signature="*f32, *f32", arch="sm_80")
    with pytest.raises(tylo.CompileError, match="must be a compile-time MMAAtom"):
        bad_atom.compile(signature="*f32, *u32", arch="sm_80")


# -- copies -----------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_and_cp_async_compile(arch, num, trans):
    store = arch == "sm_90a"
    ck = wk.ldmatrix_roundtrip.compile(signature="*u32, *u16, *u16", arch=arch,
                                       constexprs={"NUM": num, "TRANS": trans, "STORE": store})
    t = ".trans" if trans else ""
    assert f"ldmatrix.sync.aligned.m8n8.x{num}{t}.shared.b16" in ck.ptx
    assert (f"stmatrix.sync.aligned.m8n8.x{num}{t}.shared.b16" in ck.ptx) == store
    assert re.search(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16;", ck.ptx)
    assert "cp.async.commit_group;" in ck.ptx and "cp.async.wait_group 0;" in ck.ptx
    _clean(ck)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("nbytes", [4, 8, 16])
def test_cp_async_zero_fill_compiles(arch, nbytes):
    ck = wk.cp_async_zfill.compile(signature="*u32, *u32", arch=arch, constexprs={"NBYTES": nbytes})
    cache = "cg" if nbytes == 16 else "ca"
    assert len(re.findall(rf"cp\.async\.{cache}\.shared\.global \[%r\d+\], \[%rd\d+\], {nbytes}, %r\d+;", ck.ptx)) == 2
    assert "cp.async.wait_group 1;" in ck.ptx and "cp.async.wait_group 0;" in ck.ptx
    # the wait stays between the copies and the shared loads after it
    assert ck.ptx.index("cp.async.wait_group 0;") < ck.ptx.rindex("ld.shared")
    _clean(ck)


@tylo.jit
def stmatrix_sm80(p):
    s = tylo.shared_array(tylo.f16, (32, 8))
    x = p[0]
    cp.stmatrix(s.ptr, (x,))


@tylo.jit
def ldmatrix_global(p):
    r = cp.ldmatrix(p, 4)


@tylo.jit
def ldmatrix_f32(p):
    s = tylo.shared_array(tylo.f32, (32, 8))
    r = cp.ldmatrix(s.ptr, 4)


@tylo.jit
def ldmatrix_num3(p):
    s = tylo.shared_array(tylo.f16, (32, 8))
    r = cp.ldmatrix(s.ptr, 3)


@tylo.jit
def cg_8_bytes(p):
    s = tylo.shared_array(tylo.f16, (32, 8))
    cp.cp_async(s.ptr, p, 8, None, "cg")


@tylo.jit
def cp_async_swapped(p):
    s = tylo.shared_array(tylo.f16, (32, 8))
    cp.cp_async(p, s.ptr, 16)


@tylo.jit
def wait_runtime(p, n):
    cp.wait_copies(n)


@pytest.mark.parametrize("kernel,sig,msg", [
    (stmatrix_sm80, "*u32", "stmatrix needs sm_90 or newer"),
    (ldmatrix_global, "*f16", "ldmatrix reads and writes shared memory only"),
    (ldmatrix_f32, "*f16", "ldmatrix moves 16-bit elements"),
    (ldmatrix_num3, "*f16", "num must be a compile-time 1, 2 or 4"),
    (cg_8_bytes, "*f16", "cp.async.cg copies 16 bytes only"),
    (cp_async_swapped, "*f16", "dst must be a shared-memory pointer"),
    (wait_runtime, "*f16, i32", "wait_copies: n must be a compile-time integer"),
])
def test_copy_errors(kernel, sig, msg):
    with pytest.raises(tylo.CompileError, match=re.escape(msg)):
        kernel.compile(signature=sig, arch="sm_80")
