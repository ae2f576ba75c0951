"""Mutation tests of the hazard checker on the Hopper attention kernel (examples/hopper_attention.py):
every synchronisation of its IR is removed or weakened in turn (``ir_mutation``), and each unsafe
mutant must be reported by the interpreter (a hazard, or a deadlock report naming where each warp waits).

The base (``PINGPONG``): head_dim 64, 64-key blocks, 2-stage K and V rings, two consumer warpgroups
taking turns through the pingpong named barriers; one CTA walks five varlen sequences (work units)
of 1, 0, 3, 1 and 0 key blocks (ragged: the key mask runs too). So every synchronisation op runs: the
scheduler's hand-overs through the two unit slots (wrapping twice) and every reader's take-overs, the
producer's q_empty wait (the second and third Q tiles), both rings wrap and their parities flip (5
blocks through 2 stages, carried across units), the block-0 and the loop's q_empty arrivals each
release a Q tile that is reloaded, the loop runs twice, and every pingpong barrier site is used. The unmutated kernel must run
clean on every seed and match float64 (FlashAttention-3's criterion); a mutant counts as reported when
one of three scheduler seeds reports it.

Mutants (``MUTANTS``): every site of SYNC_OPS removed; every mbarrier wait on the other parity; each
arrive.expect_tx as a plain arrive (no transaction bytes) and expecting half its bytes; each
wgmma.wait_group with one more group left pending (the S wait with ``pending=2``: too early) and the
S wait with ``pending=0`` (too late); each stage/tile release (k_empty, v_empty; q_empty moves with
k_empty, they share one ``if lead``) moved before the wgmma.wait_group that precedes it.

Mutants judged safe (``SAFE``; they must also run clean and match float64, applied together):
* ``fence.mbarrier_init`` or the ``fence.proxy.async.shared::cta`` after the inits, removed alone:
  either fence makes the initialising thread's mbarrier.init visible to the async proxy before the CTA
  barrier publishes the barriers (PTX ISA 9.7.13.4, 9.7.13.15.x); removing both is unsafe and reported
  (``test_removing_both_init_fences_is_reported``).
* the ``wgmma.fence`` of the loop's O += P V (the second of the loop's two fences): the fence before
  the loop's S = Q K^T already separates every register access of the iteration (P packed, O rescaled)
  from both wgmma.mma_async that follow, and nothing touches those registers between the two (PTX ISA
  9.7.15.6.1: the fence orders prior register accesses before *subsequent* wgmma.mma_async).
* the S wait with ``pending=0`` instead of 1: it also waits for the P V in flight, which costs overlap
  but orders strictly more (PTX ISA 9.7.15.7).
* consumer 0's last ``bar.sync 1`` after the work loop: it only consumes consumer 1's final
  ``bar.arrive 1`` so the barrier is empty at exit; no memory access or issue is ordered by it, nothing
  of the CTA follows it, and named barriers are CTA resources that end with the CTA (PTX ISA 9.7.13.1
  does not require a barrier's arrivals to be consumed).
* one stage per ring (``test_one_stage_rings_are_safe``): K and V have separate rings and each is
  consumed in order, so the producer's next load into a stage needs only releases made in the
  consumers' previous iteration (S_j's K after S_j; V_{j-1} after P V_{j-1}): no deadlock, just no
  prefetch. (The GEMM's one-stage ring deadlocks: A and B of a step share one stage there.)

Every other mutant is reported (most by the hazard rule they break, some as a deadlock: removed
arrivals and expect_tx, producer waits on the wrong parity, a broken pingpong turn). ``half_tx`` is
reported as a deadlock: the interpreter delivers a box's bytes at once, so the phase's tx-count
jumps past zero; the hardware delivers them in pieces and would complete the phase half-way
(the consumers would read a stage still being written).
"""
import contextlib
import math
import re

import hopper_attention as ha  # examples/ is on sys.path (tests/conftest.py)
import ml_dtypes
import numpy as np
import pytest
from ir_mutation import mutate, sync_sites

import tylo
from tylo.interpreter import HazardError, run

SYNC_OPS = ("nv.mbarrier.wait", "nv.mbarrier.arrive", "nv.mbarrier.arrive_expect_tx", "nv.fence",
            "nv.named_barrier", "nv.barrier", "nv.wgmma.fence", "nv.wgmma.commit_group", "nv.wgmma.wait_group")
D = 64
BF16 = ml_dtypes.bfloat16
SEEDS = (0, 1, 2)


@contextlib.contextmanager
def _tiles(causal, cfg):
    """``cfg`` as the (D, causal) specialisation's tiling (``TILE_OVERRIDES``), for ``prepare``."""
    old = ha.TILE_OVERRIDES.get((D, causal))
    ha.TILE_OVERRIDES[D, causal] = cfg
    try:
        yield
    finally:
        if old is None:
            del ha.TILE_OVERRIDES[D, causal]
        else:
            ha.TILE_OVERRIDES[D, causal] = old


class Case:
    """A tiling, a mask and varlen sequence lengths (one head), run by one CTA."""

    def __init__(self, cfg, causal, lens_q, lens_k):
        self.cfg, self.causal, self.lens_q, self.lens_k = cfg, causal, lens_q, lens_k

    def ir(self, stages=None):
        cfg = self.cfg if stages is None else ha.TileConfig(self.cfg.bn, stages, self.cfg.consumers, self.cfg.pingpong)
        with _tiles(self.causal, cfg):
            sig = ha.signature(tylo.bf16, D, self.causal)
            cx = ha.constexprs(tylo.bf16, D, self.causal, varlen=True)
        return ha.attention_fwd.lower(signature=sig, constexprs=cx, block=(cfg.threads,))

    def run(self, kernel, seed, delays=True):
        """Interpret ``kernel`` on random inputs of ``seed`` (also the scheduler's seed; ``delays=False``: no
        random delays, every warp runs each round); the worst error as a fraction of what
        FlashAttention-3's criterion allows (<= 1 passes; inf: an output left unwritten or not finite)."""
        rng = np.random.default_rng(seed)
        cu_q = np.cumsum([0] + self.lens_q).astype(np.int32)
        cu_k = np.cumsum([0] + self.lens_k).astype(np.int32)
        q = rng.standard_normal((cu_q[-1], 1, D)).astype(BF16)
        k = rng.standard_normal((cu_k[-1], 1, D)).astype(BF16)
        v = rng.standard_normal((cu_k[-1], 1, D)).astype(BF16)
        with _tiles(self.causal, self.cfg):
            grid, block, args, _, o, lse, _ = ha.prepare(q, k, v, self.causal, None, cu_q, cu_k, ctas=1)
        assert grid == (1, 1, 1)
        run(kernel, args, grid=grid, block=(block,), seed=seed if delays else None)
        worst = 0.0
        scale = 1 / math.sqrt(D)
        for i in range(len(self.lens_q)):
            a, b, c, e = cu_q[i], cu_q[i + 1], cu_k[i], cu_k[i + 1]
            ref, ref_lse = ha.reference(q[a:b], k[c:e], v[c:e], self.causal, scale)
            low = ha.reference(q[a:b], k[c:e], v[c:e], self.causal, scale, BF16)[0]
            got, got_lse = o[a:b].astype(np.float64), lse[:, a:b]
            fin = np.isfinite(ref_lse)
            if np.isnan(got).any() or not np.array_equal(np.isfinite(got_lse), fin):
                return math.inf
            worst = max(worst, np.abs(got - ref).max() / (2 * np.abs(low - ref).max() + 1e-3))
            if fin.any():
                worst = max(worst, np.abs(got_lse[fin] - ref_lse[fin]).max() / 1e-4)
        return worst


# units of 1, 0, 3, 1 and 0 key blocks: the ones without keys load no Q (no q_empty wait orders the unit
# slots' reuse behind them, so a missing slot wait shows as a race)
PINGPONG = Case(ha.TileConfig(64, 2, 2, pingpong=True), False, [100, 60, 128, 70, 30], [40, 0, 150, 64, 0])
# causal, no pingpong (the consumers run freely), bottom-right mask over 2 and 3 key blocks
CAUSAL = Case(ha.TileConfig(64, 2, 2), True, [128, 90], [100, 150])


@pytest.fixture(scope="module")
def base_ir():
    return PINGPONG.ir()


def _mutants():
    sites = sync_sites(PINGPONG.ir(), SYNC_OPS)
    out = [("remove", n, k) for n, k in sites]
    out += [("flip_parity", n, k) for n, k in sites if n == "nv.mbarrier.wait"]
    out += [(kind, n, k) for n, k in sites if n == "nv.mbarrier.arrive_expect_tx" for kind in ("drop_tx", "half_tx")]
    out += [("pending+1", n, k) for n, k in sites if n == "nv.wgmma.wait_group"]
    out += [("pending-1", "nv.wgmma.wait_group", 1)]               # the S wait of the loop: pending=1 -> 0
    # releases moved before the wait that precedes them: K of block 0 (with Q), K of the loop (with Q),
    # V of the loop, V of the last block (arrive 6 and 8, the q_empty arrivals, share those ifs; arrives
    # 0-4 and 11 are the unit slots' hand-over and take-overs)
    out += [("early", "nv.mbarrier.arrive", k) for k in (5, 7, 9, 10)]
    return out


MUTANTS = _mutants()
SAFE = {("remove", "nv.fence", 0), ("remove", "nv.fence", 1),      # the init fences, one at a time
        ("remove", "nv.wgmma.fence", 2),                            # the loop's P V fence (the S fence covers it)
        ("pending-1", "nv.wgmma.wait_group", 1),                    # the S wait also waiting for P V
        ("remove", "nv.named_barrier", 7)}                          # consumer 0's final bar.sync 1


def _id(m):
    return f"{m[0]}-{m[1][3:]}-{m[2]}"


def test_the_mutation_set_covers_every_synchronisation(base_ir):
    sites = sync_sites(base_ir, SYNC_OPS)
    assert {n for n, _ in sites} == set(SYNC_OPS)
    removed = {(n, k) for kind, n, k in MUTANTS if kind == "remove"}
    assert removed == set(sites)
    counts = {n: sum(1 for m, _ in sites if m == n) for n in SYNC_OPS}
    # 3 producer waits (q_empty, k_empty, v_empty) + 5 consumer waits (q_full, k_full x2, v_full x2) + the
    # unit slots' 6 (the scheduler's two hand-overs, two take-overs each by the K/V thread and the consumers);
    # 6 releases + the slots' 6 arrivals; 3 expect_tx; 8 pingpong barrier sites; 4 WGMMA issue points,
    # each fenced and committed
    assert counts == {"nv.mbarrier.wait": 14, "nv.mbarrier.arrive": 12, "nv.mbarrier.arrive_expect_tx": 3,
                      "nv.fence": 2, "nv.named_barrier": 8, "nv.barrier": 1, "nv.wgmma.fence": 4,
                      "nv.wgmma.commit_group": 4, "nv.wgmma.wait_group": 4}
    assert SAFE <= set(MUTANTS) and len(MUTANTS) == 81
    assert set().union(*map(set, SAFE_GROUPS)) == SAFE


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_the_original_runs_clean_and_matches_float64(base_ir, seed):
    assert PINGPONG.run(base_ir, seed) <= 1


@pytest.mark.slow
def test_the_causal_original_without_pingpong_runs_clean_and_matches_float64():
    assert CAUSAL.run(CAUSAL.ir(), 0) <= 1


@pytest.mark.slow
@pytest.mark.parametrize("mutant", [m for m in MUTANTS if m not in SAFE], ids=_id)
def test_each_unsafe_mutant_is_reported(base_ir, mutant):
    kernel = mutate(base_ir, *mutant)
    report = None
    for seed in SEEDS:
        try:
            PINGPONG.run(kernel, seed)
        except HazardError as e:
            report = e
            break
    assert report is not None, f"mutant {mutant} ran without a hazard report on seeds {SEEDS}"
    # the report names the kernel's source: a deadlock where each warp waits, a hazard each side (inlined
    # tylo.lang helpers, e.g. the softmax reading S, name their own line)
    text = str(report)
    assert "hopper_attention.py:" in text, text
    assert all("hopper_attention.py:" in str(loc) or "tylo/lang/" in str(loc) for _, loc in report.sides), text


# the safe mutants applied together (one run each group: the two init fences are safe only one at a time)
SAFE_GROUPS = [sorted(SAFE - {("remove", "nv.fence", 1)}), [("remove", "nv.fence", 1)]]


@pytest.mark.slow
@pytest.mark.parametrize("group", SAFE_GROUPS, ids=["all-but-one-init-fence", "the-other-init-fence"])
def test_the_safe_mutants_run_clean_and_match_float64(base_ir, group):
    kernel = base_ir
    for m in sorted(group, key=lambda m: -m[2]):        # later occurrences first: the numbering stays valid
        kernel = mutate(kernel, *m)
    assert PINGPONG.run(kernel, 0) <= 1


EARLY = [m for m in MUTANTS if m[0] == "early"]


@pytest.mark.slow
@pytest.mark.parametrize("mutant", [None] + EARLY, ids=lambda m: "original" if m is None else _id(m))
def test_early_releases_are_reported_whatever_the_interleaving(base_ir, mutant):
    # without random delays every warp of a consumer reaches its wait_group in the round of the early
    # arrive, so the WGMMA is retired before the producer's TMA load is issued: what is reported is
    # the order (the load not ordered after the wait), not a lucky overlap of the read and the write
    if mutant is None:
        assert PINGPONG.run(base_ir, 0, delays=False) <= 1
        return
    with pytest.raises(HazardError, match="stage released before its read completed"):
        PINGPONG.run(mutate(base_ir, *mutant), 0, delays=False)


@pytest.mark.slow
def test_one_stage_rings_are_safe():
    assert PINGPONG.run(PINGPONG.ir(stages=1), 0) <= 1


@pytest.mark.slow
def test_removing_both_init_fences_is_reported(base_ir):
    kernel = mutate(mutate(base_ir, "remove", "nv.fence", 0), "remove", "nv.fence", 0)
    with pytest.raises(HazardError, match="mbarrier init not fenced"):
        PINGPONG.run(kernel, 0)


# ---- O staged in the Q buffer (TileConfig.o_in_q): the next Q load must wait for the O stores' reads

O_IN_Q = ha.TileConfig(64, 2, 2, pingpong=True, o_in_q=True)


def _staged_ir(cfg, causal=True):
    """The kernel with tile ``cfg`` (O staged in Q or in the V ring: the TMA-store epilogue, batched)."""
    with _tiles(causal, cfg):
        sig = ha.signature(tylo.bf16, D, causal)
        cx = ha.constexprs(tylo.bf16, D, causal)
    assert cx["TMA_STORE"] and cx["O_IN_Q"] == cfg.o_in_q and cx["O_IN_V"] == cfg.o_in_v
    return ha.attention_fwd.lower(signature=sig, constexprs=cx, block=(cfg.threads,))


def _o_in_q_ir():
    kernel = _staged_ir(O_IN_Q)
    with _tiles(True, O_IN_Q):
        assert ha.constexprs(tylo.bf16, D, True)["DYNAMIC"]
    return kernel


def _staged_run(kernel, cfg, seed, causal=True, seq_q=150, seq_k=40):
    """Batched, 2 batch entries, one CTA, tile ``cfg``, into a NaN-poisoned o with a guard row past the end; causal
    with 150 queries and 40 keys: per entry a tile that sees no key (its zeros pass through the staging in Q, from
    registers with O in V) and one with a key block (ragged: 22 rows). The worst error as in ``Case.run`` (inf: an
    output unwritten, not finite, or the guard row touched)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, seq_q, 1, D)).astype(BF16)
    k = rng.standard_normal((2, seq_k, 1, D)).astype(BF16)
    v = rng.standard_normal((2, seq_k, 1, D)).astype(BF16)
    with _tiles(causal, cfg):
        grid, block, args, _, o, lse, _ = ha.prepare(q, k, v, causal, None, ctas=1)
    guarded = np.full((o.size + D,), np.nan, dtype=o.dtype)
    o = guarded[:o.size].reshape(o.shape)
    args[ha.ARG_NAMES.index("o")] = o
    args[ha.O_MAP] = ha.output_map(o, False, "numpy")
    run(kernel, args, grid=grid, block=(block,), seed=seed)
    if not np.isnan(guarded[o.size:].astype(np.float32)).all():
        return math.inf
    worst = 0.0
    for i in range(2):
        ref, ref_lse = ha.reference(q[i], k[i], v[i], causal, 1 / math.sqrt(D))
        low = ha.reference(q[i], k[i], v[i], causal, 1 / math.sqrt(D), BF16)[0]
        got = o[i].astype(np.float64)
        fin = np.isfinite(ref_lse)
        if np.isnan(got).any() or not np.array_equal(np.isfinite(lse[i]), fin):
            return math.inf
        worst = max(worst, np.abs(got - ref).max() / (2 * np.abs(low - ref).max() + 1e-3),
                    np.abs(lse[i][fin] - ref_lse[fin]).max() / 1e-4)
    return worst


def _o_in_q_run(kernel, seed):
    return _staged_run(kernel, O_IN_Q, seed)


def test_o_in_q_has_three_tma_waits():
    # the wait before the staging is written, the wait for the stores' reads before q_empty, the final one
    assert [k for n, k in sync_sites(_o_in_q_ir(), ("nv.tma.wait",))] == [0, 1, 2]


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_o_in_q_original_runs_clean_and_matches_float64(seed):
    assert _o_in_q_run(_o_in_q_ir(), seed) <= 1


@pytest.mark.slow
def test_o_in_q_without_the_wait_for_reads_is_reported():
    # the next unit's Q load would overwrite the staging while the O stores still read it
    kernel = mutate(_o_in_q_ir(), "remove", "nv.tma.wait", 1)
    with pytest.raises(HazardError, match="stage overwritten while read"):
        _o_in_q_run(kernel, 0)


def _q_empty_after_the_store_wait(kernel):
    """The occurrence of the ``mbarrier.arrive`` (q_empty) that follows the wait for the O stores' reads in
    one block: the arrive the producer's next Q load waits for."""
    arrives = [k for n, k in sync_sites(kernel, ("nv.mbarrier.arrive",))]
    for k in arrives:
        try:
            mutate(kernel, "early_tma", "nv.mbarrier.arrive", k)
        except LookupError:
            continue
        return k
    raise AssertionError("no mbarrier.arrive follows a TMA wait")


@pytest.mark.slow
def test_o_in_q_releasing_q_before_the_wait_for_reads_is_reported():
    # the q_empty arrival moved before the wait: the next Q load may overwrite staging a TMA store still reads
    kernel = _o_in_q_ir()
    with pytest.raises(HazardError, match="stage overwritten while read|ordered after"):
        _o_in_q_run(mutate(kernel, "early_tma", "nv.mbarrier.arrive", _q_empty_after_the_store_wait(kernel)), 0)


@pytest.mark.slow
def test_o_in_q_without_the_wait_before_staging_is_safe():
    # staged in Q, the previous unit's stores were waited for before its q_empty arrival, so the first wait
    # of the epilogue finds nothing in flight (kept: it is what orders the separate staging)
    assert _o_in_q_run(mutate(_o_in_q_ir(), "remove", "nv.tma.wait", 0), 0) <= 1


# ---- O staged in the V ring (TileConfig.o_in_v): the next unit's first V load must wait for the O stores' reads,
# and the staging must wait for every consumer's last P V

O_IN_V = ha.TileConfig(64, 2, 2, pingpong=True, o_in_v=True)


def _o_in_v_ir(causal=True):
    return _staged_ir(O_IN_V, causal)


def _o_in_v_run(kernel, seed, causal=True, seq_q=150, seq_k=40):
    return _staged_run(kernel, O_IN_V, seed, causal, seq_q, seq_k)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_o_in_v_original_runs_clean_and_matches_float64(seed):
    assert _o_in_v_run(_o_in_v_ir(), seed) <= 1


@pytest.mark.slow
def test_o_in_v_non_causal_walks_units_with_every_block_count():
    # non-causal, 3 Q tiles of 70 keys (two key blocks, the second ragged) per entry: the K/V thread's peeled
    # first block and its loop, the o_free waits of every later unit
    assert _o_in_v_run(_o_in_v_ir(False), 0, causal=False, seq_q=300, seq_k=70) <= 1


def _occurrence(kernel, name, needle):
    """The occurrence (as ``sync_sites`` numbers them: program order) of the op ``name`` written on the kernel
    source's line holding ``needle`` (the op's own location, not the call sites it was inlined at)."""
    lines = open(ha.__file__).read().splitlines()
    ops = [op for op in kernel.body.walk() if op.name == name]
    found = [k for k, op in enumerate(ops)
             if needle in lines[int(re.search(r"hopper_attention\.py:(\d+)", str(op.loc)).group(1)) - 1]]
    assert len(found) == 1, (name, needle, found)
    return found[0]


@pytest.mark.slow
def test_o_in_v_without_the_o_free_wait_is_caught():
    # the next unit's first V block loads (the K/V thread runs ahead) before the epilogue writes the staging over
    # it: P V reads O's bytes. The hazard rules see a write over a load only while the load is in flight
    # (sometimes: "write over a TMA load in flight"); a completed load later overwritten is a wrong result, caught
    # against float64 on every seed
    kernel = _o_in_v_ir()
    mutant = mutate(kernel, "remove", "nv.mbarrier.wait", _occurrence(kernel, "nv.mbarrier.wait", "o_free"))
    for seed in SEEDS:
        try:
            assert _o_in_v_run(mutant, seed) > 10
        except HazardError as e:
            assert "TMA load in flight" in str(e)


@pytest.mark.slow
def test_o_in_v_without_the_consumers_barrier_is_reported():
    # named barrier 6: one consumer's staging writes would land in a V stage the other consumer's last P V reads
    kernel = _o_in_v_ir()
    mutant = mutate(kernel, "remove", "nv.named_barrier", _occurrence(kernel, "nv.named_barrier", "sync(6,"))
    with pytest.raises(HazardError):
        _o_in_v_run(mutant, 0)
