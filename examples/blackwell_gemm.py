"""A warp-specialised Blackwell GEMM (sm_100a): C = A @ B^T, bf16 inputs, fp32 accumulation in TMEM, f32 C.

* A (M, K) and B (N, K) row-major bf16 (both K-major: B is given transposed, as an (N, K) array),
  C (M, N) row-major f32. K-rows must be 16-byte aligned (K a multiple of 8).
* One CTA per 128 x 128 output tile, 192 threads (6 warps):
  - warp 0: allocates 128 TMEM columns (and frees them at the end); its thread 0 is the TMA
    producer: it fills a STAGES-deep shared ring with A (128 x 64) and B (128 x 64) boxes, 128-byte
    swizzled, ``full[s]`` counting their bytes (``arrive.expect_tx``), after waiting for
    ``empty[s]``;
  - warp 1, thread 32: the single MMA-issuing thread: per K step it waits for ``full[s]``, issues
    four ``tcgen05.mma.cta_group::1.kind::f16`` (M = 128, N = 128, K = 16) into the f32 TMEM
    accumulator (row i in lane i) and ``tcgen05.commit``s to ``empty[s]``: the stage is free once
    those MMAs have read it. After the last K step it commits to ``done``;
  - warps 2..5: the epilogue: each waits for ``done``, loads its 32-lane quarter of the accumulator
    (warp w reaches lanes 32 (w % 4) ..) with ``tcgen05.ld.32x32b.x128`` (one row per thread) and
    stores it, masked at M and N (ragged shapes: TMA zero-fills the loads past M, N and K).
* Trip counts are runtime (ptxas unrolls constant-trip loops around MMA bodies).

Validation: assembled for sm_100a (run_examples.py); executed only in tylo's interpreter, against
float64 on ragged shapes (tests/interpreter/test_blackwell.py): no machine available to this
project runs sm_100a.
"""
import numpy as np

import tylo
from tylo.ir.types import bf16, f32
from tylo.lang import mbarrier as mb
from tylo.lang import tcgen05 as tc
from tylo.lang import tma
from tylo.lang.tmem import TmemTransfer, partition
from tylo.layouts import Layout, window

BM, BN, BK = 128, 128, 64          # BK: one 128-byte swizzle row of bf16
THREADS = 192
A_PLAN = tma.TMATile(bf16, (BM, BK))
B_PLAN = tma.TMATile(bf16, (BN, BK))
MMA = tc.Tcgen05MMA((BM, BN), bf16, bf16, f32)     # A (M, K) and B (N, K), both K-major
ACC = tc.accumulator(MMA, 0)                          # (128, 128) f32 in TMEM columns 0..127
STAGE_BYTES = (BM + BN) * BK * 2


@tylo.jit
def blackwell_gemm(c, a_map, b_map, M, N, K, STAGES: tylo.constexpr = 3):
    sa = tylo.shared_array(tylo.bf16, (STAGES * BM * BK,), align=1024)
    sb = tylo.shared_array(tylo.bf16, (STAGES * BN * BK,), align=1024)
    bars = tylo.shared_array(tylo.u64, (2 * STAGES + 1,), align=8)
    slot = tylo.shared_array(tylo.u32, 1)
    full = bars.ptr
    empty = bars.ptr + STAGES
    done = bars.ptr + 2 * STAGES
    tid = tylo.thread_idx.x
    w = tylo.warp_id()
    if w == 0:                                  # one whole warp allocates the accumulator's columns
        tc.tmem_alloc(BN, slot)
        tc.tmem_relinquish_alloc_permit()
    if tid == 0:
        tma.prefetch_tma_descriptor(a_map)
        tma.prefetch_tma_descriptor(b_map)
        for s in tylo.static_range(STAGES):
            mb.mbarrier_init(full + s, 1)       # the producer's arrive.expect_tx (+ TMA bytes)
            mb.mbarrier_init(empty + s, 1)      # the MMA thread's commit
        mb.mbarrier_init(done, 1)
        mb.fence_mbarrier_init()
    tc.fence_before_thread_sync()
    tylo.sync_threads()
    tc.fence_after_thread_sync()
    base = slot[0]

    m0 = tylo.block_idx.x * BM
    n0 = tylo.block_idx.y * BN
    ktiles = (K + BK - 1) // BK
    if tid == 0:                                # the TMA producer
        for kt in range(ktiles):
            s = kt % STAGES
            mb.mbarrier_wait(empty + s, ((kt // STAGES) & 1) ^ 1)     # a fresh ring is free
            mb.mbarrier_arrive_expect_tx(full + s, STAGE_BYTES)
            tma.tma_load(tma.shared_tile(a_map, sa.ptr + s * (BM * BK)), a_map, (m0, kt * BK), full + s)
            tma.tma_load(tma.shared_tile(b_map, sb.ptr + s * (BN * BK)), b_map, (n0, kt * BK), full + s)
    if tid == 32:                               # the single MMA-issuing thread
        for kt in range(ktiles):
            s = kt % STAGES
            mb.mbarrier_wait(full + s, (kt // STAGES) & 1)
            tc.fence_after_thread_sync()
            a_t = tma.shared_tile(a_map, sa.ptr + s * (BM * BK))
            b_t = tma.shared_tile(b_map, sb.ptr + s * (BN * BK))
            for ks in tylo.static_range(BK // MMA.k):
                a = tc.tcgen05_operand(MMA, tc.OperandA, a_t, (0, ks * MMA.k))
                b = tc.tcgen05_operand(MMA, tc.OperandB, b_t, (0, ks * MMA.k))
                tc.mma_tcgen05(MMA, ACC, a, b, kt * (BK // MMA.k) + ks > 0, base)
            tc.commit_mma(empty + s)            # the stage is free once these MMAs have read it
        tc.commit_mma(done)
    if w >= 2:                                  # the epilogue warps: TMEM -> registers -> global
        mb.mbarrier_wait(done, 0)
        tc.fence_after_thread_sync()
        q = w % 4
        access = partition(TmemTransfer((32, BN), axis=1), window(ACC, (32 * q, 0), (32, BN)))
        out = tc.wait_load(tc.load_async(access, base))
        row = m0 + 32 * q
        dst = window(tylo.GlobalTile(c, Layout((M, N), (N, 1))), (row, n0), (32, BN))
        tylo.store_bounded(dst, out, (M - row, N - n0))
    tc.fence_before_thread_sync()
    tylo.sync_threads()
    if w == 0:
        tc.tmem_dealloc(base, BN)


# A TMATile in a signature list stands for a TMA binding of that plan (prepare_tma).
AOT = [(blackwell_gemm, ["*f32:16", A_PLAN, B_PLAN, "i32", "i32", "i32"], {"STAGES": 3}, THREADS)]


def launch(c, a, bt, M, N, K, stages=3):
    """C (M, N) f32 = A (M, K) @ Bt (N, K)^T; A and Bt bf16 row-major."""
    if K % 8:
        raise ValueError(f"blackwell_gemm: TMA needs 16-byte aligned rows: K ({K}) must be a multiple of 8")
    grid = ((M + BM - 1) // BM, (N + BN - 1) // BN)
    blackwell_gemm[grid, THREADS](c, tylo.prepare_tma(A_PLAN, a), tylo.prepare_tma(B_PLAN, bt), M, N, K, stages)


def run() -> None:
    """Runs in the interpreter (no sm_100a GPU is available): C against a float64 product on ragged shapes."""
    import ml_dtypes

    kernel = tylo.jit(interpret=True, arch="sm_100a")(blackwell_gemm.fn)
    rng = np.random.default_rng()
    for M, N, K in [(128, 128, 64), (200, 136, 200)]:
        a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
        bt = rng.standard_normal((N, K)).astype(ml_dtypes.bfloat16)
        c = np.full((M, N), np.nan, np.float32)
        grid = ((M + BM - 1) // BM, (N + BN - 1) // BN)
        kernel[grid, THREADS](c, tylo.prepare_tma(A_PLAN, a), tylo.prepare_tma(B_PLAN, bt), M, N, K, 3)
        ref = a.astype(np.float64) @ bt.astype(np.float64).T
        rel = np.linalg.norm(c - ref) / np.linalg.norm(ref)
        assert rel < 1e-5, (M, N, K, rel)
        print(f"blackwell_gemm {M}x{N}x{K} (interpreter): relative error {rel:.1e}")


if __name__ == "__main__":
    run()
