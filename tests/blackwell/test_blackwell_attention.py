"""examples/blackwell_attention.py: assembled for sm_100a (PTX and resources), run in tylo's interpreter
against float64 (FlashAttention-3 criterion), hazard-checked, and mutants reported. No Blackwell GPU
runs it here: every number comes from the interpreter or the assembler."""
import math
import pathlib
import re
import sys

import ml_dtypes
import numpy as np
import pytest

from tylo.interpreter import HazardError, run

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

import blackwell_attention as ba  # noqa: E402

BF16 = ml_dtypes.bfloat16


# -- assembly ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=range(len(ba.AOT)), ids=lambda i: "D{D}-causal{CAUSAL}".format(**ba.AOT[i][2]))
def compiled(request):
    kernel, sig, constexprs, block = ba.AOT[request.param]
    return constexprs, kernel.compile(signature=sig, arch="sm_100a", constexprs=constexprs, block=block)


def test_assembles_without_spills_or_local_memory(compiled):
    constexprs, c = compiled
    assert ".local" not in c.ptx and "call.uni" not in c.ptx
    assert c.resources.spill_bytes == 0 and c.resources.stack_bytes == 0
    assert c.resources.registers <= 255


def test_tcgen05_instruction_counts(compiled):
    constexprs, c = compiled
    ptx, nc = c.ptx, constexprs["D"] // 64
    # S = Q K^T: K = head_dim in steps of 16, A and B from shared memory (descriptors)
    qk = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], %rd\d+, %rd\d+, %r\d+", ptx)
    # O += P V: A = P from TMEM ([taddr]), 128 keys in steps of 16, per 64-column chunk of O
    pv = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], \[%r\d+\], %rd\d+, %r\d+", ptx)
    assert (len(qk), len(pv)) == (4 * nc, 8 * nc)
    assert ptx.count("tcgen05.mma") == 12 * nc
    # s_full, kv_empty[s], o_full
    assert ptx.count("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64") == 3
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x128.b32") == 1          # S: one row per thread
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x64.b32") == 2 * nc      # O: rescale and epilogue
    assert ptx.count("tcgen05.st.sync.aligned.32x32b.x64.b32") == 1 + nc      # P, and rescaled O
    assert ptx.count("tcgen05.wait::st.sync.aligned;") == 1
    assert ptx.count("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32") == 1
    assert ptx.count("tcgen05.dealloc.cta_group::1.sync.aligned.b32") == 1
    # TMA: Q once and K, V per block (LLVM may duplicate the loop body's copies when it rotates the loop:
    # the PTX has at least these; the IR exactly these)
    assert ptx.count("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes") >= 3 * nc
    ir = ba.attention_fwd.lower(signature=ba.signature(), constexprs=constexprs, arch="sm_100a", block=(ba.THREADS,))
    assert sum(op.name == "nv.tma.load" for op in ir.body.walk()) == 3 * nc
    assert ptx.count("ex2.approx") >= 128                                     # exp2 with the scale folded in


# -- interpreter --------------------------------------------------------------------------------------

def _inputs(rng, b, sq, sk, h, hk, d):
    q = rng.standard_normal((b, sq, h, d)).astype(BF16)
    k = rng.standard_normal((b, sk, hk, d)).astype(BF16)
    v = rng.standard_normal((b, sk, hk, d)).astype(BF16)
    return q, k, v


def _check_sequence(o, lse, q, k, v, causal, scale):
    """FlashAttention-3's criterion: the error against float64 is at most twice that of a bf16 reference
    of the same math, plus a small atol; LSE against float64 logsumexp (-inf where a row sees no key)."""
    ref, ref_lse = ba.reference(q, k, v, causal, scale)
    bf_ref, _ = ba.reference(q, k, v, causal, scale, dtype=BF16)
    o64 = o.astype(np.float64)
    assert np.isfinite(o64).all()
    err = np.abs(o64 - ref).max(initial=0.0)
    bf_err = np.abs(bf_ref - ref).max(initial=0.0)
    assert err <= 2 * bf_err + 1e-3, (err, bf_err)
    assert np.array_equal(np.isneginf(lse), np.isneginf(ref_lse))
    fin = np.isfinite(ref_lse)
    assert np.abs(lse[fin] - ref_lse[fin]).max(initial=0.0) < 1e-4
    return err, bf_err


def _batched(sq, sk, d, causal, h=1, hk=1, b=1, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = _inputs(rng, b, sq, sk, h, hk, d)
    o, lse = ba.attention(q, k, v, causal=causal)
    for i in range(b):
        _check_sequence(o[i], lse[i], q[i], k[i], v[i], causal, 1 / math.sqrt(d))


# interpreter time on this 2-core machine: about 2-6 s per FAST case, 14-17 s per SLOW one
FAST = [(1, 1, 64, False), (1, 1, 128, False), (128, 128, 64, False), (128, 128, 128, False), (128, 128, 64, True),
        (128, 128, 128, True), (256, 64, 64, True), (256, 64, 128, False), (256, 64, 128, True)]
SLOW = [(200, 333, 64, False), (200, 333, 128, True)]


@pytest.mark.parametrize("sq, sk, d, causal", FAST)
def test_matches_float64(sq, sk, d, causal):
    _batched(sq, sk, d, causal)


@pytest.mark.slow
@pytest.mark.parametrize("sq, sk, d, causal", SLOW)
def test_matches_float64_slow(sq, sk, d, causal):
    _batched(sq, sk, d, causal)


@pytest.mark.slow
def test_gqa_and_bhsd_strides():
    # 4 query heads on 2 KV heads, batch 2; q as a BHSD tensor seen through .transpose(1, 2) (no copy)
    rng = np.random.default_rng(3)
    _, k, v = _inputs(rng, 2, 70, 150, 4, 2, 64)
    q = rng.standard_normal((2, 4, 70, 64)).astype(BF16).transpose(0, 2, 1, 3)
    o, lse = ba.attention(q, k, v, causal=True)
    for i in range(2):
        _check_sequence(o[i], lse[i], q[i], k[i], v[i], True, 1 / math.sqrt(64))


@pytest.mark.slow
def test_varlen_batch():
    rng = np.random.default_rng(4)
    lens_q, lens_k = [1, 130, 45], [7, 200, 45]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q = rng.standard_normal((cu_q[-1], 2, 64)).astype(BF16)
    k = rng.standard_normal((cu_k[-1], 1, 64)).astype(BF16)
    v = rng.standard_normal((cu_k[-1], 1, 64)).astype(BF16)
    o, lse = ba.attention(q, k, v, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    for i in range(3):
        sl_q, sl_k = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
        _check_sequence(o[sl_q], lse[:, sl_q], q[sl_q], k[sl_k], v[sl_k], True, 1 / 8)


def test_rows_that_see_no_key_give_zero_and_minus_inf():
    # causal, bottom-right: with 192 queries on 64 keys, rows 0..127 see no key
    rng = np.random.default_rng(5)
    q, k, v = _inputs(rng, 1, 192, 64, 1, 1, 64)
    o, lse = ba.attention(q, k, v, causal=True)
    assert (o[0, :128].astype(np.float32) == 0).all() and np.isneginf(lse[0, 0, :128]).all()
    _check_sequence(o[0], lse[0], q[0], k[0], v[0], True, 1 / 8)


def test_run_example():
    ba.run()


# -- hazards ------------------------------------------------------------------------------------------

def _ir(d=64, causal=False):
    return ba.attention_fwd.lower(signature=ba.signature(), constexprs={"D": d, "CAUSAL": causal, "STAGES": 2},
                                  arch="sm_100a", block=(ba.THREADS,))


def _blocks(block):
    yield block
    for op in block.ops:
        for inner in op.blocks:
            yield from _blocks(inner)


def _without(ir, name, occurrence):
    """The kernel with the ``occurrence``-th op called ``name`` deleted (its results replaced by its operands)."""
    seen = 0
    for block in _blocks(ir.body):
        for i, op in enumerate(block.ops):
            if op.name != name:
                continue
            if seen == occurrence:
                del block.ops[i]
                forward = {id(r): v for r, v in zip(op.results, op.operands)}
                for other in ir.body.walk():
                    other.operands = [forward.get(id(v), v) for v in other.operands]
                return ir
            seen += 1
    raise LookupError((name, occurrence))


def _launch(ir, seed, sk=256):
    rng = np.random.default_rng(seed)
    q, k, v = _inputs(rng, 1, 128, sk, 1, 1, 64)
    grid, args, _, o, lse = ba.prepare(q, k, v)
    run(ir, args, grid=grid, block=(ba.THREADS,), seed=seed)
    return q, k, v, o, lse


def test_hazard_checker_is_quiet_over_seeds():
    # two key blocks through the 2-stage ring, two scheduler seeds; run() raises on any hazard
    for seed in (0, 1):
        q, k, v, o, lse = _launch(_ir(), seed)
        _check_sequence(o[0], lse[0], q[0], k[0], v[0], False, 1 / 8)


# The i-th op named so, and why removing it is unsafe.
MUTANTS = [
    ("nv.tcgen05.commit", 0, "s_full: softmax reads S before the MMAs wrote it"),
    ("nv.mbarrier.wait", 3, "p_full: P V issued before P is in TMEM"),
    ("nv.tcgen05.wait_st", 0, "the P V MMA reads P stored without wait::st"),
    ("nv.tcgen05.wait_ld", 0, "S used before tcgen05.wait::ld"),
    ("nv.tcgen05.fence_before", 1, "the last reads of O not fenced before the barrier that precedes dealloc"),
    ("nv.tcgen05.fence_before", 2, "P stored, not fenced before the p_full arrive"),
    ("nv.tcgen05.fence_after", 2, "the P V MMA issued after the p_full wait without fence::after_thread_sync"),
    ("nv.tcgen05.fence_after", 3, "S read after the s_full wait without fence::after_thread_sync"),
    ("nv.tcgen05.fence_after", 4, "O read after the o_full wait without fence::after_thread_sync"),
]


@pytest.mark.parametrize("name, occurrence, why", MUTANTS, ids=[f"{m[0]}-{m[1]}" for m in MUTANTS])
def test_mutants_are_reported(name, occurrence, why):
    ir = _without(_ir(), name, occurrence)
    for seed in (0, 1, 2):
        try:
            _launch(ir, seed)
        except HazardError:
            return
    pytest.fail(f"removing {name} #{occurrence} ({why}) ran without a hazard report")


def test_varlen_with_an_empty_key_sequence():
    # sequence 0 has no keys (no key block: the MMA thread commits o_full with no MMA, the epilogue
    # writes zeros); sequence 1 is ordinary
    rng = np.random.default_rng(6)
    cu_q, cu_k = np.array([0, 3, 5], np.int32), np.array([0, 0, 40], np.int32)
    q = rng.standard_normal((5, 1, 64)).astype(BF16)
    k = rng.standard_normal((40, 1, 64)).astype(BF16)
    v = rng.standard_normal((40, 1, 64)).astype(BF16)
    o, lse = ba.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert (o[:3].astype(np.float32) == 0).all() and np.isneginf(lse[:, :3]).all()
    _check_sequence(o[3:], lse[:, 3:], q[3:], k, v, False, 1 / 8)
