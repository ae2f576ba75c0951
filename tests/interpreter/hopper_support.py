"""Shared set-up for the interpreter's Hopper tests: the example GEMM's IR for a ``GemmConfig`` and its
runtime arguments, built the way ``hopper_gemm.prepare`` builds them."""
import functools
import pathlib
import sys

import ml_dtypes
import numpy as np

import tylo
from tylo.specialization import ConstexprSpec

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

import hopper_gemm  # noqa: E402


@functools.lru_cache(maxsize=None)
def gemm_ir(stages=None, c_bufs=2, config=None, dtype=tylo.bf16, a_mn=False, b_mn=False):
    """The kernel's IR for ``config`` (default: the 128 x 256 TMA-epilogue tile with ``c_bufs``), from the
    specialisation ``launch`` compiles (``hopper_gemm.spec``). ``stages`` sets the ring depth, also
    below GemmConfig's minimum of 2 (a one-stage ring deadlocks: the hazard tests want that)."""
    if config is None:
        config = hopper_gemm.GemmConfig(c_bufs=c_bufs)
    records = hopper_gemm.spec(config=config, dtype=dtype, a_mn=a_mn, b_mn=b_mn)
    runtime = [r for r in records if not isinstance(r, ConstexprSpec)]
    names = [p.name for p in hopper_gemm.hopper_gemm.params if p.constexpr]
    constexprs = dict(zip(names, [r.value for r in records if isinstance(r, ConstexprSpec)]))
    if stages is not None:
        constexprs["STAGES"] = stages
    return hopper_gemm.hopper_gemm.lower(signature=runtime, constexprs=constexprs, block=(config.threads,))


def gemm_operands(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    c = np.full((M, N), np.nan, ml_dtypes.bfloat16)
    return a, b, c


def gemm_args(a, b, c, config=None):
    """Runtime arguments of a launch without split-K / stream-K (one job per tile) with K-major operands
    (A row-major, B^T row-major): C = A @ B, or with ``config.swap_ab`` C^T = B^T A^T stored through the
    register epilogue or, without ``config.direct``, the transposing TMA epilogue."""
    h = hopper_gemm
    config = config or h.GemmConfig()
    assert not config.fixup, "split-K / stream-K: gemm_fixup_args"
    M, K = a.shape
    N = b.shape[1]
    bt = np.ascontiguousarray(b.T)
    if config.swap_ab:
        ka, kb, mk, nk, ld_row, ld_col = bt, a, N, M, 1, N
    else:
        ka, kb, mk, nk, ld_row, ld_col = a, bt, M, N, N, 1
    c_map, a_map, b_map = h.tma_maps(config, tylo.bf16, ka, kb, c)
    tiles = -(-mk // config.tm) * -(-nk // config.tn)
    return [c_map, a_map, b_map, c, *unused_fixup_arrays(), mk, nk, K, ld_row, ld_col, tiles, 0]


def gemm_cluster_args(a, b, c, config, sms, a_mn=False, b_mn=False):
    """Runtime arguments and grid of a cluster launch (``cluster_m`` / ``cluster_n`` > 1, or ``split_cluster``;
    A K-major, or MN-major: A column-major, ``a_mn``; B K-major, or MN-major: B row-major, ``b_mn``) under
    ``hopper_gemm.schedule`` for ``sms`` SMs: ``dp_tiles`` counts the clusters' tile pairs, ``workers`` a split
    cluster's K ranges."""
    h = hopper_gemm
    M, K = a.shape
    N = b.shape[1]
    plan = h.schedule(config, M, N, K, 2, sms)
    c_map, a_map, b_map = h.tma_maps(config, tylo.bf16, np.ascontiguousarray(a.T) if a_mn else a,
                                     b if b_mn else np.ascontiguousarray(b.T), c, a_mn, b_mn)
    args = [c_map, a_map, b_map, c, *unused_fixup_arrays(), M, N, K, N, 1, plan.dp_tiles, plan.workers]
    return args, plan.grid


def unused_fixup_arrays():
    """The kernel's fixup workspace and counters where it has no fixup (never read or written)."""
    return np.zeros(4, np.float32), np.zeros(4, np.int32)


def gemm_fixup_args(a, b, c, config, sms):
    """Runtime arguments of a split-K / stream-K launch (K-major operands, the TMA epilogue unless
    ``config.direct``) under ``hopper_gemm.schedule`` for ``sms`` SMs: a NaN-filled workspace (a partial
    read before it is written shows) and zeroed counters. Returns (arguments, grid, workspace, counters)."""
    h = hopper_gemm
    M, K = a.shape
    N = b.shape[1]
    plan = h.schedule(config, M, N, K, 2, sms)
    c_map, a_map, b_map = h.tma_maps(config, tylo.bf16, a, np.ascontiguousarray(b.T), c)
    ws = np.full((max(1, 2 * plan.workers * config.tm * config.tn),), np.nan, np.float32)
    counters = np.zeros((max(1, plan.cut_tiles * config.consumers),), np.int32)
    args = [c_map, a_map, b_map, c, ws, counters, M, N, K, N, 1,
            plan.dp_tiles, plan.workers]
    return args, plan.grid, ws, counters


def relative_error(a, b, c):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    got = c.astype(np.float64)
    assert np.isfinite(got).all(), "unwritten outputs"
    return np.linalg.norm(got - ref) / np.linalg.norm(ref)
