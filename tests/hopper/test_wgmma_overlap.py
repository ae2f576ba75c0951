"""Scheduling WGMMA work against other work: ``mma_async_interleaved`` (two products' instructions in turns,
one commit group) and ``wait_mma(acc, after=...)`` (values computed before the wait). PTX for sm_90a through
llvmlite + nvJitLink, and the interpreter against float64."""
import re

import ml_dtypes
import numpy as np
import pytest

import tylo
import tylo.lang.mbarrier as mb
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo import Layout
from tylo.codegen.compile import ptx_to_cubin
from tylo.codegen.targets import get_target

TILE = tma.TMATile(tylo.bf16, (64, 64))
PLAN = wg.WGMMA64(tylo.bf16, n=64, k=64)


@tylo.jit
def two_products(s_out, o_out, c_map, d_map, MODE: tylo.constexpr):
    sc = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    sd = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    bar = tylo.shared_array(tylo.u64, (1,), align=8)
    tid = tylo.thread_idx.x
    ct = tma.shared_tile(c_map, sc.ptr)
    dt = tma.shared_tile(d_map, sd.ptr)
    if tid == 0:
        mb.mbarrier_init(bar.ptr, 1)
        mb.fence_mbarrier_init()
    tylo.sync_threads()
    if tid == 0:
        mb.mbarrier_arrive_expect_tx(bar.ptr, 2 * tma.transfer_bytes(TILE))
        tma.tma_load(ct, c_map, (0, 0), bar.ptr)
        tma.tma_load(dt, d_map, (0, 0), bar.ptr)
    mb.mbarrier_wait(bar.ptr, 0)
    c = wg.wgmma_operand(PLAN, wg.OperandA, ct)
    d = wg.wgmma_operand(PLAN, wg.OperandB, dt)
    d_as_a = wg.wgmma_operand(PLAN, wg.OperandA, dt)
    c_as_b = wg.wgmma_operand(PLAN, wg.OperandB, ct)
    if MODE == "interleaved":
        s_pending, o_pending = wg.mma_async_interleaved((PLAN, c, d, tylo.zero_accumulator(PLAN)),
                                                        (PLAN, d_as_a, c_as_b, tylo.zero_accumulator(PLAN)))
        s = wg.finish_mma(wg.wait_mma(s_pending)) * 2
        o = wg.finish_mma(wg.wait_mma(o_pending))
    else:
        s_pending = wg.mma_async(PLAN, c, d, tylo.zero_accumulator(PLAN))                  # S = C D^T
        o_pending = wg.mma_async(PLAN, d_as_a, c_as_b, tylo.zero_accumulator(PLAN))        # O = D C^T
        s = wg.finish_mma(wg.wait_mma(s_pending, pending=1)) * 2
        if MODE == "after":
            o = wg.finish_mma(wg.wait_mma(o_pending, after=s))   # S * 2 is computed under O's product
        else:
            o = wg.finish_mma(wg.wait_mma(o_pending))
    tylo.store(tylo.GlobalTile(s_out, Layout((64, 64), (64, 1))), s)
    tylo.store(tylo.GlobalTile(o_out, Layout((64, 64), (64, 1))), o)


def _compile(mode):
    ck = two_products.compile(signature=["*f32", "*f32", TILE, TILE], constexprs=dict(MODE=mode), arch="sm_90a",
                              block=128)
    assert ck.resources.spill_bytes == 0
    _, _, log = ptx_to_cubin(ck.ptx, get_target(ck.arch), ck.name)
    assert "serialized" not in (log or ""), log
    return ck


def _accumulator_of_each_wgmma(ptx):
    """The first accumulator register of each wgmma.mma_async, in program order."""
    return re.findall(r"wgmma\.mma_async\.sync\.aligned\.\S+ \{(%r\d+),", ptx)


def test_interleaved_products_issue_in_turns_as_one_group():
    ptx = _compile("interleaved").ptx
    firsts = _accumulator_of_each_wgmma(ptx)
    assert len(firsts) == 2 * PLAN.instructions
    # the two accumulator chains alternate: S, O, S, O, ...
    assert len(set(firsts[0::2])) == 1 and len(set(firsts[1::2])) == 1 and firsts[0] != firsts[1]
    assert ptx.count("wgmma.commit_group.sync.aligned") == 1
    assert ptx.count("wgmma.fence.sync.aligned") == 1
    # and the separate products: one chain after the other, two groups
    sequential = _accumulator_of_each_wgmma(_compile("plain").ptx)
    assert len(set(sequential[:PLAN.instructions])) == 1 and sequential[0] != sequential[-1]


def test_wait_after_orders_the_values_before_the_wait():
    ptx = _compile("after").ptx
    waits = [m.start() for m in re.finditer(r"wgmma\.wait_group\.sync\.aligned 0;", ptx)]
    pins = [m.start() for m in re.finditer(r"@q st\.shared\.b32", ptx)]
    assert len(waits) == 1 and len(pins) == 1 and pins[0] < waits[0]
    # the pin takes every value of S * 2 (32 per thread), xor-folded into one never-executed store
    pin_block = ptx[ptx.rfind("{", 0, pins[0]):pins[0]]
    assert pin_block.count("xor.b32") == 31 and "%nwarpid" in pin_block
    assert "@q st.shared.b32" not in _compile("plain").ptx


@pytest.mark.parametrize("mode", ["interleaved", "after"])
def test_interpreter_matches_float64(mode):
    rng = np.random.default_rng()
    c = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    d = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    s = np.full((64, 64), np.nan, np.float32)
    o = np.full((64, 64), np.nan, np.float32)
    tylo.jit(two_products.fn, interpret=True)[1, 128](s, o, tylo.prepare_tma(TILE, c), tylo.prepare_tma(TILE, d),
                                                       mode)
    c64, d64 = c.astype(np.float64), d.astype(np.float64)
    for got, ref in ((s, 2 * c64 @ d64.T), (o, d64 @ c64.T)):
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-6


@tylo.jit
def bad_overlap(out, c_map, MODE: tylo.constexpr):
    sc = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    ct = tma.shared_tile(c_map, sc.ptr)
    a = wg.wgmma_operand(PLAN, wg.OperandA, ct)
    b = wg.wgmma_operand(PLAN, wg.OperandB, ct)
    if MODE == "one_product":
        wg.mma_async_interleaved((PLAN, a, b, tylo.zero_accumulator(PLAN)))
    else:
        p = wg.mma_async(PLAN, a, b, tylo.zero_accumulator(PLAN))
        wg.wait_mma(p, after="l")


@pytest.mark.parametrize("mode, message", [("one_product", "two or more"), ("not_a_value", "after= takes")])
def test_bad_arguments_are_compile_errors(mode, message):
    with pytest.raises(tylo.CompileError, match=message):
        bad_overlap.compile(signature=["*f32", TILE], constexprs=dict(MODE=mode), arch="sm_90a", block=128)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["interleaved", "after", "plain"])
def test_gpu_matches_float64_exactly(mode):
    from tylo.runtime import compute_capability
    if compute_capability() < (9, 0):
        pytest.skip("needs an sm_90 GPU")
    import tylo.runtime as rt
    rng = np.random.default_rng()
    # halves in [-4, 4]: products and sums are exact in fp32, so the GPU must equal float64 bit for bit
    c = (rng.integers(-8, 9, (64, 64)) / 2).astype(ml_dtypes.bfloat16)
    d = (rng.integers(-8, 9, (64, 64)) / 2).astype(ml_dtypes.bfloat16)
    s = rt.to_device(np.full((64, 64), np.nan, np.float32))
    o = rt.to_device(np.full((64, 64), np.nan, np.float32))
    two_products[1, 128](s, o, tylo.prepare_tma(TILE, rt.to_device(c)), tylo.prepare_tma(TILE, rt.to_device(d)),
                         MODE=mode)
    c64, d64 = c.astype(np.float64), d.astype(np.float64)
    np.testing.assert_array_equal(s.to_host(), 2 * c64 @ d64.T)
    np.testing.assert_array_equal(o.to_host(), d64 @ c64.T)
