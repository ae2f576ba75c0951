"""The seed-level tcgen05 MMA API: tcgen05_operand, accumulator, mma_tcgen05, commit_mma.

Host checks of the operand model (descriptor start address of an operand origin against a
brute-force enumeration of the swizzled shared-memory layout) and kernels assembled for
sm_100a through nvJitLink (no Blackwell GPU runs them).
"""
import re

import pytest

import tylo
from tylo.ir.types import bf16, f8e4m3, f8e5m2, f16, f32, i8, i32, u8
from tylo.lang import tcgen05 as tc
from tylo.lang.tcgen05 import (
    SMEM_DESC_FIELDS,
    OperandA,
    OperandB,
    Tcgen05MMA,
    accumulator,
    decode_fields,
    smem_operand,
    tmem_operand_address,
)
from tylo.lang.tmem import TmemTile, TmemTransfer, partition
from tylo.layouts import Layout, Swizzle, compose, window


def k_major(rows, elem_bytes, swizzle=128):
    w = swizzle // elem_bytes
    t = (16 // elem_bytes).bit_length() - 1
    return compose(Swizzle((swizzle // 16).bit_length() - 1, t, 3), Layout((rows, w), (w, 1)))


def mn_major(mn, k, elem_bytes, swizzle=128):
    w = swizzle // elem_bytes
    t = (16 // elem_bytes).bit_length() - 1
    # ((W, mn/W), k) : ((1, W*k), W): swizzle atoms of W x 8 stacked along k, then along mn
    return compose(Swizzle((swizzle // 16).bit_length() - 1, t, 3), Layout(((w, mn // w), k), ((1, w * k), w)))


def hw_offsets(op, layout_inner_origin_pre, rows, k, swz, canon):
    return swz(layout_inner_origin_pre + canon)


# -- host: operand origins ----------------------------------------------------------------


@pytest.mark.parametrize("kslice", [0, 1, 2, 3])
def test_k_major_operand_origin_advances_the_start_address_by_k_bytes(kslice):
    atom = Tcgen05MMA((128, 256), bf16, bf16, f32)
    lay = k_major(128, 2)
    op = smem_operand(atom, OperandA, lay, (0, 16 * kslice))
    assert op.start_bytes == 32 * kslice and op.shape == (128, 16)
    f = decode_fields(SMEM_DESC_FIELDS, op.desc)
    assert f["start_address"] == 0 and f["swizzle"] == 2 and f["stride_byte_offset"] == 1024 >> 4
    assert f["version"] == 1 and f["base_offset"] == 0 and f["lbo_mode"] == 0
    # brute force: hardware address of element (r, c) = swizzle(start + r%8*128 + r//8*SBO + 2c) on bytes
    for r in range(128):
        for c in range(16):
            pre = op.start_bytes + (r % 8) * 128 + (r // 8) * 1024 + 2 * c
            hw = pre ^ (((pre >> 7) & 7) << 4)
            assert hw == 2 * lay((r, 16 * kslice + c))


def test_operand_rows_origin_and_b_operand():
    atom = Tcgen05MMA((128, 64), bf16, bf16, f32)
    b = smem_operand(atom, OperandB, k_major(128, 2), (64, 32))
    assert b.shape == (64, 16) and b.start_bytes == 64 * 128 + 64
    with pytest.raises(ValueError, match="outside the tile"):
        smem_operand(atom, OperandB, k_major(128, 2), (72, 0))
    assert smem_operand(atom, OperandB, k_major(128, 2), (8, 0)).start_bytes == 1024  # a whole swizzle repeat
    with pytest.raises(ValueError, match="inside the swizzle repeat"):
        smem_operand(atom, OperandB, k_major(128, 2), (4, 0))  # not a multiple of 8 rows
    with pytest.raises(ValueError, match="not 16-byte aligned|not the descriptor"):
        smem_operand(atom, OperandA, k_major(128, 2), (0, 4))


def test_runtime_origin_is_checked_for_every_multiple_of_the_operand():
    atom = Tcgen05MMA((128, 64), bf16, bf16, f32)
    op = smem_operand(atom, OperandA, k_major(128, 2), (0, None))
    assert op.start is None and op.structure.major == "K"


def test_mn_major_operand():
    atom = Tcgen05MMA((128, 128), bf16, bf16, f32, b_major="MN")
    lay = mn_major(128, 64, 2)
    for ks in range(4):
        op = smem_operand(atom, OperandB, lay, (0, 16 * ks))
        assert op.structure.major == "MN" and op.structure.swizzle_bytes == 128
        assert op.start_bytes == 2 * lay((0, 16 * ks))
    with pytest.raises(ValueError, match="K-major but the plan says|MN-major but the plan says"):
        smem_operand(Tcgen05MMA((128, 128), bf16, bf16, f32), OperandB, lay, (0, 0))


@pytest.mark.parametrize("dt, acc", [(f32, f32), (f8e4m3, f32), (i8, i32)])
def test_other_element_sizes(dt, acc):
    atom = Tcgen05MMA((128, 64), dt, dt, acc)
    eb = dt.itemsize
    op = smem_operand(atom, OperandA, k_major(128, eb), (0, atom.k))
    assert op.shape == (128, atom.k) and op.start_bytes == 32


def test_cta_pair_operands_are_halves():
    atom = Tcgen05MMA((256, 128), bf16, bf16, f32)
    assert tc.operand_shape(atom, OperandA) == (128, 16) and tc.operand_shape(atom, OperandB) == (64, 16)


def test_accumulator_layouts():
    a = accumulator(Tcgen05MMA((128, 64), bf16, bf16, f32))
    assert a.shape == (128, 64)
    acc = partition(TmemTransfer((32, 64), axis=1), window(a, (64, 0), (32, 64)))
    assert acc.address == 64 << 16 and acc.warp == 2
    big = accumulator(Tcgen05MMA((256, 256), bf16, bf16, f32), 256)
    assert big.shape == (128, 256) and partition(TmemTransfer((32, 32), axis=1), window(big, (0, 32), (32, 32))).address == 288
    m64 = accumulator(Tcgen05MMA((64, 64), bf16, bf16, f32))
    # layout F: rows 16w..16w+15 in lanes 32w..32w+15, read with 16-lane transfers
    a64 = partition(TmemTransfer((16, 8), axis=1, atom="16x256b"), window(m64, (32, 0), (16, 8)))
    assert a64.address == 64 << 16
    with pytest.raises(ValueError, match="not modelled"):
        accumulator(Tcgen05MMA((128, 64), bf16, bf16, f32, cta_group=2))
    with pytest.raises(ValueError, match="not modelled"):
        accumulator(Tcgen05MMA((128, 64), f16, f16, f16))


def test_a_from_tmem():
    atom = Tcgen05MMA((128, 64), bf16, bf16, f32)
    p = TmemTile(bf16, 128, Layout((128, 128), (1, 128)))
    assert tmem_operand_address(atom, p, (0, 32)) == 128 + 16
    with pytest.raises(ValueError, match="whole word"):
        tmem_operand_address(atom, p, (0, 3))
    with pytest.raises(ValueError, match="lane i"):
        tmem_operand_address(atom, TmemTile(bf16, 0, Layout((128, 128), (128, 1))), (0, 0))
    with pytest.raises(ValueError, match="kind::f16 and kind::tf32"):
        tmem_operand_address(Tcgen05MMA((128, 64), i8, i8, i32), p, (0, 0))


def test_runtime_lane_band_needs_a_provable_multiple():
    from tylo.lang.tmem import known_multiple
    assert known_multiple(96) == 96 and known_multiple(0) == 1 << 30 and known_multiple("x") == 1


# -- kernels --------------------------------------------------------------------------------


def _clean(ck):
    assert ".local" not in ck.ptx and "call.uni" not in ck.ptx and "call " not in ck.ptx
    assert ck.resources.spill_bytes == 0 and ck.resources.stack_bytes == 0


@tylo.jit
def mma_api(out, ks_rt, PLAN: tylo.constexpr, STEPS: tylo.constexpr, A_TMEM: tylo.constexpr,
            RUNTIME_ORIGIN: tylo.constexpr):
    eb = PLAN.a_bytes
    w = 128 // eb
    ra, rb = tc.operand_shape(PLAN, tc.OperandA)[0], tc.operand_shape(PLAN, tc.OperandB)[0]
    slot = tylo.shared_array(tylo.u32, 1)
    bar = tylo.shared_array(tylo.u64, 1)
    sa = tylo.shared_array(PLAN.a_dtype, (ra * w,), align=1024)
    sb = tylo.shared_array(PLAN.b_dtype, (rb * w,), align=1024)
    A = tylo.SharedTile(sa, k_major(ra, eb), align=1024)
    B = tylo.SharedTile(sb, k_major(rb, eb), align=1024)
    tc.tmem_alloc(512, slot, PLAN.cta_group)
    tylo.sync_threads()
    tc.fence_after_thread_sync()
    base = slot[0]
    if tylo.thread_idx.x == 0:
        for ks in range(STEPS):
            kk = ks_rt * PLAN.k if RUNTIME_ORIGIN else ks * PLAN.k
            if A_TMEM:
                a = tc.tcgen05_operand(PLAN, tc.OperandA, TmemTile(PLAN.a_dtype, 256, Layout((128, 256), (1, 128))),
                                       (0, ks * PLAN.k), base)
            else:
                a = tc.tcgen05_operand(PLAN, tc.OperandA, A, (0, kk))
            b = tc.tcgen05_operand(PLAN, tc.OperandB, B, (0, kk))
            tc.mma_tcgen05(PLAN, tc.accumulator(PLAN) if PLAN.m != 128 or PLAN.cta_group == 1 else 0, a, b,
                           ks > 0, base)
        tc.commit_mma(bar, PLAN.cta_group)
    tc.fence_before_thread_sync()
    tylo.sync_threads()
    out[0] = base


PLANS = [
    Tcgen05MMA((128, 256), bf16, bf16, f32),
    Tcgen05MMA((64, 64), bf16, bf16, f32),
    Tcgen05MMA((256, 256), bf16, bf16, f32),
    Tcgen05MMA((128, 128), f32, f32, f32),
    Tcgen05MMA((64, 64), f32, f32, f32),
    Tcgen05MMA((128, 256), f8e4m3, f8e5m2, f32),
    Tcgen05MMA((64, 128), f8e4m3, f8e4m3, f32),
    Tcgen05MMA((256, 128), f8e5m2, f8e5m2, f32),
    Tcgen05MMA((128, 64), i8, u8, i32),
    Tcgen05MMA((64, 32), u8, u8, i32),
    Tcgen05MMA((256, 64), i8, i8, i32),
    Tcgen05MMA((256, 128), f32, f32, f32),
]


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: f"{p.kind}-m{p.m}n{p.n}-cg{p.cta_group}")
def test_mma_api_every_kind_and_m(plan):
    steps = 128 // plan.a_bytes // plan.k  # one 128-byte swizzle row of K
    ck = mma_api.compile(signature="*u32, i32", arch="sm_100a",
                         constexprs={"PLAN": plan, "STEPS": steps, "A_TMEM": False, "RUNTIME_ORIGIN": False})
    ptx = ck.ptx
    pat = rf"{re.escape(plan.instruction)} \[%r\d+\], %rd\d+, %rd\d+, %r\d+, %?p\w*;"
    assert len(re.findall(pat, ptx)) == steps, ptx
    assert ptx.count("tcgen05.mma") == steps
    cg = plan.cta_group
    assert ptx.count(f"tcgen05.commit.cta_group::{cg}.mbarrier::arrive::one.shared::cluster.b64") == 1
    _clean(ck)


def test_runtime_operand_origin_and_a_in_tmem():
    plan = Tcgen05MMA((128, 128), bf16, bf16, f32)
    ck = mma_api.compile(signature="*u32, i32", arch="sm_100a",
                         constexprs={"PLAN": plan, "STEPS": 2, "A_TMEM": False, "RUNTIME_ORIGIN": True})
    assert len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], %rd\d+, %rd\d+", ck.ptx)) == 2
    _clean(ck)
    ck = mma_api.compile(signature="*u32, i32", arch="sm_100a",
                         constexprs={"PLAN": plan, "STEPS": 4, "A_TMEM": True, "RUNTIME_ORIGIN": False})
    assert len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], \[%r\d+\], %rd\d+", ck.ptx)) == 4
    _clean(ck)


@tylo.jit
def commit_pair(out, mask):
    bar = tylo.shared_array(tylo.u64, 1)
    tc.commit_mma(bar, 2, 3)
    tc.commit_mma(bar, 2, mask)
    tc.commit_mma(bar, 2)


def test_commit_multicast():
    ck = commit_pair.compile(signature="*u32, u32", arch="sm_100a")
    ptx = ck.ptx
    assert ptx.count("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64") == 2
    assert ptx.count("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.b64") == 1
    assert re.search(r"multicast::cluster\.b64 \[%r\d+\], %rs\d+;", ptx)
    _clean(ck)


@tylo.jit
def bad_operand(out, KS: tylo.constexpr):
    sa = tylo.shared_array(tylo.bf16, (128 * 64,), align=1024)
    A = tylo.SharedTile(sa, k_major(128, 2), align=1024)
    a = tc.tcgen05_operand(Tcgen05MMA((128, 64), bf16, bf16, f32), tc.OperandA, A, (0, KS))


def test_operand_errors_are_compile_errors():
    with pytest.raises(tylo.CompileError, match="16-byte aligned|descriptor's pattern"):
        bad_operand.compile(signature="*u32", arch="sm_100a", constexprs={"KS": 4})
