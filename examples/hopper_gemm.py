"""A warp-specialised Hopper GEMM (sm_90a): C = A @ B, bf16 or fp8 inputs, fp32 accumulation, bf16 C.

* A (M, K), B (K, N), C (M, N) row-major bf16; A and B may also be column-major (any
  torch/cupy view with one contiguous dimension, e.g. ``x.T``). A K-contiguous operand is
  K-major for WGMMA and TMA loads it in (rows, 64) boxes; an M- or N-contiguous one is
  MN-major and loads as 64 x 64 boxes of its transpose (``shared_tile(plan, ptr, boxes=)``),
  read by WGMMA with the transpose bit: no copy of either operand is made. fp8 (e4m3/e5m2)
  inputs must be K-major (A row-major, B column-major): fp8 WGMMA has no transpose.
* Default CTA tile BM x BN = 128 x 256, K step BK = one 128-byte swizzle row (64 bf16, 128 fp8).
  384 threads: warpgroup 0 is the producer (``setmaxnreg_dec``), one elected thread of it
  issues the TMA loads of A (128 x 64) and B (256 x 64) into a STAGES-deep shared ring; the
  ``full[s]`` mbarrier counts their bytes, ``empty[s]`` the two consumers' releases.
  Warpgroups 1 and 2 (``setmaxnreg_inc``) each compute 64 rows x 256 columns with
  ``m64n256k16`` WGMMAs (``m64n256k32`` for fp8; four per K step), keeping one K step in
  flight: after issuing step k they wait for step k-1 and release its stage.
* Persistent: a grid of one CTA per SM walks the output tiles (``tile += grid``) in grouped
  order (GROUP_M tile-rows share their B tiles in L2).
* Epilogue: the fp32 accumulator is converted to bf16, written through its ownership into
  swizzled shared staging tiles (64 x 64) and stored with TMA; stores past M or N are
  dropped by TMA, loads past M, N or K are zero-filled, so ragged shapes need no masking.
  TMA needs 16-byte aligned rows: N and the leading dimension of A and B must be multiples
  of 8 elements (16 for fp8; ``launch`` checks).
* Loop trip counts are runtime (ptxas unrolls constant-trip loops around WGMMA bodies).
* Small and ragged shapes (``GemmConfig``, ``choose_config``): 64-row tiles with one consumer, any
  tn from 8 to 256, swap-AB (C^T = B^T A^T: a small M becomes the WGMMA's n), split-K and stream-K
  (tiles' K ranges cut between CTAs; the CTA that finishes a cut tile last adds the f32 partials in a
  fixed order, in the same kernel: deterministic, no second launch, no waiting), and an epilogue that
  stores from registers (any output layout and N). ``launch`` picks a configuration with a cost model unless given one.
* ``GemmConfig(cluster_m=2)``: 2 x 1 thread-block clusters on vertically adjacent tiles that share their B
  tile through TMA multicast (each CTA loads it on alternate ring steps into both); a stage is free when the
  consumers of both CTAs released it (``mbarrier_arrive_cluster``). The heuristic uses them when an
  operand's rows are 16- but not 32-byte aligned (``row_alignment``): multicast halves B's L2 loads.
  Clusters of up to 8 CTAs (``cluster_m``, ``cluster_n`` each 1, 2 or 4): a column shares B, a row A; the grid
  holds no more clusters than the driver says run at once (``cluster_slots``).
* The TMA epilogue stores any tile width that is a multiple of 16 (``c_tile``: 64 x 64, 64 x 32 or 64 x 16
  boxes), so the heuristic also offers widths fitted to the shape (``FITTED_WIDTHS``); swap-AB's C^T goes
  through it too, transposed into staging laid out as C (``stmatrix.trans``), in boxes of 64 columns by 8-64 rows.
"""
import functools
from dataclasses import dataclass, fields, replace

import numpy as np

import tylo
import tylo.lang.mbarrier as mb
import tylo.lang.sync as sync
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo import Layout, Ownership
from tylo.codegen.targets import resource_limits
from tylo.lang.mma import zero_accumulator
from tylo.layouts import permutedims
from tylo.runtime import driver
from tylo.runtime.arrays import array_fingerprint, describe_array
from tylo.runtime.memo import BoundedMemo
from tylo.runtime.scratch import stream_scratch
from tylo.runtime.streams import launch_stream

BM, BN = 128, 256                # the default (large-shape) CTA tile: two consumer warpgroups of 64 x 256
THREADS = 384                    # producer warpgroup + two consumer warpgroups
PRODUCER_REGS, CONSUMER_REGS = 40, 232           # 128 * 40 + 256 * 232 <= 65536


def threads(consumers):
    """Block size: one producer warpgroup and ``consumers`` consumer warpgroups (64 rows each)."""
    return 128 * (consumers + 1)


@functools.lru_cache(maxsize=None)
def k_step(dtype):
    """BK: one 128-byte swizzle row of the input type (64 bf16, 128 fp8)."""
    return 128 // dtype.itemsize


@functools.lru_cache(maxsize=None)
def wgmma_plan(dtype, bn=BN):
    """One consumer's WGMMA group: 64 x bn x K with K = BK, at most 64 (two groups per fp8 K step)."""
    return wg.WGMMA64(dtype, n=bn, k=min(k_step(dtype), 64))


@functools.lru_cache(maxsize=None)     # plans are built once: launch() runs on every call
def a_tile(dtype, bm=BM):
    return tma.TMATile(dtype, (bm, k_step(dtype)))          # K-major A: (m, k), 128B swizzle


@functools.lru_cache(maxsize=None)
def b_tile(dtype, bn=BN):
    return tma.TMATile(dtype, (bn, k_step(dtype)))          # K-major B: (n, k) of B^T


@functools.lru_cache(maxsize=None)
def mn_tile(dtype):
    return tma.TMATile(dtype, (k_step(dtype), 64))          # MN-major A or B: (k, mn) boxes of 8 KB


@functools.lru_cache(maxsize=None)
def staging_elems(direct, consumers, c_bufs):
    """Shared staging of the TMA epilogue (64 x 64 bf16 tiles per consumer); a token size when the
    epilogue stores straight from registers."""
    return 64 if direct else consumers * c_bufs * 64 * 64


A_TILE, B_TILE, MN_TILE = a_tile(tylo.bf16), b_tile(tylo.bf16), mn_tile(tylo.bf16)
C_TILE = tma.TMATile(tylo.bf16, (64, 64))        # epilogue staging / TMA store box, 8 KB
STAGE_BYTES = (BM + BN) * 128                    # A and B of one K step of the default tile, either input type


@functools.lru_cache(maxsize=None)
def c_tile(tn, transposed=False):
    """The TMA epilogue's store box for tiles ``tn`` wide: 64 rows by the widest of 64, 32 or 16 columns dividing
    ``tn`` (a swizzle row of 128, 64 or 32 bytes), so tiles of any multiple of 16 store through TMA. ``transposed``
    (swap-AB, whose kernel tile is C^T): the tile's columns are C's rows, so the box is the widest of 64, 32, 16
    or 8 rows dividing ``tn`` by 64 columns of C (one 128-byte swizzle row each), stacked down each chunk."""
    if transposed:
        height = next(h for h in (64, 32, 16, 8) if tn % h == 0)
        return C_TILE if height == 64 else tma.TMATile(tylo.bf16, (height, 64))
    width = next(w for w in (64, 32, 16) if tn % w == 0)
    return C_TILE if width == 64 else tma.TMATile(tylo.bf16, (64, width), swizzle=2 * width)


def c_plan(config):
    """The TMA epilogue's store box of ``config`` (not ``direct``): ``c_tile`` of its width, transposed for swap-AB."""
    return c_tile(config.tn, config.c_transposed)


def c_chunk_columns(tn, j):
    """Columns of the epilogue's j-th 64-column chunk of a ``tn``-wide tile (the last may be narrower)."""
    return min(64, tn - 64 * j)


def c_chunk_boxes(tn, j, transposed=False):
    """``c_tile(tn, transposed)`` boxes in the epilogue's j-th chunk (side by side; stacked when transposed)."""
    return c_chunk_columns(tn, j) // c_tile(tn, transposed).shape[0 if transposed else 1]


@tylo.func
def tile_coords(tile, num_m, num_n, GROUP_M: tylo.constexpr):
    """Grouped rasterisation: GROUP_M tile-rows are walked column by column."""
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    rows = tylo.minimum(num_m - first_m, GROUP_M)
    local = tile % per_group
    return first_m + local % rows, local // rows


@tylo.func
def stage_tile(tmap, ptr, EXTENT: tylo.constexpr, MN: tylo.constexpr):
    """One ring stage of an operand as TMA fills it: (EXTENT, BK) K-major, or (BK, EXTENT) in
    64-wide boxes when MN-major."""
    if MN:
        return tma.shared_tile(tmap, ptr, (1, EXTENT // 64))
    return tma.shared_tile(tmap, ptr)


@tylo.func
def load_stage(tmap, ptr, mn0, k0, bar, EXTENT: tylo.constexpr, MN: tylo.constexpr):
    """TMA-load the operand tile at (mn0, k0) into a ring stage (the plan's coordinates are (k, mn)
    when MN-major)."""
    if MN:
        tma.tma_load(stage_tile(tmap, ptr, EXTENT, MN), tmap, (k0, mn0), bar)
    else:
        tma.tma_load(stage_tile(tmap, ptr, EXTENT, MN), tmap, (mn0, k0), bar)


@tylo.func
def load_stage_multicast(tmap, ptr, mn0, k0, bar, MASK: tylo.constexpr, EXTENT: tylo.constexpr, MN: tylo.constexpr):
    """``load_stage`` into the same ring stage of every CTA of the cluster in ``MASK`` (TMA multicast:
    each one's ``bar`` at the same offset counts the bytes)."""
    if MN:
        tma.tma_load_tile(tmap.plan, tmap, stage_tile(tmap, ptr, EXTENT, MN), (k0, mn0), bar, multicast=MASK)
    else:
        tma.tma_load_tile(tmap.plan, tmap, stage_tile(tmap, ptr, EXTENT, MN), (mn0, k0), bar, multicast=MASK)


@functools.lru_cache(maxsize=None)
def row_mask(cluster_m, cluster_n):
    """The cluster ranks ``cluster_m j`` (j < cluster_n) as a CTA mask: the CTAs of cluster row 0, which take
    one M tile and share its A tile (``rank % cluster_m`` is a CTA's row, ``rank // cluster_m`` its column)."""
    return sum(1 << (cluster_m * j) for j in range(cluster_n))


@tylo.func
def load_shared_stage(tmap, ptr, mn0, k0, bar, ring, rank, CLUSTER_M: tylo.constexpr, CLUSTER_N: tylo.constexpr,
                      SHARED_ALONG_M: tylo.constexpr, EXTENT: tylo.constexpr, MN: tylo.constexpr):
    """``load_stage`` of an operand tile that several CTAs of a CLUSTER_M x CLUSTER_N cluster share (rank r sits at
    row ``r % CLUSTER_M``, column ``r // CLUSTER_M``): B (SHARED_ALONG_M) by the CTAs of a column, A by those of a
    row. At ring step ``ring`` one sharer, taken in turn, loads it into the stage of every one of them (TMA
    multicast); unshared (one sharer), each CTA loads its own."""
    if SHARED_ALONG_M:
        if CLUSTER_M == 1:
            load_stage(tmap, ptr, mn0, k0, bar, EXTENT, MN)
        else:
            if ring % CLUSTER_M == rank % CLUSTER_M:
                column = rank // CLUSTER_M
                load_stage_multicast(tmap, ptr, mn0, k0, bar, ((1 << CLUSTER_M) - 1) << (CLUSTER_M * column),
                                     EXTENT, MN)
    else:
        if CLUSTER_N == 1:
            load_stage(tmap, ptr, mn0, k0, bar, EXTENT, MN)
        else:
            if ring % CLUSTER_N == rank // CLUSTER_M:
                load_stage_multicast(tmap, ptr, mn0, k0, bar, row_mask(CLUSTER_M, CLUSTER_N) << (rank % CLUSTER_M),
                                     EXTENT, MN)


@tylo.func
def release_stage(bar, CLUSTER: tylo.constexpr):
    """A consumer warpgroup frees a ring stage: one arrival on ``empty`` of its own CTA, or, in a cluster
    whose CTAs multicast into each other's stages, on that stage's ``empty`` of every CTA of the cluster
    (each producer may refill the stage only when every CTA it writes into has released it)."""
    if CLUSTER == 1:
        mb.mbarrier_arrive(bar)
    else:
        for r in tylo.static_range(CLUSTER):
            mb.mbarrier_arrive_cluster(bar, r)


@tylo.func
def group_tile(tile, num_g, num_gn, rank, GROUP_M: tylo.constexpr, CLUSTER_M: tylo.constexpr,
               CLUSTER_N: tylo.constexpr):
    """(M tile, N tile) of cluster rank ``rank`` in job ``tile``: jobs are groups of CLUSTER_M x CLUSTER_N
    adjacent tiles, walked in grouped order over ``num_g`` x ``num_gn`` groups; rank r takes the group's tile
    at row ``r % CLUSTER_M``, column ``r // CLUSTER_M`` (a split-K cluster's CTAs all take the job's tile)."""
    pg, pgn = tile_coords(tile, num_g, num_gn, GROUP_M)
    if CLUSTER_M * CLUSTER_N == 1:
        return pg, pgn
    return pg * CLUSTER_M + rank % CLUSTER_M, pgn * CLUSTER_N + rank // CLUSTER_M


@tylo.func
def operand(PLAN: tylo.constexpr, role, tmap, ptr, mn0, K0: tylo.constexpr, EXTENT: tylo.constexpr,
            MN: tylo.constexpr):
    """The WGMMA operand at (mn0, K0) of a ring stage, viewed as (mn, k) (the transpose when MN-major)."""
    if MN:
        return wg.wgmma_operand(PLAN, role, tylo.permutedims(stage_tile(tmap, ptr, EXTENT, MN), (1, 0)), (mn0, K0))
    return wg.wgmma_operand(PLAN, role, stage_tile(tmap, ptr, EXTENT, MN), (mn0, K0))


@tylo.func
def mma_stage(PLAN: tylo.constexpr, a_map, b_map, pa, pb, m0, acc, A_MN: tylo.constexpr, B_MN: tylo.constexpr,
              TM: tylo.constexpr, TN: tylo.constexpr):
    """The WGMMAs of one K step from a ring stage (A: TM x BK, B: TN x BK): BK / PLAN.k groups (one for
    bf16, two for fp8, whose plans stop at K = 64 while the 128-byte TMA row holds 128)."""
    for kk in tylo.static_range(k_step(PLAN.dtype) // PLAN.k):
        a = operand(PLAN, wg.OperandA, a_map, pa, m0, kk * PLAN.k, TM, A_MN)
        b = operand(PLAN, wg.OperandB, b_map, pb, 0, kk * PLAN.k, TN, B_MN)
        acc = wg.mma_async(PLAN, a, b, acc)
    return acc


@functools.lru_cache(maxsize=None)
def fragment_order(tn):
    """The (64, tn) layout of a consumer's f32 partial tile in the fixup workspace, in accumulator
    register order: thread t's slots v (``Ownership.wgmma_accumulator(tn)``) lie at
    ``4 t + v % 4 + 512 (v // 4)``, so each thread stores and loads its own 16-byte groups (coalesced
    across the warpgroup) and a partial goes back into the same fragment with no exchange of values."""
    return Layout(((8, 2, 4), (2, 4, tn // 8)), ((16, 2, 128), (1, 4, 512)))


@functools.lru_cache(maxsize=None)
def accumulator_ownership(tn):
    return Ownership.wgmma_accumulator(tn)


@tylo.func
def job_range(job, dp_tiles, workers, ktiles, sk_iters):
    """``[start, end)``: the K iterations of a job in the tile-major iteration space (tile t holds
    ``[t ktiles, (t+1) ktiles)``). Jobs below ``dp_tiles`` are whole tiles (data-parallel); job
    ``dp_tiles + w`` is stream-K worker w, which takes an even share of the ``sk_iters`` iterations of
    the remaining tiles (split-K is the case where the shares end at tile boundaries)."""
    start = job * ktiles
    end = start + ktiles
    if job >= dp_tiles:
        w = job - dp_tiles
        start = dp_tiles * ktiles + w * sk_iters // workers
        end = dp_tiles * ktiles + (w + 1) * sk_iters // workers
    return start, end


@tylo.func
def partial_slot(w, base, workers, sk_iters):
    """Workspace slot of worker w's partial tile of the stream-K tile starting at (stream-K) iteration
    ``base``: 2w when w's range starts inside that tile, 2w + 1 when it started in an earlier one (a
    worker has at most two partial tiles: its first and its last)."""
    return 2 * w + tylo.where(w * sk_iters // workers < base, 1, 0)


@tylo.func
def partial_tile(ws, slot, cons, TM: tylo.constexpr, TN: tylo.constexpr):
    """Consumer ``cons``'s 64 x TN half of a workspace slot (register order, ``fragment_order``)."""
    return tylo.GlobalTile(ws + (slot * TM + cons * 64) * TN, fragment_order(TN))


@functools.lru_cache(maxsize=None)
def reduction_unroll(tn, consumers):
    """Partials the fixup loads at once before adding them: as many as fit beside the running sum (tn / 2 f32
    registers each) without spilling: 4 for tn <= 32 (or 64 with one consumer, which has the whole register
    file), 2 up to 64 (128 with one consumer), else 1."""
    if tn <= 32 or (tn <= 64 and consumers == 1):
        return 4
    return 2 if tn <= 64 or (tn <= 128 and consumers == 1) else 1


def fitted_reduction_rounds(partials, tn, consumers):
    """The rounds the cost model charges: those of the fixup its constants were fitted to (sessions 6-14: the
    first partial alone, then groups of 2, or 4 for tn <= 32). Session 15's grouped loads (``ceil(partials /
    reduction_unroll)`` rounds) took 3-5% off 64-wide split-K 4 and 8 and left the rest level (validation.md,
    session 15 run 3); charging them moved picks to split-K clusters, whose reduction they do not change
    (257x776x4104 rc: 13.7 -> 15.3 us), so the model keeps the fitted rounds until a refit against sweeps of
    this kernel."""
    unroll = 4 if tn <= 32 else 2 if tn <= 64 or (tn <= 128 and consumers == 1) else 1
    return -(-(partials - 1) // unroll) + 1


@tylo.func
def load_partial(ws, w, base, workers, sk_iters, cons, TM: tylo.constexpr, TN: tylo.constexpr):
    """Worker w's partial of the cut tile starting at stream-K step ``base`` (this consumer's half)."""
    return tylo.load(partial_tile(ws, partial_slot(w, base, workers, sk_iters), cons, TM, TN),
                     accumulator_ownership(TN))


@tylo.func
def add_partials(res, ws, v, base, workers, sk_iters, cons, COUNT: tylo.constexpr, TM: tylo.constexpr,
                 TN: tylo.constexpr):
    """``res`` plus the partials of workers ``v .. v + COUNT - 1`` in worker order, all COUNT loaded before the
    first addition (one round of L2 latency for the group)."""
    parts = [load_partial(ws, v + i, base, workers, sk_iters, cons, TM, TN) for i in tylo.static_range(COUNT)]
    for part in parts:
        res = res + part
    return res


@tylo.func
def fixup(res, ws, counters, flags, job, tile, dp_tiles, workers, ktiles, sk_iters, cons, lead,
          TM: tylo.constexpr, TN: tylo.constexpr, CONSUMERS: tylo.constexpr):
    """Deterministic in-kernel reduction of a tile whose K range is cut between jobs (split-K, stream-K).
    Every contributor writes its f32 partial to its workspace slot; its lead thread fences (release) and counts
    the half's arrival on the tile's counter (one per consumer half); the one that arrives last fences (acquire),
    sums all partials in worker order (a fixed order: bitwise the same whoever is last), resets the
    counter for the next launch and returns ``(1, sum)``; the others return ``(0, res)``. Nobody waits."""
    u = tile - dp_tiles
    base = u * ktiles
    w = job - dp_tiles
    tylo.store(partial_tile(ws, partial_slot(w, base, workers, sk_iters), cons, TM, TN), res)
    mb.named_barrier_sync(1 + cons, 128)          # the whole half's partial is written
    first = ((base + 1) * workers - 1) // sk_iters              # the workers owning the tile's first
    last = ((base + ktiles) * workers - 1) // sk_iters          # and last iterations
    counter = counters + (u * CONSUMERS + cons)
    # one fence per half, by the lead, in place of one per thread: the barrier orders the half's stores before
    # the lead's release fence and its acquire fence before the half's loads (the memory model's patterns
    # compose through a CTA barrier, as CUTLASS's semaphores rely on)
    if lead:
        tylo.fence_acq_rel("gpu")                 # release the half's partial
        arrived = tylo.atomic_add(counter, 1)
        is_last = arrived == last - first
        if is_last:
            tylo.fence_acq_rel("gpu")             # acquire the other workers' partials
        flags[cons] = tylo.where(is_last, 1, 0)
    mb.named_barrier_sync(1 + cons, 128)
    done = flags[cons]
    if done != 0:
        # the partials in worker order, loaded UNROLL at a time so their L2 latencies overlap (a loop of
        # load-then-add pays one latency per partial), the remainder as one group: ceil(partials / UNROLL)
        # rounds; the additions stay in worker order, from -0.0 (the exact identity: bitwise the partials'
        # left-to-right sum)
        UNROLL = reduction_unroll(TN, CONSUMERS)
        res = tylo.full(tylo.f32, accumulator_ownership(TN), -0.0)
        v = first
        for _ in range((last + 1 - first) // UNROLL):
            res = add_partials(res, ws, v, base, workers, sk_iters, cons, UNROLL, TM, TN)
            v += UNROLL
        left = last + 1 - v
        for count in tylo.static_range(1, UNROLL):
            if left == count:
                res = add_partials(res, ws, v, base, workers, sk_iters, cons, count, TM, TN)
        if lead:
            tylo.atomic_exch(counter, 0)
    return done, res


def ring_holds_partials(cluster_k, tm, tn, stages):
    """Whether a ring of ``stages`` (tm + tn)-row stages of 128-byte rows holds the ``cluster_k - 1`` f32
    tm x tn partials that ``cluster_reduce``'s rank 0 receives (the one statement: GemmConfig and the kernel)."""
    return (cluster_k - 1) * tm * tn * 4 <= stages * (tm + tn) * 128


@tylo.func
def cluster_reduce(res, ring, red, rank, cons, lead, TM: tylo.constexpr, TN: tylo.constexpr,
                   CLUSTER_K: tylo.constexpr, CONSUMERS: tylo.constexpr):
    """Split-K through distributed shared memory: the CLUSTER_K CTAs of a cluster computed the K ranges of one
    tile (rank r the r-th) and each runs only that job, so a CTA's ring is free once its WGMMAs complete.
    Rank 0 then tells the others (``red[1]``, remote arrivals) and they store their f32 partials into its ring
    (``store_remote``: st.async, counted off rank 0's ``red[0]``); rank 0 adds them to its own in rank order
    (bitwise the same every run). No workspace, counters or GPU-scope fences. Returns ``(rank == 0, sum)``."""
    full = red                  # rank 0: every partial has landed in its ring
    ready = red + 1             # ranks 1..: rank 0's ring may be written
    parts = tylo.bitcast(ring, tylo.f32)
    if CONSUMERS == 2:
        mb.named_barrier_sync(3, 256)       # both consumers' WGMMAs are complete: the shared B stages are free
    done = 0
    if rank == 0:
        if lead & (cons == 0):
            mb.mbarrier_arrive_expect_tx(full, (CLUSTER_K - 1) * TM * TN * 4)
            for r in tylo.static_range(1, CLUSTER_K):
                mb.mbarrier_arrive_cluster(ready, r)
        mb.mbarrier_wait(full, 0)
        for r in tylo.static_range(1, CLUSTER_K):
            part = tylo.SharedTile(parts + ((r - 1) * TM + cons * 64) * TN, fragment_order(TN))
            res = res + tylo.load(part, accumulator_ownership(TN))
        done = 1
    else:
        mb.mbarrier_wait(ready, 0)
        part = tylo.SharedTile(parts + ((rank - 1) * TM + cons * 64) * TN, fragment_order(TN))
        tylo.store_remote(part, res, full, 0)
    return done, res


@tylo.jit
def hopper_gemm(c_map, a_map, b_map, out, ws, counters, M, N, K, ld_row, ld_col, dp_tiles, workers,
                STAGES: tylo.constexpr = 4, GROUP_M: tylo.constexpr = 8, C_BUFS: tylo.constexpr = 2,
                A_MN: tylo.constexpr = False, B_MN: tylo.constexpr = False, DTYPE: tylo.constexpr = tylo.bf16,
                TN: tylo.constexpr = 256, CONSUMERS: tylo.constexpr = 2, DIRECT: tylo.constexpr = False,
                FIXUP: tylo.constexpr = False, CLUSTER_M: tylo.constexpr = 1, CLUSTER_N: tylo.constexpr = 1,
                CLUSTER_K: tylo.constexpr = 1, C_T: tylo.constexpr = False):
    """C_BUFS: 64x64 bf16 staging tiles per consumer (4 covers a whole 64 x 256 row band).
    A_MN / B_MN: the operand is MN-major (A column-major, B row-major), else K-major.
    DTYPE: the input type, bf16 or fp8 (e4m3/e5m2: K-major only; C is bf16 either way).
    TN x (64 * CONSUMERS): the CTA tile. DIRECT: the epilogue stores from registers through ``out``
    (bounds-checked, element (r, c) at ``out + r * ld_row + c * ld_col``) instead of TMA stores through
    ``c_map``. C_T: the kernel's C is the transpose of ``c_map``'s (swap-AB through the TMA epilogue).
    Work: ``dp_tiles`` whole tiles, then ``workers`` stream-K workers sharing the K iterations of the other
    tiles evenly (``job_range``). FIXUP: compile the reduction of tiles cut between workers (``fixup``:
    f32 partials in ``ws``, arrival counts in ``counters``, zero between launches); without it
    ``workers`` must be 0.
    CLUSTER_M x CLUSTER_N: launched in clusters of that many CTAs (``cluster=(CLUSTER_M * CLUSTER_N, 1, 1)``, no
    fixup) that take a CLUSTER_M x CLUSTER_N group of adjacent tiles (rank r the tile at row ``r % CLUSTER_M``,
    column ``r // CLUSTER_M`` of the group): a job is such a group, ``dp_tiles`` counts groups. The CTAs of a
    column share their B tile, those of a row their A tile: at ring step r, one CTA of each column (row), in turn,
    loads it into every CTA of that column (row) by TMA multicast. A stage's ``empty`` barrier counts the
    releases of the consumers of every CTA of the cluster (remote arrivals), so no producer overwrites a stage a
    peer still reads. A CTA whose tile lies past M or N still loads (zero-filled), computes and releases, but
    stores nothing. CLUSTER_K: split-K whose ``workers`` (K ranges, consecutive per tile) run as clusters of
    CLUSTER_K CTAs, one job per CTA (grid = ``workers``), summed in rank 0's shared memory (``cluster_reduce``; no
    fixup); it takes no CLUSTER_M or CLUSTER_N."""
    PLAN = wgmma_plan(DTYPE, TN)
    BK = k_step(DTYPE)
    TM = 64 * CONSUMERS
    GROUPS = BK // PLAN.k                    # WGMMA groups per K step
    SHARERS = CLUSTER_M * CLUSTER_N          # CTAs whose ring stages are filled together (multicast)
    CLUSTER = SHARERS * CLUSTER_K            # CTAs per cluster
    # the A stages, then the B stages (one array: cluster_reduce reuses all of it for the partials)
    stages_smem = tylo.shared_array(DTYPE, (STAGES * (TM + TN) * BK,), align=1024)
    tylo.static_assert(ring_holds_partials(CLUSTER_K, TM, TN, STAGES),
                       "the ring must hold the CLUSTER_K - 1 partial tiles that rank 0 receives")
    sa_ptr = stages_smem.ptr
    sb_ptr = stages_smem.ptr + STAGES * TM * BK
    sc = tylo.shared_array(tylo.bf16, (staging_elems(DIRECT, CONSUMERS, C_BUFS),), align=1024)
    bars = tylo.shared_array(tylo.u64, (2 * STAGES,), align=8)
    if FIXUP:
        flags = tylo.shared_array(tylo.i32, (2,), align=8)      # "this half arrived last", per consumer
    if CLUSTER_K > 1:
        red = tylo.shared_array(tylo.u64, (2,), align=8)        # cluster_reduce's two barriers
    full = bars.ptr
    empty = bars.ptr + STAGES
    tid = tylo.thread_idx.x
    # programmatic dependent launch: the kernel waits for the previous one on its stream (grid_dependency_wait,
    # below) only before its first global access, so its launch and barrier set-up overlap that kernel's tail
    # (0.5-1 us a launch). It calls no launch_dependents: the next kernel starts as this one's CTAs exit; an
    # early call measured up to 12% slower on HBM-bound shapes (docs/hopper.md, "Programmatic dependent launch")
    if tid == 0:
        tma.prefetch_tma_descriptor(a_map)
        tma.prefetch_tma_descriptor(b_map)
        if not DIRECT:
            tma.prefetch_tma_descriptor(c_map)
        for s in tylo.static_range(STAGES):
            mb.mbarrier_init(full + s, 1)         # the producer's arrive.expect_tx (+ TMA bytes)
            mb.mbarrier_init(empty + s, CONSUMERS * SHARERS)    # one release per consumer warpgroup (of each CTA)
        if CLUSTER_K > 1:
            mb.mbarrier_init(red.ptr, 1)          # rank 0's arrive.expect_tx (+ the partials' bytes)
            mb.mbarrier_init(red.ptr + 1, 1)      # rank 0's remote arrival
        mb.fence_mbarrier_init()
        mb.fence_view_async_shared()
    if CLUSTER == 1:
        tylo.sync_threads()
    else:
        # every CTA's barriers are initialised before a peer multicasts or arrives on them: fence_mbarrier_init
        # published the initialisation, so the arrival orders nothing (relaxed: no GPU-scope memory barrier)
        mb.cluster_sync(relaxed=True)
    sync.grid_dependency_wait()

    num_m = (M + TM - 1) // TM
    num_n = (N + TN - 1) // TN
    num_g = (num_m + CLUSTER_M - 1) // CLUSTER_M     # tile rows and columns of the cluster groups
    num_gn = (num_n + CLUSTER_N - 1) // CLUSTER_N
    ktiles = (K + BK - 1) // BK
    sk_iters = (num_g * num_gn - dp_tiles) * ktiles     # the stream-K tiles' iterations
    rank = tylo.block_idx.x % CLUSTER                   # the cluster rank: clusters are CLUSTER x 1 x 1
    first_job = tylo.block_idx.x // SHARERS             # (a job per CTA with CLUSTER_K)
    job_step = tylo.grid_dim.x // SHARERS
    jobs = dp_tiles + workers
    # one consumer: lane 0's warpgroup index, provably warp-uniform, so ptxas keeps the ring positions,
    # barrier addresses and WGMMA descriptors in uniform registers (the small-tile K loop's cost:
    # docs/hopper.md); two consumers measured 0.5-2% faster without the broadcast (validation.md, session 9)
    if CONSUMERS == 1:
        wgi = tylo.shfl_sync(mb.warpgroup_idx(), 0)
    else:
        wgi = mb.warpgroup_idx()
    if wgi == 0:
        if CONSUMERS == 2:
            mb.setmaxnreg_dec(PRODUCER_REGS)
        if tid == 0:
            ring = 0
            for job in range(first_job, jobs, job_step):
                it, end = job_range(job, dp_tiles, workers, ktiles, sk_iters)
                while it < end:                   # one segment (a tile's K range) per trip
                    tile = it // ktiles
                    kb = it - tile * ktiles
                    ke = tylo.minimum(ktiles, kb + (end - it))
                    pm, pn = group_tile(tile, num_g, num_gn, rank, GROUP_M, CLUSTER_M, CLUSTER_N)
                    for kt in range(kb, ke):
                        s = ring % STAGES
                        mb.mbarrier_wait(empty + s, ((ring // STAGES) & 1) ^ 1)   # a fresh ring is free
                        mb.mbarrier_arrive_expect_tx(full + s, (TM + TN) * 128)
                        # A is shared by a cluster row (its N tiles), B by a cluster column (its M tiles)
                        load_shared_stage(a_map, sa_ptr + s * (TM * BK), pm * TM, kt * BK, full + s, ring, rank,
                                          CLUSTER_M, CLUSTER_N, False, TM, A_MN)
                        load_shared_stage(b_map, sb_ptr + s * (TN * BK), pn * TN, kt * BK, full + s, ring, rank,
                                          CLUSTER_M, CLUSTER_N, True, TN, B_MN)
                        ring += 1
                    it += ke - kb
            if SHARERS > 1:
                # the load tail: the peers' consumers release this CTA's stages by remote arrivals; wait until
                # the last STAGES loads are released everywhere, so none reaches this CTA after it exits
                for tail in range(ring, ring + STAGES):
                    mb.mbarrier_wait(empty + tail % STAGES, ((tail // STAGES) & 1) ^ 1)
    else:
        if CONSUMERS == 2:
            mb.setmaxnreg_inc(CONSUMER_REGS)
        cons = wgi - 1
        lead = tid % 128 == 0
        ring = 0
        for job in range(first_job, jobs, job_step):
            it, end = job_range(job, dp_tiles, workers, ktiles, sk_iters)
            while it < end:
                tile = it // ktiles
                kb = it - tile * ktiles
                ke = tylo.minimum(ktiles, kb + (end - it))
                it += ke - kb
                pm, pn = group_tile(tile, num_g, num_gn, rank, GROUP_M, CLUSTER_M, CLUSTER_N)
                s = ring % STAGES
                mb.mbarrier_wait(full + s, (ring // STAGES) & 1)
                pending = mma_stage(PLAN, a_map, b_map, sa_ptr + s * (TM * BK), sb_ptr + s * (TN * BK), cons * 64,
                                    zero_accumulator(PLAN), A_MN, B_MN, TM, TN)
                prev = s
                ring += 1
                for _kt in range(kb + 1, ke):
                    s = ring % STAGES
                    mb.mbarrier_wait(full + s, (ring // STAGES) & 1)
                    pending = mma_stage(PLAN, a_map, b_map, sa_ptr + s * (TM * BK), sb_ptr + s * (TN * BK),
                                        cons * 64, pending, A_MN, B_MN, TM, TN)
                    pending = wg.wait_mma(pending, GROUPS)   # step kt-1 is complete: release its stage
                    if lead:
                        release_stage(empty + prev, SHARERS)
                    prev = s
                    ring += 1
                acc = wg.wait_mma(pending)
                if lead:
                    release_stage(empty + prev, SHARERS)
                res = wg.finish_mma(acc)
                done = 1
                if FIXUP:
                    if (kb > 0) | (ke < ktiles):         # a tile cut between workers
                        done, res = fixup(res, ws, counters, flags.ptr, job, tile, dp_tiles, workers, ktiles,
                                          sk_iters, cons, lead, TM, TN, CONSUMERS)
                if CLUSTER_K > 1:
                    done, res = cluster_reduce(res, stages_smem.ptr, red.ptr, rank, cons, lead, TM, TN, CLUSTER_K,
                                               CONSUMERS)
                if SHARERS > 1:
                    done = tylo.where((pm < num_m) & (pn < num_n), 1, 0)   # a cluster's tile past M or N stores nothing
                if done != 0:
                    epilogue(res, c_map, out, sc.ptr, pm * TM + cons * 64, pn * TN, M, N, ld_row, ld_col, cons,
                             lead, TN, C_BUFS, DIRECT, C_T)
        if not DIRECT:
            if lead:
                tma.wait_tma_stores(0)
    # no exit barrier for clusters: every remote access to a CTA is one it waits for before exiting (multicast
    # loads: its consumers wait on every stage; peers' releases: the load tail; split_cluster: rank 0 waits
    # for the partials, the others for rank 0's arrival), which is cheaper than the barrier's GPU-scope release


@tylo.func
def epilogue(res, c_map, out, staging, row, col, M, N, ld_row, ld_col, cons, lead, TN: tylo.constexpr,
             C_BUFS: tylo.constexpr, DIRECT: tylo.constexpr, C_T: tylo.constexpr):
    """bf16 C of a consumer's 64 x TN f32 result at (row, col); with C_T the result is a tile of C^T, stored
    transposed into staging laid out as C (``stmatrix.trans``) and from there at (col, row) of C."""
    if DIRECT:
        # from registers, each element bounds-checked: any output layout (the transpose for swap-AB), any N
        dst = tylo.GlobalTile(out, Layout((M, N), (ld_row, ld_col)))
        view = tylo.window(dst, (row, col), (64, TN), check=False)
        tylo.store(view, res.astype(tylo.bf16), bounds=(M - row, N - col))
    else:
        # bf16 through swizzled staging tiles, TMA stores (clipped at M, N)
        out16 = res.astype(tylo.bf16)
        if lead:
            tma.wait_tma_reads(0)                 # the previous tile's stores have read the staging
        mb.named_barrier_sync(1 + cons, 128)
        # 64-column chunks of c_plan boxes (the last narrower when TN is not a multiple of 64)
        for j in tylo.static_range((TN + 63) // 64):
            if j >= C_BUFS:
                if lead:
                    tma.wait_tma_reads(C_BUFS - 1)
                mb.named_barrier_sync(1 + cons, 128)
            chunk = tylo.window(out16, (0, 64 * j), (64, c_chunk_columns(TN, j)))
            base = staging + (cons * C_BUFS + j % C_BUFS) * (64 * 64)
            # C^T: the chunk is a band of C's columns, written through the transposed view (stmatrix.trans)
            buf = tma.shared_tile(c_map, base, (c_chunk_boxes(TN, j, True), 1) if C_T else (1, c_chunk_boxes(TN, j)))
            tylo.store(permutedims(buf) if C_T else buf, chunk)
            mb.fence_view_async_shared()
            mb.named_barrier_sync(1 + cons, 128)
            if lead:
                tma.tma_store(c_map, buf, (col + 64 * j, row) if C_T else (row, col + 64 * j))
                tma.commit_tma_stores()


# A TMATile in a signature list stands for a TMA binding of that plan (prepare_tma).
# out, ws, counters, M, N, K, ld_row, ld_col, dp_tiles, workers
_RUNTIME = ["*bf16", "*f32", "*i32", "i32", "i32", "i32", "i32", "i32", "i32", "i32"]
AOT = [(hopper_gemm, [C_TILE, A_TILE, B_TILE, *_RUNTIME], {"STAGES": 4, "GROUP_M": 8, "C_BUFS": 2},
        THREADS),
       (hopper_gemm, [C_TILE, MN_TILE, MN_TILE, *_RUNTIME],
        {"STAGES": 4, "GROUP_M": 8, "C_BUFS": 2, "A_MN": True, "B_MN": True}, THREADS),
       (hopper_gemm, [C_TILE, a_tile(tylo.f8e4m3), b_tile(tylo.f8e4m3), *_RUNTIME],
        {"STAGES": 4, "GROUP_M": 8, "C_BUFS": 2, "DTYPE": tylo.f8e4m3}, THREADS)]


# static + dynamic shared memory of a CTA (nvJitLink reports 1024 static bytes for sm_90a kernels: the 1024
# in GemmConfig.shared_bytes and max_stages)
SHARED_LIMIT = resource_limits("sm_90a").shared_bytes_per_block
SM_RESERVED_SHARED = resource_limits("sm_90a").reserved_shared_bytes      # the driver's, per CTA
SM_SHARED_BYTES = SHARED_LIMIT + SM_RESERVED_SHARED                        # one SM's 228 KB
MAX_STAGES = 8
CLUSTER_SIDES = (1, 2, 4)
MAX_CLUSTER = 8         # CTAs: the portable cluster size


@dataclass(frozen=True)
class GemmConfig:
    """How ``launch`` runs one product. The CTA tile is (64 * consumers) x tn of the kernel's C, which is
    C itself, or C^T when ``swap_ab`` (C^T = B^T A^T: a small M becomes the WGMMA's N, which can be 8).
    ``split_k`` > 1 cuts each tile's K into that many ranges, ``stream_k`` gives the tiles past the last
    full wave to a persistent grid in even shares of K iterations (``schedule``); either way the CTA
    that finishes a cut tile last sums its f32 partials in a fixed order (``fixup``), in the same kernel.
    ``direct``: the epilogue stores from registers (needed for N not a multiple of 8, and for tn not a multiple
    of 16 without swap_ab) instead of through shared memory and TMA (with swap_ab, C^T transposed on the way:
    ``c_transposed``). ``cluster_m`` = 2: 2 x 1 thread-block
    clusters whose two CTAs take vertically adjacent tiles and share their B tile through TMA multicast
    (half the B traffic from L2; no split-K / stream-K); ``cluster_n`` = 2: the same for horizontally
    adjacent tiles, which share their A tile; both up to 4, at most 8 CTAs together (a column of the
    cluster shares B, a row A). ``split_cluster``: the ``split_k`` CTAs of a tile run as one
    cluster and sum their partials in the first one's shared memory (``cluster_reduce``: no workspace,
    counters or GPU-scope fences; split_k from 2 to 8, the partials must fit in the ring, one job per CTA).
    ``split_tail``: split_k cuts only the tiles past the last full wave (the tail, ``tiles % sms``); the
    full waves run whole tiles. Where the tail is at most half a wave, it then takes 1 / split_k of a
    tile's time instead of a whole one (wave quantisation), and every cut tile's workers start at the same
    K offsets, as whole tiles do (stream-K's shares, which cross tiles, measured slower)."""
    tn: int = BN
    consumers: int = 2
    stages: int = 4
    group_m: int = 8
    c_bufs: int = 2
    split_k: int = 1
    swap_ab: bool = False
    direct: bool = False
    stream_k: bool = False
    cluster_m: int = 1
    cluster_n: int = 1
    split_cluster: bool = False
    split_tail: bool = False

    def __post_init__(self):
        if self.consumers not in (1, 2):
            raise ValueError(f"GemmConfig: consumers is 1 or 2 (64 or 128 rows), got {self.consumers}")
        if not (8 <= self.tn <= 256 and self.tn % 8 == 0):
            raise ValueError(f"GemmConfig: tn is a multiple of 8 from 8 to 256 (WGMMA's N), got {self.tn}")
        if self.stages < 2 or self.group_m < 1 or self.c_bufs < 1 or self.split_k < 1:
            raise ValueError(f"GemmConfig: stages >= 2, group_m, c_bufs and split_k >= 1; got {self}")
        if self.stream_k and self.split_k > 1:
            raise ValueError(f"GemmConfig: stream_k and split_k > 1 are two schedules; choose one: {self}")
        if (self.cluster_m not in CLUSTER_SIDES or self.cluster_n not in CLUSTER_SIDES
                or self.cluster_m * self.cluster_n > MAX_CLUSTER):
            raise ValueError(f"GemmConfig: cluster_m (M tiles sharing B) and cluster_n (N tiles sharing A) are each "
                             f"one of {CLUSTER_SIDES}, at most {MAX_CLUSTER} CTAs together; got {self}")
        if self.split_cluster and not (2 <= self.split_k <= 8 and self.cluster_m * self.cluster_n == 1):
            raise ValueError(f"GemmConfig: split_cluster runs the split_k (2 to 8) CTAs of a tile as one cluster, "
                             f"without cluster_m / cluster_n; got {self}")
        if self.split_tail and not (self.split_k > 1 and not self.split_cluster):
            raise ValueError(f"GemmConfig: split_tail cuts the tail's tiles split_k ways through the fixup: it needs "
                             f"split_k > 1 and no split_cluster; got {self}")
        if self.split_cluster and not ring_holds_partials(self.split_k, self.tm, self.tn, self.stages):
            raise ValueError(f"GemmConfig: split_cluster's {self.split_k - 1} f32 partial tiles do not fit in the "
                             f"ring of {self.stages} stages that receives them; use more stages or fewer splits: "
                             f"{self}")
        if self.cluster_m * self.cluster_n > 1 and self.fixup:
            raise ValueError(f"GemmConfig: clusters run whole tiles; they do not combine with split_k or "
                             f"stream_k: {self}")
        if not self.direct and not self.swap_ab and self.tn % 16:
            raise ValueError(f"GemmConfig: tn % 16 != 0 needs direct=True or swap_ab (the TMA epilogue stores boxes "
                             f"16, 32 or 64 columns wide, or 8 to 64 rows of C^T: c_tile); got {self}")
        if self.shared_bytes > SHARED_LIMIT:
            raise ValueError(f"GemmConfig: {self.shared_bytes} bytes of shared memory, more than the "
                             f"{SHARED_LIMIT} a CTA may use; use fewer stages: {self}")

    @property
    def tm(self):
        return 64 * self.consumers

    @property
    def threads(self):
        return threads(self.consumers)

    @property
    def shared_bytes(self):
        staging = 2 * staging_elems(self.direct, self.consumers, self.c_bufs)
        return (self.stages * (self.tm + self.tn) * 128 + staging + 16 * self.stages + 8 * self.fixup
                + 16 * self.split_cluster + 1024)

    @property
    def fixup(self):
        """The kernel reduces tiles cut between workers (split-K or stream-K) through global memory."""
        return (self.split_k > 1 and not self.split_cluster) or self.stream_k

    @property
    def cluster_k(self):
        """CTAs of a split_cluster cluster (the kernel's CLUSTER_K), else 1."""
        return self.split_k if self.split_cluster else 1

    def constexprs(self, dtype, a_mn, b_mn):
        """The kernel's constexpr parameters in order (STAGES .. C_T)."""
        return (self.stages, self.group_m, self.c_bufs, a_mn, b_mn, dtype, self.tn, self.consumers,
                self.direct, self.fixup, self.cluster_m, self.cluster_n, self.cluster_k, self.c_transposed)

    @property
    def c_transposed(self):
        """The TMA epilogue stores the kernel's C^T (swap-AB without direct)."""
        return self.swap_ab and not self.direct

    @property
    def cluster_size(self):
        return self.cluster_m * self.cluster_n * self.cluster_k

    @property
    def cluster(self):
        """The launch's cluster shape (the pair's CTAs are consecutive along x), or None without clusters."""
        return (self.cluster_size, 1, 1) if self.cluster_size > 1 else None


def max_stages(tm, tn, direct, consumers, c_bufs=2):
    fixed = 2 * staging_elems(direct, consumers, c_bufs) + 8 + 1024
    return min(MAX_STAGES, (SHARED_LIMIT - fixed) // ((tm + tn) * 128 + 16))


@dataclass(frozen=True)
class Schedule:
    """How the work of one launch is cut: ``grid`` persistent CTAs take jobs ``block, block + grid, ...``;
    jobs below ``dp_tiles`` are whole tiles, the ``workers`` jobs after them share the other tiles' K
    iterations evenly (``job_range`` in the kernel). ``cut_tiles``: tiles whose K range is split between
    workers (they need workspace slots and counters)."""
    grid: int
    dp_tiles: int
    workers: int
    tiles: int
    ktiles: int
    cluster: int = 1        # CTAs per cluster: a job is a column of that many vertically adjacent tiles

    @property
    def job_slots(self):
        """Jobs that run at once: one per cluster."""
        return self.grid // self.cluster

    @property
    def sk_iters(self):
        return (self.tiles - self.dp_tiles) * self.ktiles

    def worker_range(self, w):
        """Worker w's ``[start, end)`` stream-K iterations (the kernel's ``job_range``, host side)."""
        return w * self.sk_iters // self.workers, (w + 1) * self.sk_iters // self.workers

    @property
    def cut_tiles(self):
        return self.tiles - self.dp_tiles if self.workers else 0


def k_steps(K, itemsize):
    """K steps of one 128-byte TMA row."""
    return -(-K // (128 // itemsize))


def schedule(config, mk, nk, K, itemsize, sms, resident_clusters=None):
    """The ``Schedule`` of ``config`` for a kernel-orientation (mk, nk, K) problem on ``sms`` SMs.

    * plain: one job per tile, ``min(sms, tiles)`` CTAs.
    * clusters (``cluster_m`` x ``cluster_n``): one job per group of that many adjacent tiles (peers past M or
      N when the tiles do not divide), ``cluster_size`` CTAs per job, ``cluster_size min(slots, groups)`` CTAs,
      where ``slots`` is ``sms // cluster_size``, or ``resident_clusters`` (what the device runs at once, the
      driver's count: ``cluster_slots``) where that is less. E.g. 2 x 1 clusters take pairs of vertically
      adjacent tiles (M tiles 2i, 2i + 1).
    * split-K S: every tile is cut into S even K ranges (S at most the K steps): ``tiles * S`` workers
      whose shares end at tile boundaries (worker w takes tile w // S). With ``split_tail`` only the
      ``tiles % sms`` tiles past the last full wave are cut; the full waves are whole-tile jobs.
    * stream-K (CUTLASS's data-parallel + stream-K hybrid): the tiles past the last full wave, plus one
      full wave when there is one (so every worker gets at least a tile's worth of iterations and a tile
      is cut into at most three pieces), are shared by ``sms`` workers; the others are whole-tile jobs.
    """
    ktiles = k_steps(K, itemsize)
    tiles = -(-mk // config.tm) * -(-nk // config.tn)
    if config.cluster_m * config.cluster_n > 1:
        cs = config.cluster_size
        groups = -(-mk // (config.tm * config.cluster_m)) * -(-nk // (config.tn * config.cluster_n))
        slots = sms // cs if resident_clusters is None else min(sms // cs, resident_clusters)
        return Schedule(cs * max(1, min(slots, groups)), groups, 0, groups, ktiles, cs)
    if config.split_cluster:
        if ktiles < config.split_k:
            raise ValueError(f"hopper_gemm: split_cluster gives each of its {config.split_k} CTAs a K range, but K "
                             f"has {ktiles} steps of {128 // itemsize}; use fewer splits")
        # one job per CTA, the splits of a tile consecutive (a cluster); no fixup, so no workspace
        return Schedule(tiles * config.split_k, 0, tiles * config.split_k, tiles, ktiles)
    if config.split_k > 1:
        split = min(config.split_k, ktiles)
        cut = tiles % sms if config.split_tail else tiles
        plan = (Schedule(min(sms, tiles - cut + cut * split), tiles - cut, cut * split, tiles, ktiles)
                if split > 1 and cut else None)
    elif config.stream_k and tiles % sms:
        cut = tiles % sms + (sms if tiles > sms else 0)
        workers = min(sms, cut * ktiles)
        plan = Schedule(sms if tiles > sms else workers, tiles - cut, workers, tiles, ktiles)
    else:
        plan = None
    if plan is None:
        return Schedule(min(sms, tiles), tiles, 0, tiles, ktiles)
    if plan.workers * max(plan.sk_iters, 1) >= 2 ** 31:     # the kernel's worker ranges are 32-bit products
        raise ValueError(f"hopper_gemm: {plan.workers} workers over {plan.sk_iters} K iterations overflow the "
                         f"kernel's 32-bit share arithmetic; use fewer splits or no stream-K")
    return plan


@functools.lru_cache(maxsize=64)
def cluster_slots(config, dtype, a_mn, b_mn, device=0):
    """How many clusters of ``config``'s kernel (kernel-orientation operand majors) the device runs at once: the
    driver's occupancy count for the specialisation ``launch`` compiles (``spec``). H200: 66 pairs, but 30
    clusters of 4 and 15 of 8 CTAs that each fill an SM (not 33 and 16: a cluster's CTAs share a GPC), where a
    persistent grid sized by the SM count ran 1.6x slower (validation.md, session 13)."""
    compiled = hopper_gemm._compile(spec(a_mn=a_mn, b_mn=b_mn, dtype=dtype, config=config), "sm_90a",
                                    (config.threads, 1, 1))
    return compiled.max_active_clusters(config.cluster_size, config.threads)


def fit_split_cluster(config, K, itemsize):
    """``config`` with no more split_cluster CTAs than K has steps (each needs a K range): fewer splits, or
    none (and no cluster) for a single K step."""
    ktiles = k_steps(K, itemsize)
    if not config.split_cluster or config.split_k <= ktiles:
        return config
    if ktiles >= 2:
        return replace(config, split_k=ktiles)
    return replace(config, split_k=1, split_cluster=False)


DEFAULT = GemmConfig()

# H200 (sm_90) figures for the heuristic's cost model, fitted to the sweeps in docs/validation.md
# (scripts/fit_gemm_model.py scores and refits them against sweeps timed with benchmarks/gemm.py --sweep-json):
# dense bf16 tensor peak, reachable HBM bandwidth, L2 -> shared bandwidth of one SM, the latency that
# bounds one SM's streaming rate by the bytes its ring keeps in flight, and the rate of the register
# epilogue's bounds-checked scalar stores (whole GPU)
PEAK_BF16 = 989e12
HBM_BYTES_S = 3.9e12
SM_BYTES_S = 110e9
REDUCTION_BYTES_S = 110e9       # one SM's reads of f32 partials in the fixup (a constant of its own for the fit)
MEM_LATENCY_S = 1.5e-6
DIRECT_STORES_S = 2.5e11        # elements per second
# a TMA epilogue's fixed cost per tile past the register epilogue's: the session 12 sweeps (scripts/fit_gemm_model.py)
# put 0.1-0.2 us, which only moves 1x8x8 (64 x 8 swap-AB 2.6 us against 64 x 64's 3.3, both layouts) among them
TMA_EPILOGUE_S = 0.15e-6
LAUNCH_S = 3e-6                 # a launch's start, first loads and tail, whatever the configuration
UNIT_OVERHEAD_S = 1.5e-6        # a tile piece's prologue / epilogue latency not hidden by the pipeline
FIXUP_S = 2.5e-6                # a cut piece's partial store, fences, arrival count and barriers (measured)
L2_LATENCY_S = 0.3e-6           # one round of the fixup's partial loads (a load-then-add loop paid it per partial)
# each partial the last arriver sums costs this past its bytes and L2 rounds: fitted to one pair (1x1024x8192
# measured 16 splits of 128 x 8 at 9.8 us, 8 of 64 x 8 at 8.1); only 0.06-0.07 us keeps every pinned order
PARTIAL_S = 0.065e-6
# a split-K run as one cluster (split_cluster) sums its partials in shared memory instead of through the global
# fixup: measured, same configuration and run, 0.4-1.2 us less (sessions 9 and 15: 1x4096x4096, 7x1000x3000,
# 1x1024x8192, 1x4096x14336, 16x4096x14336, 64x4096x14336; 16x1024x8192 level) before session 17 took the cluster
# barriers' release arrivals out (0.5-0.6 us more on those kernels); with it finish_config can weigh another split
# count as a cluster against the pick's (fp8 1x4096x4096 128 x 8 split 3 as a cluster 7.0 us against split 4 7.4)
SPLIT_CLUSTER_SAVING_S = 1.0e-6
NEAR_TIE, NEAR_TIE_FIXUP = 0.97, 0.94     # choose_config's charge on candidates other than the default
# and a further charge on the FITTED_WIDTHS, which the model overrates where a power-of-two width is near: session 13
# (validation.md runs 6-7), 64x4096x4096 64 x 96 split 3 11.5 us against 64 x 64 split-2 cluster's 10.6, 16x1024x8192
# 64 x 80 split 8 11.5 against 64 x 64's 11.2; with it the fitted widths win only where they measured faster
NEAR_TIE_FITTED = 0.97
EXACT_TIE = 0.995               # estimates closer than this keep the earlier (simpler) candidate
WGMMA_FIXED_CLOCKS = {2: 18, 1: 39}     # per m64nNk16 WGMMA and consumer count (_tensor_efficiency)
SMEM_READ_BYTES_S = 138e9       # one SM's shared-memory reads of WGMMA operands (fitted: 128 x 64 and 128 x 128 tiles)


def _tensor_efficiency(consumers, tn):
    """Fraction of an SM's tensor peak a CTA reaches: an ``m64n{tn}k16`` WGMMA runs ``tn / 2`` clocks at
    peak plus a fixed cost per instruction (issue, wait), which a second consumer warpgroup partly
    hides; narrow WGMMAs pay it over less work. Fitted to the session 6 sweep: 128 x 256 tiles reach
    0.88 of peak, 128 x 128 0.78 (measured 0.77-0.80; the earlier ``min(1, tn / 128)`` gave them 0.88,
    so the model ranked 128 x 128 above 128 x 256 at 512x28672x8192), 64 x 128 0.62."""
    return (tn / 2) / (tn / 2 + WGMMA_FIXED_CLOCKS[consumers])


def estimate_seconds(cfg, M, N, K, itemsize, sms):
    """The cost model behind ``choose_config``: the busiest CTA's K steps under the configuration's
    ``schedule``, each bound by its tensor work or its operand traffic (at one SM's L2 rate, or less
    when the ring's bytes in flight cannot cover the memory latency), plus a fixed cost per tile piece
    (one per split-K worker); for tiles cut between workers, a fixed cost per cut piece (partial store,
    fences, arrival) and, after the streaming whatever bound it (HBM included), the last arriver's reads
    of all of the tile's partials (their bytes, rounds of L2 latency and a fixed cost each). A K step is
    also bound by the consumers' WGMMA operand reads from shared memory (each reads the whole B tile:
    128 x 64 tiles pay it). Whole tiles run in waves of one tile per CTA; each wave is bound by its share
    of the HBM traffic, where the rows TMA zero-fills past M and N count as traffic (measured: they cost
    like loads), and so is the cut tiles' part; plus the register epilogue's stores and a launch's fixed
    cost."""
    mk, nk = kernel_operands(cfg, M, N)
    bk = 128 // itemsize
    try:
        plan = schedule(cfg, mk, nk, K, itemsize, sms)
    except ValueError:          # a schedule the kernel cannot index
        return float("inf")
    num_m, num_n = -(-mk // cfg.tm), -(-nk // cfg.tn)
    peak_sm = PEAK_BF16 * (2 if itemsize == 1 else 1) / sms
    compute = 2.0 * cfg.tm * cfg.tn * bk / (peak_sm * _tensor_efficiency(cfg.consumers, cfg.tn))
    step_bytes = (cfg.tm + cfg.tn) * bk * itemsize
    memory = step_bytes / min(SM_BYTES_S, cfg.stages * step_bytes / MEM_LATENCY_S)
    # every consumer's WGMMAs read its 64-row A slice and the whole B tile from shared memory: measured,
    # 128 x 128 and 128 x 64 tiles run at about the same 130-140 GB/s of these reads per SM
    smem = cfg.consumers * (64 + cfg.tn) * bk * itemsize / SMEM_READ_BYTES_S
    padding = ((num_m * cfg.tm - mk) * num_n + (num_n * cfg.tn - nk) * num_m) * K * itemsize
    hbm_per_tile = ((mk * K + nk * K) * itemsize + padding + mk * nk * 2) / plan.tiles / HBM_BYTES_S
    # whole tiles run in waves of ``job_slots``: each wave takes its busiest CTA's time or its share of
    # the HBM traffic, whichever is longer (a last, partial wave leaves bandwidth unused that a
    # whole-run bound would count)
    t = 0.0
    step = max(compute, memory, smem)
    for wave in range(-(-plan.dp_tiles // plan.job_slots)):     # (with clusters a job and plan.tiles count groups)
        jobs_in_wave = min(plan.job_slots, plan.dp_tiles - wave * plan.job_slots)
        t += max(plan.ktiles * step + UNIT_OVERHEAD_S, jobs_in_wave * hbm_per_tile)
    if plan.workers:
        # workers per CTA; a split_cluster grid is one CTA per worker, of which ``resident_ctas`` run at once
        jobs = -(-plan.workers // (resident_ctas(cfg, sms) if cfg.split_cluster else plan.grid))
        share = -(-plan.sk_iters // plan.workers)             # K steps per worker
        per_tile = min(-(-plan.ktiles // max(1, plan.sk_iters // plan.workers)) + 1, plan.workers)
        cut = 1 if cfg.split_k > 1 else 2                     # a stream-K worker's first and last pieces
        # a split-K share lies in one tile; a stream-K share may start and end inside tiles
        pieces = jobs * (-(-share // plan.ktiles) + (cut - 1))
        tile_bytes = 4.0 * cfg.tm * cfg.tn
        loads = fitted_reduction_rounds(per_tile, cfg.tn, cfg.consumers)      # rounds of L2 latency
        stores = jobs * cut * (FIXUP_S + tile_bytes / SM_BYTES_S)
        # the last arriver's reads of the tile's partials start when the slowest worker has stored its
        # own: after the streaming, whether the SMs or HBM bound it (not hidden under the HBM bound)
        reduction = per_tile * (tile_bytes / REDUCTION_BYTES_S + PARTIAL_S) + loads * L2_LATENCY_S
        t += max(jobs * share * step + pieces * UNIT_OVERHEAD_S + stores, plan.cut_tiles * hbm_per_tile) + reduction
    t += LAUNCH_S - (SPLIT_CLUSTER_SAVING_S if cfg.split_cluster else 0.0)
    if cfg.direct:
        t += mk * nk / DIRECT_STORES_S
    else:       # the TMA epilogue's staging, fence, barrier and store of each of the busiest CTA's jobs
        t += TMA_EPILOGUE_S * -(-(plan.dp_tiles + plan.workers) // max(plan.job_slots, 1))
    return t


def resident_ctas(cfg, sms):
    """CTAs of ``cfg``'s kernel the GPU runs at once: one per SM, two where two fit in an SM's shared memory."""
    return sms * (2 if 2 * (cfg.shared_bytes + SM_RESERVED_SHARED) <= SM_SHARED_BYTES else 1)


# tile widths fitted to shapes between the powers of two: stored through the TMA epilogue in 64 x 16 or 64 x 32 boxes
# (c_tile), unswapped, with K-major B (an MN-major B loads 64-wide boxes); charged NEAR_TIE_FITTED. Session 13
# (validation.md runs 4-7): 384x6144x1024 128 x 144 10.6 us against 128 x 192's 12.2, 2048x304x6144 64 x 160 split 2
# 19.5 against swap-AB's 24.5, 257x776x4104 64 x 112 split 3 13.8 against 64 x 128's 15.3; wider ones (208-240)
# measured no better than 256 and the model overrates them at 3000x5000x2000
FITTED_WIDTHS = (80, 96, 112, 144, 160, 176)


def candidate_configs(M, N, K, dtype=tylo.bf16, a_k_major=True, b_k_major=False):
    """Every configuration ``launch`` can run for this problem (swap-AB only when it keeps the TMA rules:
    the kernel's B is then A, which must be K-major when its tile is narrower than 64). Tiles 64, 128 or 256
    wide, 128 x 192, which fills the SMs where 128 x 256 leaves a short wave (session 12: 384x6144x1024
    12.2 against 14.5 us), and the ``FITTED_WIDTHS`` (unswapped); 64 x 192 measured slower than the model
    estimates it (48x12000x1024 8.9 against 64 x 128's 8.6 us, 2048x304x6144 split 2 32.6 against swap-AB's
    24.4), so it is no candidate."""
    out = []
    for swap in (False, True):
        if swap and not a_k_major and M < 64:
            continue
        mk, nk = (N, M) if swap else (M, N)
        tns = sorted({64, 128, 256} | ({min(256, max(8, -(-nk // 8) * 8))} if nk < 64 else set()))
        for consumers in (1, 2):
            widths = tns + ([192] if consumers == 2 else []) + ([] if swap else list(FITTED_WIDTHS))
            for tn in widths:
                # the TMA epilogue takes any multiple of 16 (c_tile); the unswapped small widths fitted to nk < 64
                # keep the register epilogue they were measured with (no TMA-stored 16-48 wide tile has been
                # timed); swap-AB's C^T any width (transposed boxes) either way: the model weighs the register
                # epilogue's stores against the TMA epilogue's fixed cost (1x8x8: registers, 2.6 against 3.3 us)
                if N % 8:
                    direct_choices = (True,)
                else:
                    direct_choices = (True, False) if swap else (tn % 64 != 0 and tn not in FITTED_WIDTHS,)
                for direct in direct_choices:
                    stages = max_stages(64 * consumers, tn, direct, consumers)
                    for split in (1, 2, 3, 4, 6, 8, 12, 16):
                        if split > 1 and k_steps(K, dtype.itemsize) < 2 * split:
                            continue
                        for tail in ((False, True) if split > 1 else (False,)):
                            out.append(GemmConfig(tn=tn, consumers=consumers, stages=stages, split_k=split,
                                                  swap_ab=swap, direct=direct, split_tail=tail))
                    out.append(GemmConfig(tn=tn, consumers=consumers, stages=stages, swap_ab=swap, direct=direct,
                                          stream_k=True))
    return [cfg for cfg in out if refusal(cfg, N, not a_k_major, not b_k_major) is None]


# operand rows (K-major or MN-major: the TMA box rows either way) whose byte addresses are 16- but not 32-byte
# aligned make TMA loads slow (measured; likely because each 128-byte box row then spans two L2 lines); a 2 x 1
# cluster, whose B tile is loaded once per pair by multicast, measured 1.12-1.30x the same tile without it there
# (docs/hopper.md)
CLUSTER_BELOW_ROW_ALIGN = 32


def byte_alignment(*byte_values):
    """The largest power of two, at most 128, dividing every one of ``byte_values``."""
    align = 128
    while align > 1 and any(v % align for v in byte_values):
        align //= 2
    return align


def row_alignment(where, itemsize):
    """The ``byte_alignment`` of every row's address in a row-major storage ``(ptr, shape, strides)``
    (``operand_storage``'s ``where``): its base and, with more than one row, its pitch."""
    ptr, shape, strides = where
    return byte_alignment(ptr, strides[0] * itemsize) if shape[0] > 1 else byte_alignment(ptr)


def contiguous_row_alignment(M, N, K, itemsize, a_k_major=True, b_k_major=False):
    """The least ``row_alignment`` of contiguous operands at aligned bases: a K-major operand's rows hold K
    elements, an MN-major A's M, an MN-major B's N (B row-major, 3000x5000x2000: 10000-byte rows)."""
    return byte_alignment(K * itemsize if a_k_major else M * itemsize, K * itemsize if b_k_major else N * itemsize)


@functools.lru_cache(maxsize=4096)
def choose_config(M, N, K, dtype=tylo.bf16, sms=132, a_k_major=True, b_k_major=False, row_align=None):
    """A good configuration without tuning: the candidate with the least estimate (``estimate_seconds``;
    stream-K aside: measured slower, it is left to ``autotune``), each candidate but the default 128 x 256
    tile charged 3% (6% for a split-K candidate with 128-row tiles, whose fixup the model underestimates:
    a 128 x 256 piece measured 4-11 us against its 4), so the default wins near ties. The charge is a fixed factor
    per candidate: the pick does not depend on the candidates' order, up to ties closer than
    ``EXACT_TIE``, which keep the earlier (simpler) candidate. (Before session 6 a candidate had to be 3%
    better than the best so far, which kept the first of two near-equal candidates even when a later
    one was faster: 64 x 128 over 64 x 256 at 128x14336x4096.)

    ``row_align``: the least ``row_alignment`` of the operands' rows (default: ``contiguous_row_alignment``,
    contiguous operands at aligned bases). Below ``CLUSTER_BELOW_ROW_ALIGN``, for a bf16 whole-tile pick
    of more than one M tile, the pick runs in 2 x 1 clusters where ``refusal`` permits (operands of either
    major since session 11). A ``split_tail`` pick whose schedule is the plain split's (no full wave before
    the tail) is named as the plain split."""
    itemsize = dtype.itemsize
    best = GemmConfig(direct=N % 8 != 0)
    best_t = charged_estimate(best, M, N, K, itemsize, sms)
    for cfg in candidate_configs(M, N, K, dtype, a_k_major, b_k_major):
        if cfg.stream_k:
            continue    # measured slower than the model's next pick wherever timed (docs/hopper.md): autotune only
        t = charged_estimate(cfg, M, N, K, itemsize, sms)
        if t < best_t * EXACT_TIE:
            best, best_t = cfg, t
    return finish_config(best, M, N, K, dtype, sms, a_k_major, b_k_major, row_align)


def charged_estimate(cfg, M, N, K, itemsize, sms):
    """``choose_config``'s comparison value: ``estimate_seconds``, divided by ``NEAR_TIE`` (``NEAR_TIE_FIXUP``
    for split-K with 128-row tiles) for every configuration but the default 128 x 256 tile, and by
    ``NEAR_TIE_FITTED`` more for the ``FITTED_WIDTHS``."""
    t = estimate_seconds(cfg, M, N, K, itemsize, sms)
    if cfg == GemmConfig(direct=N % 8 != 0):
        return t
    if cfg.tn in FITTED_WIDTHS and not cfg.swap_ab:
        t /= NEAR_TIE_FITTED
    return t / (NEAR_TIE_FIXUP if cfg.fixup and cfg.consumers == 2 else NEAR_TIE)


def finish_config(best, M, N, K, dtype=tylo.bf16, sms=132, a_k_major=True, b_k_major=False, row_align=None):
    """What ``choose_config`` runs when the cost model picks ``best``: in 2 x 1 clusters where operand rows
    are misaligned, a tail split with no full wave before it named as the plain split, a split-K as a cluster
    where that measured faster (``split_cluster_pays``)."""
    itemsize = dtype.itemsize
    if row_align is None:
        row_align = contiguous_row_alignment(M, N, K, itemsize, a_k_major, b_k_major)
    if (row_align < CLUSTER_BELOW_ROW_ALIGN and itemsize == 2 and not best.fixup and not best.swap_ab
            and M > best.tm):                               # a pair of M tiles to share B
        clustered = replace(best, cluster_m=2)
        if refusal(clustered, N, not a_k_major, not b_k_major) is None:
            best = clustered
    if best.split_tail:
        mk, nk = kernel_operands(best, M, N)
        plain = replace(best, split_tail=False)
        try:
            same = schedule(best, mk, nk, K, itemsize, sms) == schedule(plain, mk, nk, K, itemsize, sms)
        except ValueError:      # the plain split's shares would overflow: it differs
            same = False
        if same:
            best = plain     # no full wave before the tail: the plain split, named as such
    if best.split_k > 1:
        best = split_as_cluster(best, M, N, K, dtype, sms, a_k_major, b_k_major)
    return best


def split_as_cluster(best, M, N, K, dtype, sms, a_k_major, b_k_major):
    """The split-K pick ``best`` or, where ``split_cluster_pays``, its tile at some split count run as one cluster
    (bf16 and fp8 alike): the least estimate among them. The cluster form of the pick's own split is always
    cheaper (``SPLIT_CLUSTER_SAVING_S``); another count can be too where the pick's does not pay as a cluster (fp8
    1x4096x4096: 128 x 8 split 4 through the fixup 7.3 us, split 3 as a cluster 6.4). Another split count is
    charged ``NEAR_TIE``, as ``choose_config`` charges every candidate but its default: 7x1000x3000 64 x 8 swap-AB
    split 7 as a cluster, estimated 1% faster than split 6, measured 1-11% slower (session 18)."""
    mk = kernel_operands(best, M, N)[0]
    options = [(estimate_seconds(best, M, N, K, dtype.itemsize, sms), best)]
    for split in range(2, MAX_CLUSTER + 1):
        plain = replace(best, split_k=split, split_tail=False, split_cluster=False)
        if not split_cluster_pays(plain, mk) or k_steps(K, dtype.itemsize) < split:
            continue
        clustered = replace(plain, split_cluster=True)
        if refusal(clustered, N, not a_k_major, not b_k_major) is None:
            charge = 1.0 if split == best.split_k else NEAR_TIE
            options.append((estimate_seconds(clustered, M, N, K, dtype.itemsize, sms) / charge, clustered))
    return min(options, key=lambda option: option[0])[1]


def split_cluster_pays(cfg, mk):
    """Whether the split-K configuration ``cfg`` runs faster with ``split_cluster`` for a kernel-orientation
    M of ``mk`` (H200, sessions 9, 15 and 16; docs/hopper.md, "Split-K through the cluster"): tiles at most 64
    wide, and
    * unswapped, only with a single M tile: 64 x 64 and 128 x 64 split 2 gained 2-12% at M = 64 and 128
      (64x4096x4096, 128x4096x4096, 128x4096x14336) and lost 5-21% with 2 to 8 M tiles (96x2048x2048,
      128x1024x8192, 256x1024x8192, 512x512x5120, 512x1024x8192), level at 257x776x4104;
    * in clusters of at most 3 CTAs, or more where two CTAs fit on an SM and the tile is 8 wide: swap-AB 64 x 8
      split 6 and 8 gained up to 14% (7x1000x3000, 1x1024x8192), 64 x 16 split 4 and 8 lost 5-9%
      (16x4096x14336, 16x1024x8192), clusters of 4 and 8 CTAs that each fill an SM 1.7-1.8x.
    Also false where the ring cannot take the partials."""
    two_per_sm = resident_ctas(cfg, 1) == 2
    if cfg.tn > 64 or not (cfg.swap_ab or mk <= cfg.tm):
        return False
    if not (cfg.split_k <= 3 or (two_per_sm and cfg.tn <= 8)):
        return False
    try:
        replace(cfg, split_cluster=True)
    except ValueError:
        return False
    return True


def spec(stages=4, group_m=8, c_bufs=2, a_mn=False, b_mn=False, dtype=tylo.bf16, config=None):
    """The specialisation ``launch`` compiles, as ``JITFunction._compile``'s records (no GPU needed)."""
    from tylo.specialization import BlobSpec, ConstexprSpec, IntSpec, PointerSpec

    if config is None:
        config = GemmConfig(stages=stages, group_m=group_m, c_bufs=c_bufs)
    blob = lambda plan: BlobSpec("tma", (plan, 2), 128)  # noqa: E731
    i32 = IntSpec("i32")
    a_plan, b_plan = operand_plans(config, dtype, a_mn, b_mn)
    c_store = a_plan if config.direct else c_plan(config)
    return [blob(c_store), blob(a_plan), blob(b_plan), PointerSpec("bf16"), PointerSpec("f32"), PointerSpec("i32"),
            *[i32] * 7, *(ConstexprSpec(v) for v in config.constexprs(dtype, a_mn, b_mn))]


def operand_plans(config, dtype, a_mn, b_mn):
    """TMA plans of the kernel's A and B operands (kernel orientation: after any swap)."""
    return (mn_tile(dtype) if a_mn else a_tile(dtype, config.tm),
            mn_tile(dtype) if b_mn else b_tile(dtype, config.tn))


_BINDINGS = BoundedMemo(16)      # bindings keep their arrays alive


def tma_maps(config, dtype, ka, kb, c, ka_mn=False, kb_mn=False, bind=tylo.prepare_tma):
    """The kernel's TMA bindings ``(c_map, a_map, b_map)`` for its A and B storages ``ka`` and ``kb`` (the kernel's
    orientation: swapped for swap-AB; ``ka_mn`` / ``kb_mn`` their majors) and C; ``bind(plan, x)`` makes one
    binding of ``x``, whatever the caller passes as an operand (``launch``: a cached one, ``_binding``). With the
    register epilogue (``direct``) the kernel never reads ``c_map``: A's binding stands in for it."""
    a_plan, b_plan = operand_plans(config, dtype, ka_mn, kb_mn)
    a_map, b_map = bind(a_plan, ka), bind(b_plan, kb)
    return (a_map if config.direct else bind(c_plan(config), c)), a_map, b_map


def _binding(plan, array, where=None):
    """TMA bindings cached per (plan, pointer, shape, strides): a new address or shape needs a new
    descriptor. ``where``: that (pointer, shape, strides) when the caller has it already."""
    if where is None:
        info = describe_array(array)
        where = (info.ptr, tuple(info.shape), tuple(info.strides))
    return _BINDINGS.get_or_make((plan, where), lambda: tylo.prepare_tma(plan, array))


def operand_storage(x, name, shape, k_axis):
    """``(row-major storage, mn_major, dtype, where)`` of operand ``x`` of logical ``shape`` whose K is
    ``k_axis``; ``where`` is the storage's (pointer, shape, strides).

    K contiguous: K-major, stored (mn, k); the other axis contiguous: MN-major, stored (k, mn).
    A transposed view (``x.T``, torch/cupy) gives the row-major storage without a copy.
    """
    info = describe_array(x)
    if info.dtype_name not in INPUT_TYPES:
        raise ValueError(f"hopper_gemm: {name} holds {info.dtype_name}; the inputs are bf16, f8e4m3 or f8e5m2")
    if tuple(info.shape) != shape:
        raise ValueError(f"hopper_gemm: {name} must have shape {shape}, got {tuple(info.shape)}")
    # a dimension of extent 1 has no meaningful stride: prefer a real unit-stride one
    contiguous = ([d for d in (1, 0) if info.strides[d] == 1 and shape[d] > 1]
                  + [d for d in (1, 0) if shape[d] == 1])
    if not contiguous:
        raise ValueError(f"hopper_gemm: {name} needs a contiguous dimension (row- or column-major), "
                         f"strides {tuple(info.strides)}")
    d = contiguous[0]
    lead = info.strides[1 - d]
    per_16_bytes = 16 // INPUT_TYPES[info.dtype_name].itemsize
    if lead % per_16_bytes and shape[1 - d] > 1:
        raise ValueError(f"hopper_gemm: TMA needs 16-byte aligned rows: the leading dimension of {name} "
                         f"({lead}) must be a multiple of {per_16_bytes} for {info.dtype_name}")
    mn_major = d != k_axis
    if mn_major and info.dtype_name != "bf16":
        raise ValueError("hopper_gemm: fp8 operands must be K-major (WGMMA has no fp8 transpose): "
                         "pass A row-major and B column-major (e.g. bt.T)")
    shape, strides = tuple(info.shape), tuple(info.strides)
    if d == 1:
        return x, mn_major, INPUT_TYPES[info.dtype_name], (info.ptr, shape, strides)
    return x.T, mn_major, INPUT_TYPES[info.dtype_name], (info.ptr, shape[::-1], strides[::-1])


INPUT_TYPES = {"bf16": tylo.bf16, "f8e4m3": tylo.f8e4m3, "f8e5m2": tylo.f8e5m2}


def _output_row_stride(c, M, N):
    info = describe_array(c)
    if info.dtype_name != "bf16" or tuple(info.shape) != (M, N):
        raise ValueError(f"hopper_gemm: C must be a bf16 ({M}, {N}) array, got {info.dtype_name} "
                         f"{tuple(info.shape)}")
    if info.strides[1] != 1 and N > 1:
        raise ValueError(f"hopper_gemm: C must be row-major (unit stride along N), strides {tuple(info.strides)}")
    return info.strides[0]


_PREPARED = BoundedMemo(64)      # prepared launches keep their arrays alive
_TUNERS = {}


TUNE_CANDIDATES = 8      # configurations ``launch(..., autotune=True)`` times per shape
# tuning times the warm back-to-back regime benchmarks/gemm.py compares with cuBLAS (operands in L2, ten calls
# queued behind a GPU hold), not do_bench's default cold L2, under which session 19's first tuned run chose
# configurations of 64x1024x8192, 128x1024x8192 and 8192^3 that the benchmark measured slower than the heuristic's
TUNING_REGIME = {"flush_l2": False, "batch": 10}


def autotuner(config):
    """``tylo.autotune`` over the pipeline depth and rasterisation (STAGES, GROUP_M) of ``config``'s tile
    family (tile shape, swap-AB, split-K and epilogue fixed: they decide the TMA plans and the grid).
    Keyed on the kernel's M, N, K, operand majors and the arrays' dtypes; the winner is stored in the tylo cache
    (``tylo cache list``), so later processes do not tune again. ``launch(..., autotune=True)`` uses it
    on ``tuned_config``'s winner."""
    family = ", ".join(f"{f.name}={getattr(config, f.name)}" for f in fields(config)
                       if f.name not in ("stages", "group_m"))
    tuner = _TUNERS.get(family)
    if tuner is None:
        top = max_stages(config.tm, config.tn, config.direct, config.consumers, config.c_bufs)
        # the family in every name: the persisted winner's identity hashes the configs, so one family's
        # winner (timed under its schedule) is never served to another of the same tile
        configs = [tylo.Config(constexprs={"STAGES": s, "GROUP_M": g}, block=config.threads, cluster=config.cluster,
                               name=f"{config.tm}x{config.tn} ({family}) STAGES={s} GROUP_M={g}")
                   for s in sorted({top, max(2, top - 1), max(2, top - 2), max(2, top // 2)}, reverse=True)
                   for g in (4, 8, 16)]
        tuner = _TUNERS[family] = tylo.autotune(configs=configs, key=["M", "N", "K", "A_MN", "B_MN"],
                                                **TUNING_REGIME)(hopper_gemm)
    return tuner


def tuning_candidates(M, N, K, dtype=tylo.bf16, sms=132, a_k_major=True, b_k_major=False, row_align=None,
                      count=TUNE_CANDIDATES):
    """What ``launch(..., autotune=True)`` times for this problem: ``choose_config``'s pick first (ties keep it),
    then, in the order of ``charged_estimate``, the best-estimated configuration of each other (tile, split
    count, stream-K) as ``finish_config`` would run it, up to ``count`` distinct ones. One per tile and split:
    the model's near-equal variants of one tile (swap-AB, tail split, epilogue) differ little on the GPU, its
    errors are between tiles and split counts (session 18: 256x1024x8192's 64 x 64 split 2, the model's fourth
    (tile, split), 14.3 us against the pick's 17.4)."""
    pick = choose_config(M, N, K, dtype, sms, a_k_major, b_k_major, row_align)
    best = {}
    for i, cfg in enumerate(candidate_configs(M, N, K, dtype, a_k_major, b_k_major)):
        group = (cfg.tm, cfg.tn, cfg.split_k, cfg.stream_k)
        ranked = (charged_estimate(cfg, M, N, K, dtype.itemsize, sms), i, cfg)
        if group not in best or ranked < best[group]:
            best[group] = ranked
    out = [pick]
    for _, _, cfg in sorted(best.values()):
        if len(out) >= count:
            break
        finished = finish_config(cfg, M, N, K, dtype, sms, a_k_major, b_k_major, row_align)
        if finished not in out:
            out.append(finished)
    return out


def tuned_config(c, a, b, M, N, K, stream, dtype, sms, a_mn, b_mn, row_align):
    """The fastest of ``tuning_candidates`` on these arrays (``tylo.tune_launches``: timed on the first call for
    the shape, layouts and alignment, then read from the tylo cache; ``tylo cache list`` shows the timings). The
    candidates are prepared (compiled) only when they are timed: a stored result compiles only its winner."""
    configs = {repr(cfg): cfg for cfg in tuning_candidates(M, N, K, dtype, sms, not a_mn, not b_mn, row_align)}

    refused = []

    def preparer(cfg):
        def prepare_candidate():
            try:
                return prepare(c, a, b, M, N, K, stream, config=cfg)
            except ValueError:        # refused for these arrays (their alignment): not a candidate here
                refused.append(cfg)
                return None
        return prepare_candidate

    key = (("M", M), ("N", N), ("K", K), ("dtype", dtype.name), ("A", "M-major" if a_mn else "K-major"),
           ("B", "N-major" if b_mn else "K-major"), ("row_align", row_align), ("sms", sms))
    try:
        best = tylo.tune_launches("hopper_gemm.launch", key, {label: preparer(cfg) for label, cfg in configs.items()},
                                  source=_kernel_source(), stream=launch_stream(stream, c), lazy=True,
                                  **TUNING_REGIME)
    except tylo.autotuner.AutotuneError:
        if len(refused) < len(configs):
            raise
        # every candidate refused: the heuristic's pick, whose prepare says why
        return choose_config(M, N, K, dtype, sms, not a_mn, not b_mn, row_align)
    return configs[best]


@functools.lru_cache(maxsize=1)
def _kernel_source():
    """The GEMM kernel's sources and what they call: a stored tuning result is stale when they change."""
    from tylo.frontend.source import dependency_sources
    return "\0".join(dependency_sources(hopper_gemm.fn))


def launch(c, a, b, M, N, K, stream=None, stages=None, group_m=None, c_bufs=None, config=None, autotune=False):
    """C (M, N) = A (M, K) @ B (K, N) (see ``prepare``). The launch arguments are cached per (arrays'
    pointers, shapes and strides, M, N, K, configuration, stream): a repeated call fingerprints the three
    arrays (``array_fingerprint``: no full description) and launches."""
    _check_arguments(M, N, K, config)
    key = (array_fingerprint(c), array_fingerprint(a), array_fingerprint(b), M, N, K, stream,
           launch_stream(stream, c), stages, group_m, c_bufs, config, autotune)
    run = _PREPARED.get(key)
    if run is None:
        run = _PREPARED.put(key, prepare(c, a, b, M, N, K, stream, stages, group_m, c_bufs, config, autotune))
    return run()


def kernel_operands(config, a, b):
    """(the kernel's A, its B) from what describes the logical A and B: swap-AB computes C^T = B^T A^T, so
    the kernel's A is B's storage and its B is A's."""
    return (b, a) if config.swap_ab else (a, b)


def refusal(config, N, a_mn=False, b_mn=False):
    """Why ``launch`` refuses to run ``config`` for an N-column C and operands of these majors (``a_mn``: A
    is M-contiguous, ``b_mn``: B is N-contiguous), or None. The one statement of these rules: ``launch``
    raises it, the heuristic's candidates and clusters and the GPU tests' cases are filtered by it."""
    _, kb_mn = kernel_operands(config, a_mn, b_mn)
    if not config.direct and N % 8:
        return (f"TMA needs 16-byte aligned rows: N ({N}) must be a multiple of 8 for the TMA epilogue (a "
                f"config with direct=True stores any N)")
    if kb_mn and config.tn % 64:
        return (f"an MN-major kernel B operand loads 64-wide boxes: tn ({config.tn}) must be a multiple of 64 "
                f"({'A column-major with swap_ab' if config.swap_ab else 'B row-major'})")
    return None


def _check_arguments(M, N, K, config):
    if min(M, N, K) <= 0:
        raise ValueError(f"hopper_gemm: M, N and K must be positive, got {M}, {N}, {K}")
    if config is not None and not isinstance(config, GemmConfig):
        raise TypeError(f"hopper_gemm: config must be a GemmConfig, got {config!r}")
    why = None if config is None else refusal(config, N)    # the rules that need no operand, before any is read
    if why is not None:
        raise ValueError(f"hopper_gemm: {why}")


def prepare(c, a, b, M, N, K, stream=None, stages=None, group_m=None, c_bufs=None, config=None, autotune=False):
    """A function that launches C (M, N) = A (M, K) @ B (K, N) into bf16 C (row-major) and returns the
    configuration it ran. A and B are bf16 (row- or column-major) or fp8 e4m3/e5m2 of one type (A
    row-major, B column-major: fp8 WGMMA reads K-major operands); everything is checked here.

    ``config``: a ``GemmConfig``; by default ``choose_config`` picks one from the shape. ``stages``,
    ``group_m``, ``c_bufs``: override those fields of the default 128 x 256 configuration. ``autotune``:
    without ``config``, time ``tuning_candidates`` (the heuristic's pick and the model's next tiles and split
    counts, ``tuned_config``) on the first call for this shape, then the STAGES / GROUP_M variants of the
    winner's (or ``config``'s) tile family (``autotuner``), and launch the winner; both are stored in the tylo
    cache."""
    _check_arguments(M, N, K, config)
    a_store, a_mn, dtype, a_where = operand_storage(a, "A", (M, K), 1)
    b_store, b_mn, b_dtype, b_where = operand_storage(b, "B", (K, N), 0)
    if b_dtype != dtype:
        raise ValueError(f"hopper_gemm: A holds {dtype} and B {b_dtype}; both must have one type")
    sms = driver.sm_count()
    if config is None:
        if (stages, group_m, c_bufs) != (None, None, None):
            config = GemmConfig(stages=stages or 4, group_m=group_m or 8, c_bufs=c_bufs or 2)
        else:
            row_align = min(row_alignment(a_where, dtype.itemsize), row_alignment(b_where, dtype.itemsize))
            if autotune:
                config = tuned_config(c, a, b, M, N, K, stream, dtype, sms, a_mn, b_mn, row_align)
            else:
                config = choose_config(M, N, K, dtype, sms, not a_mn, not b_mn, row_align)
    config = fit_split_cluster(config, K, dtype.itemsize)
    ldc = _output_row_stride(c, M, N)
    mk, nk, ld_row, ld_col = (N, M, 1, ldc) if config.swap_ab else (M, N, ldc, 1)
    (ka, ka_mn, ka_where), (kb, kb_mn, kb_where) = kernel_operands(config, (a_store, a_mn, a_where),
                                                                   (b_store, b_mn, b_where))
    why = refusal(config, N, a_mn, b_mn)
    if why is not None:
        raise ValueError(f"hopper_gemm: {why}")
    c_map, a_map, b_map = tma_maps(config, dtype, (ka, ka_where), (kb, kb_where), (c, None), ka_mn, kb_mn,
                                   bind=lambda plan, operand: _binding(plan, *operand))
    span = M * max(ldc, N)
    if config.direct and span >= 2 ** 31:     # the register epilogue's offsets are 32-bit
        raise ValueError(f"hopper_gemm: the output ({span} elements) exceeds 32-bit offsets for the register "
                         f"epilogue (direct=True); use the TMA epilogue")
    # the driver's co-resident clusters (the interpreter, with no driver, runs any grid)
    slots = (cluster_slots(config, dtype, ka_mn, kb_mn, driver.current_device())
             if config.cluster_m * config.cluster_n > 1 and not driver.interpreting() else None)
    plan = schedule(config, mk, nk, K, dtype.itemsize, sms, slots)
    grid = max(1, plan.grid)
    # the fixup's partial tiles and arrival counters (left zero by every launch), per device and stream
    device, on = describe_array(c).device_ordinal, launch_stream(stream, c)
    fixup_workers, fixup_tiles = (plan.workers, plan.cut_tiles) if config.fixup else (0, 0)
    ws = stream_scratch("hopper_gemm.ws", 2 * fixup_workers * config.tm * config.tn, "f32", device, on, zero=False)
    counters = stream_scratch("hopper_gemm.counters", fixup_tiles * config.consumers, "i32", device, on)
    # constexprs positionally: the JIT's fast path
    constexprs = config.constexprs(dtype, ka_mn, kb_mn)
    gemm = hopper_gemm[grid, config.threads, config.cluster]      # (cluster None: a plain launch)
    if autotune:
        tuned = autotuner(config)[grid]
        fixed = dict(zip(("C_BUFS", "A_MN", "B_MN", "DTYPE", "TN", "CONSUMERS", "DIRECT", "FIXUP", "CLUSTER_M",
                          "CLUSTER_N", "CLUSTER_K", "C_T"),
                         constexprs[2:]))

        def gemm(*args, stream=None):       # noqa: F811 (the tuned launch takes the fixed constexprs by name)
            tuned(*args[:13], stream=stream, **fixed)
    dp_tiles, workers = plan.dp_tiles, plan.workers

    def run():
        gemm(c_map, a_map, b_map, c, ws, counters, mk, nk, K, ld_row, ld_col, dp_tiles, workers, *constexprs,
             stream=stream)
        return config
    return run


def run() -> None:
    import ml_dtypes
    rng = np.random.default_rng()
    shapes = [(128, 256, 64), (300, 200, 136), (129, 264, 72), (1000, 1000, 1000), (2048, 2048, 4096)]
    for (M, N, K) in shapes:
        a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
        b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
        c = tylo.to_device(np.full((M, N), np.nan, dtype=ml_dtypes.bfloat16))
        launch(c, tylo.to_device(a), tylo.to_device(b), M, N, K)     # row-major A and B
        ref = a.astype(np.float64) @ b.astype(np.float64)
        got = c.to_host().astype(np.float64)
        assert np.isfinite(got).all(), (M, N, K, "unwritten outputs")
        rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        assert rel < 1e-2, (M, N, K, rel)
        print(f"hopper_gemm {M}x{N}x{K} (A row-major, B row-major): relative error {rel:.1e}")


if __name__ == "__main__":
    run()
