"""tcgen05 kernels assembled for sm_100a through nvJitLink (no Blackwell GPU runs them).

Checks the PTX holds exactly the intended instructions with the intended counts,
no local memory, no calls, and that ptxas reports zero spills.
"""
import re

import pytest

import tylo
from tylo.ir.types import bf16, f8e4m3, f8e5m2, f16, f32, i8, i32, u8
from tylo.lang import tcgen05 as tc
from tylo.lang.tcgen05 import Tcgen05MMA
from tylo.lang.tmem import ATOMS, TmemTile, TmemTransfer, partition
from tylo.layouts import Layout, window


def _clean(ck):
    assert ".local" not in ck.ptx and "call.uni" not in ck.ptx and "call " not in ck.ptx
    assert ck.resources.spill_bytes == 0 and ck.resources.stack_bytes == 0


def _access(atom, num, dtype):
    a = ATOMS[atom]
    per = 1 if dtype.bits == 32 else 2
    words = 2 * num if atom == "16x32bx2" else a.words * num
    tile = TmemTile(dtype, 0, Layout((128, 512 * per), (1, 128)))
    shape = (a.lanes, words * per)
    return partition(TmemTransfer(shape, axis=1, atom=atom), window(tile, (32, 0), shape))


@tylo.jit
def ld_st(out, ATOM: tylo.constexpr, NUM: tylo.constexpr, DT: tylo.constexpr):
    acc = _access(ATOM, NUM, DT)
    slot = tylo.shared_array(tylo.u32, 1)
    tc.tmem_alloc(512, slot)
    tc.tmem_relinquish_alloc_permit()
    tylo.sync_threads()
    tc.fence_after_thread_sync()
    base = slot[0]
    pending = tc.load_async(acc, base)
    done = tc.wait_load(pending)
    regs = done.words if DT.bits == 16 else done.values  # a PackedFragment for 16-bit tiles
    s = regs[0]
    for r in regs[1:]:
        s = s + r
    out[tylo.thread_idx.x] = tylo.cast(s, tylo.f32)
    tc.store_async(acc, regs, base)
    tc.wait_stores()
    tc.fence_before_thread_sync()
    tylo.sync_threads()
    tc.tmem_dealloc(base, 512)


CASES = [(atom, num) for atom, a in ATOMS.items() for num in (1, 2, 4, 8, 16, 32, 64, 128) if num <= a.max_num]


@pytest.mark.parametrize("atom, num", CASES)
def test_every_transfer_shape_and_width(atom, num):
    ck = ld_st.compile(signature="*f32", arch="sm_100a", constexprs={"ATOM": atom, "NUM": num, "DT": f32})
    ptx = ck.ptx
    regs = ATOMS[atom].regs * num
    lds = re.findall(rf"tcgen05\.ld\.sync\.aligned\.{atom}\.x{num}\.b32 \{{([^}}]*)\}}, \[%r\d+\](, \d+)?;", ptx)
    sts = re.findall(rf"tcgen05\.st\.sync\.aligned\.{atom}\.x{num}\.b32 \[%r\d+\](, \d+)?, \{{([^}}]*)\}};", ptx)
    assert len(lds) == 1 and len(sts) == 1
    assert len(lds[0][0].split(",")) == regs and len(sts[0][1].split(",")) == regs
    if atom == "16x32bx2":
        assert lds[0][1] == f", {num}" and sts[0][0] == f", {num}"
    assert ptx.count("tcgen05.wait::ld.sync.aligned;") == 1 and ptx.count("tcgen05.wait::st.sync.aligned;") == 1
    assert ptx.count("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32") == 1
    assert ptx.count("tcgen05.dealloc.cta_group::1.sync.aligned.b32") == 1
    assert ptx.count("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;") == 1
    assert ptx.count("tcgen05.fence::before_thread_sync;") == 1 and ptx.count("tcgen05.fence::after_thread_sync;") == 1
    # the wait comes after the load and before the first use of the registers
    assert ptx.index("tcgen05.ld.") < ptx.index("tcgen05.wait::ld") < ptx.index("st.global")
    _clean(ck)


def test_packed_bf16_load():
    ck = ld_st.compile(signature="*f32", arch="sm_100a", constexprs={"ATOM": "32x32b", "NUM": 32, "DT": bf16})
    assert "tcgen05.ld.sync.aligned.32x32b.x32.b32" in ck.ptx and ".pack::16b" not in ck.ptx
    _clean(ck)


def test_tcgen05_needs_sm100a():
    with pytest.raises(tylo.CompileError, match="needs sm_100a"):
        ld_st.compile(signature="*f32", arch="sm_90a", constexprs={"ATOM": "32x32b", "NUM": 1, "DT": f32})


MMAS = [
    Tcgen05MMA((128, 256), bf16, bf16, f32),
    Tcgen05MMA((64, 64), f16, f16, f16),
    Tcgen05MMA((128, 128), f32, f32, f32),
    Tcgen05MMA((128, 256), f8e4m3, f8e5m2, f32),
    Tcgen05MMA((128, 64), i8, u8, i32),
    Tcgen05MMA((256, 256), bf16, bf16, f32),
]


@tylo.jit
def mma_kernel(descs, out, PLAN: tylo.constexpr, A_TMEM: tylo.constexpr):
    slot = tylo.shared_array(tylo.u32, 1)
    bar = tylo.shared_array(tylo.u64, 1)
    tc.tmem_alloc(256, slot, PLAN.cta_group)
    tylo.sync_threads()
    tc.fence_after_thread_sync()
    d = slot[0]
    if tylo.thread_idx.x == 0:
        a = d + 256 if A_TMEM else descs[0]
        tc.tcgen05_mma(PLAN, d, a, descs[1], False, A_TMEM)
        tc.tcgen05_mma(PLAN, d, a, descs[1] + 2, True, A_TMEM)
        tc.tcgen05_commit(bar, PLAN.cta_group)
    tc.fence_before_thread_sync()
    tylo.sync_threads()
    out[0] = d


@pytest.mark.parametrize("plan", MMAS, ids=lambda p: f"{p.kind}-m{p.m}n{p.n}-cg{p.cta_group}")
def test_every_mma_kind(plan):
    ck = mma_kernel.compile(signature="*u64, *u32", arch="sm_100a", constexprs={"PLAN": plan, "A_TMEM": False})
    ptx = ck.ptx
    pat = rf"{re.escape(plan.instruction)} \[%r\d+\], %rd\d+, %rd\d+, %r\d+, %?p\w*;"
    assert len(re.findall(pat, ptx)) == 2, ptx
    assert str(plan.idesc) in ptx or hex(plan.idesc)[2:] in ptx.lower()
    cg = plan.cta_group
    assert ptx.count(f"tcgen05.commit.cta_group::{cg}.mbarrier::arrive::one.shared::cluster.b64") == 1
    _clean(ck)


def test_mma_with_a_in_tmem():
    plan = Tcgen05MMA((128, 256), bf16, bf16, f32)
    ck = mma_kernel.compile(signature="*u64, *u32", arch="sm_100a", constexprs={"PLAN": plan, "A_TMEM": True})
    assert len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], \[%r\d+\], %rd\d+, %r\d+", ck.ptx)) == 2
    _clean(ck)


@tylo.jit
def bad_columns(out):
    slot = tylo.shared_array(tylo.u32, 1)
    tc.tmem_alloc(48, slot)


def test_alloc_columns_rule_is_a_compile_error():
    with pytest.raises(tylo.CompileError, match="power of two in 32..512"):
        bad_columns.compile(signature="*f32", arch="sm_100a")
