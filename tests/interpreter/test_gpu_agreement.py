"""The interpreter against the H200: the same kernels, launched the same way, give the same bytes.

Each case below is one or more launches of a kernel of tylo's own (``examples/hopper_gemm.py`` and the
unit kernels of tests/hopper, imported, not copied) on numpy inputs. It runs

* in the interpreter: ``tylo.jit(kernel.fn, interpret=True)`` (what ``TYLO_INTERPRET=1`` gives),
  with numpy arrays and TMA bindings of numpy arrays, and
* on the GPU (tests marked ``gpu``): ``kernel.launch`` of the same kernel, specialised the same way
  (the interpreter's launch classifies arguments as a GPU launch does), on device copies of the same
  inputs and TMA bindings of the device arrays,

and compares every output array of the two runs, poison included: bit for bit where the inputs make the
arithmetic exact (small integers, so every product and every fp32 partial sum is an integer below
2^24 whatever the order of summation, and the one rounding to bf16 is the same round-to-nearest-even
of the same exact value on both sides), otherwise within the tolerance the case states.

Without a GPU the interpreter side of each case is checked against a float64 / numpy reference
(``test_interpreter_matches_the_reference``), so the file is useful on a CPU machine too; the cases that
interpret for more than about 3 s and the TMA combinations beyond three that cover every width, swizzle
and axis are marked ``slow`` there. On the GPU machine (``-s`` prints each case's times)::

    PYTHONPATH=$PWD python -m pytest -q -m gpu tests/interpreter/test_gpu_agreement.py -rfEs --durations=15

The raw-descriptor kernels of tests/hopper/test_hopper_gpu.py (a tensor map passed as a u64 device
address) are not here: the interpreter reads TMA bindings, and a device copy of an encoded tensor map
means nothing to it; their TMA and WGMMA work is covered by the binding-based kernels below.
"""
from __future__ import annotations

import pathlib
import sys
import time
import zlib
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

import tylo
from tylo.ir import types as T

HOPPER_TESTS = pathlib.Path(__file__).resolve().parents[1] / "hopper"
if str(HOPPER_TESTS) not in sys.path:
    sys.path.insert(0, str(HOPPER_TESTS))

import hopper_gemm as hg  # noqa: E402  (examples/, on the path through tests/conftest.py)
import test_multicast as mc  # noqa: E402
import test_tma_gpu as tg  # noqa: E402
import test_wgmma_gpu as wgt  # noqa: E402
import test_wgmma_groups as grp  # noqa: E402

BF16 = ml_dtypes.bfloat16


# -- cases: launches over named arrays ------------------------------------------------------------------

@dataclass(frozen=True)
class Arr:
    """A launch argument: the case's array of that name (a numpy array here, a device array on the GPU)."""
    name: str


@dataclass(frozen=True)
class Tma:
    """A launch argument: a TMA binding of ``plan`` over the case's array ``name``."""
    plan: object
    name: str
    bounds: tuple | None = None


@dataclass(frozen=True)
class Launch:
    kernel: object                  # a tylo.jit kernel (not interpreting)
    grid: tuple
    block: int
    args: tuple
    kwargs: tuple = ()              # constexprs by name: ((name, value), ...)
    cluster: tuple | None = None


@dataclass
class Case:
    """Launches run in order over ``arrays`` (the initial contents, poison included); ``outputs`` are the
    arrays compared afterwards. ``check(outputs)`` asserts the interpreter's result against a float64 /
    numpy reference; ``agree(name, gpu, interpreter)`` compares the two runs (default: bit for bit)."""
    launches: list
    arrays: dict
    outputs: tuple
    check: object
    agree: object = None


def bits(a):
    """The raw bit patterns (an exact, NaN-safe comparison)."""
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def assert_same_bits(name, gpu, interpreted):
    bad = bits(gpu) != bits(interpreted)
    if bad.any():
        where = np.argwhere(bad)
        first = tuple(where[0])
        raise AssertionError(f"{name}: {int(bad.sum())} of {bad.size} elements differ between the GPU and the "
                             f"interpreter, first at {where[:5].tolist()}: GPU {gpu[first]!r}, "
                             f"interpreter {interpreted[first]!r}")


_TWINS = {}


def interpreted(kernel):
    """The interpreting twin of a kernel: the same Python function under ``tylo.jit(interpret=True)``."""
    twin = _TWINS.get(id(kernel))
    if twin is None:
        twin = _TWINS[id(kernel)] = (kernel, tylo.jit(kernel.fn, interpret=True, **kernel.options))
    return twin[1]


def _arguments(launch, arrays):
    bindings = {}
    args = []
    for a in launch.args:
        if isinstance(a, Arr):
            args.append(arrays[a.name])
        elif isinstance(a, Tma):
            key = (a.plan, a.name, a.bounds)
            if key not in bindings:
                bindings[key] = tylo.prepare_tma(a.plan, arrays[a.name], bounds=a.bounds)
            args.append(bindings[key])
        else:
            args.append(a)
    return args


def run_interpreter(case):
    arrays = {k: v.copy() for k, v in case.arrays.items()}
    for ln in case.launches:
        interpreted(ln.kernel).launch(*_arguments(ln, arrays), grid=ln.grid, block=ln.block, cluster=ln.cluster,
                                      **dict(ln.kwargs))
    return {k: arrays[k] for k in case.outputs}


def run_gpu(case):
    import tylo.runtime as rt
    arrays = {k: rt.to_device(np.ascontiguousarray(v)) for k, v in case.arrays.items()}
    for ln in case.launches:
        ln.kernel.launch(*_arguments(ln, arrays), grid=ln.grid, block=ln.block, cluster=ln.cluster,
                         **dict(ln.kwargs))
    return {k: arrays[k].to_host() for k in case.outputs}


# -- the Hopper GEMM (examples/hopper_gemm.py) ---------------------------------------------------------------

def exact_values(rng, shape, bound):
    """Integers in [-bound, bound] (exact in bf16 and fp8 e4m3), never all zero."""
    x = rng.integers(-bound, bound + 1, size=shape).astype(np.float64)
    x.flat[0] = bound
    return x


def gemm_case(M, N, K, config, dtype=tylo.bf16, a_mn=False, b_mn=False, exact=True, seed=0, ctas=None, sms=1 << 20):
    """C (M, N) = A (M, K) @ B (K, N) through ``hopper_gemm`` (split-K reduced in the kernel), with the
    arguments ``hopper_gemm.prepare`` builds: K-major A is A row-major, MN-major A is A^T row-major (A
    column-major); K-major B is B^T row-major, MN-major B is B row-major; swap-AB computes C^T = B^T A^T.
    One work unit per CTA (the grid ``prepare`` picks on a GPU of at least that many SMs), or ``ctas``
    persistent CTAs walking the work units."""
    assert exact or config.split_k == 1, "the tolerance below is for C only"
    rng = np.random.default_rng(seed)
    np_dt = BF16 if dtype == tylo.bf16 else ml_dtypes.float8_e4m3fn
    if exact:     # |A|, |B| <= 3 (2 for fp8), K <= 392: every partial sum an integer below 2^12
        bound = 3 if dtype == tylo.bf16 else 2
        A, B = exact_values(rng, (M, K), bound), exact_values(rng, (K, N), bound)
        assert K * bound * bound < 2 ** 12
    else:
        A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    A, B = A.astype(np_dt), B.astype(np_dt)
    arrays = {"a": np.ascontiguousarray(A.T if a_mn else A), "b": np.ascontiguousarray(B if b_mn else B.T),
              "c": np.full((M, N), np.nan, BF16)}
    if config.swap_ab:
        ka, kb, ka_mn, kb_mn, mk, nk, ld_row, ld_col = "b", "a", b_mn, a_mn, N, M, 1, N
    else:
        ka, kb, ka_mn, kb_mn, mk, nk, ld_row, ld_col = "a", "b", a_mn, b_mn, M, N, N, 1
    c_map, a_map, b_map = hg.tma_maps(config, dtype, ka, kb, "c", ka_mn, kb_mn, bind=Tma)
    plan = hg.schedule(config, mk, nk, K, dtype.itemsize, sms)   # by default one job per CTA
    grid = (ctas or plan.dp_tiles + plan.workers,)
    constexprs = config.constexprs(dtype, ka_mn, kb_mn)
    arrays["ws"] = np.full((max(4, 2 * plan.workers * config.tm * config.tn),), np.nan, np.float32)
    arrays["counters"] = np.zeros((max(4, plan.cut_tiles * config.consumers),), np.int32)
    launches = [Launch(hg.hopper_gemm, grid, config.threads,
                       (c_map, a_map, b_map, Arr("c"), Arr("ws"), Arr("counters"), mk, nk, K, ld_row, ld_col,
                        plan.dp_tiles, plan.workers, *constexprs))]
    outputs = ("c", "counters") if config.fixup else ("c",)
    ref = A.astype(np.float64) @ B.astype(np.float64)

    def check(out):
        c = out["c"].astype(np.float64)
        assert np.isfinite(c).all(), "unwritten outputs"
        if exact:
            # the exact product, rounded once to bf16 (RNE)
            np.testing.assert_array_equal(bits(out["c"]), bits(ref.astype(BF16)))
            if "counters" in out:     # the last arrival of each cut tile reset its counter
                assert not out["counters"].any()
        else:
            assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 4e-3

    def agree(name, gpu, interp):
        if exact:
            return assert_same_bits(name, gpu, interp)
        # fp32 sums in different orders, then one bf16 rounding each: at most one bf16 step apart
        # (2^-7 of the larger magnitude) plus twice the accumulation bound of K fp32 additions,
        # rounding or truncating, K 2^-23 (|A| @ |B|)
        g, i = gpu.astype(np.float64), interp.astype(np.float64)
        absprod = np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64))
        tol = 2.0 ** -7 * np.maximum(np.abs(g), np.abs(i)) + K * 2.0 ** -22 * absprod
        assert np.isfinite(g).all() and np.isfinite(i).all()
        over = np.abs(g - i) > tol
        assert not over.any(), f"{name}: {int(over.sum())} elements differ by more than the stated tolerance"

    return Case(launches, arrays, outputs, check, agree)


GEMM_CASES = {
    # the default 128 x 256 tile (two consumers, TMA epilogue), ragged in M and N, 3 K steps (the last
    # partial) through a 2-stage ring (mbarrier phases wrap)
    "gemm-default-128x256": partial(gemm_case, 120, 248, 136, hg.GemmConfig(stages=2)),
    "gemm-default-random": partial(gemm_case, 120, 248, 136, hg.GemmConfig(stages=2), exact=False, seed=1),
    # persistent: one CTA walks 2 x 2 tiles of the default size in grouped order, 2 K steps each
    "gemm-default-persistent": partial(gemm_case, 200, 264, 72, hg.GemmConfig(stages=2), seed=7, ctas=1),
    # 64-row tiles, one consumer, 2 x 2 work units over 4 CTAs, TMA epilogue
    "gemm-64-row": partial(gemm_case, 100, 120, 136, hg.GemmConfig(tn=64, consumers=1, stages=2), seed=2),
    # swap-AB: C^T = B^T A^T stored from registers (a small M becomes the WGMMA's n)
    "gemm-swap-ab": partial(gemm_case, 40, 136, 136, hg.GemmConfig(tn=64, consumers=1, stages=2, swap_ab=True,
                                                                     direct=True), seed=3),
    # split-K: 7 K steps (the last partial) cut into 3 ranges (2, 2, 3) per tile, the f32 partials summed in
    # worker order by the last to arrive
    "gemm-split-k": partial(gemm_case, 72, 64, 392, hg.GemmConfig(tn=64, consumers=1, stages=2, split_k=3,
                                                                    direct=True), seed=4),
    # stream-K on 4 SMs: 3 x 5 tiles of 64 x 64, 8 whole tiles, the other 7 tiles' 28 K steps shared by 4
    # workers (7 each), the cut tiles summed by the last to arrive
    "gemm-stream-k": partial(gemm_case, 130, 264, 256, hg.GemmConfig(tn=64, consumers=1, stages=2, stream_k=True),
                             seed=8, ctas=4, sms=4),
    # MN-major A and B (A column-major, B row-major): 64-wide boxes read with the transpose bits
    "gemm-mn-major": partial(gemm_case, 72, 200, 136, hg.GemmConfig(tn=128, consumers=1, stages=2),
                             a_mn=True, b_mn=True, seed=5),
    # fp8 e4m3 (K-major): a 128-byte TMA row is 128 elements, two m64nNk32 groups per K step
    "gemm-fp8-e4m3": partial(gemm_case, 100, 128, 256, hg.GemmConfig(tn=128, consumers=1, stages=2),
                             dtype=tylo.f8e4m3, seed=6),
}


# -- TMA loads and stores (tests/hopper/test_tma_gpu.py) ------------------------------------------------

#: every element width (1, 2, 4 bytes) x swizzle (32, 64, 128) x inner axis, as test_tma_gpu runs them, with
#: the outer box extent capped at 40 rows (the interpreter's time grows with the box; 8 to 40 remain)
TMA_PLANS = [tg.make_plan(*c, outer=min(p.outer, 40)) for c, p in zip(tg.COMBOS, tg.ALL_PLANS)]


def _full_bounds(plan, shape):
    return tg.logical_origin(plan, shape[-2], shape[-1], *((shape[0],) if len(shape) == 3 else ()))


def tma_load_case(plan, rank=2, bounds=None, origins=None, per_cta=3, seed=0):
    """``tma_load_tiles``: boxes at in-bounds, ragged, past-the-edge (zero fill) and negative origins, several
    per CTA through one mbarrier whose parity flips (0, 1, 0). Exact: the bytes are copied."""
    rng = np.random.default_rng(zlib.crc32(repr(plan).encode()) + seed)
    R, C = tg.ragged_shape(plan)
    shape = (R, C) if rank == 2 else (tg.BATCH, R, C)
    host = tg.fresh_values(rng, plan, shape)
    if origins is None:
        origins = tg.load_origins(plan, R, C)
    n = int(np.prod(plan.shape))
    arrays = {"out": tg.poisoned_array(plan, len(origins) * n), "err": np.zeros(1, np.int32), "src": host,
              "origins": tg.origins_array(origins)}
    launch = Launch(tg.tma_load_tiles, (len(origins) // per_cta,), tg.BLOCK,
                    (Arr("out"), Arr("err"), Tma(plan, "src", bounds), Arr("origins"), per_cta))

    def check(out):
        assert out["err"][0] == 0, "an mbarrier wait gave up"
        ref = SimpleNamespace(plan=plan, bounds=bounds or _full_bounds(plan, shape))
        tg.check_loads(ref, host, origins, out["out"].reshape(len(origins), n))

    return Case([launch], arrays, ("out", "err"), check)


def tma_store_case(plan, rank=2, bounds=None, origins=None, per_cta=3, seed=0):
    """``tma_store_tiles``: boxes into a poisoned array, the staging tile reused after wait_tma_reads(0);
    parts past the bounds dropped, whole 16-byte chunks written along the inner axis (what the H200
    does at a bound inside a chunk). Exact: the bytes are copied."""
    rng = np.random.default_rng(zlib.crc32(repr(plan).encode()) + 100 + seed)
    R, C = tg.ragged_shape(plan)
    shape = (R, C) if rank == 2 else (tg.BATCH, R, C)
    if origins is None:
        origins = tg.store_origins(plan, R, C)
    poisoned = tg.poisoned_array(plan, shape)
    logical, shared = tg.store_values(rng, plan, len(origins))
    arrays = {"dst": poisoned, "vals": shared.reshape(-1), "origins": tg.origins_array(origins)}
    launch = Launch(tg.tma_store_tiles, (len(origins) // per_cta,), tg.BLOCK,
                    (Tma(plan, "dst", bounds), Arr("vals"), Arr("origins"), per_cta))

    def check(out):
        ref = SimpleNamespace(plan=plan, bounds=bounds or _full_bounds(plan, shape))
        want, written = tg.expected_after_stores(ref, poisoned, logical, origins)
        assert written.any() and not written.all()
        tg.check_array(out["dst"], want, f"{plan} stores")

    return Case([launch], arrays, ("dst",), check)


def _bounded(plan, rank):
    """Bounds 7 rows and 3 columns short of the array (a column bound inside a 16-byte chunk), one matrix
    short in 3-D (test_tma_gpu's ``_bounds``), and origins straddling each bound."""
    R, C = tg.ragged_shape(plan)
    bounds = tg.short_bounds(plan, R, C, None if rank == 2 else tg.BATCH)
    O, W, w16 = plan.outer, plan.inner, 16 // plan.elem_bytes
    rb = R - 7
    oi = [(rb - O + 2, 0), (0, W + w16), (rb - 4, 2 * W), (rb, W)]
    bs = [()] * 4 if rank == 2 else [(0,), (1,), (1,), (tg.BATCH - 1,)]
    return bounds, [tg.logical_origin(plan, a, b, *z) for (a, b), z in zip(oi, bs)]


def _negative_origins(plan):
    O, W, w16 = plan.outer, plan.inner, 16 // plan.elem_bytes
    return [tg.logical_origin(plan, a, b) for a, b in [(-3, 0), (0, -w16), (-5, -w16), (-O, 0)]]


def _3d_origins(plan, store):
    O, W = plan.outer, plan.inner
    pick = ([(0, 0, 0), (O, W, 1), (3 * O, 2 * W, 2), (0, 0, tg.BATCH)] if store else
            [(0, 0, 0), (O, W, 1), (2 * O + 8, 0, 2), (0, 0, tg.BATCH)])
    return [tg.logical_origin(plan, a, b, z) for a, b, z in pick]


def _plan_id(p):
    return f"{p.elem_bytes}B-sw{p.swizzle}-axis{p.axis}"


TMA_CASES = {}
for _p in TMA_PLANS:
    TMA_CASES[f"tma-load-{_plan_id(_p)}"] = partial(tma_load_case, _p)
    TMA_CASES[f"tma-store-{_plan_id(_p)}"] = partial(tma_store_case, _p)
for _p in tg.FEW_PLANS[:2]:
    for _rank in (2, 3):
        TMA_CASES[f"tma-load-bounds-{_rank}d-{_plan_id(_p)}"] = partial(tma_load_case, _p, _rank,
                                                                         *_bounded(_p, _rank), per_cta=2)
        TMA_CASES[f"tma-store-bounds-{_rank}d-{_plan_id(_p)}"] = partial(tma_store_case, _p, _rank,
                                                                          *_bounded(_p, _rank), per_cta=2)
    TMA_CASES[f"tma-load-3d-{_plan_id(_p)}"] = partial(tma_load_case, _p, 3, None, _3d_origins(_p, False),
                                                        per_cta=2)
    TMA_CASES[f"tma-store-3d-{_plan_id(_p)}"] = partial(tma_store_case, _p, 3, None, _3d_origins(_p, True),
                                                         per_cta=2)
    TMA_CASES[f"tma-load-negative-{_plan_id(_p)}"] = partial(tma_load_case, _p, 2, None, _negative_origins(_p),
                                                              per_cta=2)


# -- TMA multicast in a 2-CTA cluster (tests/hopper/test_multicast.py) ---------------------------------------

def multicast_case():
    """CTA rank 0 loads one box for both CTAs of the cluster; each reads the first 128 elements of its own
    copy (shared-memory order) after its own mbarrier saw the bytes."""
    rng = np.random.default_rng(11)
    a = exact_values(rng, (64, 64), 100).astype(BF16)          # integers: exact in bf16 and f32
    arrays = {"out": np.full(256, np.nan, np.float32), "a": a}
    launch = Launch(mc.multicast_load, (2,), 128, (Arr("out"), Tma(mc.PLAN, "a")), cluster=(2, 1, 1))

    def check(out):
        _, off = tg.box_offsets(mc.PLAN)
        flat = np.empty(off.size, np.float32)
        flat[off] = a.astype(np.float32).reshape(-1)            # the box in shared-memory order
        np.testing.assert_array_equal(out["out"], np.concatenate([flat[:128], flat[:128]]))

    return Case([launch], arrays, ("out",), check)


# -- WGMMA (tests/hopper/test_wgmma_gpu.py, test_wgmma_groups.py) ---------------------------------------------

def wgmma_product_case(case, partitions=1, exact=True):
    """``wgmma_product``: out (64, n) f32 = A (64, k) @ B (n, k)^T from TMA-loaded swizzled tiles (K- or
    MN-major, NaN past what the instruction may read) or A from registers (global or ldmatrix from
    shared). Exact: halves in [-4, 4] (integers in [-2, 2] for fp8), sums of at most 64 products of at
    most 12 significant bits. Otherwise normal random values rounded to the input type."""
    name, n, k, a_src, b_mn, sw = case
    plan, a_tile, b_tile, consts = wgmma_case_consts(case, partitions)
    dt = plan.dtype
    w = sw // dt.itemsize
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()) + partitions)
    if exact:
        A, B = wgt.representable_values(rng, (64, k), dt), wgt.representable_values(rng, (n, k), dt)
    else:
        A = rng.standard_normal((64, k)).astype(wgt.np_dtype(dt)).astype(np.float64)
        B = rng.standard_normal((n, k)).astype(wgt.np_dtype(dt)).astype(np.float64)
    if a_src == "REG":
        arrays, a_arg = {"a": A.astype(wgt.np_dtype(dt))}, Arr("a")
    elif a_src == "MN":
        arrays, a_arg = {"a": wgt.nan_padded(A.T, (k, w), dt)}, Tma(a_tile, "a")
    else:
        arrays, a_arg = {"a": wgt.nan_padded(A, (64, w), dt)}, Tma(a_tile, "a")
    arrays["b"] = (wgt.nan_padded(B.T, (k, w * consts["B_BOXES"]), dt) if b_mn else wgt.nan_padded(B, (n, w), dt))
    arrays["out"] = np.full((64, n), np.nan, np.float32)
    launch = Launch(wgt.wgmma_product, (1,), 128, (Arr("out"), a_arg, Tma(b_tile, "b")), tuple(consts.items()))
    ref = A @ B.T
    # the products of two inputs are exact in fp32; k additions in fp32, in any order, rounding or
    # truncating, are each off by at most 2^-23 of the running sum's magnitude: k 2^-23 (|A| @ |B|^T).
    # fp8 WGMMA on Hopper adds with fewer bits (about 14 significant bits, DeepSeek-V3 technical
    # report, 3.3.2): k 2^-13 (|A| @ |B|^T) there
    bound = k * 2.0 ** (-13 if dt.itemsize == 1 else -23) * (np.abs(A) @ np.abs(B).T)

    def check(out):
        got = out["out"].astype(np.float64)
        if exact:
            np.testing.assert_array_equal(got, ref)
        else:
            assert (np.abs(got - ref) <= bound).all()

    def agree(name, gpu, interp):
        assert np.isfinite(gpu).all() and np.isfinite(interp).all()
        assert (np.abs(gpu.astype(np.float64) - interp) <= 2 * bound).all(), f"{name}: beyond twice the bound"

    return Case([launch], arrays, ("out",), check, None if exact else agree)


def wgmma_case_consts(case, partitions):
    if partitions == 1:
        return wgt.product_case(*case)
    return wgt.partitioned_case(case + (partitions,))


#: (dtype, n, k, A source, B MN-major, swizzle[, accumulator partitions]) of wgmma_product
WGMMA_PRODUCTS = {
    "wgmma-bf16-AK-BK-n136": ("bf16", 136, 64, "K", False, 128),
    "wgmma-bf16-AMN-BMN-n64": ("bf16", 64, 32, "MN", True, 128),
    "wgmma-bf16-AK-BMN-n136-3boxes": ("bf16", 136, 32, "K", True, 128),
    "wgmma-f16-AMN-BK-n256": ("f16", 256, 16, "MN", False, 128),
    "wgmma-f16-Areg-n8": ("f16", 8, 16, "REG", False, 128),
    "wgmma-bf16-Areg-ldmatrix-n136": ("bf16", 136, 64, "REG_SMEM", False, 128),
    "wgmma-e4m3-n256": ("e4m3", 256, 64, "K", False, 128),
    "wgmma-e5m2-n136-k32": ("e5m2", 136, 32, "K", False, 128),
    "wgmma-bf16-BMN-sw32": ("bf16", 16, 16, "K", True, 32),
    "wgmma-f16-Areg-BMN-sw64": ("f16", 24, 64, "REG", True, 64),
    "wgmma-e4m3-sw32": ("e4m3", 96, 32, "K", False, 32),
    "wgmma-bf16-4-partitions": ("bf16", 8, 64, "K", False, 128, 4),
}
WGMMA_CASES = {name: partial(wgmma_product_case, c[:6], *c[6:]) for name, c in WGMMA_PRODUCTS.items()}
# random inputs, compared within the stated bound
WGMMA_CASES["wgmma-bf16-random-n256"] = partial(wgmma_product_case, ("bf16", 256, 64, "K", False, 128), exact=False)
WGMMA_CASES["wgmma-e4m3-random-n64"] = partial(wgmma_product_case, ("e4m3", 64, 64, "K", False, 128), exact=False)


def accumulator_epilogue_case(n, what):
    """``accumulator_epilogue``: the accumulator fragment through elementwise math, row reductions
    (every thread's registers dumped), conversions (RNE to bf16/f16, truncation to i32) or as the register
    A operand of a second WGMMA. Exact: integer inputs in [-4, 4]."""
    consts, (at, bt, vt) = wgt.epilogue_case(n, what)
    plan2 = consts["PLAN2"]
    rng = np.random.default_rng(1000 * n + len(what))
    A = wgt.representable_values(rng, (64, 64), T.bf16, ints=True)
    B = wgt.representable_values(rng, (n, 64), T.bf16, ints=True)
    V = wgt.nan_padded(wgt.representable_values(rng, (plan2.n, plan2.k), plan2.dtype, ints=True) / 2, (plan2.n, 64), plan2.dtype)
    red = consts["RED"]
    arrays = {"out_f": np.full((64, max(n, plan2.n)), np.nan, np.float32), "out_bf": np.full((64, n), np.nan, BF16),
              "out_h": np.full((64, n), np.nan, np.float16), "out_i": np.full((64, n), -(2 ** 31), np.int32),
              "out_red": np.full((128 * 3 * red,), np.nan, np.float32),
              "a": A.astype(BF16), "b": B.astype(BF16), "v": V}
    launch = Launch(wgt.accumulator_epilogue, (1,), 128,
                    (Arr("out_f"), Arr("out_bf"), Arr("out_h"), Arr("out_i"), Arr("out_red"),
                     Tma(at, "a"), Tma(bt, "b"), Tma(vt, "v")), tuple(consts.items()))
    S = A @ B.T
    eq = np.testing.assert_array_equal

    def check(out):
        got = out["out_f"].astype(np.float64).reshape(-1)
        if what == "reduce":
            mx, sm, mn = (S.max(axis=1, keepdims=True), S.sum(axis=1, keepdims=True),
                          S.min(axis=1, keepdims=True))
            eq(got[:64 * n].reshape(64, n), (S - mx) * 2 + sm - (mn - S))
        elif what == "convert":
            eq(got[:64 * n].reshape(n, 64).T, S)
            eq(bits(out["out_bf"]), bits((S * 1.25 + 0.375).astype(BF16)))
            eq(bits(out["out_h"]), bits((S * 37 + 0.0625).astype(np.float16)))
            eq(out["out_i"], np.trunc(S * 0.5 - 0.25).astype(np.int32))
        else:
            P = (S - S.max(axis=1, keepdims=True)).astype(wgt.np_dtype(plan2.dtype)).astype(np.float64)
            eq(got[:64 * plan2.n].reshape(64, plan2.n), P @ V.astype(np.float64)[:, :plan2.k].T)

    return Case([launch], arrays, ("out_f", "out_bf", "out_h", "out_i", "out_red"), check)


def two_groups_case():
    """``two_groups``: two WGMMA groups in flight, ``wait_mma(s, pending=1)`` (wgmma.wait_group 1) takes the
    older while the newer is still running. Exact: integers in [-3, 3]."""
    rng = np.random.default_rng(12)
    c, d = exact_values(rng, (64, 64), 3), exact_values(rng, (64, 64), 3)
    arrays = {"s": np.full((64, 64), np.nan, np.float32), "o": np.full((64, 64), np.nan, np.float32),
              "c": c.astype(BF16), "d": d.astype(BF16)}
    launch = Launch(grp.two_groups, (1,), 128, (Arr("s"), Arr("o"), Tma(grp.TILE, "c"), Tma(grp.TILE, "d")),
                    (("MODE", "ok"),))

    def check(out):
        np.testing.assert_array_equal(out["s"], 2 * c @ d.T)
        np.testing.assert_array_equal(out["o"], d @ c.T)

    return Case([launch], arrays, ("s", "o"), check)


UNIT_CASES = {
    "multicast-cluster-2": multicast_case,
    **WGMMA_CASES,
    "wgmma-epilogue-reduce-n32": partial(accumulator_epilogue_case, 32, "reduce"),
    "wgmma-epilogue-convert-n64": partial(accumulator_epilogue_case, 64, "convert"),
    "wgmma-epilogue-second-register-A-n32": partial(accumulator_epilogue_case, 32, "second"),
    "wgmma-two-groups-wait-1": two_groups_case,
}

CASES = {**GEMM_CASES, **TMA_CASES, **UNIT_CASES}

#: TMA plans whose plain load and store cases the CPU run takes by default: every width, swizzle and axis
#: once (the other 15 combinations run with ``-m slow`` and on the GPU)
TMA_DEFAULT = {(1, 32, 0), (2, 64, 1), (4, 128, 0)}

#: cases kept out of the default CPU run: those that interpret for more than ~3 s on the 2-core CPU machine
#: (docs/interpreter.md) and the TMA combinations beyond TMA_DEFAULT; all of them run on the GPU
SLOW = {"gemm-default-persistent", "gemm-stream-k",
        *(f"tma-{op}-{w}B-sw{s}-axis{a}" for op in ("load", "store") for w, s, a in tg.COMBOS
          if (w, s, a) not in TMA_DEFAULT)}


def _params():
    return [pytest.param(name, marks=[pytest.mark.slow] if name in SLOW else [], id=name) for name in CASES]


# -- tests -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", _params())
def test_interpreter_matches_the_reference(name):
    case = CASES[name]()
    case.check(run_interpreter(case))


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_gpu_agrees_with_the_interpreter(name):
    from tylo.runtime import compute_capability
    if compute_capability() < (9, 0):
        pytest.skip("needs sm_90")
    case = CASES[name]()
    t0 = time.perf_counter()
    interp = run_interpreter(case)
    t1 = time.perf_counter()
    gpu = run_gpu(case)
    print(f"{name}: interpreter {t1 - t0:.1f} s, GPU (incl. compile) {time.perf_counter() - t1:.1f} s")
    case.check(gpu)                        # the GPU against the reference: tells which side is wrong
    case.check(interp)
    agree = case.agree or assert_same_bits
    for out in case.outputs:
        agree(out, gpu[out], interp[out])


def test_cases_cover_the_brief():
    """The GEMM configurations, every TMA width, swizzle and axis for loads and stores, and the WGMMA
    operand sources the brief names are all here."""
    assert {"gemm-default-128x256", "gemm-64-row", "gemm-swap-ab", "gemm-split-k", "gemm-mn-major",
            "gemm-fp8-e4m3"} <= set(CASES)
    seen = {(p.elem_bytes, p.swizzle, p.axis) for p in TMA_PLANS}
    assert {w for w, _, _ in seen} == {1, 2, 4} and {s for _, s, _ in seen} == {32, 64, 128}
    assert {a for _, _, a in seen} == {0, 1}
    products = WGMMA_PRODUCTS.values()
    assert {c[3] for c in products} == {"K", "MN", "REG", "REG_SMEM"} and {c[4] for c in products} == {False, True}
    assert {c[0] for c in products} == {"bf16", "f16", "e4m3", "e5m2"} and {c[5] for c in products} == {32, 64, 128}


def test_the_comparisons_catch_a_difference():
    """What the GPU test applies to the two runs fails on one changed element: a flipped low bit where
    the comparison is bit for bit, four bf16 steps (GEMM) or three times the accumulation bound (WGMMA) where
    it has a tolerance; and passes on equal results."""
    exact = gemm_case(64, 64, 64, hg.GemmConfig(tn=64, consumers=1, stages=2), seed=8)
    c = exact.arrays["c"].copy()
    c[...] = 3
    assert_same_bits("c", c, c.copy())
    flipped = c.copy()
    flipped.view(np.uint16)[5, 7] ^= 1
    with pytest.raises(AssertionError, match="1 of 4096 elements differ"):
        assert_same_bits("c", flipped, c)
    with pytest.raises(AssertionError):
        exact.agree("c", flipped, c)

    rough = gemm_case(64, 64, 64, hg.GemmConfig(tn=64, consumers=1, stages=2), exact=False, seed=8)
    a, b = (rough.arrays[k].astype(np.float64) for k in ("a", "b"))
    c = (a @ b.T).astype(BF16)                        # b holds B^T (K-major)
    rough.agree("c", c, c.copy())
    off = c.copy()
    off[3, 4] = np.float64(off[3, 4]) * (1 + 4 * 2.0 ** -7)
    with pytest.raises(AssertionError, match="1 elements differ by more than"):
        rough.agree("c", off, c)

    product = wgmma_product_case(("bf16", 64, 64, "K", False, 128), exact=False)
    a, b = (product.arrays[k].astype(np.float64) for k in ("a", "b"))
    out = (a[:, :64] @ b[:, :64].T).astype(np.float32)
    product.agree("out", out, out.copy())
    off = out.copy()
    off[1, 2] += 3 * 64 * 2.0 ** -23 * (np.abs(a[1, :64]) @ np.abs(b[2, :64]))     # 3 x the bound of 64 sums
    with pytest.raises(AssertionError, match="beyond"):
        product.agree("out", off, out)


def _gemm_specialisations():
    """(config, dtype, A MN-major, B MN-major) of each GEMM case, once each."""
    out = {}
    for name, case in GEMM_CASES.items():
        kw = case.keywords
        key = (case.args[3], kw.get("dtype", tylo.bf16), kw.get("a_mn", False), kw.get("b_mn", False))
        if key[0].swap_ab:         # the kernel's operands are B^T and A^T
            key = (key[0], key[1], key[3], key[2])
        out.setdefault(key, name)
    return {name: key for key, name in out.items()}


@pytest.mark.parametrize("specialisation", [pytest.param(v, id=k) for k, v in _gemm_specialisations().items()])
def test_the_interpreter_runs_the_ir_the_cubin_is_built_from(specialisation):
    """The interpreting twin lowers the GEMM to the very IR that compiling it for sm_90a prints (the
    specialisation ``hopper_gemm.spec`` describes): the interpret option changes the backend, not the
    kernel."""
    from tylo.ir import print_kernel
    from tylo.specialization import ConstexprSpec

    config, dtype, a_mn, b_mn = specialisation
    records = hg.spec(config=config, dtype=dtype, a_mn=a_mn, b_mn=b_mn)
    signature = [r for r in records if not isinstance(r, ConstexprSpec)]
    names = [p.name for p in hg.hopper_gemm.params if p.constexpr]
    constexprs = dict(zip(names, [r.value for r in records if isinstance(r, ConstexprSpec)]))
    compiled = hg.hopper_gemm.compile(signature=signature, constexprs=constexprs, arch="sm_90a", block=config.threads)
    lowered = interpreted(hg.hopper_gemm).lower(signature=signature, constexprs=constexprs, block=config.threads)
    assert print_kernel(lowered) == compiled.ir
    assert "nv.wgmma.mma_async" in compiled.ir and "wgmma.mma_async" in compiled.ptx
