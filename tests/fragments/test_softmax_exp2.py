"""Online softmax in the exp2 domain (tylo.online_softmax_start / _update_exp2 / _finish_exp2 /
_normalize_fast) on a WGMMA accumulator ownership: the interpreter against float64 (weights, LSE in
natural-log units, masked and empty rows), and the PTX for sm_90a (ex2.approx.ftz, one fma per score, the
row sum's shuffles only once at the end, no IEEE division)."""
import math
import re

import numpy as np

import tylo
from tylo import Layout, Ownership
from tylo.lang.fragment import lane_partial_ownership
from tylo.layouts import reduction_plan

OWN = Ownership.wgmma_accumulator(32)
BLOCKS = 3


@tylo.jit
def softmax_blocks(out, lse_out, s, scale_log2, NB: tylo.constexpr):
    m, l = tylo.online_softmax_start(OWN)
    acc = tylo.full(tylo.f32, OWN, 0.0)
    for j in tylo.static_range(NB):
        sj = tylo.load(tylo.GlobalTile(s + j * 64 * 32, Layout((64, 32), (32, 1))), OWN)
        m, l, rescale, p = tylo.online_softmax_update_exp2(m, l, sj, scale_log2)
        acc = acc * rescale + p
    total, lse = tylo.online_softmax_finish_exp2(m, l, scale_log2)
    tylo.store(tylo.GlobalTile(out, Layout((64, 32), (32, 1))), tylo.online_softmax_normalize_fast(acc, total))
    if tylo.thread_idx.x % 4 == 0:
        tylo.store(tylo.GlobalTile(lse_out, Layout((64, 1), (1, 1))), lse)


def test_lane_partials_finish_with_the_same_shuffles():
    lp = lane_partial_ownership(OWN)
    assert lp.shape == (64, 4)
    assert reduction_plan(lp, 1).shuffle_masks == reduction_plan(OWN, 1).shuffle_masks == (1, 2)


def test_interpreter_matches_float64():
    rng = np.random.default_rng()
    s = (rng.standard_normal((BLOCKS, 64, 32)) * 10).astype(np.float32)
    s[0, 3, :5] = -np.inf                          # masked scores
    s[:, 7, :] = -np.inf                           # a row that sees no key
    s[1:, 9, :] = -np.inf                          # a row whose later blocks are masked
    scale = 1 / math.sqrt(128)
    out = np.full((64, 32), np.nan, np.float32)
    lse = np.full(64, np.nan, np.float32)
    tylo.jit(softmax_blocks.fn, interpret=True)[1, 128](out, lse, s, scale * math.log2(math.e), BLOCKS)
    x = np.concatenate(list(s.astype(np.float64)), axis=1) * scale          # (64, 96)
    mx = np.max(x, axis=1, keepdims=True)
    mx[~np.isfinite(mx)] = 0
    e = np.exp(x - mx)
    tot = e.sum(axis=1, keepdims=True)
    w = np.where(tot > 0, e / np.where(tot > 0, tot, 1), 0)
    ref = w.reshape(64, BLOCKS, 32).sum(axis=1)
    ref_lse = np.where(tot[:, 0] > 0, mx[:, 0] + np.log(np.where(tot[:, 0] > 0, tot[:, 0], 1)), -np.inf)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=1e-6)
    assert (out[7] == 0).all() and lse[7] == -np.inf
    ok = np.isfinite(ref_lse)
    np.testing.assert_allclose(lse[ok], ref_lse[ok], rtol=1e-5, atol=1e-5)


def test_ptx_exp2_fma_and_one_sum_reduction():
    ck = softmax_blocks.compile(signature="*f32, *f32, *f32, f32", constexprs=dict(NB=BLOCKS), arch="sm_90a",
                                block=128)
    ptx = ck.ptx
    values, rows = OWN.values, reduction_plan(OWN, 1).result.values
    assert len(re.findall(r"ex2\.approx\.ftz\.f32", ptx)) == BLOCKS * (values + rows)
    assert "div.rn" not in ptx and "rcp.rn" not in ptx
    assert len(re.findall(r"rcp\.approx\.ftz\.f32", ptx)) == rows
    # the max needs two shuffles per row and block; the sum only two per row at the end
    assert len(re.findall(r"shfl\.sync\.bfly", ptx)) == 2 * rows * (BLOCKS + 1)
