"""On an sm_90 GPU: TMA loads through an mbarrier land where shared_layout says, out-of-bounds
elements are zero, and one warpgroup's m64n64k16 WGMMAs on TMA tiles give A @ B.T.

The tensor map travels as the address of a device copy of the descriptor (a u64
parameter) until the JIT passes TMABindings as grid-constant parameters.
"""
import numpy as np
import pytest

import tylo
import tylo.lang.mbarrier as mb
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo.ir import types as T
from tylo.layouts import ownership_table, swizzled_structure

pytestmark = pytest.mark.gpu


def _sm90():
    from tylo.runtime import compute_capability
    if compute_capability() < (9, 0):
        pytest.skip("needs sm_90")


@tylo.jit
def tma_probe(out, tmap: tylo.u64, r0: tylo.i32, c0: tylo.i32, PLAN: tylo.constexpr, N: tylo.constexpr,
              BYTES: tylo.constexpr):
    tile = tylo.shared_array(PLAN.dtype, (N,), align=1024)
    bars = tylo.shared_array(tylo.u64, (1,))
    tid = tylo.thread_idx.x
    if tid == 0:
        mb.mbarrier_init(bars.ptr, 1)
        mb.fence_view_async_shared()
    mb.named_barrier_sync(0, 128)   # convergent (sync_threads' asm may be tail-duplicated)
    if tid == 0:
        mb.mbarrier_arrive_expect_tx(bars.ptr, BYTES)
        tma.tma_load_tile(PLAN, tmap, tile, (r0, c0), bars.ptr)
    mb.mbarrier_wait(bars.ptr, 0)
    for i in range(tid, N, 128):
        out[i] = tile[i]


def _descriptor_on_device(binding):
    import tylo.runtime as rt
    return rt.to_device(np.frombuffer(binding.descriptor, dtype=np.uint8).copy())


@pytest.mark.parametrize("plan", [tma.TMATile(T.bf16, (128, 64), axis=1),
                                  tma.TMATile(T.f32, (16, 64), axis=0, swizzle=64),
                                  tma.TMATile(T.u8, (64, 32), axis=1, swizzle=32),
                                  tma.TMATile(T.bf16, (32, 16), axis=0, swizzle=64),
                                  tma.TMATile(T.f32, (8, 16), axis=1, swizzle=64)], ids=repr)
def test_tma_load_matches_shared_layout(plan):
    _sm90()
    import tylo.runtime as rt
    rng = np.random.default_rng(0)
    npdt = rt.numpy_dtype(plan.dtype.name)
    # array: (outer extent, inner extent) row-major; logical coordinate (c0, c1) per plan axes
    arr_shape = (3 * plan.outer + 5, 2 * plan.inner)
    host = (rng.integers(1, 100, size=arr_shape)).astype(npdt)
    x = rt.to_device(host)
    binding = tylo.prepare_tma(plan, x)
    dmap = _descriptor_on_device(binding)
    n = int(np.prod(plan.shape))
    L = tma.shared_layout(plan)
    for origin in [(0, 0), (plan.outer, plan.inner), (3 * plan.outer, plan.inner)]:  # last: past the edge
        o_outer, o_inner = origin
        logical = [0, 0]
        logical[1 - plan.axis], logical[plan.axis] = o_outer, o_inner
        out = rt.to_device(np.full(n, 77, dtype=npdt))
        tma_probe[1, 128](out, dmap.ptr, logical[0], logical[1], plan, n, tma.transfer_bytes(plan))
        got = out.to_host()
        for r in range(plan.outer):
            for c in range(plan.inner):
                coord = [0, 0]
                coord[1 - plan.axis], coord[plan.axis] = r, c
                gr, gc = o_outer + r, o_inner + c
                want = host[gr, gc] if gr < arr_shape[0] else 0
                assert got[L(tuple(coord))] == want, (origin, r, c)


@tylo.jit
def wgmma_probe(out, ta: tylo.u64, tb: tylo.u64, desc_hi: tylo.u64, PLAN: tylo.constexpr, TILE: tylo.constexpr):
    a = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    b = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    bars = tylo.shared_array(tylo.u64, (1,))
    tid = tylo.thread_idx.x
    if tid == 0:
        mb.mbarrier_init(bars.ptr, 1)
        mb.fence_view_async_shared()
    mb.named_barrier_sync(0, 128)   # convergent (sync_threads' asm may be tail-duplicated)
    if tid == 0:
        mb.mbarrier_arrive_expect_tx(bars.ptr, 16384)
        tma.tma_load_tile(TILE, ta, a, (0, 0), bars.ptr)
        tma.tma_load_tile(TILE, tb, b, (0, 0), bars.ptr)
    mb.mbarrier_wait(bars.ptr, 0)
    da = desc_hi + (wg.shared_address(a).to(tylo.u64) >> 4)
    db = desc_hi + (wg.shared_address(b).to(tylo.u64) >> 4)
    acc = wg.zero_accumulators(32)
    acc = wg.wgmma_fence(acc)
    for kk in tylo.static_range(4):
        acc = wg.wgmma_mma_async(PLAN, da + 2 * kk, db + 2 * kk, acc)   # +32 bytes along K
    wg.wgmma_commit_group()
    acc = wg.wgmma_wait_group(0, acc)
    for i in tylo.static_range(32):
        out[tid * 32 + i] = acc[i]


def test_wgmma_m64n64_k64_on_tma_tiles():
    _sm90()
    import ml_dtypes

    import tylo.runtime as rt
    rng = np.random.default_rng(1)
    A = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)    # (n, k) row-major: K-major B
    tile = tma.TMATile(T.bf16, (64, 64), axis=1)
    plan = wg.WGMMA64(T.bf16, n=64, k=16)
    ba, bb = tylo.prepare_tma(tile, rt.to_device(A)), tylo.prepare_tma(tile, rt.to_device(B))
    ma, mbb = _descriptor_on_device(ba), _descriptor_on_device(bb)
    st = swizzled_structure(tma.shared_layout(tile), 2)
    desc_hi = wg.smem_descriptor(st, 0)
    out = rt.to_device(np.full(128 * 32, np.nan, dtype=np.float32))
    wgmma_probe[1, 128](out, ma.ptr, mbb.ptr, desc_hi, plan, tile)
    got = out.to_host()
    table = ownership_table(wg.accumulator_ownership(plan))      # (thread, slot) -> (row, col)
    D = np.full((64, 64), np.nan)
    for t in range(128):
        for s in range(32):
            r, c = table[t, s]
            D[r, c] = got[t * 32 + s]
    ref = A.astype(np.float64) @ B.astype(np.float64).T
    np.testing.assert_allclose(D, ref, rtol=1e-3, atol=1e-3)
