"""FlashAttention forward on Blackwell (sm_100a), FA4-style: TMA, mbarriers, tcgen05 and TMEM.

``o, lse = attention(q, k, v, causal=False, scale=None, cu_seqlens_q=None, cu_seqlens_k=None,
max_seqlen_q=None, max_seqlen_k=None)``; the arguments are checked by ``attention_host`` (shared with
the Hopper example): q (batch, seqlen_q, heads, head_dim), k and v (batch, seqlen_k, kv_heads,
head_dim), bf16, head_dim 64, 128 or 256, GQA/MQA, varlen (packed rows and int32 ``cu_seqlens``),
bottom-right aligned causal masking. ``o`` has q's shape (bf16); ``lse`` is float32 in natural-log
units, (batch, heads, seqlen_q), or (heads, total_q) for varlen. Rows that see no key give O = 0 and
LSE = -inf. torch/cupy/tylo device arrays launch the sm_100a build on an sm_100-class GPU (compute
capability 10.x; the caller's stream: torch's or cupy's current one) and return arrays of the same library;
on any other GPU ``attention`` raises RuntimeError (``check_sm100``). numpy arrays run in tylo's
interpreter (``interpreted()``). The host side (views, TMA maps, outputs) is ``attention_host``'s, shared
with the Hopper example.

The kernel is persistent: ``grid = min(work tiles, SMs of the target)``, and CTA ``c`` walks work
tiles ``c, c + grid, ...``; a work tile is ``Q_TILES`` x 128 query rows of one (batch, head), walked
longest first when causal (the bottom rows see the most keys). 512 threads = 4 warpgroups, with
``setmaxnreg`` per role (``config(head_dim)`` holds the budget: two tiles 144 softmax, 112 correction,
112 MMA/load; one tile 232, 128, 80, and 24 for the idle warpgroup):

* warpgroups 0 and 1 -- softmax, one per 128-row Q tile (Q tile ``i`` of the work tile; warpgroup 1
  is idle when head_dim = 256: two tiles do not fit TMEM), one query row per thread (warp ``w``
  owns TMEM lanes 32 (w % 4) .., ``tcgen05.ld.32x32b``, no shuffles): wait ``s_full[i]``, load S in
  64-key pieces for the row max and again for P (a whole row of S would not fit the register
  budget), mask (key bound, causal), running max with FA4's *conditional rescale* (the max used in the
  exponent moves only when the row max grows by more than ``RESCALE_THRESHOLD`` in log2 units),
  hand the rescale factor to the correction warpgroup through shared memory (``stats[i]``),
  ``p = exp2(s * scale * log2(e) - m * scale * log2(e))``, P packed to bf16 and stored over S,
  ``wait::st``, ``fence::before_thread_sync``, arrive on ``p_full[i]``; after the last key block the
  row sum and max go to shared memory (``sums[i]``).
* warpgroup 2 -- correction and epilogue: per key block and tile, a warp whose rows' max moved
  reloads its 32 lanes of O_i, scales them and stores them back, then arrives on ``p_full[i]`` too
  (the MMA warp issues P V only once P is written *and* O corrected); after the last block it waits
  ``o_full[i]``, loads O_i, divides by the row sum, stores bf16 rows (bounded) and the LSE, and
  arrives on ``epi_done[i]`` (O_i and the sums may be reused by the next work tile).
* warpgroup 3 -- warp 12, lane 0: the single MMA-issuing thread (warp 12 also allocates and frees
  TMEM); warp 13, lane 0: the TMA load thread (both Q tiles once per work tile after ``q_empty``,
  then K and V blocks through a ``STAGES``-deep ring: ``kv_full[s]`` with ``arrive.expect_tx`` after
  ``kv_empty[s]``); warps 14 and 15 idle.

The MMA order interleaves the two tiles so that one tile's softmax overlaps the other's MMAs:
``S0 = Q0 K0^T, S1 = Q1 K0^T``, then per key block j: ``O0 += P0 V_j, S0 = Q0 K_{j+1}^T, O1 += P1 V_j,
S1 = Q1 K_{j+1}^T`` (tcgen05 ``kind::f16``, M = 128, K = 16 per instruction; P is the A operand read
from TMEM, V the B operand read MN-major from shared memory), each S committed to ``s_full[i]``, the
K/V stage released by a commit to ``kv_empty[s]`` after both P V, ``o_full[i]`` and ``q_empty``
committed at the end of the work tile. Every hand-off between a thread's tcgen05 operations and
another thread's goes ``fence::before_thread_sync`` -> arrive -> wait -> ``fence::after_thread_sync``.

``EX2_EMU = k`` (constexpr, 0 by default) computes every k-th probability with ``exp2_fma``, a cubic on
the FMA pipe plus exponent-bit arithmetic (FA4's emulated exp2; 1.03e-4 relative error, measured in
the interpreter), to share the exponentials between the MUFU and FMA units.

TMEM plan (docs/tmem.md, "The attention kernel's TMEM plan"), 512 columns allocated: S_i at columns
``BN i .. BN i + BN - 1`` (f32), P_i over the first BN/2 of them (bf16 pairs), O_i at
``Q_TILES BN + head_dim i ..`` (f32). head_dim <= 128: two tiles, 2 x 128 + 2 x head_dim <= 512;
head_dim 256: one tile, 64-key blocks (shared memory: Q 64 KB + a 2-stage K/V ring of 128 KB).

Validation: the results come from tylo's CPU interpreter (asynchronous units, a seeded scheduler and
the hazard checker) and from assembling for sm_100a with ptxas; no machine available to this project
runs sm_100a, so none of it is hardware-validated, the device path included (its host side is tested
without a GPU: tests/blackwell/test_blackwell_attention_device.py).
"""
import functools
import math
from dataclasses import dataclass

import tylo
from tylo.ir.types import bf16, f32
from tylo.lang import mbarrier as mb
from tylo.lang import tcgen05 as tc
from tylo.lang import tma
from tylo.lang.core import bitcast
from tylo.lang.tmem import TmemTransfer, partition, reinterpret_tile
from tylo.layouts import Layout, permutedims, window

try:
    from . import attention_host as host
except ImportError:  # run as a script or with examples/ on sys.path
    import attention_host as host

BM, DC = 128, 64                   # Q rows per tile, head_dim columns per TMA box and per O accumulator
OC = 32                            # O columns per correction/epilogue transfer (its register budget)
PC = 32                            # keys per P store (fewer live registers in the softmax)
THREADS = 512                      # warpgroups: softmax 0, softmax 1, correction, (MMA, load, 2 idle)
MMA_WARP, LOAD_WARP = 12, 13
MMA_THREAD, LOAD_THREAD = 32 * MMA_WARP, 32 * LOAD_WARP
CORRECTION = 256                   # first thread of the correction warpgroup
TMEM_COLUMNS = 512
HEAD_DIMS = (64, 128, 256)
RESCALE_THRESHOLD = 8.0            # log2 units: P stays below 2^8, O and l grow at most that much
LOG2E = 1.4426950408889634
NEG_INF = float("-inf")
IDLE_REGS = 24                     # setmaxnreg's minimum, for a warpgroup with no role
SM100_SMS = 148                    # SMs of a B200, the persistent grid when no device says otherwise
GPU_PATH = True                    # attention() launches on an sm_100-class GPU (benchmarks/attention.py looks)


@dataclass(frozen=True)
class Config:
    """The static plan for one head_dim: ``q_tiles`` 128-row Q tiles per CTA, ``bn`` keys per block,
    ``stages`` of the K/V ring, and the registers per thread of each warpgroup after ``setmaxnreg``
    (softmax, correction, other; the sum over the four warpgroups must stay within the 512 per thread of a
    warpgroup that 512 threads at 128 each start with: 64K registers)."""

    head_dim: int
    q_tiles: int
    bn: int
    stages: int
    softmax_regs: int
    correction_regs: int
    other_regs: int

    @property
    def nc(self):
        """64-column chunks of head_dim (TMA boxes, O accumulators)."""
        return self.head_dim // DC

    def s_column(self, i):
        return self.bn * i

    def o_column(self, i):
        return self.q_tiles * self.bn + self.head_dim * i


def config(head_dim):
    if head_dim == 256:
        return Config(256, 1, 64, 2, 232, 128, 80)    # one Q tile: warpgroup 1 idles at IDLE_REGS
    return Config(head_dim, 2, 128, 2, 144, 112, 112)


def q_plan():
    return tma.TMATile(bf16, (BM, DC))


def kv_plan(bn):
    return tma.TMATile(bf16, (bn, DC))


def qk_plan(bn):
    """S = Q K^T: A (M, K) and B (N, K), both K-major in shared memory."""
    return tc.Tcgen05MMA((BM, bn), bf16, bf16, f32)


PV = tc.Tcgen05MMA((BM, DC), bf16, bf16, f32, b_major="MN")   # O[:, c] += P V[:, c]: B = V^T, MN-major
Q_BOX_LAYOUT = tma.shared_layout(q_plan())


def kv_box_layout(bn):
    return tma.shared_layout(kv_plan(bn))


def vt_layout(bn):
    """V's box as the (64, keys) B operand of P V."""
    return permutedims(kv_box_layout(bn))


def s_tile(bn, column):
    return tc.accumulator(qk_plan(bn), column)


def p_tile(bn, column):
    """P (bf16) over the first bn/2 columns of S at ``column``."""
    return window(reinterpret_tile(bf16, s_tile(bn, column), axis=1), (0, 0), (BM, bn))


def o_tile(column):
    """One 64-column accumulator of O at ``column`` (f32)."""
    return tc.accumulator(PV, column)


@tylo.func
def work_tile(t, n_mb, heads, CAUSAL: tylo.constexpr):
    """Work tile t -> (m block, batch, head); longest first when causal (the bottom rows see most keys)."""
    per = t // n_mb
    mblk = t % n_mb
    if CAUSAL:
        mblk = n_mb - 1 - mblk
    return mblk, per // heads, per % heads


@tylo.func
def key_blocks(m0, seqlen_q, seqlen_k, ROWS: tylo.constexpr, BN: tylo.constexpr, CAUSAL: tylo.constexpr):
    """Key blocks the rows m0 .. m0 + ROWS - 1 see (causal: bottom-right aligned)."""
    kv_end = seqlen_k
    if CAUSAL:
        kv_end = tylo.minimum(seqlen_k, tylo.maximum(m0 + ROWS + seqlen_k - seqlen_q, 0))
    return (kv_end + BN - 1) // BN


@tylo.func
def warp_any(flag):
    """1 if ``flag`` is set in any lane of the warp (tcgen05.ld/st are warp collectives)."""
    x = tylo.where(flag, 1, 0)
    for sh in tylo.static_range(5):
        x = tylo.maximum(x, tylo.shfl_xor(x, 1 << sh))
    return x > 0


# 2^f on [0, 1] ~ 1 + f (C1 + f (C2 + f C3)) with p(1) = 2: a least-maximum-relative-error fit made for this
# file (numpy, iteratively reweighted least squares): 1.03e-4 at most, under bf16's rounding of P (2^-9)
EX2_C1, EX2_C2, EX2_C3 = 0.6954244, 0.22630766, 0.07826794


@tylo.func
def exp2_fma(x):
    """2^x without the MUFU unit (FA4's emulated exp2, our own coefficients): the fraction by a cubic on the
    FMA pipe, the integer part added to the exponent bits; 0 below 2^-126 (masked scores are -inf)."""
    xc = tylo.maximum(x, -127.0)
    n = tylo.floor(xc)
    f = xc - n
    p = tylo.fma(tylo.fma(tylo.fma(f, EX2_C3, EX2_C2), f, EX2_C1), f, 1.0)
    r = bitcast(bitcast(p, tylo.i32) + (tylo.cast(n, tylo.i32) << 23), tylo.f32)
    return tylo.where(n < -126.0, 0.0, r)


@tylo.func
def scores(access, base, n0, limit, masked):
    """64 scores of this thread's row (keys n0 ..) from TMEM; keys at or past ``limit`` are -inf when ``masked``."""
    sf = tc.wait_load(tc.load_async(access, base))
    if masked:
        sf = tylo.fragment(tylo.f32, sf.ownership, [tylo.where(n0 + y < limit, sf[y], NEG_INF) for y in range(DC)])
    return sf


@tylo.func
def rescale_o(alpha, base, band, COL: tylo.constexpr, NC: tylo.constexpr):
    """O rows of this warp (TMEM lanes band..band+31) times alpha, 32 columns at a time, in place."""
    for c in tylo.static_range(2 * NC):
        acc = partition(TmemTransfer((32, OC), axis=1), window(o_tile(COL + DC * (c // 2)), (band, OC * (c % 2)),
                                                               (32, OC)))
        of = tc.wait_load(tc.load_async(acc, base))
        tc.store_async(acc, (of * alpha).values, base)
    tc.wait_stores()


@tylo.func
def store_o(o, base, band, inv_l, n_blocks, col0, q_start, m0, seqlen_q, row_stride, COL: tylo.constexpr,
            NC: tylo.constexpr, ROWS: tylo.constexpr):
    """The epilogue of one Q tile for this warp: O (TMEM lanes band..) / l -> bf16 rows m0 + band .. of the
    sequence starting at q_start (rows past seqlen_q dropped); zeros when no key block was seen."""
    rows_left = seqlen_q - (m0 + band)
    for c in tylo.static_range(2 * NC):
        acc = partition(TmemTransfer((32, OC), axis=1), window(o_tile(COL + DC * (c // 2)), (band, OC * (c % 2)),
                                                               (32, OC)))
        dst = window(tylo.GlobalTile(o + col0 + c * OC, Layout((q_start + m0 + ROWS, OC), (row_stride, 1))),
                     (q_start + m0 + band, 0), (32, OC))
        if n_blocks > 0:
            of = tc.wait_load(tc.load_async(acc, base))
            tylo.store_bounded(dst, of * inv_l, (rows_left, OC))
        else:
            tylo.store_bounded(dst, tylo.full(tylo.f32, acc.ownership, 0.0), (rows_left, OC))


@tylo.jit
def attention_fwd(o, lse, q_map, k_map, v_map, cu_q, cu_k, heads, group, n_mb, n_tiles, q_row_mul, q_bat_mul,
                  kv_row_mul, kv_bat_mul, lse_b, lse_h, lse_row_mul, scale, scale_log2, D: tylo.constexpr,
                  CAUSAL: tylo.constexpr, EX2_EMU: tylo.constexpr = 0):
    cfg = config(D)
    QT = cfg.q_tiles
    BN = cfg.bn
    NC = cfg.nc
    STAGES = cfg.stages
    QK = qk_plan(BN)
    Q_BYTES = tma.transfer_bytes(q_plan())
    KV_BYTES = tma.transfer_bytes(kv_plan(BN))
    KV_LAYOUT = kv_box_layout(BN)
    VT_LAYOUT = vt_layout(BN)
    q_s = tylo.shared_array(tylo.bf16, (QT * NC * BM * DC,), align=1024)
    k_s = tylo.shared_array(tylo.bf16, (STAGES * NC * BN * DC,), align=1024)
    v_s = tylo.shared_array(tylo.bf16, (STAGES * NC * BN * DC,), align=1024)
    alpha_s = tylo.shared_array(tylo.f32, (QT * BM,), align=16)     # rescale factor per row, per key block
    sum_s = tylo.shared_array(tylo.f32, (QT * BM,), align=16)       # final row sum
    max_s = tylo.shared_array(tylo.f32, (QT * BM,), align=16)       # final row max (raw score units)
    bars = tylo.shared_array(tylo.u64, (2 * STAGES + 2 + 7 * QT,), align=8)
    slot = tylo.shared_array(tylo.u32, 1)
    kv_full = bars.ptr
    kv_empty = bars.ptr + STAGES
    q_full = bars.ptr + 2 * STAGES
    q_empty = bars.ptr + 2 * STAGES + 1
    s_full = bars.ptr + 2 * STAGES + 2            # [i]: commit after S_i
    p_full = s_full + QT                          # [i]: softmax_i (P stored) + correction (O_i corrected)
    stats = s_full + 2 * QT                       # [i]: softmax_i wrote the rescale factors (blocks >= 1)
    sums = s_full + 3 * QT                        # [i]: softmax_i wrote the final row sums and maxima
    o_full = s_full + 4 * QT                      # [i]: commit after the work tile's last P V into O_i
    epi_done = s_full + 5 * QT                    # [i]: the epilogue has read O_i and the sums
    tid = tylo.thread_idx.x
    w = tylo.warp_id()
    wg = tid // 128

    if w == MMA_WARP:
        tc.tmem_alloc(TMEM_COLUMNS, slot)
        tc.tmem_relinquish_alloc_permit()
    if tid == 0:
        tma.prefetch_tma_descriptor(q_map)
        tma.prefetch_tma_descriptor(k_map)
        tma.prefetch_tma_descriptor(v_map)
        for s in tylo.static_range(STAGES):
            mb.mbarrier_init(kv_full + s, 1)          # the load thread's arrive.expect_tx (+ TMA bytes)
            mb.mbarrier_init(kv_empty + s, 1)         # the MMA thread's commit after both P V
        mb.mbarrier_init(q_full, 1)
        mb.mbarrier_init(q_empty, 1)                  # commit at the end of the work tile
        for i in tylo.static_range(QT):
            mb.mbarrier_init(s_full + i, 1)
            mb.mbarrier_init(p_full + i, 2 * BM)      # 128 softmax + 128 correction threads
            mb.mbarrier_init(stats + i, BM)
            mb.mbarrier_init(sums + i, BM)
            mb.mbarrier_init(o_full + i, 1)
            mb.mbarrier_init(epi_done + i, BM)
        mb.fence_mbarrier_init()
    tc.fence_before_thread_sync()
    tylo.sync_threads()
    tc.fence_after_thread_sync()
    base = slot[0]

    # the register budget per role: setmaxnreg (a warpgroup-wide instruction) opens each role's branch and
    # the role's code stays inside it: ptxas allocates code after a join with the smallest count that
    # reaches it
    if QT == 1:
        if wg == 1:
            mb.setmaxnreg_dec(IDLE_REGS)          # no second Q tile: warpgroup 1 idles

    if wg == 3:                                 # the MMA warp (12), the load warp (13), two idle warps
        mb.setmaxnreg_dec(cfg.other_regs)
        if tid == LOAD_THREAD:                      # the load thread
            kv_it = 0
            tcount = 0
            for t in range(tylo.block_idx.x, n_tiles, tylo.grid_dim.x):
                mblk, b, h = work_tile(t, n_mb, heads, CAUSAL)
                m0 = mblk * (QT * BM)
                q_start = cu_q[b]
                k_start = cu_k[b]
                seqlen_q = cu_q[b + 1] - q_start
                seqlen_k = cu_k[b + 1] - k_start
                if m0 < seqlen_q:
                    n_blocks = key_blocks(m0, seqlen_q, seqlen_k, QT * BM, BN, CAUSAL)
                    mb.mbarrier_wait(q_empty, (tcount & 1) ^ 1)               # the previous tile's MMAs are done
                    mb.mbarrier_arrive_expect_tx(q_full, QT * NC * Q_BYTES)
                    q_row = q_row_mul * q_start + m0
                    q_bat = q_bat_mul * b + h
                    for i in tylo.static_range(QT):
                        for c in tylo.static_range(NC):
                            tma.tma_load(tma.shared_tile(q_map, q_s.ptr + (i * NC + c) * (BM * DC)), q_map,
                                         (q_row + i * BM, c * DC, q_bat), q_full)
                    kv_row = kv_row_mul * k_start
                    kv_bat = kv_bat_mul * b + h // group
                    for j in range(n_blocks):
                        s = (kv_it + j) % STAGES
                        mb.mbarrier_wait(kv_empty + s, (((kv_it + j) // STAGES) & 1) ^ 1)   # a fresh ring is free
                        mb.mbarrier_arrive_expect_tx(kv_full + s, 2 * NC * KV_BYTES)
                        for c in tylo.static_range(NC):
                            off = (s * NC + c) * (BN * DC)
                            tma.tma_load(tma.shared_tile(k_map, k_s.ptr + off), k_map,
                                         (kv_row + j * BN, c * DC, kv_bat), kv_full + s)
                            tma.tma_load(tma.shared_tile(v_map, v_s.ptr + off), v_map,
                                         (kv_row + j * BN, c * DC, kv_bat), kv_full + s)
                    kv_it += n_blocks
                    tcount += 1

        if tid == MMA_THREAD:                       # the single MMA-issuing thread
            kv_it = 0
            tcount = 0
            p0 = 0                                  # phases of p_full[i] and epi_done[i] (tiles of tile i)
            p1 = 0
            e0 = 0
            e1 = 0
            for t in range(tylo.block_idx.x, n_tiles, tylo.grid_dim.x):
                mblk, b, h = work_tile(t, n_mb, heads, CAUSAL)
                m0 = mblk * (QT * BM)
                seqlen_q = cu_q[b + 1] - cu_q[b]
                seqlen_k = cu_k[b + 1] - cu_k[b]
                if m0 < seqlen_q:
                    n_blocks = key_blocks(m0, seqlen_q, seqlen_k, QT * BM, BN, CAUSAL)
                    has1 = m0 + BM < seqlen_q                 # tile 1 holds rows of this sequence
                    mb.mbarrier_wait(q_full, tcount & 1)
                    if n_blocks > 0:
                        s = kv_it % STAGES
                        mb.mbarrier_wait(kv_full + s, (kv_it // STAGES) & 1)
                        tc.fence_after_thread_sync()
                        for i in tylo.static_range(QT):       # S_i = Q_i K_0^T
                            if i == 0 or has1:
                                for c in tylo.static_range(NC):
                                    q_t = tylo.SharedTile(q_s.ptr + (i * NC + c) * (BM * DC), Q_BOX_LAYOUT, align=1024)
                                    k_t = tylo.SharedTile(k_s.ptr + (s * NC + c) * (BN * DC), KV_LAYOUT, align=1024)
                                    for ks in tylo.static_range(DC // QK.k):
                                        a = tc.tcgen05_operand(QK, tc.OperandA, q_t, (0, ks * QK.k))
                                        bk = tc.tcgen05_operand(QK, tc.OperandB, k_t, (0, ks * QK.k))
                                        tc.mma_tcgen05(QK, s_tile(BN, cfg.s_column(i)), a, bk, c + ks > 0, base)
                                tc.commit_mma(s_full + i)
                        for j in range(n_blocks):
                            s = (kv_it + j) % STAGES
                            sn = (kv_it + j + 1) % STAGES
                            more = j + 1 < n_blocks
                            for i in tylo.static_range(QT):
                                if i == 0 or has1:
                                    if i == 0:
                                        if j == 0:
                                            mb.mbarrier_wait(epi_done, (e0 & 1) ^ 1)     # O_0 is free
                                        mb.mbarrier_wait(p_full, p0 & 1)                 # P_0 written, O_0 corrected
                                        p0 += 1
                                    else:
                                        if j == 0:
                                            mb.mbarrier_wait(epi_done + 1, (e1 & 1) ^ 1)
                                        mb.mbarrier_wait(p_full + 1, p1 & 1)
                                        p1 += 1
                                    tc.fence_after_thread_sync()
                                    for c in tylo.static_range(NC):     # O_i[:, 64c..] += P_i V_j[:, 64c..]
                                        v_t = tylo.SharedTile(v_s.ptr + (s * NC + c) * (BN * DC), VT_LAYOUT, align=1024)
                                        for ks in tylo.static_range(BN // PV.k):
                                            pa = tc.tcgen05_operand(PV, tc.OperandA, p_tile(BN, cfg.s_column(i)),
                                                                    (0, ks * PV.k), base)
                                            bv = tc.tcgen05_operand(PV, tc.OperandB, v_t, (0, ks * PV.k))
                                            tc.mma_tcgen05(PV, o_tile(cfg.o_column(i) + DC * c), pa, bv, j + ks > 0,
                                                           base)
                                    if more:                    # S_i = Q_i K_{j+1}^T, behind this tile's P V
                                        if i == 0:
                                            mb.mbarrier_wait(kv_full + sn, ((kv_it + j + 1) // STAGES) & 1)
                                            tc.fence_after_thread_sync()
                                        for c in tylo.static_range(NC):
                                            q_t = tylo.SharedTile(q_s.ptr + (i * NC + c) * (BM * DC), Q_BOX_LAYOUT,
                                                                  align=1024)
                                            k_t = tylo.SharedTile(k_s.ptr + (sn * NC + c) * (BN * DC), KV_LAYOUT,
                                                                  align=1024)
                                            for ks in tylo.static_range(DC // QK.k):
                                                a = tc.tcgen05_operand(QK, tc.OperandA, q_t, (0, ks * QK.k))
                                                bk = tc.tcgen05_operand(QK, tc.OperandB, k_t, (0, ks * QK.k))
                                                tc.mma_tcgen05(QK, s_tile(BN, cfg.s_column(i)), a, bk, c + ks > 0, base)
                                        tc.commit_mma(s_full + i)
                            tc.commit_mma(kv_empty + s)         # the stage is free once these MMAs have read it
                    tc.commit_mma(q_empty)
                    for i in tylo.static_range(QT):
                        if i == 0:
                            tc.commit_mma(o_full)
                            e0 += 1
                        else:
                            if has1:
                                tc.commit_mma(o_full + 1)
                                e1 += 1
                    kv_it += n_blocks
                    tcount += 1

    for i in tylo.static_range(QT):           # softmax warpgroup i (code per tile: its TMEM columns are static)
        if wg == i:                             # thread r owns row r of Q tile i
            mb.setmaxnreg_inc(cfg.softmax_regs)
            r = tid % BM
            band = 32 * (w % 4)
            scount = 0
            ecount = 0
            # S of this warp's 32 rows in 64-key chunks, read twice (the max, then P): the softmax never
            # holds a whole row of S, which keeps it within its register budget; P in 32-key pieces
            s_access = [partition(TmemTransfer((32, DC), axis=1), window(s_tile(BN, cfg.s_column(i)), (band, DC * x),
                                                                         (32, DC))) for x in range(BN // DC)]
            p_access = [partition(TmemTransfer((32, PC), axis=1), window(p_tile(BN, cfg.s_column(i)), (band, PC * y),
                                                                         (32, PC))) for y in range(BN // PC)]
            for t in range(tylo.block_idx.x, n_tiles, tylo.grid_dim.x):
                mblk, b, h = work_tile(t, n_mb, heads, CAUSAL)
                m0 = mblk * (QT * BM)
                seqlen_q = cu_q[b + 1] - cu_q[b]
                seqlen_k = cu_k[b + 1] - cu_k[b]
                if m0 + i * BM < seqlen_q:          # warpgroup-uniform: this Q tile holds rows of the sequence
                    n_blocks = key_blocks(m0, seqlen_q, seqlen_k, QT * BM, BN, CAUSAL)
                    row = m0 + i * BM + r
                    limit = seqlen_k                # keys this row may see: [0, limit)
                    tile_limit = seqlen_k           # the smallest limit of the tile's rows
                    if CAUSAL:
                        limit = tylo.minimum(seqlen_k, tylo.maximum(row + 1 + seqlen_k - seqlen_q, 0))
                        tile_limit = tylo.minimum(seqlen_k, tylo.maximum(m0 + i * BM + 1 + seqlen_k - seqlen_q, 0))
                    m = tylo.f32(NEG_INF)           # the max used in the exponent (raw score units)
                    l = tylo.f32(0.0)
                    for j in range(n_blocks):
                        mb.mbarrier_wait(s_full + i, scount & 1)
                        scount += 1
                        tc.fence_after_thread_sync()
                        n0 = j * BN
                        masked = n0 + BN > tile_limit   # warpgroup-uniform: only blocks that cross a row's limit
                        # the row max, 64 keys at a time (S is read again below: fewer live registers)
                        m_blk = scores(s_access[0], base, n0, limit, masked).max(axis=1)[0]
                        for x in tylo.static_range(1, BN // DC):
                            m_blk = tylo.maximum(m_blk, scores(s_access[x], base, n0 + DC * x, limit,
                                                               masked).max(axis=1)[0])
                        # conditional rescale: move the max only when it grew by more than the threshold
                        moved = (m_blk - m) * scale_log2 > RESCALE_THRESHOLD
                        m_new = tylo.where(moved, m_blk, m)
                        alpha = tylo.exp2((m - tylo.where(m_new == NEG_INF, 0.0, m_new)) * scale_log2)
                        alpha = tylo.where(m == NEG_INF, 0.0, alpha)
                        m = m_new
                        if j > 0:                   # the correction warpgroup rescales O_i by alpha
                            alpha_s[i * BM + r] = alpha
                            mb.mbarrier_arrive(stats + i)
                        mb_log2 = tylo.where(m == NEG_INF, 0.0, m * scale_log2)
                        l = l * alpha
                        for x in tylo.static_range(BN // DC):
                            # P of keys 64x.. goes to words 32x..32x+31, over S words already read: chunk x is
                            # read again before P overwrites any of its words
                            sx = scores(s_access[x], base, n0 + DC * x, limit, masked)
                            for y in tylo.static_range(DC // PC):    # P in 32-key pieces
                                sy = tylo.fragment(tylo.f32, p_access[x * (DC // PC) + y].ownership,
                                                   [sx[y * PC + z] for z in range(PC)])
                                xs = sy * scale_log2 - mb_log2
                                p = tylo.exp2(xs)
                                if EX2_EMU > 0:         # every EX2_EMU-th key on the FMA pipe (exp2_fma)
                                    p = tylo.fragment(tylo.f32, p.ownership,
                                                      [exp2_fma(xs[z]) if z % EX2_EMU == EX2_EMU - 1 else p[z]
                                                       for z in range(PC)])
                                l = l + p.sum(axis=1)[0]
                                tc.store_async(p_access[x * (DC // PC) + y], tylo.pack(tylo.bf16, p), base)
                        tc.wait_stores()
                        tc.fence_before_thread_sync()
                        mb.mbarrier_arrive(p_full + i)
                    mb.mbarrier_wait(epi_done + i, (ecount & 1) ^ 1)    # the previous tile's epilogue read the sums
                    ecount += 1
                    sum_s[i * BM + r] = l
                    max_s[i * BM + r] = m
                    mb.mbarrier_arrive(sums + i)

    if wg == 2:                                 # correction and epilogue: thread r owns row r of each Q tile
        mb.setmaxnreg_dec(cfg.correction_regs)
        r = tid % BM
        band = 32 * (w % 4)
        a0 = 0                                  # phases of stats[i] and of the per-tile barriers of tile i
        a1 = 0
        e0 = 0
        e1 = 0
        for t in range(tylo.block_idx.x, n_tiles, tylo.grid_dim.x):
            mblk, b, h = work_tile(t, n_mb, heads, CAUSAL)
            m0 = mblk * (QT * BM)
            q_start = cu_q[b]
            seqlen_q = cu_q[b + 1] - q_start
            seqlen_k = cu_k[b + 1] - cu_k[b]
            if m0 < seqlen_q:
                n_blocks = key_blocks(m0, seqlen_q, seqlen_k, QT * BM, BN, CAUSAL)
                has1 = m0 + BM < seqlen_q
                for j in range(n_blocks):
                    for i in tylo.static_range(QT):
                        if i == 0 or has1:
                            if j > 0:
                                if i == 0:
                                    mb.mbarrier_wait(stats, a0 & 1)
                                    a0 += 1
                                else:
                                    mb.mbarrier_wait(stats + 1, a1 & 1)
                                    a1 += 1
                                tc.fence_after_thread_sync()
                                alpha = alpha_s[i * BM + r]
                                if warp_any(alpha != 1.0):     # O_i holds earlier blocks: rescale the warp's rows
                                    rescale_o(alpha, base, band, cfg.o_column(i), NC)
                            tc.fence_before_thread_sync()
                            mb.mbarrier_arrive(p_full + i)
                # epilogue: O_i / l -> bf16 rows, LSE = m * scale + ln(l)
                for i in tylo.static_range(QT):
                    if i == 0 or has1:
                        ph = e0 & 1
                        if i == 1:
                            ph = e1 & 1
                        mb.mbarrier_wait(o_full + i, ph)
                        mb.mbarrier_wait(sums + i, ph)
                        tc.fence_after_thread_sync()
                        l = sum_s[i * BM + r]
                        m = max_s[i * BM + r]
                        inv_l = tylo.where(l == 0.0, 0.0, 1.0 / tylo.where(l == 0.0, 1.0, l))
                        store_o(o, base, band, inv_l, n_blocks, h * D, q_start, m0 + i * BM, seqlen_q, heads * D,
                                cfg.o_column(i), NC, QT * BM)
                        row = m0 + i * BM + r
                        if row < seqlen_q:
                            lse_val = tylo.where(l == 0.0, NEG_INF, m * scale + tylo.log(tylo.where(l == 0.0, 1.0, l)))
                            lse[b * lse_b + h * lse_h + lse_row_mul * q_start + row] = lse_val
                        tc.fence_before_thread_sync()
                        mb.mbarrier_arrive(epi_done + i)
                        if i == 0:
                            e0 += 1
                        else:
                            e1 += 1

    tc.fence_before_thread_sync()
    tylo.sync_threads()
    if w == MMA_WARP:
        tc.tmem_dealloc(base, TMEM_COLUMNS)


def constexprs_for(head_dim, causal, ex2_emu=0):
    """``ex2_emu``: 0, or k to compute every k-th probability with ``exp2_fma`` (FMA pipe) instead of ex2."""
    cx = {"D": head_dim, "CAUSAL": causal}
    if ex2_emu:
        cx["EX2_EMU"] = ex2_emu
    return cx


def signature(head_dim=128):
    """The launch signature (TMA maps are 3-D: rows x head_dim, batched)."""
    cfg = config(head_dim)
    return (["*bf16:16", "*f32", tma.batched(q_plan()), tma.batched(kv_plan(cfg.bn)), tma.batched(kv_plan(cfg.bn)),
             "*i32", "*i32"] + ["i32"] * 11 + ["f32", "f32"])


AOT = [(attention_fwd, signature(d), constexprs_for(d, causal), THREADS) for d in HEAD_DIMS for causal in (False, True)]


def check_sm100(capability, device=0):
    """Raise RuntimeError unless ``capability`` (major, minor) is an sm_100-class GPU's (compute capability
    10.x): the kernel is built for sm_100a (tcgen05, TMEM), which no other GPU runs."""
    major, minor = capability
    if major != 10:
        raise RuntimeError(
            f"attention: examples/blackwell_attention.py's kernel needs an sm_100-class GPU (compute capability "
            f"10.x: tcgen05 and TMEM); GPU {device} is sm_{major}{minor} (compute capability {major}.{minor}). "
            f"Pass numpy arrays (ml_dtypes.bfloat16) to run the kernel in tylo's interpreter instead")


_SMS = {}


def device_sms(device):
    """The SM count of GPU ``device`` (an int ordinal), after ``check_sm100`` of its compute capability
    (cached per device)."""
    sms = _SMS.get(device)
    if sms is None:
        from tylo.runtime import driver
        check_sm100(driver.compute_capability(device), device)
        sms = _SMS[device] = driver.sm_count(device)
    return sms


def array_device(x):
    """The ordinal of the GPU holding device array ``x`` (the current device when it does not say)."""
    from tylo.runtime import describe_array, driver
    ordinal = describe_array(x).device_ordinal
    return driver.current_device() if ordinal is None else ordinal


def prepare(q, k, v, causal=False, scale=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
            max_seqlen_k=None, num_sms=None):
    """Check the arguments and build one launch: ``(grid, args, constexprs, o, lse)``; ``args`` are the
    runtime arguments in signature order (arrays of the inputs' library and TMA bindings of views of
    them), ``o`` and ``lse`` the outputs the launch fills (poisoned with NaN for numpy). ``num_sms``: the
    persistent grid's size bound (default: the GPU's SMs for device arrays, which must be on an
    sm_100-class GPU: ``check_sm100``; a B200's 148 for numpy arrays)."""
    pb = host.check_attention_args(q, k, v, causal, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                   head_dims=HEAD_DIMS)
    if pb.dtype != "bfloat16":
        raise TypeError(f"attention: this kernel takes bfloat16 (q is {pb.dtype})")
    if num_sms is not None and (not isinstance(num_sms, int) or isinstance(num_sms, bool) or num_sms < 1):
        raise ValueError(f"attention: num_sms must be a positive int, got {num_sms!r}")
    lib = host.one_library(q, k, v)
    if lib != "numpy":
        sms = device_sms(array_device(q))          # raises on a GPU that is not sm_100-class
        num_sms = num_sms or sms
    cfg = config(pb.head_dim)
    ops = host.kernel_operands(q, k, v, pb, lib)
    n_mb = max(1, -(-pb.max_seqlen_q // (cfg.q_tiles * BM)))
    n_tiles = n_mb * pb.heads * pb.batch
    grid = (min(n_tiles, num_sms or SM100_SMS),)
    kv = kv_plan(cfg.bn)
    args = [ops.o, ops.lse, host.tma_binding(q_plan(), ops.q_view, lib), host.tma_binding(kv, ops.k_view, lib),
            host.tma_binding(kv, ops.v_view, lib), ops.cu_q, ops.cu_k, pb.heads, pb.group, n_mb, n_tiles,
            ops.q_row_mul, ops.q_bat_mul, ops.kv_row_mul, ops.kv_bat_mul, ops.lse_b, ops.lse_h, ops.lse_row_mul,
            pb.scale, pb.scale * LOG2E]
    return grid, args, constexprs_for(pb.head_dim, pb.causal), ops.o, ops.lse


def attention(q, k, v, causal=False, scale=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
              max_seqlen_k=None):
    """FlashAttention forward (see the module docstring). torch/cupy/tylo device arrays launch the sm_100a
    kernel on an sm_100-class GPU (torch's/cupy's current stream) and return arrays of their library (any
    other GPU: RuntimeError, ``check_sm100``); numpy arrays (ml_dtypes.bfloat16) run in tylo's
    interpreter."""
    grid, args, cx, o, lse = prepare(q, k, v, causal, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    if math.prod(o.shape):
        kernel = interpreted() if host.array_library(q) == "numpy" else device_kernel()
        kernel[grid, THREADS](*args, *cx.values())
    return o, lse


@functools.cache
def device_kernel():
    """``attention_fwd`` built for sm_100a whatever GPU 0 is (``prepare`` has checked the arrays' GPU), once."""
    return tylo.jit(arch="sm_100a")(attention_fwd.fn)


@functools.cache
def interpreted():
    """``attention_fwd`` built for the interpreter (sm_100a), once."""
    return tylo.jit(interpret=True, arch="sm_100a")(attention_fwd.fn)


reference = host.reference      # the float64 (or low-precision) reference both attention examples check against


def sm100_present() -> bool:
    """Whether GPU 0 is sm_100-class (False without a GPU)."""
    from tylo.runtime import driver
    return driver.gpu_available() and driver.compute_capability(0)[0] == 10


def run() -> None:
    """Checks itself against float64 (O by FlashAttention-3's criterion, LSE): on an sm_100-class GPU when
    one is present (tylo device arrays), else in the interpreter on small shapes."""
    gpu = sm100_present()
    # (batch, seqlen_q, seqlen_k, heads, kv_heads, head_dim, causal)
    cases = ([(2, 1000, 1000, 4, 2, 128, False), (1, 777, 1500, 2, 1, 64, True), (1, 300, 259, 2, 2, 256, True)]
             if gpu else [(1, 128, 128, 2, 1, 64, False), (1, 200, 150, 1, 1, 64, True)])
    # LSE: 1e-4 in the interpreter; 1e-3 on the GPU (ex2/lg2.approx), as the Hopper example allows
    host.check_examples("blackwell_attention", attention, cases, gpu, lse_tol=1e-3 if gpu else 1e-4)


if __name__ == "__main__":
    run()
