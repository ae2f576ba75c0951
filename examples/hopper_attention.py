"""FlashAttention forward on Hopper (sm_90a), FlashAttention-3-style: TMA, mbarriers, WGMMA, setmaxnreg.

``o, lse = attention(q, k, v, causal=False, scale=None, cu_seqlens_q=None, cu_seqlens_k=None,
max_seqlen_q=None, max_seqlen_k=None)``; the arguments are checked by ``attention_host`` (shared with
the Blackwell example): q (batch, seqlen_q, heads, head_dim), k and v (batch, seqlen_k, kv_heads,
head_dim), bf16 or f16, head_dim 64, 128 or 256, GQA/MQA, varlen (packed rows and int32
``cu_seqlens``), bottom-right aligned causal masking, any strides with a contiguous last dimension
(BSHD, or BHSD views by ``.transpose(1, 2)``: no copy). ``o`` has q's shape and dtype (contiguous);
``lse`` is float32 in natural-log units, (batch, heads, seqlen_q), or (heads, total_q) for varlen.
Rows that see no key give O = 0 and LSE = -inf. torch/cupy/tylo device arrays run on the GPU (torch's
current stream for torch tensors) and return arrays of the same library; numpy arrays run in tylo's
interpreter (``interpreted()``), for checks on machines without a GPU.

The kernel (docs/attention.md has the details and the measurements). Work units are (Q tile of BM
rows, head, batch entry); one CTA per SM (persistent) starts with unit x and goes on with x + grid,
x + 2 grid, ... for non-causal calls (a static schedule over equal units) or, causal, with each next unit
from a global per-stream counter (a dynamic schedule, longest first, heads grouped so their K and V stay
in L2; the last CTA to run out resets the counter).

* warpgroup 0 -- the producer (``setmaxnreg_dec(24)``): thread 32 schedules: it takes the units, hands
  each to the other roles through a two-slot ring in shared memory (``hand_over`` / ``take_over``) and
  issues the TMA load of its Q tile (``q_full``, after ``q_empty`` says the previous unit's last S is
  done); thread 0 loads per key block j the K block (``k_full[s]``, after ``k_empty[s]``) and the V block
  (``v_full[s]``, after ``v_empty[s]``) into STAGES-deep rings whose position carries across units.
  q, k, v are bound as 3-D TMA maps (rows x head_dim, batched over heads or batch x heads:
  ``attention_host.tma_view``); head_dim is loaded as 64-column boxes (one 128-byte swizzle row each),
  side by side in shared memory.
* warpgroups 1..CONSUMERS -- the consumers (``setmaxnreg_inc``), 64 query rows each: S = Q K^T by
  WGMMA from shared memory (both K-major, K = head_dim in one plan), the mask from
  ``fragment_coords`` on blocks that cross a row's key limit (the key bound, or causal the bottom-right
  diagonal, which implies it for the sequence's rows), the online softmax in the exp2 domain with the
  scale folded into one fma (``online_softmax_update_exp2``:
  the row sum stays a per-thread partial until the end), P packed to bf16/f16 in registers as the A
  operand of O += P V (V read MN-major: ``permutedims`` of its (keys, head_dim) tile, K = the key
  block). Intra-warpgroup overlap: S of block j+1 is issued before P V of block j, and the wait
  leaves P V in flight (``wait_mma(s, pending=1)``) while the softmax of block j+1 runs. With
  ``pingpong`` the two consumers take turns issuing their GEMMs (named barriers 1 and 2), so one's
  softmax runs under the other's tensor-core work.
* epilogue: O * (1 / l) (``rcp.approx``); batched calls where the staging fits (D = 64, D = 128 causal)
  write it into shared memory (``stmatrix``) and TMA-store it through a (batch, seqlen, heads * D) map of
  o that clips at each sequence's end; tiles with ``o_in_q`` stage O in the consumer's own rows of the Q
  buffer instead (the next Q tile then loads after the stores have read them); the others store from
  registers (whole 64-row tiles without tests, ragged ones bounded per element). LSE (natural log) by the
  lanes that own each row.

Tiles (``tile_config``, measured on the H200): D = 64: 128 x 128 with two consumers and pingpong for
short sequences (keys <= 1k non-causal, <= 2k causal), else 192 x 128 (three consumers); D = 128:
128 x 176 non-causal (128 x 128 for keys <= 1k), 128 x 128 causal, pingpong; D = 256: 128 x 80
(pingpong when causal), O staged in Q.
"""
import functools
import math
from dataclasses import dataclass

import numpy as np

import tylo
import tylo.lang.mbarrier as mb
import tylo.lang.sync as sync
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo.layouts import Layout, permutedims, window
from tylo.runtime import driver
from tylo.runtime.arrays import array_fingerprint, describe_array
from tylo.runtime.memo import BoundedMemo
from tylo.runtime.scratch import stream_scratch
from tylo.runtime.streams import launch_stream

try:
    from . import attention_host as host
except ImportError:  # run as a script or with examples/ on sys.path
    import attention_host as host

DC = 64                              # head_dim columns per TMA box: one 128-byte swizzle row of 16-bit data
HEAD_DIMS = (64, 128, 256)
LOG2E = 1.4426950408889634
NEG_INF = float("-inf")
PRODUCER_REGS = 24


def consumer_registers(consumers):
    """setmaxnreg of a consumer warpgroup: what the register file leaves after the producer's 24
    (128 * 24 + 256 * 240 and 128 * 24 + 384 * 160 are at most 64512, the allocatable registers)."""
    return 240 if consumers == 2 else 160

DTYPES = {"bfloat16": tylo.bf16, "float16": tylo.f16}


@dataclass(frozen=True)
class TileConfig:
    """One specialisation's tiling: ``bn`` keys per block, ``stages`` K/V ring depth, ``consumers`` consumer
    warpgroups of 64 query rows (BM = 64 * consumers), ``pingpong``: the two consumers take turns issuing
    their GEMMs (named barriers), so one's softmax overlaps the other's tensor-core work. ``o_in_q``: Q is
    loaded per consumer (64-row boxes, each consumer's rows contiguous) and the TMA-store epilogue stages O
    in the consumer's own rows of the Q buffer instead of a buffer of its own (for tiles whose K/V rings
    leave no room for one); ``q_empty`` then means "Q buffer free": the unit's last S is done and the O
    stores have read the staging, so the next Q tile loads only after the unit's epilogue. ``o_in_v``: the
    TMA-store epilogue stages O at the start of the V ring (as FlashAttention-3 does): after every consumer's
    last P V of the unit, and the K/V thread loads the next unit's first V block only once the O stores have
    read the staging (``o_free``); the next Q tile and K blocks load early as without staging."""

    bn: int
    stages: int
    consumers: int
    pingpong: bool = False
    o_in_q: bool = False
    o_in_v: bool = False

    def __post_init__(self):
        if self.pingpong and self.consumers != 2:
            raise ValueError(f"TileConfig: pingpong takes two consumer warpgroups, got {self.consumers}")
        if self.o_in_q and self.o_in_v:
            raise ValueError("TileConfig: O is staged in the Q buffer (o_in_q) or in the V ring (o_in_v), not both")
        if self.o_in_v and 64 * self.consumers > self.stages * self.bn:
            raise ValueError(f"TileConfig: the V ring ({self.stages} x {self.bn} rows) cannot hold the O staging "
                             f"({64 * self.consumers} rows)")

    @property
    def bm(self):
        return 64 * self.consumers

    @property
    def threads(self):
        return threads(self.consumers)


def tile_config(head_dim, causal, seqlen_k=None):
    """The TileConfig of one (head_dim, causal) specialisation for keys up to ``seqlen_k`` long (None:
    any length; measured on the H200, docs/attention.md).

    Shared memory holds Q (BM x D) and STAGES K and V blocks (BN x D each): D = 256 needs a short key
    block to fit (128 x 256 + 2 * 2 * 80 x 256 elements = 224 KB). Short sequences take the tiles of
    ``SHORT_TILES`` (smaller Q tiles: more units to balance, less work per unit in flight)."""
    if (head_dim, causal) in TILE_OVERRIDES:
        return TILE_OVERRIDES[head_dim, causal]
    short = SHORT_TILES.get((head_dim, causal))
    if short is not None and seqlen_k is not None and seqlen_k <= short[0]:
        return short[1]
    if head_dim == 256:
        return TileConfig(80, 2, 2, pingpong=causal, o_in_q=True)    # O staged in Q: measured faster (session 5)
    if head_dim == 64:
        return TileConfig(128, 2, 3)
    if causal:
        return TileConfig(128, 2, 2, pingpong=True)
    return TileConfig(least_padded_block(seqlen_k, D128_KEY_BLOCKS), 2, 2, pingpong=True)


# D = 128 non-causal key blocks, the first preferred: 160 pads fewer keys at 2k and 4k and measured 1-2% faster
# there, 176 at 8k (session 12, validation.md)
D128_KEY_BLOCKS = (176, 160)


def least_padded_block(seqlen_k, blocks):
    """The key block of ``blocks`` whose last block pads ``seqlen_k`` keys least (the first on a tie, or
    when the length is unknown): padded keys cost a whole block's GEMMs and softmax."""
    if seqlen_k is None:
        return blocks[0]
    return min(blocks, key=lambda bn: -(-seqlen_k // bn) * bn)


TILE_OVERRIDES = {}        # (head_dim, causal) -> TileConfig, for tuning runs
# (head_dim, causal) -> (longest seqlen_k, TileConfig) for short sequences (measured: docs/attention.md)
SHORT_TILES = {(64, False): (1024, TileConfig(128, 2, 2, pingpong=True)),
               (64, True): (2048, TileConfig(128, 2, 2, pingpong=True)),
               (128, False): (1024, TileConfig(128, 2, 2, pingpong=True))}

# causal -> how CTAs take work units (measured: docs/attention.md):
#   "static": one CTA per SM walks units x, x + grid, ... (non-causal: equal units, so it balances);
#   "dynamic": one CTA per SM, each next unit from a global counter, longest first (causal: unequal units);
#   "per_unit": one CTA per unit (the hardware hands out CTAs in order).
SCHEDULE = {False: "static", True: "dynamic"}
L2_GROUP_BYTES = 16 << 20     # K and V bytes of one group of (batch, head) pairs in the dynamic order
# "tma": batched calls store O through shared memory and TMA where the staging fits (tma_store_fits);
# "registers": every call stores O from registers (varlen calls always do)
EPILOGUE = "tma"
# the consumer loop's order (kernel constexprs of the same names; measured slower, so off: docs/attention.md, session
# 18): SOFTMAX_UNDER_PV computes block j's softmax before the wait for block j - 1's P V (wait_mma(after=): ptxas
# otherwise hoists that wait above the softmax); INTERLEAVE_S_PV issues S of block j and P V of block j - 1 in turns
# as one group (mma_async_interleaved), then waits for both
SOFTMAX_UNDER_PV = False
INTERLEAVE_S_PV = False


def threads(consumers):
    return 128 * (consumers + 1)


def plans(dtype, head_dim, bn, consumers, o_in_q=False):
    """(Q box plan, K/V box plan, S = Q K^T plan, O += P V plan); ``o_in_q``: Q in 64-row boxes (per consumer)."""
    q_plan = tma.TMATile(dtype, (64 if o_in_q else 64 * consumers, DC))
    kv_plan = tma.TMATile(dtype, (bn, DC))
    return q_plan, kv_plan, wg.WGMMA64(dtype, n=bn, k=head_dim), wg.WGMMA64(dtype, n=head_dim, k=bn)


@tylo.func
def k_operand(PLAN: tylo.constexpr, k_map, base, s, BN: tylo.constexpr, D: tylo.constexpr):
    """Stage ``s`` of the K ring as the (keys, head_dim) K-major B operand of S = Q K^T."""
    return wg.wgmma_operand(PLAN, wg.OperandB, tma.shared_tile(k_map, base + s * (BN * D), (1, D // DC)))


@tylo.func
def v_operand(PLAN: tylo.constexpr, v_map, base, s, BN: tylo.constexpr, D: tylo.constexpr):
    """Stage ``s`` of the V ring, stored (keys, head_dim), as the MN-major (head_dim, keys) B operand of P V."""
    return wg.wgmma_operand(PLAN, wg.OperandB, permutedims(tma.shared_tile(v_map, base + s * (BN * D), (1, D // DC))))


@tylo.func
def mask_block(sc, n0, seqlen_k, diag, wg_limit, BN: tylo.constexpr, CAUSAL: tylo.constexpr):
    """-inf for keys past seqlen_k (non-causal) or after row + diag (causal); only blocks that cross the
    smallest limit of the warpgroup's rows (``wg_limit``) pay for it (a warpgroup-uniform branch).

    Causal tests the diagonal alone: for every row inside the sequence (row < seqlen_q) row + diag <=
    seqlen_k - 1, so it masks every key past seqlen_k too; rows past the sequence's end (never stored) may
    see more keys. One comparison per score, and none that is the same in every unit: with both, LLVM
    hoisted block 0's ``cols < seq_k`` (batched calls: loop-invariant) out of the unit loop and ptxas
    spilled one of those predicates at D = 256 causal with O staged in Q."""
    if n0 + BN > wg_limit:
        rows, cols = tylo.fragment_coords(sc)       # computed here: coordinates held across the loop cost registers
        keys = cols + n0
        if CAUSAL:
            sc = tylo.where(keys <= rows + diag, sc, NEG_INF)
        else:
            sc = tylo.where(keys < seqlen_k, sc, NEG_INF)
    return sc


@tylo.func
def tile_of(t, num_m, heads, batch, bh_group, CAUSAL: tylo.constexpr):
    """(Q tile, head, batch entry) of work unit ``t``. The (batch, head) pairs form groups of ``bh_group``
    (sized on the host so a group's K and V stay in L2); within a group the (batch, head) pair runs
    fastest, then the Q tile, so the units running at once share the group's K and V. Causal walks the
    tiles last to first (the longest first: a longest-first order when units are taken in order).
    ``bh_group = 1`` is each head's tiles in turn."""
    bhs = heads * batch
    span = bh_group * num_m
    g = t // span
    r = t - g * span
    size = tylo.minimum(bh_group, bhs - g * bh_group)    # the last group may be smaller
    mt = r // size
    bh = g * bh_group + (r - mt * size)
    if CAUSAL:
        mt = num_m - 1 - mt
    return mt, bh % heads, bh // heads


@tylo.func
def ring_position(it, STAGES: tylo.constexpr):
    """(stage, phase parity) of the ``it``-th block through a STAGES-deep ring (``it >= 0``; shifts and
    masks when STAGES is a power of two: fewer registers than signed division in the producer)."""
    if STAGES & (STAGES - 1) == 0:
        shift = STAGES.bit_length() - 1
        return it & (STAGES - 1), (it >> shift) & 1
    return it % STAGES, (it // STAGES) & 1


@tylo.func
def hand_over(slots, full, empty, n, mt, h, b, n_blocks, kv_row, kv_bat):
    """The scheduler thread: hand a unit to the K/V thread and the consumers through slot ``n % 2`` of a
    two-slot ring in shared memory (``full[s]``: written; ``empty[s]``: every reader has read it): its Q
    tile, head and batch entry (``mt = -1``: no more units), and for the K/V thread its key blocks, first
    key row and K/V batch coordinate."""
    s = n & 1
    mb.mbarrier_wait(empty + s, ((n >> 1) & 1) ^ 1)      # a fresh ring is free
    slot = slots + 8 * s
    slot[0] = mt
    slot[1] = h
    slot[2] = b
    slot[3] = n_blocks
    slot[4] = kv_row
    slot[5] = kv_bat
    mb.mbarrier_arrive(full + s)                          # release: the slot's writes are seen by the waiters


@tylo.func
def take_over(slots, full, empty, n, FIRST: tylo.constexpr):
    """A reader thread: words FIRST..FIRST+2 of slot ``n % 2`` (see ``hand_over``): (mt, h, b) for the
    consumers (FIRST = 0), (n_blocks, kv_row, kv_bat) for the K/V thread (FIRST = 3)."""
    s = n & 1
    mb.mbarrier_wait(full + s, (n >> 1) & 1)
    slot = slots + 8 * s
    x = slot[FIRST]
    y = slot[FIRST + 1]
    z = slot[FIRST + 2]
    mb.mbarrier_arrive(empty + s)
    return x, y, z


@tylo.func
def store_o_tma(o_map, staging, res, cons, lead, row, col, b, rows_left, release, D: tylo.constexpr,
                BORROWED: tylo.constexpr):
    """Consumer ``cons``: its 64 x D tile of O (``res``, already in the output dtype) into its staging
    buffer (D / 64 swizzled boxes), then TMA stores at (row, col) of batch entry ``b`` of ``o_map``
    (rows past the sequence's end are clipped by the map). Named barrier 3 + cons orders the
    warpgroup's writes before the store and the previous store's reads before the writes. BORROWED: the
    staging lies in a buffer the loads reuse (the consumer's rows of Q, or the V ring); the lead waits for
    the stores' reads and then releases it (arrives on ``release``: ``q_empty`` or ``o_free``)."""
    buf = staging + cons * (64 * D)
    if lead:
        tma.wait_tma_reads(0)                     # the previous unit's stores have read the staging
    mb.named_barrier_sync(3 + cons, 128)
    for j in tylo.static_range(D // DC):
        tylo.store(tma.shared_tile(o_map, buf + j * (64 * DC)), window(res, (0, DC * j), (64, DC)))
    mb.fence_view_async_shared()                  # the generic writes, seen by the TMA (async proxy)
    mb.named_barrier_sync(3 + cons, 128)
    if lead:
        if rows_left > 0:
            for j in tylo.static_range(D // DC):
                tma.tma_store(o_map, tma.shared_tile(o_map, buf + j * (64 * DC)), (row, col + DC * j, b))
            tma.commit_tma_stores()
        if BORROWED:
            # once the stores have read the staging, the loads may refill its buffer
            tma.wait_tma_reads(0)
            mb.mbarrier_arrive(release)


@tylo.func
def load_ring_block(kv_map, ring, empty, full, it, row, kv_bat, BN: tylo.constexpr, D: tylo.constexpr,
                    STAGES: tylo.constexpr, DTYPE: tylo.constexpr):
    """The K/V thread: key block ``it`` (rows ``row ...`` of batch coordinate ``kv_bat``) into its stage of a
    ring (K or V) once the consumers have released the stage (a fresh ring is free)."""
    s, phase = ring_position(it, STAGES)
    mb.mbarrier_wait(empty + s, phase ^ 1)
    mb.mbarrier_arrive_expect_tx(full + s, BN * D * DTYPE.itemsize)
    tma.tma_load(tma.shared_tile(kv_map, ring + s * (BN * D), (1, D // DC)), kv_map, (row, 0, kv_bat), full + s)


@tylo.func
def store_o_registers(o, out, h, heads, q_start, r0, rows_left, D: tylo.constexpr):
    """A consumer's 64 x D tile of O from registers into ``o`` (rows ``q_start + r0 ...`` of head ``h``): whole
    tiles without tests, a ragged one bounds-checked per element."""
    dst = window(tylo.GlobalTile(o + h * D, Layout((q_start + r0 + 64, D), (heads * D, 1))), (q_start + r0, 0),
                 (64, D))
    if rows_left >= 64:                  # warpgroup-uniform: whole tiles store without per-element tests
        tylo.store(dst, out)
    else:
        tylo.store_bounded(dst, out, (rows_left, D))


@tylo.func
def tile_extent(cu_q, cu_k, seq_q, seq_k, b, m0, BM: tylo.constexpr, BN: tylo.constexpr, CAUSAL: tylo.constexpr,
                VARLEN: tylo.constexpr):
    """(q_start, k_start, seqlen_q, seqlen_k, key blocks) of the Q tile at row m0 of sequence b (varlen: from
    the offsets in global memory; else from the common lengths, without loads on the way to the first GEMM)."""
    if VARLEN:
        q_start = cu_q[b]
        k_start = cu_k[b]
        seqlen_q = cu_q[b + 1] - q_start
        seqlen_k = cu_k[b + 1] - k_start
    else:
        q_start = b * seq_q
        k_start = b * seq_k
        seqlen_q = seq_q
        seqlen_k = seq_k
    # keys the tile sees: all of them, or (causal, bottom-right) those <= its last row + seqlen_k - seqlen_q
    kv_end = seqlen_k
    if CAUSAL:
        kv_end = tylo.minimum(seqlen_k, tylo.maximum(m0 + BM + seqlen_k - seqlen_q, 0))
    n_blocks = (kv_end + BN - 1) // BN
    if m0 >= seqlen_q:                  # a tile past this sequence's end (varlen): nothing to do
        n_blocks = 0
    return q_start, k_start, seqlen_q, seqlen_k, n_blocks


@tylo.jit
def attention_fwd(o, lse, q_map, k_map, v_map, o_map, cu_q, cu_k, counter, heads, group, q_row_mul, q_bat_mul,
                  kv_row_mul, kv_bat_mul, lse_b, lse_h, lse_row_mul, num_m, batch, seq_q, seq_k, bh_group, scale_log2,
                  D: tylo.constexpr, CAUSAL: tylo.constexpr, BN: tylo.constexpr, STAGES: tylo.constexpr,
                  CONSUMERS: tylo.constexpr, DTYPE: tylo.constexpr, VARLEN: tylo.constexpr = False,
                  PINGPONG: tylo.constexpr = False, DYNAMIC: tylo.constexpr = False,
                  TMA_STORE: tylo.constexpr = False, O_IN_Q: tylo.constexpr = False, O_IN_V: tylo.constexpr = False,
                  SOFTMAX_UNDER_PV: tylo.constexpr = False, INTERLEAVE_S_PV: tylo.constexpr = False):
    """Work units are (Q tile, head, batch entry), ``num_m * heads * batch`` of them (``tile_of``); CTA ``x``
    starts with unit x. Static schedule: then x + grid, x + 2 grid, ... DYNAMIC: the producer takes each
    next unit from the global ``counter`` (``grid + atomic_add(counter[0], 1)``) and hands it to the
    consumers through shared memory; the last CTA to run out resets ``counter[0..1]`` to 0 for the next
    launch on its stream. VARLEN: the sequences' offsets and lengths come from ``cu_q`` / ``cu_k``;
    otherwise every sequence has ``seq_q`` queries and ``seq_k`` keys. TMA_STORE (batched calls only): O
    leaves through shared memory and TMA stores of ``o_map`` (o as (batch, seqlen_q, heads * D): the
    store clips at each sequence's end); else from registers, bounds-checked per element. O_IN_Q: Q is
    loaded per consumer (64-row boxes) and, with TMA_STORE, O is staged in the consumer's rows of Q;
    ``q_empty`` is then arrived once per unit (every unit, with or without keys), after the stores have read
    the staging, and the scheduler waits for it before each next unit's Q load. O_IN_V: with TMA_STORE, O is
    staged at the start of the V ring once every consumer's last P V of the unit is done (named barrier 6);
    ``o_free`` is arrived once per unit with keys, after the stores have read the staging, and the K/V
    thread waits for it before the next such unit's first V load; keyless units store their zeros from
    registers and do not arrive (the consumers may run up to two units ahead of the K/V thread, and arrivals
    it did not wait for in order would put its parity waits two phases behind)."""
    BM = 64 * CONSUMERS
    STAGE_IN_Q = TMA_STORE and O_IN_Q           # q_empty: last S done and the O staging drained
    STAGE_IN_V = TMA_STORE and O_IN_V           # o_free: the V ring's staging drained
    NC = D // DC
    S_PLAN = wg.WGMMA64(DTYPE, n=BN, k=D)
    PV_PLAN = wg.WGMMA64(DTYPE, n=D, k=BN)
    q_s = tylo.shared_array(DTYPE, (BM * D,), align=1024)
    k_s = tylo.shared_array(DTYPE, (STAGES * BN * D,), align=1024)
    v_s = tylo.shared_array(DTYPE, (STAGES * BN * D,), align=1024)
    o_s = tylo.shared_array(DTYPE, (CONSUMERS * 64 * D if TMA_STORE and not (O_IN_Q or O_IN_V) else 8,),
                            align=1024)                                                # staging of its own
    bars = tylo.shared_array(tylo.u64, (4 * STAGES + 7 if STAGE_IN_V else 4 * STAGES + 6,), align=8)
    slots = tylo.shared_array(tylo.i32, (16,), align=16)   # two slots of a unit's coordinates (hand_over)
    k_full = bars.ptr
    k_empty = bars.ptr + STAGES
    v_full = bars.ptr + 2 * STAGES
    v_empty = bars.ptr + 3 * STAGES
    q_full = bars.ptr + 4 * STAGES
    q_empty = bars.ptr + 4 * STAGES + 1
    slot_full = bars.ptr + 4 * STAGES + 2          # slot s holds the next unit
    slot_empty = bars.ptr + 4 * STAGES + 4         # the loading thread and every consumer thread have read it
    o_free = bars.ptr + 4 * STAGES + 6             # O_IN_V: the O stores have read the staging in the V ring
    tid = tylo.thread_idx.x
    units = num_m * heads * batch
    # programmatic dependent launch (as in hopper_gemm.py): set up beside the previous kernel's tail, wait for it
    # (grid_dependency_wait, below) before the first global access; no early launch_dependents

    if tid == 0:
        tma.prefetch_tma_descriptor(q_map)
        tma.prefetch_tma_descriptor(k_map)
        tma.prefetch_tma_descriptor(v_map)
        if TMA_STORE:
            tma.prefetch_tma_descriptor(o_map)
        for s in tylo.static_range(STAGES):
            mb.mbarrier_init(k_full + s, 1)            # the producer's arrive.expect_tx (+ TMA bytes)
            mb.mbarrier_init(v_full + s, 1)
            mb.mbarrier_init(k_empty + s, CONSUMERS)   # one release per consumer warpgroup
            mb.mbarrier_init(v_empty + s, CONSUMERS)
        mb.mbarrier_init(q_full, 1)
        mb.mbarrier_init(q_empty, CONSUMERS)          # the consumers are done with this Q tile
        if STAGE_IN_V:
            mb.mbarrier_init(o_free, CONSUMERS)
        for s in tylo.static_range(2):
            mb.mbarrier_init(slot_full + s, 1)
            mb.mbarrier_init(slot_empty + s, 1 + 128 * CONSUMERS)
        mb.fence_mbarrier_init()
        mb.fence_view_async_shared()
    tylo.sync_threads()
    sync.grid_dependency_wait()

    wgi = mb.warpgroup_idx()
    if wgi == 0:
        mb.setmaxnreg_dec(PRODUCER_REGS)
        if tid == 32:
            # the scheduler (one thread of the second warp): units in order x, x + grid, ... (static) or,
            # DYNAMIC, each next one from the global counter; it hands each to the K/V thread and the consumers
            # through the slots and loads its Q tile (two threads split the producer's work: each fits in
            # the producer's 24 registers)
            n = 0                                      # units handed over
            qi = 0                                     # Q tiles loaded so far
            t = tylo.block_idx.x
            while t < units:
                mt, h, b = tile_of(t, num_m, heads, batch, bh_group, CAUSAL)
                m0 = mt * BM
                q_start, k_start, seqlen_q, seqlen_k, n_blocks = tile_extent(cu_q, cu_k, seq_q, seq_k, b, m0, BM, BN,
                                                                             CAUSAL, VARLEN)
                hand_over(slots.ptr, slot_full, slot_empty, n, mt, h, b, n_blocks, kv_row_mul * k_start,
                          kv_bat_mul * b + h // group)
                n += 1
                if STAGE_IN_Q:
                    # every unit stages O in the Q buffer: wait for the previous unit's release (its last S
                    # is done and its stores have read the staging), completion n - 2 of q_empty
                    if n > 1:
                        mb.mbarrier_wait(q_empty, n & 1)
                if n_blocks > 0:
                    if not STAGE_IN_Q:
                        if qi > 0:
                            mb.mbarrier_wait(q_empty, (qi - 1) & 1)
                    mb.mbarrier_arrive_expect_tx(q_full, BM * D * DTYPE.itemsize)
                    if O_IN_Q:                         # each consumer's rows contiguous: its O staging
                        for c in tylo.static_range(CONSUMERS):
                            tma.tma_load(tma.shared_tile(q_map, q_s.ptr + c * (64 * D), (1, NC)), q_map,
                                         (q_row_mul * q_start + m0 + 64 * c, 0, q_bat_mul * b + h), q_full)
                    else:
                        tma.tma_load(tma.shared_tile(q_map, q_s.ptr, (1, NC)), q_map,
                                     (q_row_mul * q_start + m0, 0, q_bat_mul * b + h), q_full)
                    qi += 1
                if DYNAMIC:
                    t = tylo.grid_dim.x + tylo.atomic_add(counter, 1)
                else:
                    t += tylo.grid_dim.x
            hand_over(slots.ptr, slot_full, slot_empty, n, -1, 0, 0, -1, 0, 0)        # no more units
            if DYNAMIC:
                # every CTA takes exactly one unit past the end, then counts itself out; the last one out
                # knows that no CTA reads the counter again and resets both words for the next launch
                if tylo.atomic_add(counter + 1, 1) == tylo.grid_dim.x - 1:
                    tylo.atomic_exch(counter, 0)
                    tylo.atomic_exch(counter + 1, 0)
        if tid == 0:
            # the K/V thread: each unit's key blocks into the two rings
            it = 0                                     # K/V blocks loaded so far (ring position)
            n = 1                                      # units taken from the slots
            staged = 0                                 # STAGE_IN_V: units with keys taken before this one
            n_blocks, row, kv_bat = take_over(slots.ptr, slot_full, slot_empty, 0, 3)
            while n_blocks >= 0:
                end = it + n_blocks                    # (a while over it: fewer live registers than a j loop)
                if STAGE_IN_V:
                    if n_blocks > 0:
                        # the unit's first block, peeled: its V may load only once the previous unit with keys,
                        # which staged its O in the V ring, has its stores' reads done (completion staged - 1)
                        load_ring_block(k_map, k_s.ptr, k_empty, k_full, it, row, kv_bat, BN, D, STAGES, DTYPE)
                        if staged > 0:
                            mb.mbarrier_wait(o_free, (staged - 1) & 1)
                        load_ring_block(v_map, v_s.ptr, v_empty, v_full, it, row, kv_bat, BN, D, STAGES, DTYPE)
                        row += BN
                        it += 1
                        staged += 1
                while it < end:
                    load_ring_block(k_map, k_s.ptr, k_empty, k_full, it, row, kv_bat, BN, D, STAGES, DTYPE)
                    load_ring_block(v_map, v_s.ptr, v_empty, v_full, it, row, kv_bat, BN, D, STAGES, DTYPE)
                    row += BN
                    it += 1
                n_blocks, row, kv_bat = take_over(slots.ptr, slot_full, slot_empty, n, 3)
                n += 1
    else:
        mb.setmaxnreg_inc(consumer_registers(CONSUMERS))
        cons = wgi - 1
        lead = tid % 128 == 0
        if O_IN_Q:
            q_op = wg.wgmma_operand(S_PLAN, wg.OperandA, tma.shared_tile(q_map, q_s.ptr + cons * (64 * D), (1, NC)))
        else:
            q_op = wg.wgmma_operand(S_PLAN, wg.OperandA, tma.shared_tile(q_map, q_s.ptr, (1, NC)), (64 * cons, 0))
        if PINGPONG:
            if cons == 1:
                mb.named_barrier_arrive(1, 256)      # warpgroup 1 issues its first GEMMs first
        it = 0
        qi = 0
        n = 1
        mt, h, b = take_over(slots.ptr, slot_full, slot_empty, 0, 0)
        while mt >= 0:
            m0 = mt * BM
            q_start, k_start, seqlen_q, seqlen_k, n_blocks = tile_extent(cu_q, cu_k, seq_q, seq_k, b, m0, BM, BN,
                                                                         CAUSAL, VARLEN)
            r0 = m0 + 64 * cons                      # this warpgroup's first query row (in the sequence)
            # keys row r may see: [0, seqlen_k), and (causal) key <= r + seqlen_k - seqlen_q
            diag = r0 + seqlen_k - seqlen_q
            wg_limit = seqlen_k                      # the smallest limit of this warpgroup's rows
            if CAUSAL:
                wg_limit = tylo.minimum(seqlen_k, tylo.maximum(diag + 1, 0))
            m, l = tylo.online_softmax_start(tylo.Ownership.wgmma_accumulator(BN))
            acc = tylo.zero_accumulator(PV_PLAN)
            if n_blocks > 0:
                mb.mbarrier_wait(q_full, qi & 1)
                # block 0: S alone
                s = it % STAGES
                mb.mbarrier_wait(k_full + s, (it // STAGES) & 1)
                if PINGPONG:
                    mb.named_barrier_sync(1 + cons, 256)
                s_pend = wg.mma_async(S_PLAN, q_op, k_operand(S_PLAN, k_map, k_s.ptr, s, BN, D),
                                      tylo.zero_accumulator(S_PLAN))
                if PINGPONG:
                    mb.named_barrier_arrive(2 - cons, 256)
                sc = wg.finish_mma(wg.wait_mma(s_pend))
                if lead:
                    mb.mbarrier_arrive(k_empty + s)
                    if not STAGE_IN_Q:
                        if n_blocks == 1:
                            mb.mbarrier_arrive(q_empty)  # the tile's last S is complete: Q may be replaced
                sc = mask_block(sc, 0, seqlen_k, diag, wg_limit, BN, CAUSAL)
                m, l, rescale, p = tylo.online_softmax_update_exp2(m, l, sc, scale_log2)
                pk = tylo.pack(DTYPE, p)             # carried packed: 32 registers, not 64
                for j in range(1, n_blocks):
                    s = (it + j) % STAGES
                    sp = (it + j - 1) % STAGES
                    mb.mbarrier_wait(k_full + s, ((it + j) // STAGES) & 1)
                    mb.mbarrier_wait(v_full + sp, ((it + j - 1) // STAGES) & 1)
                    if PINGPONG:
                        mb.named_barrier_sync(1 + cons, 256)
                    # S of block j, then P V of block j - 1: wait for S only, P V stays in flight
                    if INTERLEAVE_S_PV:
                        # both products' instructions in turns, one group: two accumulator chains side by side
                        s_pend, o_pend = wg.mma_async_interleaved(
                            (S_PLAN, q_op, k_operand(S_PLAN, k_map, k_s.ptr, s, BN, D), tylo.zero_accumulator(S_PLAN)),
                            (PV_PLAN, pk, v_operand(PV_PLAN, v_map, v_s.ptr, sp, BN, D), acc))
                    else:
                        s_pend = wg.mma_async(S_PLAN, q_op, k_operand(S_PLAN, k_map, k_s.ptr, s, BN, D),
                                              tylo.zero_accumulator(S_PLAN))
                        o_pend = wg.mma_async(PV_PLAN, pk, v_operand(PV_PLAN, v_map, v_s.ptr, sp, BN, D), acc)
                    if PINGPONG:
                        mb.named_barrier_arrive(2 - cons, 256)
                    if INTERLEAVE_S_PV:
                        sc = wg.finish_mma(wg.wait_mma(s_pend))
                    else:
                        sc = wg.finish_mma(wg.wait_mma(s_pend, pending=1))
                    if lead:
                        mb.mbarrier_arrive(k_empty + s)
                        if not STAGE_IN_Q:
                            if j == n_blocks - 1:
                                mb.mbarrier_arrive(q_empty)
                    sc = mask_block(sc, j * BN, seqlen_k, diag, wg_limit, BN, CAUSAL)
                    m, l, rescale, p = tylo.online_softmax_update_exp2(m, l, sc, scale_log2)
                    # P V of block j - 1 done: its P is dead. SOFTMAX_UNDER_PV: the softmax (its row sums depend
                    # on every weight) is computed before the wait, so it runs under that GEMM
                    if SOFTMAX_UNDER_PV:
                        acc = wg.finish_mma(wg.wait_mma(o_pend, after=l))
                    else:
                        acc = wg.finish_mma(wg.wait_mma(o_pend))
                    pk = tylo.pack(DTYPE, p)
                    if lead:
                        mb.mbarrier_arrive(v_empty + sp)
                    acc = acc * rescale
                # P V of the last block
                sl = (it + n_blocks - 1) % STAGES
                mb.mbarrier_wait(v_full + sl, ((it + n_blocks - 1) // STAGES) & 1)
                if PINGPONG:
                    mb.named_barrier_sync(1 + cons, 256)
                o_pend = wg.mma_async(PV_PLAN, pk, v_operand(PV_PLAN, v_map, v_s.ptr, sl, BN, D), acc)
                if PINGPONG:
                    mb.named_barrier_arrive(2 - cons, 256)
                acc = wg.finish_mma(wg.wait_mma(o_pend))
                if lead:
                    mb.mbarrier_arrive(v_empty + sl)
                it += n_blocks
                qi += 1

            total, row_lse = tylo.online_softmax_finish_exp2(m, l, scale_log2)
            out = tylo.online_softmax_normalize_fast(acc, total)
            rows_left = seqlen_q - r0
            if STAGE_IN_V:
                if n_blocks > 0:
                    # the staging overlaps V stages: every consumer's last P V must have read them
                    mb.named_barrier_sync(6, 128 * CONSUMERS)
                    store_o_tma(o_map, v_s.ptr, out.astype(DTYPE), cons, lead, r0, h * D, b, rows_left, o_free, D,
                                True)
                else:
                    store_o_registers(o, out, h, heads, q_start, r0, rows_left, D)
            elif TMA_STORE:
                staging = q_s.ptr if O_IN_Q else o_s.ptr
                store_o_tma(o_map, staging, out.astype(DTYPE), cons, lead, r0, h * D, b, rows_left, q_empty, D,
                            O_IN_Q)
            else:
                store_o_registers(o, out, h, heads, q_start, r0, rows_left, D)
            if tid % 4 == 0:
                lse_row0 = b * lse_b + h * lse_h + lse_row_mul * q_start + r0
                lse_dst = tylo.GlobalTile(lse + lse_row0, Layout((64, 1), (1, 1)))
                tylo.store_bounded(lse_dst, row_lse, (rows_left, 1))
            mt, h, b = take_over(slots.ptr, slot_full, slot_empty, n, 0)
            n += 1
        if PINGPONG:
            if cons == 0:
                mb.named_barrier_sync(1, 256)        # the other warpgroup's last arrival on barrier 1
        if TMA_STORE:
            if lead:
                tma.wait_tma_stores(0)               # the last stores are done before the CTA ends


def signature(dtype=tylo.bf16, head_dim=128, causal=False, seqlen_k=None):
    """The launch signature (TMA maps are 3-D: rows x head_dim, batched)."""
    cfg = tile_config(head_dim, causal, seqlen_k)
    q_plan, kv_plan, _, _ = plans(dtype, head_dim, cfg.bn, cfg.consumers, cfg.o_in_q)
    name = "bf16" if dtype == tylo.bf16 else "f16"
    return ([f"*{name}:16", "*f32", tma.batched(q_plan), tma.batched(kv_plan), tma.batched(kv_plan),
             tma.batched(o_plan(dtype)), "*i32", "*i32", "*i32"] + ["i32"] * 14 + ["f32"])


def o_plan(dtype):
    """The O staging / TMA store box: 64 rows x 64 columns (one 128-byte swizzle row of 16-bit data)."""
    return tma.TMATile(dtype, (64, DC))


SHARED_BYTES = 232448 - 1024     # sm_90's shared memory per CTA, less the barriers, slots and alignment


def tma_store_fits(cfg, head_dim, itemsize=2):
    """Whether Q, the K/V rings and the O staging (64 x head_dim per consumer) fit in shared memory."""
    return itemsize * head_dim * (cfg.bm + 2 * cfg.stages * cfg.bn + 64 * cfg.consumers) <= SHARED_BYTES


def output_map(o, varlen, lib):
    """The TMA binding of ``o`` (contiguous, (batch, seqlen, heads, D) or packed (total, heads, D)) as
    (batch, seqlen, heads * D): a box at (row, h * D + c, b) is clipped at the sequence's end."""
    *lead, heads, d = o.shape
    batch, seq = (1, lead[0]) if varlen else lead
    shape, strides = (batch, seq, heads * d), (seq * heads * d, heads * d, 1)
    if lib == "numpy":
        view = host.strided(o, lib, host.pointer(o, lib), shape, strides)
    else:   # the cached binding must not keep each call's output alive: the map holds only its address
        view = host.DeviceView(None, host.pointer(o, lib), host.numpy_dtype(host.dtype_name(o)), shape, strides)
    return host.tma_binding(o_plan(DTYPES[host.dtype_name(o)]), view, lib)


# attention_fwd's runtime arguments, in signature order (``prepare`` returns them so)
ARG_NAMES = ("o", "lse", "q_map", "k_map", "v_map", "o_map", "cu_q", "cu_k", "counter", "heads", "group", "q_row_mul",
             "q_bat_mul", "kv_row_mul", "kv_bat_mul", "lse_b", "lse_h", "lse_row_mul", "num_m", "batch", "seq_q",
             "seq_k", "bh_group", "scale_log2")
O_MAP = ARG_NAMES.index("o_map")


def constexprs(dtype, head_dim, causal, varlen=False, seqlen_k=None):
    cfg = tile_config(head_dim, causal, seqlen_k)
    # the TMA-store epilogue: batched calls whose staging fits beside Q and the rings, or goes into Q (o_in_q)
    tma_store = EPILOGUE == "tma" and not varlen and (cfg.o_in_q or cfg.o_in_v
                                                      or tma_store_fits(cfg, head_dim, dtype.itemsize))
    return {"D": head_dim, "CAUSAL": causal, "BN": cfg.bn, "STAGES": cfg.stages, "CONSUMERS": cfg.consumers,
            "DTYPE": dtype, "VARLEN": varlen, "PINGPONG": cfg.pingpong, "DYNAMIC": SCHEDULE[causal] == "dynamic",
            "TMA_STORE": tma_store, "O_IN_Q": cfg.o_in_q, "O_IN_V": cfg.o_in_v, "SOFTMAX_UNDER_PV": SOFTMAX_UNDER_PV,
            "INTERLEAVE_S_PV": INTERLEAVE_S_PV}


# every (head_dim, causal), the short-sequence tiles (seqlen_k = the class's longest) and D = 128's other key
# block (2048 keys: 160)
SPECIALISATIONS = [(d, c, None) for d in HEAD_DIMS for c in (False, True)] + [
    (d, c, n) for (d, c), (n, _) in SHORT_TILES.items()] + [(128, False, 2048)]
AOT = [(attention_fwd, signature(tylo.bf16, d, c, n), constexprs(tylo.bf16, d, c, seqlen_k=n),
        tile_config(d, c, n).threads) for d, c, n in SPECIALISATIONS]


# ---------------------------------------------------------------------------------------------- host side



def grid_size(units, causal):
    """CTAs to launch: one per unit for "per_unit", else one per SM (at most one per unit)."""
    if SCHEDULE[causal] == "per_unit":
        return units
    return min(units, driver.sm_count())


def head_group(causal, seqlen_k, head_dim, itemsize, bh_pairs):
    """(batch, head) pairs per group of ``tile_of``'s order: the dynamic schedule groups as many as keep
    their K and V (``2 * seqlen_k * head_dim`` elements each) within ``L2_GROUP_BYTES``; the static ones
    take each head's tiles in turn (1)."""
    if SCHEDULE[causal] != "dynamic":
        return 1
    per_pair = max(1, 2 * seqlen_k * head_dim * itemsize)
    return max(1, min(bh_pairs, L2_GROUP_BYTES // per_pair))


def scheduler_counter(like, lib):
    """The dynamic schedule's two int32 counters (next unit, CTAs done) for ``like``'s device and the stream
    the launch goes to (``tylo.runtime.scratch``): zero before a launch, and the launch leaves them zero (its
    last CTA resets them), so launches on one stream share them while launches on concurrent streams never
    do. numpy (the interpreter): fresh zeros per call."""
    if lib == "numpy":
        return np.zeros(2, np.int32)
    return stream_scratch("hopper_attention.scheduler", 2, "i32", describe_array(like).device_ordinal,
                          launch_stream(None, like))


def prepare(q, k, v, causal=False, scale=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
            max_seqlen_k=None, ctas=None):
    """Check the arguments and build one launch: ``(grid, block, args, constexprs, o, lse, lib)``; ``args``
    are the runtime arguments in signature order, ``o`` and ``lse`` the outputs the launch fills.
    ``ctas``: how many CTAs walk the work units (default: ``grid_size`` on a GPU, one per unit in the
    interpreter)."""
    pb = host.check_attention_args(q, k, v, causal, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                   head_dims=HEAD_DIMS)
    lib = host.one_library(q, k, v)
    dtype = DTYPES[pb.dtype]
    cfg = tile_config(pb.head_dim, pb.causal, pb.max_seqlen_k)
    q_plan, kv_plan, _, _ = plans(dtype, pb.head_dim, cfg.bn, cfg.consumers, cfg.o_in_q)
    ops = host.kernel_operands(q, k, v, pb, lib)
    num_m = max(1, (pb.max_seqlen_q + cfg.bm - 1) // cfg.bm)
    units = num_m * pb.heads * pb.batch
    if ctas is None:
        ctas = units if lib == "numpy" else grid_size(units, pb.causal)
    grid = (max(1, min(ctas, units)), 1, 1)
    bh_group = head_group(pb.causal, pb.max_seqlen_k, pb.head_dim, 2, pb.heads * pb.batch)
    args = [ops.o, ops.lse, host.tma_binding(q_plan, ops.q_view, lib), host.tma_binding(kv_plan, ops.k_view, lib),
            host.tma_binding(kv_plan, ops.v_view, lib), output_map(ops.o, pb.varlen, lib), ops.cu_q, ops.cu_k,
            scheduler_counter(q, lib), pb.heads,
            pb.group, ops.q_row_mul, ops.q_bat_mul, ops.kv_row_mul, ops.kv_bat_mul, ops.lse_b, ops.lse_h,
            ops.lse_row_mul, num_m, pb.batch, pb.max_seqlen_q, pb.max_seqlen_k, bh_group, pb.scale * LOG2E]
    cx = constexprs(dtype, pb.head_dim, pb.causal, pb.varlen, pb.max_seqlen_k)
    return grid, cfg.threads, args, cx, ops.o, ops.lse, lib


def attention(q, k, v, causal=False, scale=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
              max_seqlen_k=None):
    """FlashAttention forward (see the module docstring). torch/cupy/tylo device arrays run on the GPU
    (torch's current stream for torch tensors); numpy arrays (ml_dtypes.bfloat16 or float16) run in
    tylo's interpreter."""
    fast = cu_seqlens_q is None and cu_seqlens_k is None and max_seqlen_q is None and max_seqlen_k is None
    key = launch_key(q, k, v, causal, scale) if fast else None
    hit = _LAUNCHES.get(key) if key is not None else None
    if hit is not None:                 # checked before with these exact arrays: allocate and launch
        grid, block, template, cx, lse_shape, lib = hit
        o = host.empty(tuple(q.shape), host.dtype_name(q), q, lib)
        lse = host.empty(lse_shape, "float32", q, lib)
        if math.prod(o.shape):
            if cx["TMA_STORE"]:         # the map of this call's o (bindings are cached by address)
                template = list(template)
                template[O_MAP - 2] = output_map(o, False, lib)
            attention_fwd[grid, block](o, lse, *template, *cx.values())
        return o, lse
    grid, block, args, cx, o, lse, lib = prepare(q, k, v, causal, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                                 max_seqlen_k)
    if math.prod(o.shape):
        kernel = interpreted() if lib == "numpy" else attention_fwd
        kernel[grid, block](*args, *cx.values())
    if key is not None:
        _LAUNCHES.put(key, (grid, block, args[2:], cx, tuple(lse.shape), lib))
    return o, lse


_LAUNCHES = BoundedMemo(64)     # entries keep their TMA bindings (and arrays) alive


def launch_key(q, k, v, causal, scale):
    """What a batched device call's launch depends on: the arrays' library, addresses, dtypes, shapes and
    strides, ``causal``, ``scale`` and the current stream (None for numpy arrays and for arguments
    ``prepare`` must judge)."""
    if type(causal) is not bool or not (scale is None or type(scale) in (int, float)):
        return None
    lib = host.array_library(q)
    if lib == "numpy" or any(host.array_library(x) != lib for x in (k, v)):
        return None
    try:
        # the stream too: the dynamic schedule's counters belong to one stream
        return (lib, causal, scale, launch_stream(None, q), *(array_fingerprint(x) for x in (q, k, v)))
    except (TypeError, ValueError):
        return None


@functools.cache
def interpreted():
    """``attention_fwd`` built for the interpreter (sm_90a), once."""
    return tylo.jit(interpret=True, arch="sm_90a")(attention_fwd.fn)


reference = host.reference      # the float64 (or low-precision) reference both attention examples check against


def run() -> None:
    """Checks itself against float64 with FlashAttention-3's criterion: on the GPU when one is present
    (tylo device arrays), else in the interpreter on small shapes."""
    gpu = driver.gpu_available()
    # (batch, seqlen_q, seqlen_k, heads, kv_heads, head_dim, causal)
    cases = ([(2, 1000, 1000, 4, 2, 128, False), (1, 777, 1500, 2, 1, 64, True), (1, 300, 259, 2, 2, 256, True)]
             if gpu else [(1, 70, 50, 1, 1, 64, False), (1, 50, 90, 2, 1, 64, True)])
    host.check_examples("hopper_attention", attention, cases, gpu, lse_tol=1e-3)


if __name__ == "__main__":
    run()
