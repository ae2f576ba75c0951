"""One attention tile on Blackwell (sm_100a): O = softmax(Q K^T * scale) V with TMA, tcgen05 and TMEM.

Shapes (one CTA, 128 threads = 4 warps): Q is 128 x 64 (queries x head dim), K and V are
128 x 64 (keys x head dim), all bf16 and row-major; O is 128 x 64 f32.

1. TMA stages Q, K and V into 128-byte-swizzled shared tiles (one mbarrier,
   ``arrive_expect_tx`` of the three tiles' bytes, then every thread waits).
2. Thread 0 issues S = Q K^T as four ``tcgen05.mma.cta_group::1.kind::f16`` (M=128, N=128,
   K=16 each; A = Q K-major, B = K K-major) into the f32 TMEM accumulator at columns 0..127
   (``accumulator``: row i in lane i), then ``commit_mma`` to an mbarrier.
3. Each warp w loads its 32-lane band (rows 32w..32w+31, ``window(S, (32 * w, 0), ...)``) with a
   ``.32x32b.x128`` transfer (a Fragment: one row per thread), applies ``tylo.row_softmax`` to
   ``S * scale`` in registers (thread-local: the row is in one thread), packs P to bf16 and stores
   it over the same TMEM columns (``reinterpret_tile``: P is 128 x 128 bf16 in columns 0..63, a
   ``.32x32b.x64`` store), then ``wait_stores`` + fence + barrier + fence.
4. Thread 0 issues O = P V: eight ``kind::f16`` MMAs (M=128, N=64, K=16) with A = P from TMEM
   and B = V^T, which is V's row-major tile read MN-major, into columns 128..191.
5. Each warp loads its band of O (``.32x32b.x64``) and stores it with ``tylo.store`` through a
   GlobalTile window.

TMA descriptors: ``kernel.compile(signature=...)`` has no spelling for a by-value TMA
parameter, so, as in tests/hopper, ``q_map``/``k_map``/``v_map`` are ``u64`` generic addresses
of 128-byte CUtensorMaps copied to global memory (``tylo.prepare_tma(plan, array).descriptor``).

Validation: assembled for sm_100a only (tests/blackwell/test_attention_example.py checks the
instruction mix, no local memory, zero spills). No machine available to this project runs
sm_100a, so none of it is hardware-validated.
"""
import tylo
from tylo.ir.types import bf16, f32
from tylo.lang import mbarrier as mb
from tylo.lang import tcgen05 as tc
from tylo.lang import tma
from tylo.lang.tmem import TmemTransfer, partition, reinterpret_tile
from tylo.layouts import Layout, permutedims, window

M, N, D = 128, 128, 64  # queries, keys, head dim
THREADS = 128
TMEM_COLUMNS = 256  # S / P: columns 0..127, O: 128..191

Q_PLAN = tma.TMATile(bf16, (M, D), axis=1)  # 64 bf16 = one 128-byte swizzle row
KV_PLAN = tma.TMATile(bf16, (N, D), axis=1)
QK = tc.Tcgen05MMA((M, N), bf16, bf16, f32)  # S = Q K^T: A (M, D) and B (N, D) K-major
PV = tc.Tcgen05MMA((M, D), bf16, bf16, f32, b_major="MN")  # O = P V: B = V^T (D, N), D contiguous

Q_LAYOUT = tma.shared_layout(Q_PLAN)  # (M, D)
K_LAYOUT = tma.shared_layout(KV_PLAN)  # (N, D): B of QK in (n, k) coordinates
VT_LAYOUT = permutedims(tma.shared_layout(KV_PLAN))  # (D, N): B of PV in (n, k) coordinates, MN-major

S_TILE = tc.accumulator(QK, 0)  # (128, 128) f32, columns 0..127
P_TILE = reinterpret_tile(bf16, S_TILE, axis=1)  # (128, 256) bf16 over the same words
P_TILE = window(P_TILE, (0, 0), (M, N))  # P: columns 0..63
O_TILE = tc.accumulator(PV, 128)  # (128, 64) f32, columns 128..191


@tylo.jit
def attention_tile(o, q_map, k_map, v_map, scale):
    q_s = tylo.shared_array(tylo.bf16, (M * D,), align=1024)
    k_s = tylo.shared_array(tylo.bf16, (N * D,), align=1024)
    v_s = tylo.shared_array(tylo.bf16, (N * D,), align=1024)
    loaded = tylo.shared_array(tylo.u64, 1).ptr  # mbarriers: TMA loads, S done, O done
    s_done = tylo.shared_array(tylo.u64, 1).ptr
    o_done = tylo.shared_array(tylo.u64, 1).ptr
    slot = tylo.shared_array(tylo.u32, 1)
    tid = tylo.thread_idx.x
    w = tylo.warp_id()

    if w == 0:  # one whole warp allocates (and later frees) the TMEM columns
        tc.tmem_alloc(TMEM_COLUMNS, slot)
        tc.tmem_relinquish_alloc_permit()
    if tid == 0:
        mb.mbarrier_init(loaded, 1)
        mb.mbarrier_init(s_done, 1)
        mb.mbarrier_init(o_done, 1)
        mb.fence_mbarrier_init()
    tc.fence_before_thread_sync()
    tylo.sync_threads()
    tc.fence_after_thread_sync()
    base = slot[0]

    # 1. TMA: Q, K, V -> shared memory
    if tid == 0:
        mb.mbarrier_arrive_expect_tx(loaded, tma.transfer_bytes(Q_PLAN) + 2 * tma.transfer_bytes(KV_PLAN))
        tma.tma_load_tile(Q_PLAN, q_map, q_s, (0, 0), loaded)
        tma.tma_load_tile(KV_PLAN, k_map, k_s, (0, 0), loaded)
        tma.tma_load_tile(KV_PLAN, v_map, v_s, (0, 0), loaded)
    mb.mbarrier_wait(loaded, 0)

    # 2. S = Q K^T into TMEM
    q_t = tylo.SharedTile(q_s, Q_LAYOUT, align=1024)
    k_t = tylo.SharedTile(k_s, K_LAYOUT, align=1024)
    if tid == 0:
        for ks in range(D // QK.k):
            a = tc.tcgen05_operand(QK, tc.OperandA, q_t, (0, ks * QK.k))
            b = tc.tcgen05_operand(QK, tc.OperandB, k_t, (0, ks * QK.k))
            tc.mma_tcgen05(QK, S_TILE, a, b, ks > 0, base)
        tc.commit_mma(s_done)
    mb.mbarrier_wait(s_done, 0)
    tc.fence_after_thread_sync()

    # 3. softmax in registers: warp w owns TMEM lanes (rows) 32w..32w+31
    s_access = partition(TmemTransfer((32, N), axis=1), window(S_TILE, (32 * w, 0), (32, N)))
    s = tc.wait_load(tc.load_async(s_access, base))
    p = tylo.row_softmax(s * scale)
    p_access = partition(TmemTransfer((32, N), axis=1), window(P_TILE, (32 * w, 0), (32, N)))
    tc.store_async(p_access, tylo.pack(tylo.bf16, p), base)
    tc.wait_stores()
    tc.fence_before_thread_sync()
    tylo.sync_threads()
    tc.fence_after_thread_sync()

    # 4. O = P V, A = P from TMEM
    v_t = tylo.SharedTile(v_s, VT_LAYOUT, align=1024)
    if tid == 0:
        for ks in range(N // PV.k):
            a = tc.tcgen05_operand(PV, tc.OperandA, P_TILE, (0, ks * PV.k), base)
            b = tc.tcgen05_operand(PV, tc.OperandB, v_t, (0, ks * PV.k))
            tc.mma_tcgen05(PV, O_TILE, a, b, ks > 0, base)
        tc.commit_mma(o_done)
    mb.mbarrier_wait(o_done, 0)
    tc.fence_after_thread_sync()

    # 5. O: TMEM -> registers -> global
    o_access = partition(TmemTransfer((32, D), axis=1), window(O_TILE, (32 * w, 0), (32, D)))
    out = tc.wait_load(tc.load_async(o_access, base))
    tylo.store(window(tylo.GlobalTile(o, Layout((M, D), (D, 1))), (32 * w, 0), (32, D)), out)

    tc.fence_before_thread_sync()
    tylo.sync_threads()
    if w == 0:
        tc.tmem_dealloc(base, TMEM_COLUMNS)


AOT = [(attention_tile, "*f32:16, u64, u64, u64, f32", {}, THREADS)]


def run() -> None:
    raise RuntimeError(
        "blackwell_attention_tile needs an sm_100a (B200/B300) GPU: it uses TMEM and tcgen05, which no machine "
        "available to this project has. It is checked by assembling it for sm_100a "
        "(tests/blackwell/test_attention_example.py)."
    )


if __name__ == "__main__":
    run()
