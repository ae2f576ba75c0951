"""Waiting for some WGMMA groups while others stay in flight: wait_mma(acc, pending=n) gives the
completed accumulator when at least n groups were committed after acc's, and a compile error naming
the group otherwise. PTX for sm_90a (wait_group 1 then 0), and the interpreter, whose WGMMA unit
completes at wait_group n all but the newest n groups."""
import re

import ml_dtypes
import numpy as np
import pytest

import tylo
import tylo.lang.mbarrier as mb
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo import Layout
from tylo.interpreter import InterpreterError

TILE = tma.TMATile(tylo.bf16, (64, 64))
PLAN = wg.WGMMA64(tylo.bf16, n=64, k=64)


@tylo.jit
def two_groups(s_out, o_out, c_map, d_map, MODE: tylo.constexpr):
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
    if MODE == "interleaved":       # test_wgmma_overlap.py: both products' instructions in turns, one group
        s_pending, o_pending = wg.mma_async_interleaved((PLAN, c, d, tylo.zero_accumulator(PLAN)),
                                                        (PLAN, d_as_a, c_as_b, tylo.zero_accumulator(PLAN)))
        s = wg.finish_mma(wg.wait_mma(s_pending)) * 2
        o = wg.finish_mma(wg.wait_mma(o_pending))
    else:
        s_pending = wg.mma_async(PLAN, c, d, tylo.zero_accumulator(PLAN))              # group 1: S = C D^T
        o_pending = wg.mma_async(PLAN, d_as_a, c_as_b, tylo.zero_accumulator(PLAN))    # group 2: O = D C^T
        if MODE == "newest":
            wg.wait_mma(o_pending, pending=1)                             # O is the newest group
        if MODE == "too_many":
            wg.wait_mma(s_pending, pending=2)
        s = wg.finish_mma(wg.wait_mma(s_pending, pending=1)) * 2              # wait_group 1: S done, O in flight
        if MODE == "after":         # test_wgmma_overlap.py: S * 2 is computed before O's wait
            o = wg.finish_mma(wg.wait_mma(o_pending, after=s))
        else:
            o = wg.finish_mma(wg.wait_mma(o_pending))
    tylo.store(tylo.GlobalTile(s_out, Layout((64, 64), (64, 1))), s)
    tylo.store(tylo.GlobalTile(o_out, Layout((64, 64), (64, 1))), o)


def _compile(mode):
    return two_groups.compile(signature=["*f32", "*f32", TILE, TILE], constexprs=dict(MODE=mode), arch="sm_90a",
                              block=128)


def test_wait_for_the_older_group_only():
    ck = _compile("ok")
    waits = re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+)", ck.ptx)
    assert waits == ["1", "0"]
    assert ck.ptx.index("wgmma.wait_group.sync.aligned 1") < ck.ptx.index("wgmma.wait_group.sync.aligned 0")
    assert len(re.findall(r"wgmma\.commit_group", ck.ptx)) == 2


def test_waiting_for_the_newest_group_with_pending_is_an_error():
    with pytest.raises(tylo.CompileError, match=r"still in flight after wgmma.wait_group 1: only 0 group\(s\) "
                                                r"were committed after it"):
        _compile("newest")
    with pytest.raises(tylo.CompileError, match=r"only 1 group\(s\).*use pending=1 or fewer"):
        _compile("too_many")


@tylo.jit
def carried(out, N: tylo.constexpr):
    sa = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    a = wg.wgmma_operand(PLAN, wg.OperandA, tma.shared_tile(TILE, sa))
    b = wg.wgmma_operand(PLAN, wg.OperandB, tma.shared_tile(TILE, sa))
    p = wg.mma_async(PLAN, a, b, tylo.zero_accumulator(PLAN))
    for _ in range(tylo.thread_idx.y, N):
        p = wg.mma_async(PLAN, a, b, p)
    q = wg.mma_async(PLAN, a, b, tylo.zero_accumulator(PLAN))
    s = wg.wait_mma(p, pending=1)
    tylo.store(tylo.GlobalTile(out, Layout((64, 64), (64, 1))), wg.finish_mma(s) + wg.finish_mma(wg.wait_mma(q)))


def test_an_accumulator_through_a_loop_has_no_known_group():
    with pytest.raises(tylo.CompileError, match="cannot tell how many WGMMA groups were committed"):
        carried.compile(signature="*f32", constexprs=dict(N=4), arch="sm_90a", block=128)


def test_positional_n_keeps_the_accumulator_pending():
    @tylo.jit
    def keep(out):
        sa = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
        a = wg.wgmma_operand(PLAN, wg.OperandA, tma.shared_tile(TILE, sa))
        p = wg.wait_mma(wg.mma_async(PLAN, a, wg.wgmma_operand(PLAN, wg.OperandB, tma.shared_tile(TILE, sa)),
                                     tylo.zero_accumulator(PLAN)), 1)
        out[0] = p + 1.0

    with pytest.raises(tylo.CompileError, match="pending WGMMA accumulator"):
        keep.compile(signature="*f32", arch="sm_90a", block=128)


def _operands():
    rng = np.random.default_rng()
    c = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    d = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    return c, d


def test_interpreter_completes_the_older_group_at_wait_group_1():
    c, d = _operands()
    s = np.full((64, 64), np.nan, np.float32)
    o = np.full((64, 64), np.nan, np.float32)
    tylo.jit(two_groups.fn, interpret=True)[1, 128](s, o, tylo.prepare_tma(TILE, c), tylo.prepare_tma(TILE, d), "ok")
    c64, d64 = c.astype(np.float64), d.astype(np.float64)
    for got, ref in ((s, 2 * c64 @ d64.T), (o, d64 @ c64.T)):
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-6


@tylo.jit(interpret=True)
def read_in_flight(out, c_map):
    sc = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    bar = tylo.shared_array(tylo.u64, (1,), align=8)
    tid = tylo.thread_idx.x
    ct = tma.shared_tile(c_map, sc.ptr)
    if tid == 0:
        mb.mbarrier_init(bar.ptr, 1)
        mb.fence_mbarrier_init()
    tylo.sync_threads()
    if tid == 0:
        mb.mbarrier_arrive_expect_tx(bar.ptr, tma.transfer_bytes(TILE))
        tma.tma_load(ct, c_map, (0, 0), bar.ptr)
    mb.mbarrier_wait(bar.ptr, 0)
    a = wg.wgmma_operand(PLAN, wg.OperandA, ct)
    b = wg.wgmma_operand(PLAN, wg.OperandB, ct)
    accs = wg.wgmma_fence(wg.zero_accumulators(32))
    accs = wg.wgmma_mma_async(PLAN, a.desc, b.desc, accs)
    wg.wgmma_commit_group()
    accs = wg.wgmma_wait_group(1, accs)          # the raw API: the only group may still be in flight
    out[tid] = accs[0]


def test_interpreter_refuses_a_register_of_a_group_wait_1_left_in_flight():
    c, _ = _operands()
    out = np.full(128, np.nan, np.float32)
    with pytest.raises(InterpreterError, match="accumulator read before its wait"):
        read_in_flight[1, 128](out, tylo.prepare_tma(TILE, c))
