"""WGMMA plans with K up to 256 in one plan (P V with K = the key block): one mma_async issues
K / instr_k instructions; K-major operands span several TMA boxes along K, MN-major ones several
16-row steps. PTX for sm_90a through nvJitLink (instruction counts, no serialisation) and the
interpreter against float64."""
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
from tylo.ir import types as T

KEY_BLOCKS = (64, 80, 128, 176, 256)


def test_plan_accepts_k_up_to_256():
    for k in range(16, 257, 16):
        assert wg.WGMMA64(T.bf16, n=64, k=k).instructions == k // 16
    assert wg.WGMMA64(T.f8e4m3, n=64, k=256).instructions == 8
    for bad in (8, 24, 272):
        with pytest.raises(ValueError, match="K must be a multiple of 16 in 16..256"):
            wg.WGMMA64(T.bf16, n=64, k=bad)
    with pytest.raises(ValueError, match="K must be a multiple of 32 in 32..256"):
        wg.WGMMA64(T.f8e4m3, n=64, k=48)


@tylo.jit
def attention_block(out, S: tylo.constexpr, PV: tylo.constexpr, KB: tylo.constexpr):
    sq = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    sk = tylo.shared_array(tylo.bf16, (KB * 64,), align=1024)
    sv = tylo.shared_array(tylo.bf16, (KB * 64,), align=1024)
    q = wg.wgmma_operand(S, wg.OperandA, tma.shared_tile(tma.TMATile(tylo.bf16, (64, 64)), sq))
    k = wg.wgmma_operand(S, wg.OperandB, tma.shared_tile(tma.TMATile(tylo.bf16, (KB, 64)), sk))
    s = wg.finish_mma(wg.wait_mma(wg.mma_async(S, q, k, tylo.zero_accumulator(S))))
    p = tylo.pack(tylo.bf16, tylo.exp2(s - s.max(axis=1), fast=True))
    # V stored (key, d) with d contiguous: the (d, key) view is an MN-major B operand with K = KB
    v = wg.wgmma_operand(PV, wg.OperandB, tylo.permutedims(tma.shared_tile(tma.TMATile(tylo.bf16, (KB, 64)), sv)))
    o = wg.finish_mma(wg.wait_mma(wg.mma_async(PV, p, v, tylo.zero_accumulator(PV))))
    tylo.store(tylo.GlobalTile(out, Layout((64, 64), (64, 1))), o)


@pytest.mark.parametrize("kb", KEY_BLOCKS)
def test_p_v_with_k_the_key_block(kb):
    s_plan, pv_plan = wg.WGMMA64(T.bf16, n=kb, k=64), wg.WGMMA64(T.bf16, n=64, k=kb)
    ck = attention_block.compile(signature="*f32", constexprs=dict(S=s_plan, PV=pv_plan, KB=kb), arch="sm_90a",
                                 block=128)
    ptx = ck.ptx
    ss = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{kb}k16\.f32\.bf16\.bf16 \{{[^}}]*\}}, %rd", ptx)
    assert len(ss) == 4                                                                  # S = Q K^T: K = 64
    rs = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.bf16\.bf16 \{[^}]*\}, \{[^}]*\}, [^;]*;", ptx)
    assert len(rs) == kb // 16 and all(h.rstrip(";").endswith("1, 1, 1") for h in rs)   # B transposed
    assert ck.resources.spill_bytes == 0 and ".local" not in ptx
    _, _, log = ptx_to_cubin(ptx, get_target("sm_90a"), ck.name)
    assert "serialized" not in log, log


@tylo.jit
def k_major_long(out, PLAN: tylo.constexpr):
    sa = tylo.shared_array(tylo.bf16, (64 * PLAN.k,), align=1024)
    sb = tylo.shared_array(tylo.bf16, (64 * PLAN.k,), align=1024)
    box = tma.TMATile(tylo.bf16, (64, 64))
    a = wg.wgmma_operand(PLAN, wg.OperandA, tma.shared_tile(box, sa, boxes=(1, PLAN.k // 64)))
    b = wg.wgmma_operand(PLAN, wg.OperandB, tma.shared_tile(box, sb, boxes=(1, PLAN.k // 64)))
    f = wg.finish_mma(wg.wait_mma(wg.mma_async(PLAN, a, b, tylo.zero_accumulator(PLAN))))
    tylo.store(tylo.GlobalTile(out, Layout((64, 64), (64, 1))), f)


@pytest.mark.parametrize("k", (128, 256))
def test_k_major_operands_span_boxes_along_k(k):
    plan = wg.WGMMA64(T.bf16, n=64, k=k)
    st, major, lin, steps = wg.operand_encoding(plan, wg.OperandA(), tma.shared_layout(tma.TMATile(T.bf16, (64, 64)),
                                                                                       (1, k // 64)), "t")
    # 16 elements (32 bytes) inside a 128-byte row, then the next box (64 x 64 elements further)
    assert major == "K" and steps == tuple((i // 4) * 4096 + (i % 4) * 16 for i in range(k // 16))
    ck = k_major_long.compile(signature="*f32", constexprs=dict(PLAN=plan), arch="sm_90a", block=128)
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.", ck.ptx)) == k // 16


B_BOX = tma.TMATile(tylo.bf16, (64, 64))


@tylo.jit(interpret=True)
def register_a_long_k(c, a, v_map, PLAN: tylo.constexpr, KB: tylo.constexpr):
    sv = tylo.shared_array(tylo.bf16, (KB * 64,), align=1024)
    bar = tylo.shared_array(tylo.u64, (1,), align=8)
    tid = tylo.thread_idx.x
    vt = tma.shared_tile(v_map, sv.ptr)
    if tid == 0:
        mb.mbarrier_init(bar.ptr, 1)
        mb.fence_mbarrier_init()
    tylo.sync_threads()
    if tid == 0:
        mb.mbarrier_arrive_expect_tx(bar.ptr, tma.transfer_bytes(v_map.plan))
        tma.tma_load(vt, v_map, (0, 0), bar.ptr)
    mb.mbarrier_wait(bar.ptr, 0)
    af = tylo.load(tylo.GlobalTile(a, Layout((64, KB), (KB, 1))), wg.a_register_ownership(PLAN))
    b = wg.wgmma_operand(PLAN, wg.OperandB, tylo.permutedims(vt))
    acc = wg.wait_mma(wg.mma_async(PLAN, af, b, tylo.zero_accumulator(PLAN)))
    tylo.store(tylo.GlobalTile(c, Layout((64, 64), (64, 1))), wg.finish_mma(acc))


@pytest.mark.parametrize("kb", (80, 176))
def test_interpreter_long_k_register_a_matches_float64(kb):
    rng = np.random.default_rng()
    a = rng.standard_normal((64, kb)).astype(ml_dtypes.bfloat16)
    v = rng.standard_normal((kb, 64)).astype(ml_dtypes.bfloat16)
    c = np.full((64, 64), np.nan, np.float32)
    plan = wg.WGMMA64(tylo.bf16, n=64, k=kb)
    register_a_long_k[1, 128](c, a, tylo.prepare_tma(tma.TMATile(tylo.bf16, (kb, 64)), v), plan, kb)
    ref = a.astype(np.float64) @ v.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-6
