"""A warp-specialised Hopper GEMM (sm_90a): C = A @ B, bf16 or fp8 inputs, fp32 accumulation, bf16 C.

* A (M, K), B (K, N), C (M, N) row-major bf16; A and B may also be column-major (any
  torch/cupy view with one contiguous dimension, e.g. ``x.T``). A K-contiguous operand is
  K-major for WGMMA and TMA loads it in (rows, 64) boxes; an M- or N-contiguous one is
  MN-major and loads as 64 x 64 boxes of its transpose (``shared_tile(plan, ptr, boxes=)``),
  read by WGMMA with the transpose bit: no copy of either operand is made. fp8 (e4m3/e5m2)
  inputs must be K-major (A row-major, B column-major): fp8 WGMMA has no transpose.
* CTA tile BM x BN = 128 x 256, K step BK = one 128-byte swizzle row (64 bf16, 128 fp8).
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
"""
import functools

import numpy as np

import tylo
import tylo.lang.mbarrier as mb
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo.lang.mma import zero_accumulator

BM, BN = 128, 256
THREADS = 384                    # producer warpgroup + two consumer warpgroups
PRODUCER_REGS, CONSUMER_REGS = 40, 232           # 128 * 40 + 256 * 232 <= 65536


@functools.lru_cache(maxsize=None)
def k_step(dtype):
    """BK: one 128-byte swizzle row of the input type (64 bf16, 128 fp8)."""
    return 128 // dtype.itemsize


@functools.lru_cache(maxsize=None)
def wgmma_plan(dtype):
    """One consumer's WGMMA group: 64 x 256 x K with K = BK, at most 64 (two groups per fp8 K step)."""
    return wg.WGMMA64(dtype, n=BN, k=min(k_step(dtype), 64))


@functools.lru_cache(maxsize=None)     # plans are built once: launch() runs on every call
def a_tile(dtype):
    return tma.TMATile(dtype, (BM, k_step(dtype)))          # K-major A: (m, k), 16 KB, 128B swizzle


@functools.lru_cache(maxsize=None)
def b_tile(dtype):
    return tma.TMATile(dtype, (BN, k_step(dtype)))          # K-major B: (n, k) of B^T, 32 KB


@functools.lru_cache(maxsize=None)
def mn_tile(dtype):
    return tma.TMATile(dtype, (k_step(dtype), 64))          # MN-major A or B: (k, mn) boxes of 8 KB


A_TILE, B_TILE, MN_TILE = a_tile(tylo.bf16), b_tile(tylo.bf16), mn_tile(tylo.bf16)
C_TILE = tma.TMATile(tylo.bf16, (64, 64))        # epilogue staging / TMA store box, 8 KB
STAGE_BYTES = (BM + BN) * 128                    # A and B of one K step, for either input type


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
def operand(PLAN: tylo.constexpr, role, tmap, ptr, mn0, K0: tylo.constexpr, EXTENT: tylo.constexpr,
            MN: tylo.constexpr):
    """The WGMMA operand at (mn0, K0) of a ring stage, viewed as (mn, k) (the transpose when MN-major)."""
    if MN:
        return wg.wgmma_operand(PLAN, role, tylo.permutedims(stage_tile(tmap, ptr, EXTENT, MN), (1, 0)), (mn0, K0))
    return wg.wgmma_operand(PLAN, role, stage_tile(tmap, ptr, EXTENT, MN), (mn0, K0))


@tylo.func
def mma_stage(PLAN: tylo.constexpr, a_map, b_map, pa, pb, m0, acc, A_MN: tylo.constexpr, B_MN: tylo.constexpr):
    """The WGMMAs of one K step from a ring stage: BK / PLAN.k groups (one for bf16, two for fp8,
    whose plans stop at K = 64 while the 128-byte TMA row holds 128)."""
    for kk in tylo.static_range(k_step(PLAN.dtype) // PLAN.k):
        a = operand(PLAN, wg.OperandA, a_map, pa, m0, kk * PLAN.k, BM, A_MN)
        b = operand(PLAN, wg.OperandB, b_map, pb, 0, kk * PLAN.k, BN, B_MN)
        acc = wg.mma_async(PLAN, a, b, acc)
    return acc


@tylo.jit
def hopper_gemm(c_map, a_map, b_map, M, N, K, STAGES: tylo.constexpr = 4, GROUP_M: tylo.constexpr = 8,
                C_BUFS: tylo.constexpr = 2, A_MN: tylo.constexpr = False, B_MN: tylo.constexpr = False,
                DTYPE: tylo.constexpr = tylo.bf16):
    """C_BUFS: 64x64 bf16 staging tiles per consumer (4 covers a whole 64 x 256 row band).
    A_MN / B_MN: the operand is MN-major (A column-major, B row-major), else K-major.
    DTYPE: the input type, bf16 or fp8 (e4m3/e5m2: K-major only; C is bf16 either way)."""
    PLAN = wgmma_plan(DTYPE)
    BK = k_step(DTYPE)
    GROUPS = BK // PLAN.k                    # WGMMA groups per K step
    sa = tylo.shared_array(DTYPE, (STAGES * BM * BK,), align=1024)
    sb = tylo.shared_array(DTYPE, (STAGES * BN * BK,), align=1024)
    sc = tylo.shared_array(tylo.bf16, (2 * C_BUFS * 64 * 64,), align=1024)
    bars = tylo.shared_array(tylo.u64, (2 * STAGES,), align=8)
    full = bars.ptr
    empty = bars.ptr + STAGES
    tid = tylo.thread_idx.x
    if tid == 0:
        tma.prefetch_tma_descriptor(a_map)
        tma.prefetch_tma_descriptor(b_map)
        tma.prefetch_tma_descriptor(c_map)
        for s in tylo.static_range(STAGES):
            mb.mbarrier_init(full + s, 1)         # the producer's arrive.expect_tx (+ TMA bytes)
            mb.mbarrier_init(empty + s, 2)        # one release per consumer warpgroup
        mb.fence_mbarrier_init()
        mb.fence_view_async_shared()
    tylo.sync_threads()

    num_m = (M + BM - 1) // BM
    num_n = (N + BN - 1) // BN
    num_tiles = num_m * num_n
    ktiles = (K + BK - 1) // BK
    wgi = mb.warpgroup_idx()
    if wgi == 0:
        mb.setmaxnreg_dec(PRODUCER_REGS)
        if tid == 0:
            it = 0
            for tile in range(tylo.block_idx.x, num_tiles, tylo.grid_dim.x):
                pm, pn = tile_coords(tile, num_m, num_n, GROUP_M)
                for kt in range(ktiles):
                    s = it % STAGES
                    mb.mbarrier_wait(empty + s, ((it // STAGES) & 1) ^ 1)   # a fresh ring is free
                    mb.mbarrier_arrive_expect_tx(full + s, STAGE_BYTES)
                    load_stage(a_map, sa.ptr + s * (BM * BK), pm * BM, kt * BK, full + s, BM, A_MN)
                    load_stage(b_map, sb.ptr + s * (BN * BK), pn * BN, kt * BK, full + s, BN, B_MN)
                    it += 1
    else:
        mb.setmaxnreg_inc(CONSUMER_REGS)
        cons = wgi - 1
        lead = tid % 128 == 0
        it = 0
        for tile in range(tylo.block_idx.x, num_tiles, tylo.grid_dim.x):
            pm, pn = tile_coords(tile, num_m, num_n, GROUP_M)
            s = it % STAGES
            mb.mbarrier_wait(full + s, (it // STAGES) & 1)
            pending = mma_stage(PLAN, a_map, b_map, sa.ptr + s * (BM * BK), sb.ptr + s * (BN * BK), cons * 64,
                                zero_accumulator(PLAN), A_MN, B_MN)
            prev = s
            it += 1
            for kt in range(1, ktiles):
                s = it % STAGES
                mb.mbarrier_wait(full + s, (it // STAGES) & 1)
                pending = mma_stage(PLAN, a_map, b_map, sa.ptr + s * (BM * BK), sb.ptr + s * (BN * BK),
                                    cons * 64, pending, A_MN, B_MN)
                pending = wg.wait_mma(pending, GROUPS)   # step kt-1 is complete: release its stage
                if lead:
                    mb.mbarrier_arrive(empty + prev)
                prev = s
                it += 1
            acc = wg.wait_mma(pending)
            if lead:
                mb.mbarrier_arrive(empty + prev)

            # epilogue: bf16 through swizzled staging tiles, TMA stores (clipped at M, N)
            out = wg.finish_mma(acc).astype(tylo.bf16)
            row = pm * BM + cons * 64
            col = pn * BN
            if lead:
                tma.wait_tma_reads(0)                 # the previous tile's stores have read the staging
            mb.named_barrier_sync(1 + cons, 128)
            for j in tylo.static_range(BN // 64):
                if j >= C_BUFS:
                    if lead:
                        tma.wait_tma_reads(C_BUFS - 1)
                    mb.named_barrier_sync(1 + cons, 128)
                buf = tma.shared_tile(c_map, sc.ptr + (cons * C_BUFS + j % C_BUFS) * (64 * 64))
                tylo.store(buf, tylo.window(out, (0, 64 * j), (64, 64)))
                mb.fence_view_async_shared()
                mb.named_barrier_sync(1 + cons, 128)
                if lead:
                    tma.tma_store(c_map, buf, (row, col + 64 * j))
                    tma.commit_tma_stores()
        if lead:
            tma.wait_tma_stores(0)


# A TMATile in a signature list stands for a TMA binding of that plan (prepare_tma).
AOT = [(hopper_gemm, [C_TILE, A_TILE, B_TILE, "i32", "i32", "i32"], {"STAGES": 4, "GROUP_M": 8, "C_BUFS": 2},
        THREADS),
       (hopper_gemm, [C_TILE, MN_TILE, MN_TILE, "i32", "i32", "i32"],
        {"STAGES": 4, "GROUP_M": 8, "C_BUFS": 2, "A_MN": True, "B_MN": True}, THREADS),
       (hopper_gemm, [C_TILE, a_tile(tylo.f8e4m3), b_tile(tylo.f8e4m3), "i32", "i32", "i32"],
        {"STAGES": 4, "GROUP_M": 8, "C_BUFS": 2, "DTYPE": tylo.f8e4m3}, THREADS)]


def spec(stages=4, group_m=8, c_bufs=2, a_mn=False, b_mn=False, dtype=tylo.bf16):
    """The specialisation ``launch`` compiles, as ``JITFunction._compile``'s records (no GPU needed)."""
    from tylo.specialization import BlobSpec, ConstexprSpec, IntSpec

    blob = lambda plan: BlobSpec("tma", (plan, 2), 128)  # noqa: E731
    i32 = IntSpec("i32")
    return [blob(C_TILE), blob(mn_tile(dtype) if a_mn else a_tile(dtype)),
            blob(mn_tile(dtype) if b_mn else b_tile(dtype)), i32, i32, i32,
            *(ConstexprSpec(v) for v in (stages, group_m, c_bufs, a_mn, b_mn, dtype))]


_BINDINGS = {}


def _binding(plan, array, where=None):
    """TMA bindings cached per (plan, pointer, shape, strides): a new address or shape needs a new
    descriptor. ``where``: that (pointer, shape, strides) when the caller has it already."""
    if where is None:
        from tylo.runtime import describe_array
        info = describe_array(array)
        where = (info.ptr, tuple(info.shape), tuple(info.strides))
    key = (plan, where)
    b = _BINDINGS.get(key)
    if b is None:
        if len(_BINDINGS) >= 16:     # bindings keep their arrays alive
            _BINDINGS.clear()
        b = _BINDINGS[key] = tylo.prepare_tma(plan, array)
    return b


def operand_storage(x, name, shape, k_axis):
    """``(row-major storage, mn_major, dtype, where)`` of operand ``x`` of logical ``shape`` whose K is
    ``k_axis``; ``where`` is the storage's (pointer, shape, strides).

    K contiguous: K-major, stored (mn, k); the other axis contiguous: MN-major, stored (k, mn).
    A transposed view (``x.T``, torch/cupy) gives the row-major storage without a copy.
    """
    from tylo.runtime import describe_array
    info = describe_array(x)
    if info.dtype_name not in INPUT_TYPES:
        raise ValueError(f"hopper_gemm: {name} holds {info.dtype_name}; the inputs are bf16, f8e4m3 or f8e5m2")
    if tuple(info.shape) != shape:
        raise ValueError(f"hopper_gemm: {name} must have shape {shape}, got {tuple(info.shape)}")
    contiguous = [d for d in (1, 0) if info.strides[d] == 1 or shape[d] == 1]
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
        raise ValueError(f"hopper_gemm: fp8 operands must be K-major (WGMMA has no fp8 transpose): "
                         f"pass A row-major and B column-major (e.g. bt.T)")
    shape, strides = tuple(info.shape), tuple(info.strides)
    if d == 1:
        return x, mn_major, INPUT_TYPES[info.dtype_name], (info.ptr, shape, strides)
    return x.T, mn_major, INPUT_TYPES[info.dtype_name], (info.ptr, shape[::-1], strides[::-1])


INPUT_TYPES = {"bf16": tylo.bf16, "f8e4m3": tylo.f8e4m3, "f8e5m2": tylo.f8e5m2}


_SMS = []


def launch(c, a, b, M, N, K, stream=None, stages=4, group_m=8, c_bufs=2):
    """C (M, N) = A (M, K) @ B (K, N) into bf16 C (row-major). A and B are bf16 (row- or column-major)
    or fp8 e4m3/e5m2 of one type (A row-major, B column-major: fp8 WGMMA reads K-major operands)."""
    if min(M, N, K) <= 0:
        raise ValueError(f"hopper_gemm: M, N and K must be positive, got {M}, {N}, {K}")
    if N % 8:
        raise ValueError(f"hopper_gemm: TMA needs 16-byte aligned rows: N ({N}) must be a multiple of 8")
    a_store, a_mn, dtype, a_where = operand_storage(a, "A", (M, K), 1)
    b_store, b_mn, b_dtype, b_where = operand_storage(b, "B", (K, N), 0)
    if b_dtype != dtype:
        raise ValueError(f"hopper_gemm: A holds {dtype} and B {b_dtype}; both must have one type")
    if not _SMS:
        from tylo.runtime import driver
        _SMS.append(driver.devices()[0]["sm_count"])
    tiles = ((M + BM - 1) // BM) * ((N + BN - 1) // BN)
    grid = max(1, min(_SMS[0], tiles))
    # every parameter positionally (STAGES, GROUP_M, C_BUFS, A_MN, B_MN, DTYPE): the JIT's fast path
    hopper_gemm[grid, THREADS](_binding(C_TILE, c),
                               _binding(mn_tile(dtype) if a_mn else a_tile(dtype), a_store, a_where),
                               _binding(mn_tile(dtype) if b_mn else b_tile(dtype), b_store, b_where), M, N, K,
                               stages, group_m, c_bufs, a_mn, b_mn, dtype, stream=stream)


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
