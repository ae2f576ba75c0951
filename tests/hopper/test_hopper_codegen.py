"""Hopper kernel builtins compiled for sm_90a through llvmlite + nvJitLink (no GPU needed):
the intended PTX instructions are present, nothing goes to local memory, no spills."""
import re

import pytest

import tylo
import tylo.lang.mbarrier as mb
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo.ir.types import bf16

PLAN64 = wg.WGMMA64(bf16, n=64, k=16)
PLAN256 = wg.WGMMA64(bf16, n=256, k=16)
A_TILE = tma.TMATile(bf16, (64, 64), axis=1)


def _clean(ck):
    assert ".local" not in ck.ptx and "call.uni" not in ck.ptx
    assert ck.resources.spill_bytes == 0 and ck.resources.stack_bytes == 0
    assert ck.cubin[:4] == b"\x7fELF"


@tylo.jit
def barriers(out, n):
    bars = tylo.shared_array(tylo.u64, (2,))
    b = bars.ptr + 1
    if mb.elect_one():
        mb.mbarrier_init(bars.ptr, 1)
        mb.mbarrier_init(b, 128)
    mb.fence_mbarrier_init()
    mb.fence_view_async_shared()
    mb.fence_proxy_async()
    tylo.sync_threads()
    st = mb.mbarrier_arrive(b)
    st2 = mb.mbarrier_arrive_expect_tx(bars.ptr, 1024)
    mb.mbarrier_expect_tx(bars.ptr, 16)
    ok = mb.mbarrier_try_wait(b, 0)
    mb.mbarrier_wait(b, 0)
    mb.mbarrier_wait(bars.ptr, n & 1)
    mb.named_barrier_sync(1, 128)
    mb.named_barrier_arrive(2, 256)
    if mb.warpgroup_idx() == 0:
        mb.setmaxnreg_dec(40)
    else:
        mb.setmaxnreg_inc(232)
    if ok:
        out[tylo.thread_idx.x] = st + st2


def test_mbarrier_and_fences_assemble_for_sm90a():
    ck = barriers.compile(signature="*u64, i32", arch="sm_90a")
    ptx = ck.ptx
    for text in ("mbarrier.init.shared::cta.b64", "mbarrier.arrive.shared::cta.b64",
                 "mbarrier.arrive.expect_tx.shared::cta.b64", "mbarrier.expect_tx.relaxed.cta.shared::cta.b64",
                 "mbarrier.try_wait.parity.shared::cta.b64", "fence.mbarrier_init.release.cluster",
                 "fence.proxy.async.shared::cta", "fence.proxy.async;", "elect.sync",
                 "setmaxnreg.dec.sync.aligned.u32 40", "setmaxnreg.inc.sync.aligned.u32 232"):
        assert text in ptx, text
    assert len(re.findall(r"@!p bra TYLO_WAIT", ptx)) == 2  # two inlined wait loops assemble together
    assert re.search(r"bar\.sync\s+%r\d+, %r\d+", ptx) and re.search(r"bar\.arrive\s+%r\d+, %r\d+", ptx)
    _clean(ck)


@tylo.jit
def bad_barrier(out):
    bars = tylo.shared_array(tylo.u32, (2,))
    mb.mbarrier_init(bars.ptr, 1)


def test_barrier_pointer_type_is_checked():
    with pytest.raises(tylo.CompileError, match=r"\*shared u64 pointer"):
        bad_barrier.compile(signature="*u64", arch="sm_90a")


@tylo.jit
def bad_setmaxnreg(out):
    mb.setmaxnreg_inc(100)


def test_setmaxnreg_rules():
    with pytest.raises(tylo.CompileError, match="multiple of 8"):
        bad_setmaxnreg.compile(signature="*u64", arch="sm_90a")
    with pytest.raises(tylo.CompileError, match="architecture-specific"):
        bad_setmaxnreg.compile(signature="*u64", arch="sm_90")


@tylo.jit
def one_wgmma(out, da, db):
    acc = wg.zero_accumulators(32)
    acc = wg.wgmma_fence(acc)
    acc = wg.wgmma_mma_async(PLAN64, da, db, acc)
    wg.wgmma_commit_group()
    acc = wg.wgmma_wait_group(0, acc)
    for i in tylo.static_range(32):
        out[tylo.thread_idx.x * 32 + i] = acc[i]


def test_one_m64n64k16_wgmma():
    ck = one_wgmma.compile(signature="*f32, u64, u64", arch="sm_90a")
    ptx = ck.ptx
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16") == 1
    assert "wgmma.fence.sync.aligned" in ptx and "wgmma.commit_group.sync.aligned" in ptx
    assert "wgmma.wait_group.sync.aligned 0" in ptx
    _clean(ck)


@tylo.jit
def wgmma_loop(out, da, db, steps):
    acc = wg.zero_accumulators(128)
    for s in range(steps):
        acc = wg.wgmma_fence(acc)
        acc = wg.wgmma_mma_async(PLAN256, da + s * 2, db + s * 2, acc, scale_d=s > 0)
        wg.wgmma_commit_group()
        acc = wg.wgmma_wait_group(0, acc)
    for i in tylo.static_range(128):
        out[tylo.thread_idx.x * 128 + i] = acc[i]


def test_loop_carried_m64n256k16_accumulators_stay_in_registers():
    ck = wgmma_loop.compile(signature="*f32, u64, u64, i32", arch="sm_90a")
    # LLVM runtime-unrolls the loop (4x + remainder) until loops can carry no-unroll metadata
    assert ck.ptx.count("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16") >= 1
    _clean(ck)


@tylo.jit
def wgmma_sm90(out, da, db):
    acc = wg.wgmma_fence(wg.zero_accumulators(32))


def test_wgmma_needs_sm90a():
    with pytest.raises(tylo.CompileError, match="needs sm_90a"):
        wgmma_sm90.compile(signature="*f32, u64, u64", arch="sm_90")


@tylo.jit
def tma_copies(out, tmap, row):
    tile = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    bars = tylo.shared_array(tylo.u64, (1,))
    if tylo.thread_idx.x == 0:
        tma.prefetch_tma_descriptor(tmap)
        mb.mbarrier_init(bars.ptr, 1)
        mb.fence_view_async_shared()
        mb.mbarrier_arrive_expect_tx(bars.ptr, 8192)
        tma.tma_load_tile(A_TILE, tmap, tile, (row, 0), bars.ptr)
        tma.tma_load_tile(A_TILE, tmap, tile.ptr, (row, 64, 3), bars.ptr)
    mb.mbarrier_wait(bars.ptr, 0)
    if tylo.thread_idx.x == 0:
        tma.tma_store_tile(A_TILE, tmap, tile, (row, 0))
        tma.commit_tma_stores()
        tma.wait_tma_reads(0)
        tma.wait_tma_stores(1)


def test_tma_loads_and_stores_assemble():
    ck = tma_copies.compile(signature="*f32, u64, i32", arch="sm_90a")
    ptx = ck.ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in ptx
    assert "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in ptx
    assert "cp.async.bulk.commit_group" in ptx
    assert "cp.async.bulk.wait_group.read 0" in ptx and "cp.async.bulk.wait_group 1" in ptx
    assert "prefetch.tensormap" in ptx
    _clean(ck)


@tylo.jit
def tma_misaligned(out, tmap, row):
    tile = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    bars = tylo.shared_array(tylo.u64, (1,))
    tma.tma_load_tile(A_TILE, tmap, tile, (row, 4), bars.ptr)


def test_tma_inner_origin_must_start_a_chunk():
    with pytest.raises(tylo.CompileError, match="16-byte chunk"):
        tma_misaligned.compile(signature="*f32, u64, i32", arch="sm_90a")
