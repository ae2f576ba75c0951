"""WGMMA through the seed API (wgmma_operand, mma_async, wait_mma, finish_mma) on an sm_90 GPU.

Every result is compared element for element (``assert_array_equal``) with a float64 reference on
inputs exactly representable in the input type (halves in [-4, 4] for bf16/f16, integers in
[-2, 2] for fp8) whose products and sums are exact in fp32. Outputs are poisoned with NaN before
each launch, and the parts of the shared tiles an instruction must not read (columns past K of a
K-major tile, columns past N of an MN-major one) hold NaN, so a descriptor that strays shows up.

GPU tests (``gpu`` marker, skipped below compute capability 9.0):

* ``test_wgmma_product``: WGMMA64(dtype, n=, k=) for bf16 and f16 (K 16/32/64) and fp8 e4m3/e5m2
  (K 32/64); A and B from TMA-loaded swizzled shared tiles, K-major or MN-major (a (k, mn) tile
  seen through ``permutedims``; 16-bit only), or A from registers (a Fragment with
  ``a_register_ownership(plan)``, loaded from global memory or, through ldmatrix, from the
  swizzled shared tile). Every N in 8..256 for bf16 K=64 (K-major), fp8 e4m3 K=64 (K-major) and
  f16 K=16 (A in registers); every N an MN-major B allows (8..64) for bf16 K=32; every dtype x K
  x source (x B major for 16-bit) at N = 8, 136, 256 (MN-major B: 8, 40, 64); a few cases with
  64- and 32-byte swizzles.
* ``test_partitioned_product``: plans with 2 or 4 accumulator partitions (finish_mma sums them).
* ``test_accumulator_fragment_epilogue``: finish_mma's Fragment (ownership
  ``wgmma_accumulator(n)``) through elementwise math (where, abs, fragment * fragment, scalars),
  ``max``/``sum``/``min`` along axis 1 with every thread's reduced registers dumped (the row value
  must sit in all four lanes of a group), broadcasting the reductions back, ``astype`` to
  bf16/f16/i32 (bit-exact RNE, truncation), row- and column-major stores, and ``pack`` /
  ``astype`` of the accumulator into the register A operand of a second WGMMA (k = n).

CPU tests (no GPU): representative kernels of each group assemble for sm_90a with the expected
``wgmma.mma_async`` opcodes, counts and immediates, no local memory and no spills; a reduction
along axis 0 of the accumulator is a compile error naming the ownership; the case lists cover the
requirement. Compiling every GPU variant for sm_90a (all of them compile) takes about a minute.

An MN-major B wider than one swizzle row is ``shared_tile(plan, ptr, boxes=(1, n))`` of (k, row)
TMA boxes. API limit: A from registers is 16-bit only
(``a_register_ownership`` rejects fp8); ``tylo.maximum``/``minimum`` of a fragment and a constant
or of two fragments, and ``tylo.fma`` on fragments, work slot by slot (checked at the end).
"""
import re
import zlib

import numpy as np
import pytest

import tylo
import tylo.lang.mbarrier as mb
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo import Layout
from tylo.ir import types as T
from tylo.layouts import ownership_table, reduction_plan

DTYPES = {"bf16": T.bf16, "f16": T.f16, "e4m3": T.f8e4m3, "e5m2": T.f8e5m2}
K_OF = {"bf16": (16, 32, 64), "f16": (16, 32, 64), "e4m3": (32, 64), "e5m2": (32, 64)}
ALL_N = tuple(range(8, 257, 8))
FEW_N = (8, 136, 256)
MN_N = (8, 40, 64, 136, 256)   # MN-major B: N past one swizzle row takes several TMA boxes


def _sm90():
    from tylo.runtime import compute_capability
    if compute_capability() < (9, 0):
        pytest.skip("needs sm_90")


# ----------------------------------------------------------------------------- kernels


@tylo.jit
def wgmma_product(out, a, b_map, PLAN: tylo.constexpr, A_SRC: tylo.constexpr, B_MN: tylo.constexpr,
                  A_ELEMS: tylo.constexpr, B_ELEMS: tylo.constexpr, BYTES: tylo.constexpr,
                  B_BOXES: tylo.constexpr = 1):
    """out (64, n) f32 = A (64, k) @ B (n, k)^T with one WGMMA64 plan.

    A_SRC: "K" / "MN" (``a`` is a TMA binding of the K-major (64, KW) or the (k, 64) tile),
    "REG" (``a`` is a (64, k) row-major global array loaded into the A register ownership),
    "REG_SMEM" (``a`` is the K-major TMA binding; the register fragment is loaded from shared).
    B_MN: ``b_map`` holds (k, 64) tiles (MN-major; B_BOXES of them side by side along n), else the
    (n, KW) tile (K-major)."""
    sa = tylo.shared_array(PLAN.dtype, (A_ELEMS,), align=1024)
    sb = tylo.shared_array(PLAN.dtype, (B_ELEMS,), align=1024)
    bars = tylo.shared_array(tylo.u64, (1,), align=8)
    tid = tylo.thread_idx.x
    if tid == 0:
        mb.mbarrier_init(bars.ptr, 1)
        mb.fence_mbarrier_init()
        mb.fence_view_async_shared()
    mb.named_barrier_sync(0, 128)
    tb = tma.shared_tile(b_map, sb, (1, B_BOXES))
    if A_SRC == "REG":
        if tid == 0:
            mb.mbarrier_arrive_expect_tx(bars.ptr, BYTES)
            tma.tma_load(tb, b_map, (0, 0), bars.ptr)
    else:
        ta = tma.shared_tile(a, sa)
        if tid == 0:
            mb.mbarrier_arrive_expect_tx(bars.ptr, BYTES)
            tma.tma_load(ta, a, (0, 0), bars.ptr)
            tma.tma_load(tb, b_map, (0, 0), bars.ptr)
    mb.mbarrier_wait(bars.ptr, 0)
    if A_SRC == "K":
        opa = wg.wgmma_operand(PLAN, wg.OperandA, ta)
    elif A_SRC == "MN":
        opa = wg.wgmma_operand(PLAN, wg.OperandA, tylo.permutedims(ta, (1, 0)))
    elif A_SRC == "REG":
        opa = tylo.load(tylo.GlobalTile(a, Layout((64, PLAN.k), (PLAN.k, 1))), wg.a_register_ownership(PLAN))
    else:
        opa = tylo.load(tylo.window(ta, (0, 0), (64, PLAN.k)), wg.a_register_ownership(PLAN))
    if B_MN:
        opb = wg.wgmma_operand(PLAN, wg.OperandB, tylo.permutedims(tb, (1, 0)))
    else:
        opb = wg.wgmma_operand(PLAN, wg.OperandB, tb)
    acc = wg.wait_mma(wg.mma_async(PLAN, opa, opb, tylo.zero_accumulator(PLAN)))
    tylo.store(tylo.GlobalTile(out, Layout((64, PLAN.n), (PLAN.n, 1))), wg.finish_mma(acc))


@tylo.jit
def accumulator_epilogue(out_f, out_bf, out_h, out_i, out_red, a_map, b_map, v_map, PLAN: tylo.constexpr,
                         PLAN2: tylo.constexpr, HOW: tylo.constexpr, RED: tylo.constexpr, BYTES: tylo.constexpr,
                         WHAT: tylo.constexpr):
    """S = A (64, 64) @ B (n, 64)^T, then one group of fragment operations (WHAT; one group per
    kernel keeps every variant within the register file without spills):

    "math": out_f = elementwise math on S; "reduce": every thread's max/sum/min registers into
    out_red, out_f = the reductions broadcast back; "convert": out_f = S stored column-major,
    out_bf / out_h / out_i = affine maps of S .astype(bf16 / f16 / i32); "second": out_f =
    (S - rowmax) as the register A operand of PLAN2 (``pack`` or ``astype``) times V (n2, n)^T."""
    N = PLAN.n
    sa = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    sb = tylo.shared_array(tylo.bf16, (N * 64,), align=1024)
    sv = tylo.shared_array(PLAN2.dtype, (PLAN2.n * 64,), align=1024)
    bars = tylo.shared_array(tylo.u64, (1,), align=8)
    tid = tylo.thread_idx.x
    if tid == 0:
        mb.mbarrier_init(bars.ptr, 1)
        mb.fence_mbarrier_init()
        mb.fence_view_async_shared()
    mb.named_barrier_sync(0, 128)
    ta = tma.shared_tile(a_map, sa)
    tb = tma.shared_tile(b_map, sb)
    tv = tma.shared_tile(v_map, sv)
    if tid == 0:
        mb.mbarrier_arrive_expect_tx(bars.ptr, BYTES)
        tma.tma_load(ta, a_map, (0, 0), bars.ptr)
        tma.tma_load(tb, b_map, (0, 0), bars.ptr)
        if WHAT == "second":
            tma.tma_load(tv, v_map, (0, 0), bars.ptr)
    mb.mbarrier_wait(bars.ptr, 0)
    s = wg.finish_mma(wg.wait_mma(wg.mma_async(PLAN, wg.wgmma_operand(PLAN, wg.OperandA, ta),
                                               wg.wgmma_operand(PLAN, wg.OperandB, tb),
                                               tylo.zero_accumulator(PLAN))))
    rows = Layout((64, N), (N, 1))
    if WHAT == "math":
        e = tylo.where(s > 2.0, s * 0.5 - 3, s * s + 1.0) - tylo.abs(s)
        tylo.store(tylo.GlobalTile(out_f, rows), e)
    elif WHAT == "reduce":
        m = s.max(axis=1)
        t = s.sum(axis=1)
        lo = s.min(axis=1)
        for i in tylo.static_range(RED):
            out_red[(tid * 3 + 0) * RED + i] = m[i]
            out_red[(tid * 3 + 1) * RED + i] = t[i]
            out_red[(tid * 3 + 2) * RED + i] = lo[i]
        d = (s - m) * 2 + t - (lo - s)               # reduced fragments broadcast on either side
        tylo.store(tylo.GlobalTile(out_f, rows), d)
    elif WHAT == "convert":
        tylo.store(tylo.GlobalTile(out_f, Layout((64, N), (1, 64))), s)
        tylo.store(tylo.GlobalTile(out_bf, rows), (s * 1.25 + 0.375).astype(tylo.bf16))
        tylo.store(tylo.GlobalTile(out_h, rows), (s * 37.0 + 0.0625).astype(tylo.f16))
        tylo.store(tylo.GlobalTile(out_i, rows), (s * 0.5 - 0.25).astype(tylo.i32))
    else:
        p = s - s.max(axis=1)
        if HOW == "pack":
            pa = tylo.pack(PLAN2.dtype, p)
        else:
            pa = p.astype(PLAN2.dtype)
        o = wg.finish_mma(wg.wait_mma(wg.mma_async(PLAN2, pa, wg.wgmma_operand(PLAN2, wg.OperandB, tv),
                                                   tylo.zero_accumulator(PLAN2))))
        tylo.store(tylo.GlobalTile(out_f, Layout((64, PLAN2.n), (PLAN2.n, 1))), o)


# ----------------------------------------------------------------------------- host side


def np_dtype(dtype):
    from tylo.runtime import numpy_dtype
    return numpy_dtype(dtype.name)


def representable_values(rng, shape, dtype, ints=False):
    """Exactly representable values: halves in [-4, 4] for 16-bit types (integers with ``ints``),
    integers in [-2, 2] for fp8. Sums of 64 products need at most 12 significant bits (9 for fp8),
    far inside what any accumulator keeps exactly, even one that aligns and truncates products."""
    if dtype.itemsize == 2 and not ints:
        x = rng.integers(-8, 9, size=shape) / 2
        x.flat[0] = 1.5                                       # never all zeros
    else:
        bound = 4 if dtype.itemsize == 2 else 2
        x = rng.integers(-bound, bound + 1, size=shape).astype(np.float64)
        x.flat[0] = 2.0
    assert np.array_equal(x.astype(np_dtype(dtype)).astype(np.float64), x)
    return x


def nan_padded(x, shape, dtype):
    """``x`` in the top-left corner of a NaN array of ``shape``, in the storage dtype."""
    buf = np.full(shape, np.nan, dtype=np.float64)
    buf[:x.shape[0], :x.shape[1]] = x
    return buf.astype(np_dtype(dtype))


def product_case(dtype_name, n, k, a_src, b_mn, sw=128):
    """(plan, TMA plan of A, TMA plan of B, launch constexprs) of one wgmma_product variant.

    K-major tiles are (rows, sw / itemsize): one swizzle row along K, of which the plan reads the
    first k columns. MN-major tiles are (k, sw / itemsize) with MN contiguous: A needs all 64 rows
    in one row (sw = 128 for 16-bit), B its first n columns, in ceil(n / row) boxes side by side."""
    dt = DTYPES[dtype_name]
    plan = wg.WGMMA64(dt, n=n, k=k)
    w = sw // dt.itemsize
    a_tile = tma.TMATile(dt, (k, w) if a_src == "MN" else (64, w), swizzle=sw)
    b_tile = tma.TMATile(dt, (k, w) if b_mn else (n, w), swizzle=sw)
    boxes = -(-n // w) if b_mn else 1
    nbytes = tma.transfer_bytes(b_tile, (1, boxes)) + (0 if a_src == "REG" else tma.transfer_bytes(a_tile))
    consts = dict(PLAN=plan, A_SRC=a_src, B_MN=b_mn, A_ELEMS=a_tile.shape[0] * a_tile.shape[1],
                  B_ELEMS=b_tile.shape[0] * b_tile.shape[1] * boxes, BYTES=nbytes, B_BOXES=boxes)
    return plan, a_tile, b_tile, consts


def product_signature(case):
    """The signature a launch of ``case`` specialises on (16-byte aligned device arrays)."""
    plan, a_tile, b_tile, _ = product_case(*case)
    a = "*" + plan.dtype.name + ":16" if case[3] == "REG" else a_tile
    return ["*f32:16", a, b_tile]


def _cases():
    cases = []
    for n in ALL_N:                                   # every N, on three (dtype, K, source) lines
        cases.append(("bf16", n, 64, "K", False))
        cases.append(("e4m3", n, 64, "K", False))
        cases.append(("f16", n, 16, "REG", False))
    for n in ALL_N:                                   # every N with an MN-major B (several boxes past 64)
        cases.append(("bf16", n, 32, "MN", True))
    for name, ks in K_OF.items():                     # every dtype, K and operand source at a few N
        sixteen = DTYPES[name].itemsize == 2
        for k in ks:
            for a_src in (("K", "MN", "REG") if sixteen else ("K",)):
                cases += [(name, n, k, a_src, False) for n in FEW_N]
                if sixteen:
                    cases += [(name, n, k, a_src, True) for n in MN_N]
        if sixteen:                                   # register A loaded from the swizzled tile (ldmatrix)
            cases += [(name, n, 64, "REG_SMEM", False) for n in FEW_N]
    # narrower swizzles: the K-major row is exactly K (or 2K) wide, the MN-major row exactly N
    cases += [("bf16", 8, 16, "K", False, 32), ("bf16", 136, 16, "K", False, 32),
              ("f16", 64, 32, "K", False, 64), ("bf16", 256, 32, "REG", False, 64),
              ("e4m3", 96, 32, "K", False, 32), ("e5m2", 256, 64, "K", False, 64),
              ("bf16", 16, 16, "K", True, 32), ("f16", 8, 32, "REG", True, 32),
              ("bf16", 32, 16, "K", True, 64), ("f16", 24, 64, "REG", True, 64)]
    out = []
    for c in cases:
        c = c + (128,) * (6 - len(c))
        if c not in out:
            out.append(c)
    return out


PRODUCT_CASES = _cases()


def _case_id(c):
    name, n, k, a_src, b_mn, sw = c
    return f"{name}-n{n}-k{k}-A{a_src}-B{'MN' if b_mn else 'K'}" + ("" if sw == 128 else f"-sw{sw}")


def _run_product(case, consts, seed):
    """Launch wgmma_product for ``case`` (with ``consts``); returns (result, float64 reference)."""
    import tylo.runtime as rt
    name, n, k, a_src, b_mn, sw = case
    plan = consts["PLAN"]
    dt = plan.dtype
    _, a_tile, b_tile, _ = product_case(*case)
    w = sw // dt.itemsize
    rng = np.random.default_rng(seed)
    A = representable_values(rng, (64, k), dt)
    B = representable_values(rng, (n, k), dt)
    if a_src == "REG":
        a_arg = rt.to_device(A.astype(np_dtype(dt)))                                   # (64, k) row-major
    elif a_src == "MN":
        a_arg = tylo.prepare_tma(a_tile, rt.to_device(nan_padded(A.T, (k, w), dt)))  # (k, 64): M contiguous
    else:
        a_arg = tylo.prepare_tma(a_tile, rt.to_device(nan_padded(A, (64, w), dt)))   # (64, w): NaN past K
    if b_mn:
        wide = w * consts["B_BOXES"]
        b_arg = tylo.prepare_tma(b_tile, rt.to_device(nan_padded(B.T, (k, wide), dt)))  # (k, boxes * w): NaN past N
    else:
        b_arg = tylo.prepare_tma(b_tile, rt.to_device(nan_padded(B, (n, w), dt)))    # (n, w): NaN past K
    out = rt.to_device(np.full((64, n), np.nan, dtype=np.float32))
    wgmma_product[1, 128](out, a_arg, b_arg, **consts)
    ref = A @ B.T
    assert np.any(ref != 0)
    return out.to_host().astype(np.float64), ref


@pytest.mark.gpu
@pytest.mark.parametrize("case", PRODUCT_CASES, ids=_case_id)
def test_wgmma_product(case):
    _sm90()
    consts = product_case(*case)[3]
    got, ref = _run_product(case, consts, zlib.crc32(_case_id(case).encode()))
    np.testing.assert_array_equal(got, ref, err_msg=_case_id(case))


# partitions: instruction i accumulates into partition i % p, finish_mma sums them (p * n / 2 <= 128)
PARTITIONED = [("bf16", 8, 64, "K", False, 128, 4), ("f16", 128, 64, "REG", False, 128, 2),
               ("e4m3", 64, 64, "K", False, 128, 2), ("bf16", 32, 32, "MN", True, 128, 2)]


def partitioned_case(case):
    plan, a_tile, b_tile, consts = product_case(*case[:6])
    plan = wg.WGMMA64(plan.dtype, n=plan.n, k=plan.k, partitions=case[6])
    return plan, a_tile, b_tile, dict(consts, PLAN=plan)


@pytest.mark.gpu
@pytest.mark.parametrize("case", PARTITIONED, ids=lambda c: _case_id(c[:6]) + f"-p{c[6]}")
def test_partitioned_product(case):
    _sm90()
    got, ref = _run_product(case[:6], partitioned_case(case)[3], 7 * case[6] + case[1])
    np.testing.assert_array_equal(got, ref)


EPILOGUE_N = (8, 16, 32, 64, 136, 256)
EPILOGUE_CASES = ([(n, w) for n in EPILOGUE_N for w in ("math", "reduce", "convert")]
                  + [(n, "second") for n in (16, 32, 64)])


def epilogue_case(n, what):
    """(constexprs, TMA plans of A, B, V) of one accumulator_epilogue variant. "second" (n in
    16/32/64, a valid K): PLAN2 = WGMMA64(bf16 via pack for 16 and 64, f16 via astype for 32,
    n2 = 24 / 64 / 256, k = n)."""
    plan = wg.WGMMA64(T.bf16, n=n, k=64)
    if what == "second":
        dt2 = T.f16 if n == 32 else T.bf16
        plan2 = wg.WGMMA64(dt2, n={16: 24, 32: 64, 64: 256}[n], k=n)
        how = "astype" if n == 32 else "pack"
    else:
        plan2, how = wg.WGMMA64(T.bf16, n=8, k=16), "none"       # V is not loaded
    at = tma.TMATile(T.bf16, (64, 64))
    bt = tma.TMATile(T.bf16, (n, 64))
    vt = tma.TMATile(plan2.dtype, (plan2.n, 64))
    red = reduction_plan(wg.accumulator_ownership(plan), 1).result.values
    nbytes = sum(tma.transfer_bytes(x) for x in ((at, bt, vt) if what == "second" else (at, bt)))
    return dict(PLAN=plan, PLAN2=plan2, HOW=how, RED=red, BYTES=nbytes, WHAT=what), (at, bt, vt)


def epilogue_signature(tiles):
    return ["*f32:16", "*bf16:16", "*f16:16", "*i32:16", "*f32:16", *tiles]


@pytest.mark.gpu
@pytest.mark.parametrize("n, what", EPILOGUE_CASES, ids=lambda x: str(x))
def test_accumulator_fragment_epilogue(n, what):
    _sm90()
    import ml_dtypes

    import tylo.runtime as rt
    consts, (at, bt, vt) = epilogue_case(n, what)
    plan, plan2 = consts["PLAN"], consts["PLAN2"]
    rng = np.random.default_rng(1000 * n + len(what))
    A = representable_values(rng, (64, 64), T.bf16, ints=True)             # integers in [-4, 4]: S, S*S exact
    B = representable_values(rng, (n, 64), T.bf16, ints=True)
    bf = ml_dtypes.bfloat16
    V = nan_padded(representable_values(rng, (plan2.n, plan2.k), plan2.dtype, ints=True) / 2, (plan2.n, 64), plan2.dtype)
    red = consts["RED"]
    out_f = rt.to_device(np.full((64, max(n, plan2.n)), np.nan, dtype=np.float32))
    out_bf = rt.to_device(np.full((64, n), np.nan, dtype=bf))
    out_h = rt.to_device(np.full((64, n), np.nan, dtype=np.float16))
    out_i = rt.to_device(np.full((64, n), -(2 ** 31), dtype=np.int32))
    out_red = rt.to_device(np.full((128 * 3 * red,), np.nan, dtype=np.float32))
    maps = [tylo.prepare_tma(at, rt.to_device(A.astype(bf))), tylo.prepare_tma(bt, rt.to_device(B.astype(bf))),
            tylo.prepare_tma(vt, rt.to_device(V))]
    accumulator_epilogue[1, 128](out_f, out_bf, out_h, out_i, out_red, *maps, **consts)

    S = A @ B.T
    assert np.any(S != 0)
    eq = np.testing.assert_array_equal
    got = out_f.to_host().astype(np.float64).reshape(-1)
    mx, sm, mn = S.max(axis=1, keepdims=True), S.sum(axis=1, keepdims=True), S.min(axis=1, keepdims=True)
    if what == "math":
        eq(got[:64 * n].reshape(64, n), np.where(S > 2, S * 0.5 - 3, S * S + 1) - np.abs(S))
    elif what == "reduce":
        eq(got[:64 * n].reshape(64, n), (S - mx) * 2 + sm - (mn - S))
        # every thread holds its rows' reductions: replicated in all four lanes of a group
        table = ownership_table(reduction_plan(wg.accumulator_ownership(plan), 1).result)   # -> (row, 0)
        regs = out_red.to_host().astype(np.float64).reshape(128, 3, red)
        for j, ref in enumerate((mx[:, 0], sm[:, 0], mn[:, 0])):
            want = np.array([[ref[table[t, s][0]] for s in range(red)] for t in range(128)])
            eq(regs[:, j, :], want, err_msg=("max", "sum", "min")[j])
    elif what == "convert":
        eq(got[:64 * n].reshape(n, 64).T, S)                                            # column-major store
        eq(out_bf.to_host().view(np.uint16), (S * 1.25 + 0.375).astype(bf).view(np.uint16))   # RNE, bit for bit
        eq(out_h.to_host().view(np.uint16), (S * 37 + 0.0625).astype(np.float16).view(np.uint16))
        eq(out_i.to_host(), np.trunc(S * 0.5 - 0.25).astype(np.int32))                  # toward zero
    else:
        P = (S - mx).astype(np_dtype(plan2.dtype)).astype(np.float64)                        # rounded like cvt.rn
        Vk = V.astype(np.float64)[:, :plan2.k]
        eq(got[:64 * plan2.n].reshape(64, plan2.n), P @ Vk.T)


# ----------------------------------------------------------------------------- no GPU


def _count(ptx, text):
    return len(re.findall(re.escape(text), ptx))


def _opcode(plan):
    t = plan.dtype.name.replace("f8", "")
    return f"wgmma.mma_async.sync.aligned.m64n{plan.n}k{plan.instr_k}.f32.{t}.{t}"


def _clean(ck):
    assert ".local" not in ck.ptx and "call.uni" not in ck.ptx
    assert ck.resources.spill_bytes == 0 and ck.resources.stack_bytes == 0


# one of each dtype, K, operand source and swizzle, N from 8 to 256 (the GPU tests compile all)
ASSEMBLED = [("bf16", 8, 64, "K", False, 128), ("bf16", 256, 16, "MN", False, 128),
             ("f16", 136, 32, "REG", False, 128), ("bf16", 64, 32, "MN", True, 128),
             ("e4m3", 256, 64, "K", False, 128), ("e5m2", 136, 32, "K", False, 128),
             ("bf16", 136, 64, "REG_SMEM", False, 128), ("f16", 24, 64, "REG", True, 64),
             ("e4m3", 96, 32, "K", False, 32)]


@pytest.mark.parametrize("case", ASSEMBLED, ids=_case_id)
def test_product_variants_assemble_for_sm90a(case):
    assert case in PRODUCT_CASES
    name, n, k, a_src, b_mn, sw = case
    plan, a_tile, b_tile, consts = product_case(*case)
    ck = wgmma_product.compile(signature=product_signature(case), constexprs=consts, arch="sm_90a", block=128)
    ptx = ck.ptx
    op = _opcode(plan)
    hits = re.findall(re.escape(op) + r" [^;]*;", ptx)
    assert len(hits) == plan.instructions == k // plan.instr_k, (op, len(hits))
    assert _count(ptx, "wgmma.mma_async") == plan.instructions
    assert _count(ptx, "wgmma.fence.sync.aligned") == 1 and _count(ptx, "wgmma.commit_group.sync.aligned") == 1
    assert _count(ptx, "wgmma.wait_group.sync.aligned 0") == 1
    # trailing immediates: scale-d is a register; imm-scale-a, imm-scale-b, then for 16-bit inputs
    # imm-trans-a (not with A in registers) and imm-trans-b
    if plan.dtype.itemsize == 2:
        want = "1, 1, " + ("" if a_src.startswith("REG") else f"{int(a_src == 'MN')}, ") + f"{int(b_mn)}"
    else:
        want = "1, 1"
    assert all(h.rstrip(";").endswith(want) for h in hits), (want, hits)
    # operands: {accumulators}, then A as {four registers} or a descriptor, then B's descriptor
    assert all(h.count("{") == (2 if a_src.startswith("REG") else 1) for h in hits), hits
    loads = _count(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes")
    assert loads == (1 if a_src == "REG" else 2)
    if a_src == "REG_SMEM":
        assert "ldmatrix.sync.aligned" in ptx
    _clean(ck)


@pytest.mark.parametrize("n, what", [(8, "reduce"), (136, "math"), (64, "convert"), (32, "second")],
                         ids=lambda x: str(x))
def test_epilogue_variants_assemble_for_sm90a(n, what):
    assert (n, what) in EPILOGUE_CASES
    consts, tiles = epilogue_case(n, what)
    plan, plan2 = consts["PLAN"], consts["PLAN2"]
    ck = accumulator_epilogue.compile(signature=epilogue_signature(tiles), constexprs=consts, arch="sm_90a",
                                      block=128)
    ptx = ck.ptx
    assert _count(ptx, _opcode(plan)) == plan.instructions
    red = reduction_plan(wg.accumulator_ownership(plan), 1)
    assert red.shuffle_masks == (1, 2) and consts["RED"] == len(red.groups) == 2   # rows g and g + 8
    if what == "reduce":        # max, sum, min: two XOR shuffles (lanes ^1, ^2) per row
        assert _count(ptx, "shfl.sync.bfly") == 3 * 2 * 2
    if what == "convert":
        assert "cvt.rn.bf16" in ptx and "cvt.rn.f16" in ptx and "cvt.rzi.s32.f32" in ptx
    if what == "second":
        # A from registers: {four 32-bit registers} then B's descriptor; imm-trans-a absent
        rs = re.findall(re.escape(_opcode(plan2)) + r" \{[^}]*\}, \{[^}]*\}, [^;]*;", ptx)
        assert len(rs) == plan2.instructions and all(h.rstrip(";").endswith("1, 1, 0") for h in rs)
        assert "cvt.rn.f16x2.f32" in ptx
    _clean(ck)


def test_partitioned_variants_assemble_and_respect_the_register_budget():
    case = PARTITIONED[0]
    plan, a_tile, b_tile, consts = partitioned_case(case)
    ck = wgmma_product.compile(signature=product_signature(case[:6]), constexprs=consts, arch="sm_90a",
                               block=128)
    assert _count(ck.ptx, _opcode(plan)) == 4
    assert len(re.findall(r"add(\.rn)?\.f32", ck.ptx)) == 3 * plan.n // 2      # finish_mma: 3 sums per register
    _clean(ck)
    for c in PARTITIONED:
        assert c[6] * c[1] // 2 <= wg.MAX_ACC_REGISTERS
    with pytest.raises(ValueError, match="register budget"):
        wg.WGMMA64(T.bf16, n=256, k=64, partitions=2)


@tylo.jit
def column_reduction(out, PLAN: tylo.constexpr):
    sa = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    t = tma.shared_tile(tma.TMATile(tylo.bf16, (64, 64)), sa)
    s = wg.finish_mma(wg.wait_mma(wg.mma_async(PLAN, wg.wgmma_operand(PLAN, wg.OperandA, t),
                                               wg.wgmma_operand(PLAN, wg.OperandB, t), tylo.zero_accumulator(PLAN))))
    tylo.store(tylo.GlobalTile(out, Layout((1, PLAN.n), (0, 1))), s.sum(axis=0))


def test_accumulator_column_reduction_names_the_ownership():
    # axis 0 of the accumulator spans the four warps: no shuffle plan, a compile error
    with pytest.raises(tylo.CompileError, match="wgmma_accumulator"):
        column_reduction.compile(signature="*f32", constexprs=dict(PLAN=wg.WGMMA64(T.bf16, n=64, k=16)),
                                 arch="sm_90a", block=128)


def test_case_lists_cover_the_requirement():
    """Every N for at least one line; every dtype x K x source; fp8 K-major only."""
    seen_n = {}
    for name, n, k, a_src, b_mn, sw in PRODUCT_CASES:
        seen_n.setdefault((name, k, a_src, b_mn, sw), set()).add(n)
        assert k in K_OF[name]
        if DTYPES[name].itemsize == 1:
            assert a_src == "K" and not b_mn
    full = [key for key, ns in seen_n.items() if ns == set(ALL_N)]
    assert len(full) >= 3, full
    for name, ks in K_OF.items():
        for k in ks:
            sources = ("K", "MN", "REG") if DTYPES[name].itemsize == 2 else ("K",)
            for a_src in sources:
                assert {8, 136, 256} <= seen_n[(name, k, a_src, False, 128)]
                if DTYPES[name].itemsize == 2:
                    assert {8, 64} <= seen_n[(name, k, a_src, True, 128)]


@tylo.jit
def fragment_math(out, PLAN: tylo.constexpr, WHAT: tylo.constexpr):
    sa = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    t = tma.shared_tile(tma.TMATile(tylo.bf16, (64, 64)), sa)
    s = wg.finish_mma(wg.wait_mma(wg.mma_async(PLAN, wg.wgmma_operand(PLAN, wg.OperandA, t),
                                               wg.wgmma_operand(PLAN, wg.OperandB, t), tylo.zero_accumulator(PLAN))))
    if WHAT == "maximum-constant":
        r = tylo.maximum(s, 2.0)
    elif WHAT == "minimum-fragments":
        r = tylo.minimum(s, s * 2)
    else:
        r = tylo.fma(s, s, 1.0)
    tylo.store(tylo.GlobalTile(out, Layout((64, PLAN.n), (PLAN.n, 1))), r)


@pytest.mark.parametrize("what,opcode", [("maximum-constant", "max.f32"), ("minimum-fragments", "min.f32"),
                                         ("fma", "fma.rn.f32")])
def test_fragment_min_max_fma(what, opcode):
    ck = fragment_math.compile(signature="*f32", constexprs=dict(PLAN=wg.WGMMA64(T.bf16, n=64, k=16), WHAT=what),
                               arch="sm_90a", block=128)
    assert len(re.findall(rf"\b{re.escape(opcode)}\s", ck.ptx)) >= 32      # one per accumulator slot
    assert ".local" not in ck.ptx
