"""Mutation tests of the hazard checker: every synchronisation of the example Hopper GEMM is removed or
weakened in turn (in its IR), and each unsafe mutant must be reported as a hazard.

The mutants are derived from two specialisations of the kernel, which together hold every
synchronisation point of its source:
* ``tma``: the default configuration (128 x 256 tile, two consumers, TMA-store epilogue through
  shared staging tiles) runs two tiles with K = 192 (3 K steps each) through a 2-stage ring with 2
  staging buffers per consumer in one persistent CTA, so every stage and staging buffer is reused,
  also across tiles.
* ``splitk``: the split-K configuration (64 x 64 tile, one consumer, the register epilogue) runs 2 tiles
  x 3 K ranges = 6 workers of 2 K steps each through a 2-stage ring, so the ring's phases run on across
  workers of different K ranges, and each tile's third worker sums the partials in the kernel (the
  fixup: a named barrier before and after the arrival count, whose result the lead thread passes
  through shared memory).
A mutant counts as caught when one of three scheduler seeds reports it; the originals must pass on
every seed.

Mutants judged safe (and therefore not required to be reported), in both specialisations:
* removing ``fence.mbarrier_init`` alone, or the ``fence.proxy.async.shared::cta`` after the
  inits alone: either fence orders the same thread's ``mbarrier.init`` for the async proxy before the
  CTA barrier that publishes the barriers (PTX ISA 9.7.13.4 / 9.7.13.15); removing both is unsafe
  (``test_removing_both_init_fences_is_reported``).
* removing the ``wgmma.fence`` of the K loop: its WGMMAs take the accumulators straight from the
  previous ``wgmma.mma_async`` of the same shape (through ``wait_group``, which touches no register),
  the case PTX ISA 9.7.15.6.1 exempts from the fence. The first chain's fence (after the zero
  accumulator is written) is required, and its removal is reported.

Not modelled, so not required to be reported (``splitk`` only): removing the fixup's ``fence.acq_rel.gpu``
before the arrival count (release) or after it (acquire). They order global memory between CTAs; the
interpreter runs a grid's CTAs one after another over one copy of memory, where every earlier write
is visible (docs of ``tylo/interpreter/fence.py``). Their PTX is asserted in
tests/hopper/test_hopper_gemm_example.py.

Every other mutant (all waits, arrivals, commits, named barriers, the CTA barrier, the proxy
fences of the epilogue, wrong parities) is reported. One representative per kind runs by default;
the whole set is marked ``slow`` (``.ci/run`` runs it). Too few stages (one) is a reported deadlock.
"""
import pytest
from hopper_support import gemm_args, gemm_fixup_args, gemm_ir, gemm_operands, hopper_gemm, relative_error
from ir_mutation import mutate, sync_sites

from tylo.interpreter import HazardError, run

SYNC_OPS = ("nv.mbarrier.wait", "nv.mbarrier.arrive", "nv.mbarrier.arrive_expect_tx", "nv.fence",
            "nv.named_barrier", "nv.barrier", "nv.wgmma.fence", "nv.wgmma.commit_group", "nv.wgmma.wait_group",
            "nv.tma.commit", "nv.tma.wait")
SAFE = {("remove", "nv.fence", 0), ("remove", "nv.fence", 1),    # module doc: the init fences, one at a time
        ("remove", "nv.wgmma.fence", 1)}                            # the K loop's fence (chained accumulators)
# per specialisation: the fixup's ordering fences (occurrences 2 and 3 after the two init fences)
NOT_MODELLED = {"splitk": {("remove", "nv.fence", 2), ("remove", "nv.fence", 3)}}
SEEDS = (0, 1, 2)
SHAPE = (256, 256, 192)
SPLIT_CONFIG = hopper_gemm.GemmConfig(tn=64, consumers=1, stages=2, split_k=3, direct=True)
SPLIT_SHAPE = (64, 128, 384)      # 1 x 2 tiles, 6 K steps in 3 ranges of 2


def _run_tma(kernel, seed):
    a, b, c = gemm_operands(*SHAPE, seed=seed)
    run(kernel, gemm_args(a, b, c), grid=(1,), block=(384,), seed=seed)
    return relative_error(a, b, c)


def _run_splitk(kernel, seed):
    a, b, c = gemm_operands(*SPLIT_SHAPE, seed=seed)
    args, _, _, counters = gemm_fixup_args(a, b, c, SPLIT_CONFIG, 4)
    run(kernel, args, grid=(1,), block=(SPLIT_CONFIG.threads,), seed=seed)
    assert not counters.any(), "an arrival counter was left non-zero"
    return relative_error(a, b, c)


# each specialisation: its IR (``stages``: the ring depth) and a run returning its relative error
BASES = {"tma": (lambda stages=2: gemm_ir(stages=stages), _run_tma),
         "splitk": (lambda stages=2: gemm_ir(stages=stages, config=SPLIT_CONFIG), _run_splitk)}
# bf16 C rounds to 2^-9
TOLERANCE = {"tma": 4e-3, "splitk": 4e-3}


def _run(kernel, seed, base="tma"):
    return BASES[base][1](kernel, seed)


def _mutants(base):
    kernel = BASES[base][0]()
    sites = sync_sites(kernel, SYNC_OPS)
    out = [(base, "remove", n, k) for n, k in sites]
    out += [(base, "flip_parity", n, k) for n, k in sites if n == "nv.mbarrier.wait"]
    return out


MUTANTS = _mutants("tma") + _mutants("splitk")
# one quick mutant per kind of synchronisation runs by default
REPRESENTATIVE = [("tma", "remove", "nv.mbarrier.wait", 1), ("tma", "remove", "nv.mbarrier.arrive", 0),
                  ("tma", "remove", "nv.wgmma.wait_group", 0), ("tma", "remove", "nv.wgmma.commit_group", 1),
                  ("tma", "remove", "nv.fence", 2), ("tma", "remove", "nv.named_barrier", 1),
                  ("tma", "remove", "nv.tma.wait", 1), ("tma", "flip_parity", "nv.mbarrier.wait", 1),
                  ("tma", "remove", "nv.wgmma.fence", 0), ("splitk", "remove", "nv.mbarrier.arrive", 1),
                  ("splitk", "flip_parity", "nv.mbarrier.wait", 0), ("splitk", "remove", "nv.named_barrier", 1)]


def test_the_mutation_set_covers_every_kind_of_synchronisation():
    names = {n for b, _, n, _ in MUTANTS if b == "tma"}
    assert names == set(SYNC_OPS)
    # the split-K specialisation has every synchronisation of the ring, the WGMMA chain and the fixup
    # (its register epilogue has none): all but the TMA epilogue's bulk-group ops
    split = {n for b, _, n, _ in MUTANTS if b == "splitk"}
    assert split == set(SYNC_OPS) - {"nv.tma.commit", "nv.tma.wait"}
    assert len(MUTANTS) >= 50


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("seed", SEEDS)
def test_the_original_gemm_has_no_hazard(base, seed):
    assert _run(BASES[base][0](), seed, base) < TOLERANCE[base]


def _params():
    return [pytest.param(m, id="-".join(map(str, m)), marks=() if m in REPRESENTATIVE else pytest.mark.slow)
            for m in MUTANTS]


@pytest.mark.parametrize("mutant", _params())
def test_each_unsafe_mutant_is_reported(mutant):
    base = mutant[0]
    kernel = mutate(BASES[base][0](), *mutant[1:])
    reports = []
    for seed in SEEDS:
        try:
            _run(kernel, seed, base)
        except HazardError as e:
            reports.append(e)
            break
    if mutant[1:] in SAFE or mutant[1:] in NOT_MODELLED.get(base, ()):
        return
    assert reports, f"mutant {mutant} ran without a hazard report on seeds {SEEDS}"
    # the report names the kernel's source: every side has a file:line of examples/hopper_gemm.py
    assert all("hopper_gemm.py:" in str(loc) for _, loc in reports[0].sides if loc != "?"), reports[0]


@pytest.mark.parametrize("base", BASES)
def test_too_few_stages_is_a_reported_deadlock(base):
    # one stage cannot hold the step in flight and the next one: the producer and consumers wait on
    # each other; the report says where each warp waits
    with pytest.raises(HazardError, match="deadlock") as e:
        _run(BASES[base][0](stages=1), 0, base)
    assert "nv.mbarrier.wait at" in str(e.value) and "hopper_gemm.py" in str(e.value)


def test_removing_both_init_fences_is_reported():
    kernel = mutate(mutate(gemm_ir(stages=2), "remove", "nv.fence", 0), "remove", "nv.fence", 0)
    with pytest.raises(HazardError, match="mbarrier init not fenced"):
        _run(kernel, 0)
