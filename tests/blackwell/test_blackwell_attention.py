"""examples/blackwell_attention.py: assembled for sm_100a (PTX and resources), run in tylo's interpreter
against float64 (FlashAttention-3 criterion) and hazard-checked (the mutation tests are in
test_blackwell_attention_mutations.py). No Blackwell GPU runs it here: every number comes from the
interpreter or the assembler."""
import math
import pathlib
import re
import sys

import ml_dtypes
import numpy as np
import pytest

import tylo
from tylo.interpreter import run

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


def test_assembles_without_local_memory_or_calls(compiled):
    constexprs, c = compiled
    assert ".local" not in c.ptx and "call.uni" not in c.ptx
    # 512 threads start with 128 registers each; setmaxnreg moves them between the roles
    assert c.resources.registers <= 128


def test_assembles_without_spills(compiled):
    constexprs, c = compiled
    assert c.resources.spill_bytes == 0 and c.resources.stack_bytes == 0


def test_tcgen05_instruction_counts(compiled):
    constexprs, c = compiled
    ptx = c.ptx
    cfg = ba.config(constexprs["D"])
    qt, nc, bn = cfg.q_tiles, cfg.nc, cfg.bn
    # S = Q K^T (K = head_dim in steps of 16, A and B from shared memory), issued for each Q tile before the key
    # loop and inside it; O += P V (A = P from TMEM, bn keys in steps of 16) per tile and 64-column chunk
    qk = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], %rd\d+, %rd\d+, %r\d+", ptx)
    pv = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], \[%r\d+\], %rd\d+, %r\d+", ptx)
    assert (len(qk), len(pv)) == (2 * qt * nc * 4, qt * nc * bn // 16)
    assert ptx.count("tcgen05.mma") == len(qk) + len(pv)
    # s_full[i] (two sites per tile), kv_empty, q_empty, o_full[i]
    assert ptx.count("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64") == 3 * qt + 2
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x64.b32") == 2 * qt * bn // 64   # S twice, 64 keys a load
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x32.b32") == qt * 4 * nc         # O: rescale, epilogue
    assert ptx.count("tcgen05.st.sync.aligned.32x32b.x16.b32") == qt * bn // 32       # P, 32 keys per store
    assert ptx.count("tcgen05.st.sync.aligned.32x32b.x32.b32") == qt * 2 * nc         # rescaled O
    assert ptx.count("tcgen05.wait::st.sync.aligned") == 2 * qt
    assert ptx.count("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32") == 1
    assert ptx.count("tcgen05.dealloc.cta_group::1.sync.aligned.b32") == 1
    # the register budget per role
    assert re.findall(r"setmaxnreg\.inc\.sync\.aligned\.u32 (\d+);", ptx) == [str(cfg.softmax_regs)] * qt
    decs = sorted(int(n) for n in re.findall(r"setmaxnreg\.dec\.sync\.aligned\.u32 (\d+);", ptx))
    assert decs == sorted([cfg.correction_regs, cfg.other_regs] + ([ba.IDLE_REGS] if qt == 1 else []))
    assert 2 * cfg.softmax_regs + cfg.correction_regs + cfg.other_regs <= 512 if qt == 2 else \
        cfg.softmax_regs + ba.IDLE_REGS + cfg.correction_regs + cfg.other_regs <= 512
    # TMA: both Q tiles once per work tile and K, V per block (LLVM may duplicate the loop body's copies
    # when it rotates the loop: the PTX has at least these; the IR exactly these)
    assert ptx.count("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes") >= \
        (qt + 2) * nc
    ir = ba.attention_fwd.lower(signature=ba.signature(constexprs["D"]), constexprs=constexprs, arch="sm_100a",
                                block=(ba.THREADS,))
    assert sum(op.name == "nv.tma.load" for op in ir.body.walk()) == (qt + 2) * nc
    assert ptx.count("ex2.approx") >= qt * bn                                  # exp2 with the scale folded in


def test_emulated_exp2_assembles_without_spills():
    # every 4th probability on the FMA pipe (exp2_fma): fewer ex2.approx, still no spills
    cx = ba.constexprs_for(128, True, 4)
    c = ba.attention_fwd.compile(signature=ba.signature(128), arch="sm_100a", constexprs=cx, block=ba.THREADS)
    assert c.resources.spill_bytes == 0 and c.resources.stack_bytes == 0 and ".local" not in c.ptx
    cfg = ba.config(128)
    assert cfg.q_tiles * cfg.bn * 3 // 4 <= c.ptx.count("ex2.approx") < cfg.q_tiles * cfg.bn


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


# interpreter time on this 2-core machine (shared): the (1, 1) case about 3 s, 128-row cases 5-10 s, (200, 333)
# 20-30 s; the shapes with head_dim 64, 128 and 256, causal and not, are spread over the slow set
FAST = [(1, 1, 64, False)]
SLOW = [(1, 1, 128, True), (128, 128, 64, True), (128, 128, 128, False), (128, 128, 256, True), (256, 64, 64, False),
        (256, 64, 128, True), (256, 64, 256, False), (200, 333, 64, True)]


@pytest.mark.parametrize("sq, sk, d, causal", FAST)
def test_matches_float64(sq, sk, d, causal):
    _batched(sq, sk, d, causal)


@pytest.mark.slow
@pytest.mark.parametrize("sq, sk, d, causal", SLOW)
def test_matches_float64_slow(sq, sk, d, causal):
    _batched(sq, sk, d, causal)


@tylo.jit(interpret=True, arch="sm_100a")
def exp2_probe(out, x, n):
    i = tylo.block_idx.x * 128 + tylo.thread_idx.x
    if i < n:
        out[i] = ba.exp2_fma(x[i])


def test_exp2_fma_accuracy():
    # the FMA-pipe exp2 in the interpreter against float64: 1.03e-4 relative at most (the cubic's fit), 0 below
    # 2^-126 and for -inf (masked scores)
    x = np.concatenate([np.linspace(-30, 8, 2000), [-126.5, -127.5, -200.0, -np.inf]]).astype(np.float32)
    out = np.full_like(x, np.nan)
    exp2_probe[(len(x) + 127) // 128, 128](out, x, len(x))
    ref = np.exp2(x[:2000].astype(np.float64))
    assert np.abs(out[:2000] / ref - 1).max() < 1.1e-4
    assert (out[2000:] == 0).all()


@pytest.mark.slow
def test_emulated_exp2_matches_float64():
    # half the probabilities through exp2_fma: O unchanged at this precision, LSE within 2e-5 (measured 1.9e-5)
    rng = np.random.default_rng(5)
    q, k, v = _inputs(rng, 1, 200, 333, 1, 1, 64)
    grid, args, cx, o, lse = ba.prepare(q, k, v, causal=True)
    ba.interpreted()[grid, ba.THREADS](*args, cx["D"], cx["CAUSAL"], 2)
    _check_sequence(o[0], lse[0], q[0], k[0], v[0], True, 1 / 8)


@pytest.mark.slow
def test_gqa_bhsd_strides_and_persistent_ctas():
    # 2 query heads on 1 KV head, batch 2; q as a BHSD tensor seen through .transpose(1, 2) (no copy); 300 rows:
    # 2 work tiles of 256 rows per (batch, head), 8 in all, walked by 3 persistent CTAs (longest first: causal);
    # the second key block is scaled up so that the conditional rescale runs
    rng = np.random.default_rng(3)
    _, k, v = _inputs(rng, 2, 300, 150, 2, 1, 64)
    k[:, 128:] *= 4
    q = rng.standard_normal((2, 2, 300, 64)).astype(BF16).transpose(0, 2, 1, 3)
    grid, args, cx, o, lse = ba.prepare(q, k, v, causal=True, num_sms=3)
    assert grid == (3,) and args[9:11] == [2, 8]          # n_mb, n_tiles
    ba.interpreted()[grid, ba.THREADS](*args, cx["D"], cx["CAUSAL"])
    for i in range(2):
        _check_sequence(o[i], lse[i], q[i], k[i], v[i], True, 1 / 8)


@pytest.mark.slow
def test_varlen_batch():
    rng = np.random.default_rng(4)
    lens_q, lens_k = [1, 130, 45], [7, 200, 45]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q = rng.standard_normal((cu_q[-1], 1, 64)).astype(BF16)
    k = rng.standard_normal((cu_k[-1], 1, 64)).astype(BF16)
    v = rng.standard_normal((cu_k[-1], 1, 64)).astype(BF16)
    o, lse = ba.attention(q, k, v, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    for i in range(3):
        sl_q, sl_k = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
        _check_sequence(o[sl_q], lse[:, sl_q], q[sl_q], k[sl_k], v[sl_k], True, 1 / 8)


@pytest.mark.slow
def test_rows_that_see_no_key_give_zero_and_minus_inf():
    # causal, bottom-right: with 192 queries on 64 keys, rows 0..127 see no key
    rng = np.random.default_rng(5)
    q, k, v = _inputs(rng, 1, 192, 64, 1, 1, 64)
    o, lse = ba.attention(q, k, v, causal=True)
    assert (o[0, :128].astype(np.float32) == 0).all() and np.isneginf(lse[0, 0, :128]).all()
    _check_sequence(o[0], lse[0], q[0], k[0], v[0], True, 1 / 8)


@pytest.mark.slow
def test_run_example():
    ba.run()


# -- hazards ------------------------------------------------------------------------------------------

def _ir(d=64, causal=False):
    return ba.attention_fwd.lower(signature=ba.signature(d), constexprs=ba.constexprs_for(d, causal),
                                  arch="sm_100a", block=(ba.THREADS,))


def _launch(ir, seed, sk=256):
    rng = np.random.default_rng(seed)
    q, k, v = _inputs(rng, 1, 128, sk, 1, 1, 64)
    grid, args, _, o, lse = ba.prepare(q, k, v)
    run(ir, args, grid=grid, block=(ba.THREADS,), seed=seed)
    return q, k, v, o, lse


@pytest.mark.slow
def test_hazard_checker_is_quiet_over_seeds():
    # two key blocks through the 2-stage ring, two scheduler seeds; run() raises on any hazard (the mutation
    # tests run the original kernel over three more seeds)
    for seed in (0, 1):
        q, k, v, o, lse = _launch(_ir(), seed)
        _check_sequence(o[0], lse[0], q[0], k[0], v[0], False, 1 / 8)


@pytest.mark.slow
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
