"""Blackwell (TMEM, tcgen05) in the interpreter: the attention tile example against float64, and the
TMEM hazards."""
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import tylo
from tylo.interpreter import HazardError, run

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

import blackwell_attention_tile as at  # noqa: E402


def _attention_reference(q, k, v, scale):
    s = q.astype(np.float64) @ k.astype(np.float64).T * scale
    p = np.exp(s - s.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    # the kernel rounds P to bf16 before the second MMA (the tensor cores read bf16)
    return p.astype(ml_dtypes.bfloat16).astype(np.float64) @ v.astype(np.float64)


@pytest.mark.parametrize("seed", [0, 1])
def test_attention_tile_matches_float64(seed):
    ir = at.attention_tile.lower(signature="*f32:16, u64, u64, u64, f32", arch="sm_100a", block=(at.THREADS,))
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((128, 64)).astype(ml_dtypes.bfloat16) for _ in range(3))
    o = np.full((128, 64), np.nan, np.float32)
    run(ir, [o, tylo.prepare_tma(at.Q_PLAN, q), tylo.prepare_tma(at.KV_PLAN, k), tylo.prepare_tma(at.KV_PLAN, v),
             0.125], block=(at.THREADS,), seed=seed)
    ref = _attention_reference(q, k, v, 0.125)
    # fp32 accumulation and the fp32 softmax against float64: 1e-5 relative is ample (measured 5e-8)
    assert np.linalg.norm(o - ref) / np.linalg.norm(ref) < 1e-5


@pytest.mark.parametrize("mutation, message", [
    ("nv.tcgen05.dealloc", "TMEM not deallocated"),
    ("nv.tcgen05.wait_ld", "register read before its wait"),
    ("nv.mbarrier.wait", "TMA load"),   # the first wait (TMA loads): the MMA reads shared memory being written
])
def test_attention_tile_mutants_are_reported(mutation, message):
    ir = at.attention_tile.lower(signature="*f32:16, u64, u64, u64, f32", arch="sm_100a", block=(at.THREADS,))
    for block in _blocks(ir.body):
        for i, op in enumerate(block.ops):
            if op.name == mutation:
                del block.ops[i]
                fwd = {id(r): v for r, v in zip(op.results, op.operands)}
                for o in ir.body.walk():
                    o.operands = [fwd.get(id(v), v) for v in o.operands]
                break
        else:
            continue
        break
    q = np.ones((128, 64), ml_dtypes.bfloat16)
    with pytest.raises(HazardError, match=message):
        run(ir, [np.zeros((128, 64), np.float32), tylo.prepare_tma(at.Q_PLAN, q), tylo.prepare_tma(at.KV_PLAN, q),
                 tylo.prepare_tma(at.KV_PLAN, q), 0.125], block=(at.THREADS,))


def _blocks(block):
    yield block
    for op in block.ops:
        for b in op.blocks:
            yield from _blocks(b)


import blackwell_gemm as bg  # noqa: E402


def _gemm_ir():
    return bg.blackwell_gemm.lower(signature=["*f32:16", bg.A_PLAN, bg.B_PLAN, "i32", "i32", "i32"],
                                   constexprs={"STAGES": 2}, arch="sm_100a", block=(bg.THREADS,))


def _gemm(kernel, M, N, K, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    bt = rng.standard_normal((N, K)).astype(ml_dtypes.bfloat16)
    c = np.full((M, N), np.nan, np.float32)
    run(kernel, [c, tylo.prepare_tma(bg.A_PLAN, a), tylo.prepare_tma(bg.B_PLAN, bt), M, N, K],
        grid=((M + 127) // 128, (N + 127) // 128), block=(bg.THREADS,), seed=seed)
    ref = a.astype(np.float64) @ bt.astype(np.float64).T
    assert np.isfinite(c).all()
    return np.linalg.norm(c - ref) / np.linalg.norm(ref)


@pytest.mark.parametrize("shape", [(128, 128, 64), (200, 136, 200), (72, 264, 328)])
def test_blackwell_gemm_matches_float64_on_ragged_shapes(shape):
    # 2-stage ring: K = 200 and 328 take 4 and 6 K steps, so stages are reused
    assert _gemm(_gemm_ir(), *shape, seed=sum(shape)) < 1e-5


BW_SYNC = ("nv.mbarrier.wait", "nv.mbarrier.arrive_expect_tx", "nv.tcgen05.commit", "nv.tcgen05.wait_ld",
           "nv.tcgen05.dealloc", "nv.barrier")


def _bw_mutants():
    counts = {}
    for op in _gemm_ir().body.walk():
        if op.name in BW_SYNC:
            counts[op.name] = counts.get(op.name, 0) + 1
    return [(n, k) for n in BW_SYNC for k in range(counts.get(n, 0))]


def _remove(kernel, name, occurrence):
    k = 0
    for block in _blocks(kernel.body):
        for i, op in enumerate(block.ops):
            if op.name == name:
                if k == occurrence:
                    del block.ops[i]
                    fwd = {id(r): v for r, v in zip(op.results, op.operands)}
                    for o in kernel.body.walk():
                        o.operands = [fwd.get(id(v), v) for v in o.operands]
                    return kernel
                k += 1
    raise LookupError((name, occurrence))


@pytest.mark.parametrize("mutant", _bw_mutants(), ids=lambda m: f"{m[0]}-{m[1]}")
def test_blackwell_gemm_mutants_are_reported(mutant):
    # every wait, arrive.expect_tx, commit, wait::ld, dealloc and the CTA barriers, removed in turn
    kernel = _remove(_gemm_ir(), *mutant)
    for seed in (0, 1, 2):
        try:
            _gemm(kernel, 128, 128, 320, seed)
        except HazardError:
            return
    pytest.fail(f"mutant {mutant} ran without a hazard report")


from tylo.lang import tcgen05 as tc  # noqa: E402
from tylo.lang.tmem import TmemTransfer, partition  # noqa: E402
from tylo.layouts import Layout, window  # noqa: E402


@tylo.jit(interpret=True, arch="sm_100a")
def tmem_roundtrip(out, x, FREE_FIRST: tylo.constexpr):
    slot = tylo.shared_array(tylo.u32, 1)
    w = tylo.warp_id()
    if w == 0:
        tc.tmem_alloc(256, slot)        # O_TILE is at columns 128..191
    tc.fence_before_thread_sync()
    tylo.sync_threads()
    tc.fence_after_thread_sync()
    base = slot[0]
    access = partition(TmemTransfer((32, 64), axis=1), window(at.O_TILE, (32 * w, 0), (32, 64)))
    g = tylo.GlobalTile(x, Layout((128, 64), (64, 1)))
    tc.store_async(access, tylo.load(window(g, (32 * w, 0), (32, 64)), access.ownership), base)
    tc.wait_stores()
    tc.fence_before_thread_sync()
    tylo.sync_threads()
    if FREE_FIRST:
        if w == 0:
            tc.tmem_dealloc(base, 256)
        tylo.sync_threads()
    v = tc.wait_load(tc.load_async(access, base))
    tylo.store(window(tylo.GlobalTile(out, Layout((128, 64), (64, 1))), (32 * w, 0), (32, 64)), v)
    tc.fence_before_thread_sync()
    tylo.sync_threads()
    if w == 0 and not FREE_FIRST:
        tc.tmem_dealloc(base, 256)


def test_tmem_store_then_load_round_trips_and_use_after_dealloc_is_reported():
    x = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    out = np.zeros_like(x)
    tmem_roundtrip[1, 128](out, x, False)
    assert np.array_equal(out, x)
    with pytest.raises(HazardError, match="TMEM not allocated"):
        tmem_roundtrip[1, 128](out, x, True)
