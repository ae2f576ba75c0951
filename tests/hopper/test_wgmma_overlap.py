"""Scheduling WGMMA work against other work: ``mma_async_interleaved`` (two products' instructions in turns,
one commit group) and ``wait_mma(acc, after=...)`` (values computed before the wait). PTX for sm_90a through
llvmlite + nvJitLink, and the interpreter against float64."""
import re

import ml_dtypes
import numpy as np
import pytest

# the two-product kernel, with the modes "interleaved" and "after" (tests/hopper is on sys.path under pytest)
from test_wgmma_groups import PLAN, TILE, two_groups

import tylo
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo.codegen.compile import ptx_to_cubin
from tylo.codegen.targets import get_target


def _compile(mode):
    ck = two_groups.compile(signature=["*f32", "*f32", TILE, TILE], constexprs=dict(MODE=mode), arch="sm_90a",
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
    sequential = _accumulator_of_each_wgmma(_compile("ok").ptx)
    assert len(set(sequential[:PLAN.instructions])) == 1 and sequential[0] != sequential[-1]


def test_wait_after_orders_the_values_before_the_wait():
    ptx = _compile("after").ptx
    waits = [m.start() for m in re.finditer(r"wgmma\.wait_group\.sync\.aligned 0;", ptx)]
    pins = [m.start() for m in re.finditer(r"@q st\.shared\.b32", ptx)]
    assert len(waits) == 1 and len(pins) == 1 and pins[0] < waits[0]
    # the pin takes every value of S * 2 (32 per thread), xor-folded into one never-executed store
    pin_block = ptx[ptx.rfind("{", 0, pins[0]):pins[0]]
    assert pin_block.count("xor.b32") == 31 and "%nwarpid" in pin_block
    assert "@q st.shared.b32" not in _compile("ok").ptx


@pytest.mark.parametrize("mode", ["interleaved", "after"])
def test_interpreter_matches_float64(mode):
    rng = np.random.default_rng()
    c = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    d = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    s = np.full((64, 64), np.nan, np.float32)
    o = np.full((64, 64), np.nan, np.float32)
    tylo.jit(two_groups.fn, interpret=True)[1, 128](s, o, tylo.prepare_tma(TILE, c), tylo.prepare_tma(TILE, d),
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
@pytest.mark.parametrize("mode", ["interleaved", "after", "ok"])
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
    two_groups[1, 128](s, o, tylo.prepare_tma(TILE, rt.to_device(c)), tylo.prepare_tma(TILE, rt.to_device(d)),
                         MODE=mode)
    c64, d64 = c.astype(np.float64), d.astype(np.float64)
    np.testing.assert_array_equal(s.to_host(), 2 * c64 @ d64.T)
    np.testing.assert_array_equal(o.to_host(), d64 @ c64.T)
