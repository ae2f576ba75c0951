"""Shared set-up for the interpreter's Hopper tests: the example GEMM's IR and its TMA bindings."""
import functools
import pathlib
import sys

import ml_dtypes
import numpy as np

import tylo

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

import hopper_gemm  # noqa: E402


@functools.lru_cache(maxsize=None)
def gemm_ir(stages=4, c_bufs=2):
    return hopper_gemm.hopper_gemm.lower(
        signature=[hopper_gemm.C_TILE, hopper_gemm.A_TILE, hopper_gemm.B_TILE, "i32", "i32", "i32"],
        constexprs={"STAGES": stages, "GROUP_M": 8, "C_BUFS": c_bufs}, block=(hopper_gemm.THREADS,))


def gemm_operands(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    c = np.full((M, N), np.nan, ml_dtypes.bfloat16)
    return a, b, c


def gemm_args(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    h = hopper_gemm
    return [tylo.prepare_tma(h.C_TILE, c), tylo.prepare_tma(h.A_TILE, a),
            tylo.prepare_tma(h.B_TILE, np.ascontiguousarray(b.T)), M, N, K]


def relative_error(a, b, c):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    got = c.astype(np.float64)
    assert np.isfinite(got).all(), "unwritten outputs"
    return np.linalg.norm(got - ref) / np.linalg.norm(ref)
