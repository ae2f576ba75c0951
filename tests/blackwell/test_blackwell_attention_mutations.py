"""Mutation tests of the interpreter's hazard checker on examples/blackwell_attention.py (issue 12's
method, applied to issue 13's kernel): every synchronisation op of the kinds issue 13 names -- each
tcgen05 commit, mbarrier wait, tcgen05.wait::ld / wait::st and tcgen05.fence::before_thread_sync /
after_thread_sync -- is removed in turn from the kernel's IR, and each unsafe mutant must be reported
by the hazard checker (``HazardError``) on one of three scheduler seeds, or fail the numerics check
on every seed. The original kernel must pass every seed.

The launch runs every synchronisation of the kernel: a varlen batch of two sequences of 136 query
rows (two 128-row Q tiles each: both softmax warpgroups, the interleaved MMA order) walked by one
persistent CTA (TMEM buffers, ring stages and barriers reused across work tiles); the first sees 264
keys (three key blocks through the 2-stage K/V ring: a stage refilled; blocks after the first
scaled up so that the conditional rescale runs), the second 100 (one partial block: the next work
tile's softmax may finish before the previous tile's epilogue), causal (masked blocks, rows that see
no key).

Mutants judged safe (not required to be reported, not run) are listed in ``SAFE`` with the reason;
each is a redundant synchronisation of this kernel by the PTX ISA's rules, not a gap of the checker.
"""
import math
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest
from ir_mutation import mutate, sync_sites

from tylo.interpreter import HazardError, run

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

import blackwell_attention as ba  # noqa: E402

BF16 = ml_dtypes.bfloat16
SYNC_OPS = ("nv.tcgen05.commit", "nv.mbarrier.wait", "nv.tcgen05.wait_ld", "nv.tcgen05.wait_st",
            "nv.tcgen05.fence_before", "nv.tcgen05.fence_after")
SEEDS = (0, 1, 2)
D, CAUSAL = 64, True
# (name, occurrence in IR walk order) -> why removing it is safe: each is redundant in this kernel
_INIT = "the init barrier's fences: no asynchronous tcgen05 op precedes the barrier (tcgen05.alloc is synchronous), "
SAFE = {
    ("nv.tcgen05.fence_before", 0): _INIT + "so there is nothing for fence::before_thread_sync to order",
    ("nv.tcgen05.fence_after", 0): _INIT + "and every role issues its own fence::after_thread_sync after a later "
                                   "wait before its first asynchronous tcgen05 op",
    ("nv.tcgen05.fence_after", 1): "the MMA thread's fence after the first kv_full wait of a work tile: the S MMAs "
                                   "it orders overwrite S/P, last read by the softmax before its p_full arrive of the "
                                   "previous tile, which the MMA thread's fence after that p_full wait already orders",
    ("nv.tcgen05.fence_after", 3): "the MMA thread's fence after the kv_full wait of the next block: the S_0 MMA it "
                                   "orders follows the fence after the p_full[0] wait just before it, which orders "
                                   "the softmax's reads of S_0",
    ("nv.mbarrier.wait", 4): "the MMA thread's epi_done[0] wait: p_full[0] counts the correction warpgroup, which "
                             "arrives for the next tile's first key block only after its epilogue read O_0 (FA4 "
                             "relies on the same)",
    ("nv.mbarrier.wait", 7): "the MMA thread's epi_done[1] wait: as epi_done[0], through p_full[1]",
    ("nv.tcgen05.fence_before", 5): "the correction's fence before its epi_done[0] arrive: its epilogue reads of O_0 "
                                    "are ordered for the next tile's MMA by its fence before the next p_full[0] "
                                    "arrive, and for tcgen05.dealloc by the final fence (removing both is unsafe)",
    ("nv.tcgen05.fence_before", 6): "as the previous one, for O_1",
    ("nv.tcgen05.fence_before", 7): "the final fence before the CTA barrier and tcgen05.dealloc: every role's last "
                                    "tcgen05.ld/st is already followed by a fence::before_thread_sync before its last "
                                    "arrive, ahead of the barrier",
    ("nv.mbarrier.wait", 17): "the correction's o_full[1] wait: o_full[0]'s commit comes after the work tile's last "
                              "P V of both tiles, and a commit tracks every earlier MMA of the thread, so the wait on "
                              "o_full[0] just before has observed O_1 complete",
    ("nv.tcgen05.fence_after", 10): "the correction's fence after the o_full[1] and sums[1] waits: the fence after "
                                    "the o_full[0] wait already orders its reads of O_1 (see o_full[1])",
}


def _ir():
    return ba.attention_fwd.lower(signature=ba.signature(), constexprs=ba.constexprs_for(D, CAUSAL),
                                  arch="sm_100a", block=(ba.THREADS,))


IR = _ir()


LENS_Q, LENS_K = (136, 136), (264, 100)


def _launch(kernel, seed):
    """The varlen batch of the module docstring, one persistent CTA; True when O and LSE match float64."""
    rng = np.random.default_rng(seed)
    cu_q = np.array([0, LENS_Q[0], sum(LENS_Q)], np.int32)
    cu_k = np.array([0, LENS_K[0], sum(LENS_K)], np.int32)
    q = rng.standard_normal((cu_q[-1], 1, D)).astype(BF16)
    k = rng.standard_normal((cu_k[-1], 1, D)).astype(BF16)
    v = rng.standard_normal((cu_k[-1], 1, D)).astype(BF16)
    k[128:LENS_K[0]] *= 4                           # later key blocks move the row max: O is rescaled
    grid, args, _, o, lse = ba.prepare(q, k, v, causal=CAUSAL, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, num_sms=1)
    run(kernel, args, grid=grid, block=(ba.THREADS,), seed=seed)
    scale = 1 / math.sqrt(D)
    ok = True
    for b in range(2):
        sq, sk = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        ref, ref_lse = ba.reference(q[sq], k[sk], v[sk], CAUSAL, scale)
        bf, _ = ba.reference(q[sq], k[sk], v[sk], CAUSAL, scale, dtype=BF16)
        o64 = o[sq].astype(np.float64)
        err = np.abs(o64 - ref).max() if np.isfinite(o64).all() else np.inf
        ok &= bool(err <= 2 * np.abs(bf - ref).max() + 1e-3)
        fin = np.isfinite(ref_lse)
        got = lse[:, sq]
        ok &= bool(np.array_equal(np.isfinite(got), fin) and np.abs(got[fin] - ref_lse[fin]).max() < 1e-4)
    return ok


def test_the_mutation_set_covers_every_kind():
    names = {n for n, _ in sync_sites(IR, SYNC_OPS)}
    assert {"nv.tcgen05.commit", "nv.mbarrier.wait", "nv.tcgen05.wait_ld", "nv.tcgen05.wait_st",
            "nv.tcgen05.fence_before", "nv.tcgen05.fence_after"} <= names
    assert set(SAFE) <= set(sync_sites(IR, SYNC_OPS)), "a SAFE entry names no op of the kernel"


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_the_original_kernel_is_quiet_and_right(seed):
    assert _launch(IR, seed)


def _outcome(kernel):
    """'hazard: <kind>' on the first seed that reports one, 'wrong' if every seed gives wrong numbers,
    else 'passes'."""
    wrong = 0
    for seed in SEEDS:
        try:
            wrong += not _launch(kernel, seed)
        except HazardError as e:
            return f"hazard: {e.kind}"
    return "wrong" if wrong == len(SEEDS) else "passes"


# one quick mutant per kind runs by default; the whole set is slow
REPRESENTATIVE = {("nv.tcgen05.commit", 0), ("nv.mbarrier.wait", 2), ("nv.tcgen05.wait_ld", 0),
                  ("nv.tcgen05.wait_st", 0), ("nv.tcgen05.fence_before", 1), ("nv.tcgen05.fence_after", 5)}


def _params():
    """Every site but those judged safe (``SAFE``, each with its reason)."""
    return [pytest.param(s, id=f"{s[0]}-{s[1]}", marks=() if s in REPRESENTATIVE else pytest.mark.slow)
            for s in sync_sites(IR, SYNC_OPS) if s not in SAFE]


@pytest.mark.parametrize("site", _params())
def test_each_unsafe_mutant_is_reported(site):
    outcome = _outcome(mutate(IR, "remove", *site))
    assert outcome != "passes", f"removing {site[0]} #{site[1]} ran clean and right on seeds {SEEDS}"
