"""FlashAttention forward on Blackwell (sm_100a), FA4-style: TMA, mbarriers, tcgen05 and TMEM.

``o, lse = attention(q, k, v, causal=False, scale=None, cu_seqlens_q=None, cu_seqlens_k=None,
max_seqlen_q=None, max_seqlen_k=None)``; the arguments are checked by ``attention_host`` (shared with
the Hopper example): q (batch, seqlen_q, heads, head_dim), k and v (batch, seqlen_k, kv_heads,
head_dim), bf16, head_dim 64 or 128 here (256 would need more TMEM columns than this plan uses: a
ValueError), GQA/MQA, varlen (packed rows and int32 ``cu_seqlens``), bottom-right aligned causal
masking. ``o`` has q's shape (bf16); ``lse`` is float32 in natural-log units, (batch, heads,
seqlen_q), or (heads, total_q) for varlen. Rows that see no key give O = 0 and LSE = -inf.

The kernel (one CTA per 128-row Q tile of one (batch, head); 192 threads = 6 warps):

* warp 4, lane 0 -- the load warp: TMA of the Q tile once (``q_full``), then K and V blocks of
  128 keys through a ``STAGES``-deep ring (``kv_full[s]`` with ``arrive.expect_tx``, after waiting
  for ``kv_empty[s]``). q, k, v are bound as 3-D TMA maps (rows x head_dim, batched over heads or
  batch x heads, see ``_tma_view``); head_dim 128 is two 64-column boxes (one 128-byte swizzle row each).
* warp 5, lane 0 -- the single MMA-issuing thread: per key block j, S = Q K^T (tcgen05
  ``kind::f16``, M = N = 128, K = 16 per instruction) into TMEM, ``commit`` to ``s_full``; then it
  waits for ``p_full`` (P written, O corrected) and issues O += P V with **P read from TMEM** (the A
  operand in tensor memory, written over S; V is the B operand read MN-major from shared memory),
  then ``commit``s to ``kv_empty[s]`` (the stage is free once these MMAs have read it). After the
  last block it commits to ``o_full``.
* warps 0-3 -- softmax and epilogue, one query row per thread (warp w owns TMEM lanes 32w..32w+31;
  ``tcgen05.ld.32x32b``): mask (key bound, causal), running max in raw-score units with the FA4
  *conditional rescale* (the max used for the exponent moves only when the row max grows by more
  than ``RESCALE_THRESHOLD`` in log2 units; a warp reloads and rescales its O rows only when one of
  its rows moved), ``p = exp2(s * scale * log2(e) - m * scale * log2(e))``, row sum in f32, P packed
  to bf16 and stored over S, ``wait::st``, ``fence::before_thread_sync``, arrive on ``p_full``. The
  epilogue waits for ``o_full``, loads O, divides by l and stores bf16 rows (bounded) and the LSE.

TMEM plan (docs/tmem.md, "The attention kernel's TMEM plan"): S at columns 0..127 (f32), P over the
first 64 of them (bf16 pairs), O at columns 128..128+head_dim-1 (f32); 256 columns allocated.

Validation: the results come from tylo's CPU interpreter (asynchronous units, a seeded scheduler and
the hazard checker) and from assembling for sm_100a with nvJitLink; no machine available to this
project runs sm_100a, so none of it is hardware-validated.
"""
import math

import numpy as np

import tylo
from tylo.ir.types import bf16, f32
from tylo.lang import mbarrier as mb
from tylo.lang import tcgen05 as tc
from tylo.lang import tma
from tylo.lang.tmem import TmemTransfer, partition, reinterpret_tile
from tylo.layouts import Layout, permutedims, window

try:
    from . import attention_host as host
except ImportError:  # run as a script or with examples/ on sys.path
    import attention_host as host

BM, BN, DC = 128, 128, 64          # Q rows per CTA, keys per block, head_dim columns per TMA box
THREADS = 192                      # warps 0-3 softmax + epilogue, warp 4 loads, warp 5 issues MMAs
LOAD_THREAD, MMA_THREAD = 128, 160
TMEM_COLUMNS = 256
HEAD_DIMS = (64, 128)
RESCALE_THRESHOLD = 8.0            # log2 units: P stays below 2^8, O and l grow at most that much
LOG2E = 1.4426950408889634
NEG_INF = float("-inf")

PLAN = tma.TMATile(bf16, (BM, DC))                     # Q, K and V boxes: 128 rows x 64 columns
BOX_BYTES = tma.transfer_bytes(PLAN)
QK = tc.Tcgen05MMA((BM, BN), bf16, bf16, f32)          # S = Q K^T: A (M, K) and B (N, K), K-major
PV = tc.Tcgen05MMA((BM, DC), bf16, bf16, f32, b_major="MN")   # O[:, c] += P V[:, c]: B = V^T, MN-major
BOX_LAYOUT = tma.shared_layout(PLAN)                   # (rows, 64)
VT_LAYOUT = permutedims(BOX_LAYOUT)                    # (64, keys): B of PV in (n, k) coordinates

S_TILE = tc.accumulator(QK, 0)                         # (128, 128) f32: columns 0..127
P_TILE = window(reinterpret_tile(bf16, S_TILE, axis=1), (0, 0), (BM, BN))   # bf16 over columns 0..63
O_COLUMN = 128


def o_tile(c):
    """The accumulator of head_dim columns 64c..64c+63: TMEM columns 128 + 64c .. (f32)."""
    return tc.accumulator(PV, O_COLUMN + DC * c)


@tylo.jit
def attention_fwd(o, lse, q_map, k_map, v_map, cu_q, cu_k, heads, group, q_row_mul, q_bat_mul, kv_row_mul,
                  kv_bat_mul, lse_b, lse_h, lse_row_mul, scale, scale_log2, D: tylo.constexpr,
                  CAUSAL: tylo.constexpr, STAGES: tylo.constexpr = 2):
    NC = D // DC
    q_s = tylo.shared_array(tylo.bf16, (NC * BM * DC,), align=1024)
    k_s = tylo.shared_array(tylo.bf16, (STAGES * NC * BN * DC,), align=1024)
    v_s = tylo.shared_array(tylo.bf16, (STAGES * NC * BN * DC,), align=1024)
    bars = tylo.shared_array(tylo.u64, (2 * STAGES + 4,), align=8)
    slot = tylo.shared_array(tylo.u32, 1)
    kv_full = bars.ptr
    kv_empty = bars.ptr + STAGES
    q_full = bars.ptr + 2 * STAGES
    s_full = bars.ptr + 2 * STAGES + 1
    p_full = bars.ptr + 2 * STAGES + 2
    o_full = bars.ptr + 2 * STAGES + 3
    tid = tylo.thread_idx.x
    w = tylo.warp_id()

    b = tylo.block_idx.z
    h = tylo.block_idx.y
    hk = h // group
    m0 = tylo.block_idx.x * BM
    q_start = cu_q[b]
    k_start = cu_k[b]
    seqlen_q = cu_q[b + 1] - q_start
    seqlen_k = cu_k[b + 1] - k_start
    # keys this tile sees: all of them, or (causal, bottom-right) those <= the last row + seqlen_k - seqlen_q
    kv_end = seqlen_k
    if CAUSAL:
        kv_end = tylo.minimum(seqlen_k, tylo.maximum(m0 + BM + seqlen_k - seqlen_q, 0))
    n_blocks = (kv_end + BN - 1) // BN

    if m0 < seqlen_q:                           # CTA-uniform: tiles past this sequence's end do nothing
        if w == 0:
            tc.tmem_alloc(TMEM_COLUMNS, slot)
            tc.tmem_relinquish_alloc_permit()
        if tid == 0:
            tma.prefetch_tma_descriptor(q_map)
            tma.prefetch_tma_descriptor(k_map)
            tma.prefetch_tma_descriptor(v_map)
            for s in tylo.static_range(STAGES):
                mb.mbarrier_init(kv_full + s, 1)      # the load thread's arrive.expect_tx (+ TMA bytes)
                mb.mbarrier_init(kv_empty + s, 1)     # the MMA thread's commit after P V
            mb.mbarrier_init(q_full, 1)
            mb.mbarrier_init(s_full, 1)               # commit after S = Q K^T
            mb.mbarrier_init(p_full, BM)              # the 128 softmax threads, after P and O are written
            mb.mbarrier_init(o_full, 1)               # commit after the last P V
            mb.fence_mbarrier_init()
        tc.fence_before_thread_sync()
        tylo.sync_threads()
        tc.fence_after_thread_sync()
        base = slot[0]

        if tid == LOAD_THREAD:                  # the load warp
            q_row = q_row_mul * q_start + m0
            q_bat = q_bat_mul * b + h
            mb.mbarrier_arrive_expect_tx(q_full, NC * BOX_BYTES)
            for c in tylo.static_range(NC):
                tma.tma_load(tma.shared_tile(q_map, q_s.ptr + c * (BM * DC)), q_map, (q_row, c * DC, q_bat), q_full)
            kv_row = kv_row_mul * k_start
            kv_bat = kv_bat_mul * b + hk
            for j in range(n_blocks):
                s = j % STAGES
                mb.mbarrier_wait(kv_empty + s, ((j // STAGES) & 1) ^ 1)     # a fresh ring is free
                mb.mbarrier_arrive_expect_tx(kv_full + s, 2 * NC * BOX_BYTES)
                for c in tylo.static_range(NC):
                    off = (s * NC + c) * (BN * DC)
                    tma.tma_load(tma.shared_tile(k_map, k_s.ptr + off), k_map, (kv_row + j * BN, c * DC, kv_bat),
                                 kv_full + s)
                    tma.tma_load(tma.shared_tile(v_map, v_s.ptr + off), v_map, (kv_row + j * BN, c * DC, kv_bat),
                                 kv_full + s)

        if tid == MMA_THREAD:                   # the single MMA-issuing thread
            mb.mbarrier_wait(q_full, 0)
            for j in range(n_blocks):
                s = j % STAGES
                mb.mbarrier_wait(kv_full + s, (j // STAGES) & 1)
                tc.fence_after_thread_sync()
                for c in tylo.static_range(NC):     # S = Q K^T, K = head_dim in 16-column steps
                    q_t = tylo.SharedTile(q_s.ptr + c * (BM * DC), BOX_LAYOUT, align=1024)
                    k_t = tylo.SharedTile(k_s.ptr + (s * NC + c) * (BN * DC), BOX_LAYOUT, align=1024)
                    for ks in tylo.static_range(DC // QK.k):
                        a = tc.tcgen05_operand(QK, tc.OperandA, q_t, (0, ks * QK.k))
                        bk = tc.tcgen05_operand(QK, tc.OperandB, k_t, (0, ks * QK.k))
                        tc.mma_tcgen05(QK, S_TILE, a, bk, c + ks > 0, base)
                tc.commit_mma(s_full)
                mb.mbarrier_wait(p_full, j & 1)     # P is in TMEM and O is corrected
                tc.fence_after_thread_sync()
                for c in tylo.static_range(NC):     # O[:, 64c..] += P V[:, 64c..], A = P from TMEM
                    v_t = tylo.SharedTile(v_s.ptr + (s * NC + c) * (BN * DC), VT_LAYOUT, align=1024)
                    for ks in tylo.static_range(BN // PV.k):
                        a = tc.tcgen05_operand(PV, tc.OperandA, P_TILE, (0, ks * PV.k), base)
                        bv = tc.tcgen05_operand(PV, tc.OperandB, v_t, (0, ks * PV.k))
                        tc.mma_tcgen05(PV, o_tile(c), a, bv, j + ks > 0, base)
                tc.commit_mma(kv_empty + s)         # the stage is free once these MMAs have read it
            tc.commit_mma(o_full)

        if w < 4:                               # softmax warps: thread tid owns query row m0 + tid
            row = m0 + tid
            # keys this row may see: [0, limit)
            limit = seqlen_k
            tile_limit = seqlen_k                # the smallest limit of the tile's rows
            if CAUSAL:
                limit = tylo.minimum(seqlen_k, tylo.maximum(row + 1 + seqlen_k - seqlen_q, 0))
                tile_limit = tylo.minimum(seqlen_k, tylo.maximum(m0 + 1 + seqlen_k - seqlen_q, 0))
            s_access = partition(TmemTransfer((32, BN), axis=1), window(S_TILE, (32 * w, 0), (32, BN)))
            p_access = partition(TmemTransfer((32, BN), axis=1), window(P_TILE, (32 * w, 0), (32, BN)))
            m = tylo.f32(NEG_INF)               # the max used in the exponent (raw score units)
            l = tylo.f32(0.0)
            for j in range(n_blocks):
                mb.mbarrier_wait(s_full, j & 1)
                tc.fence_after_thread_sync()
                sf = tc.wait_load(tc.load_async(s_access, base))
                n0 = j * BN
                if n0 + BN > tile_limit:        # CTA-uniform: only blocks that cross a row's limit are masked
                    sf = tylo.fragment(tylo.f32, sf.ownership,
                                       [tylo.where(n0 + i < limit, sf[i], NEG_INF) for i in range(BN)])
                m_blk = sf.max(axis=1)[0]
                # conditional rescale: move the max only when it grew by more than the threshold
                moved = (m_blk - m) * scale_log2 > RESCALE_THRESHOLD
                m_new = tylo.where(moved, m_blk, m)
                alpha = tylo.exp2((m - tylo.where(m_new == NEG_INF, 0.0, m_new)) * scale_log2)
                alpha = tylo.where(m == NEG_INF, 0.0, alpha)
                m = m_new
                mb_log2 = tylo.where(m == NEG_INF, 0.0, m * scale_log2)
                p = tylo.exp2(sf * scale_log2 - mb_log2)
                l = l * alpha + p.sum(axis=1)[0]
                tc.store_async(p_access, tylo.pack(tylo.bf16, p), base)
                if j > 0:                       # O holds earlier blocks: rescale the warp's rows if one moved
                    any_moved = tylo.where(moved, 1, 0)
                    for sh in tylo.static_range(5):
                        any_moved = tylo.maximum(any_moved, tylo.shfl_xor(any_moved, 1 << sh))
                    if any_moved > 0:
                        for c in tylo.static_range(NC):
                            o_access = partition(TmemTransfer((32, DC), axis=1),
                                                 window(o_tile(c), (32 * w, 0), (32, DC)))
                            of = tc.wait_load(tc.load_async(o_access, base))
                            tc.store_async(o_access, (of * alpha).values, base)
                tc.wait_stores()
                tc.fence_before_thread_sync()
                mb.mbarrier_arrive(p_full)

            # epilogue: O / l -> bf16 rows, LSE = m * scale + ln(l)
            inv_l = tylo.where(l == 0.0, 0.0, 1.0 / tylo.where(l == 0.0, 1.0, l))
            rows_left = seqlen_q - (m0 + 32 * w)
            if n_blocks > 0:
                mb.mbarrier_wait(o_full, 0)
                tc.fence_after_thread_sync()
            for c in tylo.static_range(NC):
                o_access = partition(TmemTransfer((32, DC), axis=1), window(o_tile(c), (32 * w, 0), (32, DC)))
                dst = window(tylo.GlobalTile(o + h * D + c * DC, Layout((m0 + BM + q_start, DC), (heads * D, 1))),
                             (q_start + m0 + 32 * w, 0), (32, DC))
                if n_blocks > 0:
                    of = tc.wait_load(tc.load_async(o_access, base))
                    tylo.store_bounded(dst, of * inv_l, (rows_left, DC))
                else:
                    tylo.store_bounded(dst, tylo.full(tylo.f32, o_access.ownership, 0.0), (rows_left, DC))
            if row < seqlen_q:
                lse_val = tylo.where(l == 0.0, NEG_INF, m * scale + tylo.log(tylo.where(l == 0.0, 1.0, l)))
                lse[b * lse_b + h * lse_h + lse_row_mul * q_start + row] = lse_val

        tc.fence_before_thread_sync()
        tylo.sync_threads()
        if w == 0:
            tc.tmem_dealloc(base, TMEM_COLUMNS)


def signature():
    """The launch signature (TMA maps are 3-D: rows x head_dim, batched)."""
    b3 = tma.batched(PLAN)
    return ["*bf16:16", "*f32", b3, b3, b3, "*i32", "*i32"] + ["i32"] * 9 + ["f32", "f32"]


AOT = [(attention_fwd, signature(), {"D": d, "CAUSAL": causal, "STAGES": 2}, THREADS)
       for d in HEAD_DIMS for causal in (False, True)]


def _tma_view(x, packed: bool):
    """A 3-D (batch, rows, head_dim) view of q, k or v for a batched TMA map, and how to address it.

    Returns ``(view, row_mul, bat_mul)``: sequence b, head h, position i is row
    ``row_mul * offset[b] + i`` of batch entry ``bat_mul * b + h``. Rows of all sequences share one
    axis (stride = the sequence stride) when the layout allows it (BSHD, packed varlen); otherwise
    batch and heads share the batch axis (BHSD views). Anything else is copied (documented: rare).
    """
    if packed:                                   # (total, heads, d): rows along total
        return x.transpose(1, 0, 2), 1, 0
    bsz, seq, nh, d = x.shape
    st = host.element_strides(x)
    item = x.itemsize
    if bsz == 1 or st[0] == seq * st[1]:         # BSHD-like: batch and sequence merge into rows
        v = np.lib.stride_tricks.as_strided(x, (nh, bsz * seq, d), (st[2] * item, st[1] * item, item))
        return v, 1, 0
    if st[0] == nh * st[2]:                      # BHSD-like: batch and heads merge into the batch axis
        v = np.lib.stride_tricks.as_strided(x, (bsz * nh, seq, d), (st[2] * item, st[1] * item, item))
        return v, 0, nh
    return _tma_view(np.ascontiguousarray(x), packed)


def prepare(q, k, v, causal=False, scale=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
            max_seqlen_k=None):
    """Check the arguments and build one launch: ``(grid, args, constexprs, o, lse)``; ``args`` are the
    runtime arguments in signature order (numpy arrays and TMA bindings of numpy views), ``o`` and
    ``lse`` the outputs (poisoned with NaN) the launch fills."""
    pb = host.check_attention_args(q, k, v, causal, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                   head_dims=HEAD_DIMS)
    if pb.dtype != "bfloat16":
        raise TypeError(f"attention: this kernel takes bfloat16 (q is {pb.dtype})")
    q_view, q_row_mul, q_bat_mul = _tma_view(q, pb.varlen)
    k_view, kv_row_mul, kv_bat_mul = _tma_view(k, pb.varlen)
    v_view, v_row_mul, v_bat_mul = _tma_view(v, pb.varlen)
    if (v_row_mul, v_bat_mul) != (kv_row_mul, kv_bat_mul):      # k and v must be addressed alike
        k_view, kv_row_mul, kv_bat_mul = _tma_view(np.ascontiguousarray(k), pb.varlen)
        v_view, _, _ = _tma_view(np.ascontiguousarray(v), pb.varlen)
    total_q = pb.offsets_q[-1]
    o = np.full(q.shape, np.nan, q.dtype)
    if pb.varlen:
        lse = np.full((pb.heads, total_q), np.nan, np.float32)
        lse_b, lse_h, lse_row_mul = 0, total_q, 1
    else:
        lse = np.full((pb.batch, pb.heads, pb.max_seqlen_q), np.nan, np.float32)
        lse_b, lse_h, lse_row_mul = pb.heads * pb.max_seqlen_q, pb.max_seqlen_q, 0
    cu_q = np.asarray(pb.offsets_q, np.int32)
    cu_k = np.asarray(pb.offsets_k, np.int32)
    grid = (max(1, (pb.max_seqlen_q + BM - 1) // BM), pb.heads, pb.batch)
    args = [o, lse, tylo.prepare_tma(PLAN, q_view), tylo.prepare_tma(PLAN, k_view), tylo.prepare_tma(PLAN, v_view),
            cu_q, cu_k, pb.heads, pb.group, q_row_mul, q_bat_mul, kv_row_mul, kv_bat_mul, lse_b, lse_h, lse_row_mul,
            pb.scale, pb.scale * LOG2E]
    return grid, args, {"D": pb.head_dim, "CAUSAL": pb.causal, "STAGES": 2}, o, lse


def attention(q, k, v, causal=False, scale=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
              max_seqlen_k=None):
    """FlashAttention forward (see the module docstring) on numpy arrays (ml_dtypes.bfloat16), run in
    tylo's interpreter: no sm_100 GPU is available to this project, so there is no device path yet."""
    grid, args, cx, o, lse = prepare(q, k, v, causal, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    if o.size:
        interpreted()[grid, THREADS](*args, cx["D"], cx["CAUSAL"], cx["STAGES"])
    return o, lse


_INTERPRETED = []


def interpreted():
    """``attention_fwd`` built for the interpreter (sm_100a), once."""
    if not _INTERPRETED:
        _INTERPRETED.append(tylo.jit(interpret=True, arch="sm_100a")(attention_fwd.fn))
    return _INTERPRETED[0]


def reference(q, k, v, causal, scale, dtype=np.float64):
    """Attention of one sequence (seq, heads, d) in ``dtype`` (float64, or bf16-rounded steps via ml_dtypes)."""
    sq, sk = q.shape[0], k.shape[0]
    group = q.shape[1] // k.shape[1]
    kk = np.repeat(k.astype(np.float64), group, axis=1)
    vv = np.repeat(v.astype(np.float64), group, axis=1)
    s = np.einsum("qhd,khd->hqk", q.astype(np.float64), kk) * scale
    if causal:
        allowed = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + sk - sq
        s = np.where(allowed[None], s, -np.inf)
    mx = s.max(-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    p = np.exp(s - mx)
    ls = p.sum(-1, keepdims=True)
    lse = np.where(ls[..., 0] > 0, np.log(np.where(ls > 0, ls, 1.0))[..., 0] + mx[..., 0], -np.inf)
    p = p / np.where(ls > 0, ls, 1.0)
    if dtype is not np.float64:
        p = p.astype(dtype).astype(np.float64)
    o = np.einsum("hqk,khd->qhd", p, vv)
    if dtype is not np.float64:
        o = o.astype(dtype).astype(np.float64)
    return o, lse


def run() -> None:
    """Runs in the interpreter (no sm_100a GPU is available): O and LSE against float64."""
    import ml_dtypes

    rng = np.random.default_rng()
    for sq, sk, d, causal, heads in [(128, 128, 64, False, 2), (200, 150, 64, True, 1)]:
        q = rng.standard_normal((1, sq, heads, d)).astype(ml_dtypes.bfloat16)
        k = rng.standard_normal((1, sk, 1, d)).astype(ml_dtypes.bfloat16)
        v = rng.standard_normal((1, sk, 1, d)).astype(ml_dtypes.bfloat16)
        o, lse = attention(q, k, v, causal=causal)
        ref, ref_lse = reference(q[0], k[0], v[0], causal, 1 / math.sqrt(d))
        err = np.abs(o[0].astype(np.float64) - ref).max()
        bf_err = np.abs(reference(q[0], k[0], v[0], causal, 1 / math.sqrt(d), ml_dtypes.bfloat16)[0] - ref).max()
        fin = np.isfinite(ref_lse)
        lse_err = np.abs(lse[0][fin] - ref_lse[fin]).max()
        # FlashAttention-3's criterion: at most twice the error of a bf16 reference, plus a small atol
        assert err <= 2 * bf_err + 1e-3 and lse_err < 1e-4, (err, bf_err, lse_err)
        assert np.array_equal(np.isneginf(lse[0]), ~fin)
        print(f"blackwell_attention sq={sq} sk={sk} d={d} causal={causal} (interpreter): max |O - ref| {err:.1e}, "
              f"max |LSE - ref| {lse_err:.1e}")


if __name__ == "__main__":
    run()
