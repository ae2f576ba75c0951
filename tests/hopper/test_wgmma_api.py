"""The seed-level WGMMA API on fragments (zero_accumulator, wgmma_operand, mma_async, wait_mma,
finish_mma, shared_tile), compiled for sm_90a through llvmlite + nvJitLink (no GPU needed)."""
import re

import pytest

import tylo
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo import Layout
from tylo.codegen.compile import ptx_to_cubin
from tylo.codegen.targets import get_target
from tylo.ir import types as T
from tylo.layouts import reduction_plan


def _clean(ck):
    assert ".local" not in ck.ptx and "call.uni" not in ck.ptx
    assert ck.resources.spill_bytes == 0 and ck.resources.stack_bytes == 0
    _, _, log = ptx_to_cubin(ck.ptx, get_target(ck.arch), ck.name)
    assert "serialized" not in (log or ""), log      # ptxas did not serialise the wgmma pipeline


def _count(ptx, text):
    return len(re.findall(re.escape(text), ptx))


@tylo.jit
def seed_product(out, row, PLAN: tylo.constexpr, AT: tylo.constexpr, BT: tylo.constexpr, ROW0: tylo.constexpr):
    sa = tylo.shared_array(PLAN.dtype, (AT.shape[0] * AT.shape[1],), align=1024)
    sb = tylo.shared_array(PLAN.dtype, (BT.shape[0] * BT.shape[1],), align=1024)
    ta = tma.shared_tile(AT, sa)
    tb = tma.shared_tile(BT, sb)
    acc = tylo.zero_accumulator(PLAN)
    a = wg.wgmma_operand(PLAN, wg.OperandA, ta, (ROW0 if ROW0 >= 0 else row, 0))
    b = wg.wgmma_operand(PLAN, wg.OperandB, tb)
    pending = wg.mma_async(PLAN, a, b, acc)
    acc = wg.wait_mma(pending)
    f = wg.finish_mma(acc)
    tylo.store(tylo.GlobalTile(out, Layout((64, PLAN.n), (PLAN.n, 1))), f)


def _tiles(plan, rows=64):
    inner = 128 // plan.dtype.itemsize
    return tma.TMATile(plan.dtype, (rows, inner)), tma.TMATile(plan.dtype, (plan.n, inner))


CASES = ([(T.bf16, n, k) for n in (8, 16, 64, 128, 256) for k in (16, 32, 64)]
         + [(T.f16, n, 64) for n in (8, 256)] + [(T.f8e4m3, n, k) for n in (64, 256) for k in (32, 64)])


@pytest.mark.parametrize("dtype, n, k", CASES, ids=lambda x: str(x))
def test_every_n_k_dtype(dtype, n, k):
    plan = wg.WGMMA64(dtype, n=n, k=k)
    at, bt = _tiles(plan)
    ck = seed_product.compile(signature="*f32, i32", constexprs=dict(PLAN=plan, AT=at, BT=bt, ROW0=0),
                              arch="sm_90a", block=128)
    ptx = ck.ptx
    assert _count(ptx, f"wgmma.mma_async.sync.aligned.m64n{n}k{plan.instr_k}.") == plan.instructions
    assert _count(ptx, "wgmma.commit_group.sync.aligned") == 1
    assert _count(ptx, "wgmma.wait_group.sync.aligned 0") == 1
    assert _count(ptx, "wgmma.fence.sync.aligned") == 1
    _clean(ck)


def test_partitions_are_summed_by_finish_mma():
    plan = wg.WGMMA64(T.bf16, n=8, k=64, partitions=4)
    at, bt = _tiles(plan)
    ck = seed_product.compile(signature="*f32, i32", constexprs=dict(PLAN=plan, AT=at, BT=bt, ROW0=0),
                              arch="sm_90a", block=128)
    assert _count(ck.ptx, "wgmma.mma_async.sync.aligned.m64n8k16.") == 4
    assert len(re.findall(r"add(\.rn)?\.f32", ck.ptx)) == 3 * 4        # 3 sums per register, 4 registers
    _clean(ck)


def test_runtime_origin_and_second_warpgroup_rows():
    plan = wg.WGMMA64(T.bf16, n=64, k=64)
    at, bt = _tiles(plan, rows=128)
    ck = seed_product.compile(signature="*f32, i32", constexprs=dict(PLAN=plan, AT=at, BT=bt, ROW0=-1),
                              arch="sm_90a", block=128)
    assert _count(ck.ptx, "wgmma.mma_async.sync.aligned.m64n64k16.") == 4
    _clean(ck)
    ck = seed_product.compile(signature="*f32, i32", constexprs=dict(PLAN=plan, AT=at, BT=bt, ROW0=64),
                              arch="sm_90a", block=128)
    _clean(ck)


def test_origin_rules():
    plan = wg.WGMMA64(T.bf16, n=64, k=64)
    at, bt = _tiles(plan, rows=128)
    with pytest.raises(tylo.CompileError, match="non-K \\(mn\\) origin 4 must be a multiple of 8"):
        seed_product.compile(signature="*f32, i32", constexprs=dict(PLAN=plan, AT=at, BT=bt, ROW0=4),
                             arch="sm_90a", block=128)
    with pytest.raises(tylo.CompileError, match="leaves the tile"):
        seed_product.compile(signature="*f32, i32", constexprs=dict(PLAN=plan, AT=at, BT=bt, ROW0=72),
                             arch="sm_90a", block=128)


@tylo.jit
def k_window(out, PLAN: tylo.constexpr, AT: tylo.constexpr, K0: tylo.constexpr):
    sa = tylo.shared_array(PLAN.dtype, (64 * 64,), align=1024)
    ta = tma.shared_tile(AT, sa)
    a = wg.wgmma_operand(PLAN, wg.OperandA, ta, (0, K0))
    b = wg.wgmma_operand(PLAN, wg.OperandB, ta, (0, K0))
    f = wg.finish_mma(wg.wait_mma(wg.mma_async(PLAN, a, b, tylo.zero_accumulator(PLAN))))
    tylo.store(tylo.GlobalTile(out, Layout((64, 64), (64, 1))), f)


def test_k_origin_rule_and_k_offsets():
    plan = wg.WGMMA64(T.bf16, n=64, k=16)
    at = tma.TMATile(T.bf16, (64, 64))
    ck = k_window.compile(signature="*f32", constexprs=dict(PLAN=plan, AT=at, K0=48), arch="sm_90a", block=128)
    _clean(ck)
    with pytest.raises(tylo.CompileError, match="K origin 8 must be a multiple of 16"):
        k_window.compile(signature="*f32", constexprs=dict(PLAN=plan, AT=at, K0=8), arch="sm_90a", block=128)
    with pytest.raises(tylo.CompileError, match="leaves the tile"):
        k_window.compile(signature="*f32", constexprs=dict(PLAN=wg.WGMMA64(T.bf16, n=64, k=32), AT=at, K0=48),
                         arch="sm_90a", block=128)


def test_descriptors_are_built_and_advanced_in_the_low_word():
    # the start address / 16 stays below 2^14, so wgmma_operand builds a descriptor and mma_async advances it
    # along K in its low 32-bit word: each WGMMA's descriptor is a 32-bit word or-ed with the constant high
    # fields, never a 64-bit add (an add with carry and its moves per WGMMA in every K loop)
    plan = wg.WGMMA64(T.bf16, n=64, k=64)
    ck = k_window.compile(signature="*f32", constexprs=dict(PLAN=plan, AT=tma.TMATile(T.bf16, (64, 64)), K0=0),
                          arch="sm_90a", block=128)
    defs = {reg: op for op, reg in re.findall(r"^\s*(\w+(?:\.\w+)*)\s+(%rd\d+),", ck.ptx, re.M)}
    descs = re.findall(r"wgmma\.mma_async[^;]*\}, (%rd\d+), (%rd\d+),", ck.ptx)
    assert len(descs) == 4
    assert {defs[r] for pair in descs for r in pair} == {"or.b64"}, defs


def test_operand_descriptor_values_on_the_host_encoding():
    # the descriptor's constant part is smem_descriptor(structure, 0); the K step of a K-major
    # 128B bf16 operand is 32 bytes (2 in descriptor units), of an MN-major one 16 rows * 128 B
    plan = wg.WGMMA64(T.bf16, n=64, k=64)
    st, major, lin, steps = wg.operand_encoding(plan, wg.OperandA(), tma.shared_layout(tma.TMATile(T.bf16, (128, 64))), "t")
    assert (major, steps) == ("K", (0, 16, 32, 48))
    mn = tylo.permutedims(tma.shared_layout(tma.TMATile(T.bf16, (64, 64))), (1, 0))
    st, major, lin, steps = wg.operand_encoding(plan, wg.OperandB(), mn, "t")
    assert (major, steps) == ("MN", (0, 1024, 2048, 3072))


@tylo.jit
def mn_major_b(out, PLAN: tylo.constexpr):
    sa = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    sb = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    a = wg.wgmma_operand(PLAN, wg.OperandA, tma.shared_tile(tma.TMATile(tylo.bf16, (64, 64)), sa))
    # B stored (k, n) with n contiguous: the (n, k) view is MN-major
    kn = tma.shared_tile(tma.TMATile(tylo.bf16, (64, 64)), sb)
    b = wg.wgmma_operand(PLAN, wg.OperandB, tylo.permutedims(kn, (1, 0)))
    f = wg.finish_mma(wg.wait_mma(wg.mma_async(PLAN, a, b, tylo.zero_accumulator(PLAN))))
    tylo.store(tylo.GlobalTile(out, Layout((64, 64), (64, 1))), f)


def test_mn_major_b_uses_the_transpose_immediate():
    ck = mn_major_b.compile(signature="*f32", constexprs=dict(PLAN=wg.WGMMA64(T.bf16, n=64, k=64)),
                            arch="sm_90a", block=128)
    hits = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.bf16\.bf16 [^;]*;", ck.ptx)
    assert len(hits) == 4 and all(h.rstrip(";").endswith("1, 1, 0, 1") for h in hits)
    _clean(ck)


@tylo.jit
def register_a(out, PLAN: tylo.constexpr, PLAN2: tylo.constexpr):
    sa = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    sb = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    t = tma.shared_tile(tma.TMATile(tylo.bf16, (64, 64)), sa)
    tb = tma.shared_tile(tma.TMATile(tylo.bf16, (64, 64)), sb)
    s = wg.finish_mma(wg.wait_mma(wg.mma_async(PLAN, wg.wgmma_operand(PLAN, wg.OperandA, t),
                                               wg.wgmma_operand(PLAN, wg.OperandB, t), tylo.zero_accumulator(PLAN))))
    p = tylo.pack(tylo.bf16, s - s.max(axis=1))          # the accumulator as A of the next product
    o = wg.finish_mma(wg.wait_mma(wg.mma_async(PLAN2, p, wg.wgmma_operand(PLAN2, wg.OperandB, tb),
                                               tylo.zero_accumulator(PLAN2))))
    tylo.store(tylo.GlobalTile(out, Layout((64, 64), (64, 1))), o)


def test_accumulator_feeds_register_a():
    plan = wg.WGMMA64(T.bf16, n=64, k=64)
    ck = register_a.compile(signature="*f32", constexprs=dict(PLAN=plan, PLAN2=plan), arch="sm_90a", block=128)
    rs = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.bf16\.bf16 \{[^}]*\}, \{[^}]*\}, [^;]*;", ck.ptx)
    assert len(rs) == 4 and all(h.rstrip(";").endswith("1, 1, 0") for h in rs)
    _clean(ck)


def test_register_a_ownership_is_the_accumulator_distribution():
    from tylo.layouts import same_distribution
    for n in (16, 64, 256):
        assert same_distribution(wg.accumulator_ownership(wg.WGMMA64(T.bf16, n=n, k=16)),
                                 wg.a_register_ownership(wg.WGMMA64(T.bf16, n=8, k=n if n <= 64 else 64)) if n <= 64
                                 else wg.accumulator_ownership(wg.WGMMA64(T.bf16, n=n, k=16)))


@tylo.jit
def epilogue(out, rmax, PLAN: tylo.constexpr):
    sa = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    sb = tylo.shared_array(tylo.bf16, (PLAN.n * 64,), align=1024)
    a = wg.wgmma_operand(PLAN, wg.OperandA, tma.shared_tile(tma.TMATile(tylo.bf16, (64, 64)), sa))
    b = wg.wgmma_operand(PLAN, wg.OperandB, tma.shared_tile(tma.TMATile(tylo.bf16, (PLAN.n, 64)), sb))
    f = wg.finish_mma(wg.wait_mma(wg.mma_async(PLAN, a, b, tylo.zero_accumulator(PLAN)))) * 2
    m = f.max(axis=1)
    tylo.store(tylo.GlobalTile(out, Layout((64, PLAN.n), (PLAN.n, 1))), f - m)
    if tylo.thread_idx.x % 4 == 0:
        tylo.store(tylo.GlobalTile(rmax, Layout((64, 1), (1, 1))), m)


@pytest.mark.parametrize("n", [8, 64, 256])
def test_fragment_epilogue_reductions_shuffle_within_four_lanes(n):
    plan = wg.WGMMA64(T.bf16, n=n, k=64)
    ck = epilogue.compile(signature="*f32, *f32", constexprs=dict(PLAN=plan), arch="sm_90a", block=128)
    red = reduction_plan(wg.accumulator_ownership(plan), 1)
    assert red.shuffle_masks == (1, 2)
    assert _count(ck.ptx, "shfl.sync.bfly") == len(red.shuffle_masks) * len(red.groups)
    assert len(re.findall(r"(mul|add|sub)(\.rn)?\.f32", ck.ptx)) >= n // 2
    _clean(ck)


@tylo.jit
def chained(out, steps, PLAN: tylo.constexpr):
    sa = tylo.shared_array(tylo.bf16, (2 * 64 * 64,), align=1024)
    sb = tylo.shared_array(tylo.bf16, (2 * PLAN.n * 64,), align=1024)
    AT = tma.TMATile(tylo.bf16, (64, 64))
    BT = tma.TMATile(tylo.bf16, (PLAN.n, 64))
    acc = tylo.zero_accumulator(PLAN)
    pending = wg.mma_async(PLAN, wg.wgmma_operand(PLAN, wg.OperandA, tma.shared_tile(AT, sa)),
                           wg.wgmma_operand(PLAN, wg.OperandB, tma.shared_tile(BT, sb)), acc)
    for s in range(1, steps):
        st = s % 2
        a = wg.wgmma_operand(PLAN, wg.OperandA, tma.shared_tile(AT, sa.ptr + st * 4096))
        b = wg.wgmma_operand(PLAN, wg.OperandB, tma.shared_tile(BT, sb.ptr + st * (PLAN.n * 64)))
        pending = wg.mma_async(PLAN, a, b, pending)
        pending = wg.wait_mma(pending, 1)       # the previous group is done: its stage may be refilled
    f = wg.finish_mma(wg.wait_mma(pending))
    tylo.store(tylo.GlobalTile(out, Layout((64, PLAN.n), (PLAN.n, 1))), f)


def test_pending_accumulators_chain_through_a_runtime_loop():
    plan = wg.WGMMA64(T.bf16, n=256, k=64)
    ck = chained.compile(signature="*f32, i32", constexprs=dict(PLAN=plan), arch="sm_90a", block=128)
    assert "wgmma.wait_group.sync.aligned 1" in ck.ptx and "wgmma.wait_group.sync.aligned 0" in ck.ptx
    assert _count(ck.ptx, "wgmma.mma_async.sync.aligned.m64n256k16.") >= 8
    _clean(ck)


@tylo.jit
def pending_math(out, PLAN: tylo.constexpr, WHAT: tylo.constexpr):
    sa = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    t = tma.shared_tile(tma.TMATile(tylo.bf16, (64, 64)), sa)
    p = wg.mma_async(PLAN, wg.wgmma_operand(PLAN, wg.OperandA, t), wg.wgmma_operand(PLAN, wg.OperandB, t),
                     tylo.zero_accumulator(PLAN))
    if WHAT == 0:
        x = p * 2
    elif WHAT == 1:
        x = wg.finish_mma(p)
    else:
        x = wg.wait_mma(p).values


def test_pending_accumulators_have_no_arithmetic():
    plan = wg.WGMMA64(T.bf16, n=64, k=16)
    with pytest.raises(tylo.CompileError, match="pending WGMMA accumulator has no arithmetic.*wait_mma"):
        pending_math.compile(signature="*f32", constexprs=dict(PLAN=plan, WHAT=0), arch="sm_90a")
    with pytest.raises(tylo.CompileError, match="still pending"):
        pending_math.compile(signature="*f32", constexprs=dict(PLAN=plan, WHAT=1), arch="sm_90a")
    p4 = wg.WGMMA64(T.bf16, n=8, k=64, partitions=4)
    with pytest.raises(tylo.CompileError, match="partial .*finish_mma"):
        pending_math.compile(signature="*f32", constexprs=dict(PLAN=p4, WHAT=2), arch="sm_90a")
