"""A warp-MMA GEMM: C = alpha * A @ B in bf16 with fp32 accumulation, any M, N, K.

* A (M, K) and B (K, N) row-major bf16; C (M, N) row-major bf16.
* 128x128 CTA tiles, 4 warps (2x2), each warp a 64x64 tile of m16n8k16 ``mma.sync`` atoms
  (``TiledMMA``), K step 32.
* ``cp.async`` double buffering into swizzled shared storage; the copy of step k+1 is in
  flight while step k computes. Ragged edges: bounded copies zero-fill, the epilogue stores
  only the rows and columns that exist.
* The epilogue (``alpha`` scaling and the conversion to bf16) is fused on the accumulator.
"""
import numpy as np

import tylo
from tylo import ComposedLayout, Layout, Swizzle
from tylo.lang.copy import commit_copies, wait_copies
from tylo.lang.mma import MMAAtom, TiledMMA, mma, zero_accumulator
from tylo.lang.tiles import copy_async

ATOM = MMAAtom((16, 8, 16), tylo.bf16, tylo.bf16, tylo.f32)
BM, BN, BK = 128, 128, 32
THREADS = 128
TILED = TiledMMA(ATOM, warps=(2, 2), repeats=(4, 8), k=BK)
# 64-byte rows of A (32 bf16): swizzle 16-byte chunks within 4-chunk rows against the row index
A_SMEM = ComposedLayout(Swizzle(2, 3, 3), Layout((BM, BK), (BK, 1)))
B_SMEM = ComposedLayout(Swizzle(3, 3, 3), Layout((BK, BN), (BN, 1)))


@tylo.jit
def warp_gemm(c, a, b, M, N, K, alpha: tylo.f32, VEC: tylo.constexpr = 16):
    """VEC: bytes per cp.async (16 when the rows of A and B are 16-byte aligned, else 2: element copies)."""
    m0 = tylo.block_idx.y * BM
    n0 = tylo.block_idx.x * BN
    sa = tylo.shared_array(tylo.bf16, (2 * BM * BK,), align=128)
    sb = tylo.shared_array(tylo.bf16, (2 * BK * BN,), align=128)
    ga = tylo.GlobalTile(a, Layout((M, K), (K, 1)))
    gb = tylo.GlobalTile(b, Layout((K, N), (N, 1)))
    ktiles = (K + BK - 1) // BK
    copy_async(tylo.SharedTile(sa.ptr, A_SMEM), tylo.window(ga, (m0, 0), (BM, BK), check=False), THREADS,
               bounds=(M - m0, K), vector_bytes=VEC)
    copy_async(tylo.SharedTile(sb.ptr, B_SMEM), tylo.window(gb, (0, n0), (BK, BN), check=False), THREADS,
               bounds=(K, N - n0), vector_bytes=VEC)
    commit_copies()
    acc = zero_accumulator(TILED)
    for kt in range(ktiles):
        stage = kt % 2
        if kt + 1 < ktiles:
            k1 = (kt + 1) * BK
            nxt = 1 - stage
            copy_async(tylo.SharedTile(sa.ptr + nxt * (BM * BK), A_SMEM),
                       tylo.window(ga, (m0, k1), (BM, BK), check=False),
                       THREADS, bounds=(M - m0, K - k1), vector_bytes=VEC)
            copy_async(tylo.SharedTile(sb.ptr + nxt * (BK * BN), B_SMEM),
                       tylo.window(gb, (k1, n0), (BK, BN), check=False),
                       THREADS, bounds=(K - k1, N - n0), vector_bytes=VEC)
        commit_copies()
        wait_copies(1)
        tylo.sync_threads()
        sA = tylo.SharedTile(sa.ptr + stage * (BM * BK), A_SMEM)
        sB = tylo.SharedTile(sb.ptr + stage * (BK * BN), B_SMEM)
        for ks in tylo.static_range(BK // 16):
            af = tylo.load(tylo.window(sA, (0, ks * 16), (BM, 16)), TILED.a_ownership)
            bf = tylo.load(tylo.window(sB, (ks * 16, 0), (16, BN)), TILED.b_ownership)
            acc = mma(TILED, af, bf, acc)
        tylo.sync_threads()
    out = (acc * alpha).astype(tylo.bf16)
    gc = tylo.window(tylo.GlobalTile(c, Layout((M, N), (N, 1))), (m0, n0), (BM, BN), check=False)
    tylo.store(gc, out, bounds=(M - m0, N - n0))


AOT = [(warp_gemm, "*bf16:16, *bf16:16, *bf16:16, i32, i32, i32, f32", {"VEC": 16}, THREADS),
       (warp_gemm, "*bf16:16, *bf16:16, *bf16:16, i32, i32, i32, f32", {"VEC": 2}, THREADS)]


def launch(c, a, b, M, N, K, alpha=1.0, stream=None):
    """16-byte copies when every row of A and B starts 16-byte aligned, else element copies."""
    vec = 16 if K % 8 == 0 and N % 8 == 0 else 2
    warp_gemm[((N + BN - 1) // BN, (M + BM - 1) // BM), THREADS](c, a, b, M, N, K, alpha, VEC=vec, stream=stream)


def run() -> None:
    import ml_dtypes
    rng = np.random.default_rng()
    for (M, N, K) in [(256, 256, 64), (300, 200, 77), (1000, 1000, 1000)]:
        a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
        b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
        c = tylo.to_device(np.full((M, N), np.nan, dtype=ml_dtypes.bfloat16))
        launch(c, tylo.to_device(a), tylo.to_device(b), M, N, K, alpha=0.5)
        ref = 0.5 * a.astype(np.float64) @ b.astype(np.float64)
        got = c.to_host().astype(np.float64)
        rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        assert rel < 1e-2, (M, N, K, rel)
        print(f"warp_gemm {M}x{N}x{K}: relative error {rel:.1e}")


if __name__ == "__main__":
    from run_examples import main
    main(["warp_gemm"])
