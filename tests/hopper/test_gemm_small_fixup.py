"""Split-K and stream-K of the Hopper GEMM in the interpreter: the in-kernel fixup (each worker writes
its f32 partial tile, the last to arrive adds all of them in worker order) on ragged and tiny shapes
against float64, bitwise equal whichever CTA arrives last, counters back at zero; and the layout
that keeps the partials in accumulator register order."""
import os
import sys

import ml_dtypes
import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import hopper_gemm as hg  # noqa: E402

import tylo  # noqa: E402
from tylo.interpreter import run  # noqa: E402
from tylo.specialization import ConstexprSpec  # noqa: E402

BF16 = ml_dtypes.bfloat16
C = hg.GemmConfig


def _ir(cfg, mn_major=False):
    records = hg.spec(config=cfg, a_mn=mn_major, b_mn=mn_major)
    names = [p.name for p in hg.hopper_gemm.params if p.constexpr]
    return hg.hopper_gemm.lower(signature=[r for r in records if not isinstance(r, ConstexprSpec)],
                                constexprs=dict(zip(names, [r.value for r in records if isinstance(r, ConstexprSpec)])),
                                block=(cfg.threads,))


def _rows(x):
    """``x`` as a fresh row-major array (a one-row view of a column has unit row stride; TMA wants rows)."""
    out = np.empty(x.shape, x.dtype)
    out[...] = x
    return out


def gemm(a, b, cfg, sms, ctas=None, seed=0, mn_major=False):
    """C = A @ B in the interpreter the way ``launch`` runs it: the schedule for ``sms`` SMs, ``ctas``
    persistent CTAs (default: the schedule's grid); K-major operands (A row-major, B column-major), or
    with ``mn_major`` A column-major and B row-major. Returns (C, counters, schedule)."""
    M, K = a.shape
    N = b.shape[1]
    c = np.full((M, N), np.nan, BF16)
    a_store, b_store = (_rows(a.T), _rows(b)) if mn_major else (_rows(a), _rows(b.T))
    if cfg.swap_ab:
        ka, kb, mk, nk, ld_row, ld_col = b_store, a_store, N, M, 1, N
    else:
        ka, kb, mk, nk, ld_row, ld_col = a_store, b_store, M, N, N, 1
    c_map, a_map, b_map = hg.tma_maps(cfg, tylo.bf16, ka, kb, c, mn_major, mn_major)
    plan = hg.schedule(cfg, mk, nk, K, 2, sms)
    ws = np.full(max(4, 2 * plan.workers * cfg.tm * cfg.tn), np.nan, np.float32)     # unread until written
    counters = np.zeros(max(4, plan.cut_tiles * cfg.consumers), np.int32)
    run(_ir(cfg, mn_major), [c_map, a_map, b_map, c, ws, counters, mk, nk, K, ld_row, ld_col, plan.dp_tiles, plan.workers],
        grid=(ctas or plan.grid,), block=(cfg.threads,), seed=seed)
    return c, counters, plan


def operands(M, N, K, seed, exact):
    rng = np.random.default_rng(seed)
    if exact:       # |A|, |B| <= 3, K <= 455: every partial sum an exact f32 integer below 2^12
        a, b = rng.integers(-3, 4, (M, K)), rng.integers(-3, 4, (K, N))
    else:
        a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    return a.astype(BF16), b.astype(BF16)


def exact_product(a, b):
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(BF16)      # rounded once to bf16


# (config, M, N, K, sms): ragged M and N, K = 1 and short K; split-K with ranges of unequal length;
# stream-K with whole tiles and cut tiles (tiles > sms), and with every tile cut (tiles < sms)
CASES = {
    "split3-64x64-direct": (C(tn=64, consumers=1, stages=2, split_k=3, direct=True), 72, 64, 392, 4),
    "split2-64x64-tma": (C(tn=64, consumers=1, stages=2, split_k=2), 100, 136, 200, 4),
    # the last arriver's groups of partials (reduction_unroll: 4 for tn <= 64 with one consumer, 2 for 64 x 128)
    # and their remainders: 6 = 4 + 2, 5 = 4 + 1, 3 = 3 (above), 3 = 2 + 1
    "split6-swap-n8": (C(tn=8, consumers=1, stages=2, swap_ab=True, split_k=6, direct=True), 1, 24, 392, 4),
    "split5-64x64": (C(tn=64, consumers=1, stages=2, split_k=5), 64, 64, 328, 8),
    "split3-64x128": (C(tn=128, consumers=1, stages=2, split_k=3), 64, 136, 392, 4),
    "split2-k1-mn-major": (C(tn=64, consumers=1, stages=2, split_k=2, direct=True), 40, 64, 1, 4),
    "streamk-m8-mn-major": (C(tn=64, consumers=1, stages=2, stream_k=True), 8, 200, 136, 3),
    "streamk-64x64-all-cut": (C(tn=64, consumers=1, stages=3, stream_k=True), 65, 72, 328, 6),
    "streamk-swap-n8-m1": (C(tn=8, consumers=1, stages=2, swap_ab=True, stream_k=True, direct=True), 1, 8, 200, 3),
    "streamk-n1": (C(tn=8, consumers=1, stages=2, stream_k=True, direct=True), 33, 1, 136, 5),
}
SLOW_CASES = {
    "streamk-64x64-dp-and-cut": (C(tn=64, consumers=1, stages=2, stream_k=True), 130, 264, 256, 4),
    "split2-128x256": (C(stages=2, split_k=2), 130, 264, 200, 4),
    "streamk-128x256": (C(stages=2, stream_k=True), 200, 264, 136, 3),
}


def _params(cases, slow=False):
    return [pytest.param(name, marks=[pytest.mark.slow] if slow else [], id=name) for name in cases]


@pytest.mark.parametrize("name", _params(CASES) + _params(SLOW_CASES, slow=True))
def test_fixup_is_exact_on_small_integers(name):
    cfg, M, N, K, sms = {**CASES, **SLOW_CASES}[name]
    a, b = operands(M, N, K, seed=len(name), exact=True)
    c, counters, plan = gemm(a, b, cfg, sms, mn_major="mn-major" in name)
    assert plan.workers > 0 or plan.ktiles == 1, plan     # the fixup runs (one K step: nothing to split)
    assert np.array_equal(c.view(np.uint16), exact_product(a, b).view(np.uint16))
    assert not counters.any()                           # every cut tile's last arrival reset its counter


@pytest.mark.parametrize("name", [pytest.param("split3", id="split3"),
                                  pytest.param("streamk", id="streamk", marks=pytest.mark.slow)])
def test_fixup_result_does_not_depend_on_which_cta_arrives_last(name):
    # random data: the f32 sums round, so only a fixed order gives equal bits. One CTA (the tile's
    # workers arrive in worker order), one CTA per worker and two CTAs (other last arrivals), under
    # different scheduler seeds, must all give the same bits, close to float64
    cfg = {"split3": C(tn=64, consumers=1, stages=2, split_k=3, direct=True),
           "streamk": C(tn=64, consumers=1, stages=3, stream_k=True)}[name]
    M, N, K, sms = (64, 64, 392, 4) if name == "split3" else (65, 72, 328, 6)
    a, b = operands(M, N, K, seed=3, exact=False)
    results = [gemm(a, b, cfg, sms, ctas=ctas, seed=seed)[0] for ctas, seed in ((1, 0), (None, 1), (2, 2))]
    for c in results[1:]:
        assert np.array_equal(c.view(np.uint16), results[0].view(np.uint16))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(results[0].astype(np.float64) - ref) / np.linalg.norm(ref) < 4e-3


@pytest.mark.parametrize("tn", [8, 16, 64, 128, 256])
def test_partials_are_stored_in_accumulator_register_order(tn):
    # thread t's slots v land at 4 t + v % 4 + 512 (v // 4): each thread's four consecutive slots are one
    # 16-byte access and the 128 threads' accesses are contiguous
    own = hg.accumulator_ownership(tn)
    order = hg.fragment_order(tn)
    offsets = {order(own.coord(t, v)): (t, v) for t in range(128) for v in range(own.values)}
    assert len(offsets) == 64 * tn and set(offsets) == set(range(64 * tn))
    assert all(off == 4 * t + v % 4 + 512 * (v // 4) for off, (t, v) in offsets.items())
