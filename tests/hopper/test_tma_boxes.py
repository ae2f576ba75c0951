"""Shared tiles of several TMA boxes (``shared_tile(plan, ptr, boxes=)``): their layout, one bulk
copy per box at shifted coordinates, and the WGMMA operand they make when viewed MN-major."""
import re

import pytest

import tylo
import tylo.lang.mbarrier as mb
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo.ir.types import bf16, f32
from tylo.lang.tma import TMATile, box_grid, shared_layout, transfer_bytes
from tylo.layouts import permutedims, swizzled_structure


@pytest.mark.parametrize("plan,boxes", [(TMATile(bf16, (64, 64)), (1, 4)), (TMATile(bf16, (64, 64)), (2, 1)),
                                        (TMATile(f32, (8, 32), axis=0, swizzle=32), (3, 2))])
def test_each_box_keeps_the_plan_layout_in_row_major_box_order(plan, boxes):
    one, many = shared_layout(plan), shared_layout(plan, boxes)
    e0, e1 = plan.shape
    box = e0 * e1
    for r in range(e0 * boxes[0]):
        for c in range(e1 * boxes[1]):
            k = (r // e0) * boxes[1] + c // e1
            assert many((r, c)) == one((r % e0, c % e1)) + k * box
    assert shared_layout(plan, (1, 1)) == one
    assert transfer_bytes(plan, boxes) == transfer_bytes(plan) * boxes[0] * boxes[1]
    assert box_grid(plan, (e0 * boxes[0], e1 * boxes[1])) == boxes


def test_box_rules():
    plan = TMATile(bf16, (64, 64))
    with pytest.raises(ValueError, match="pair of positive ints"):
        shared_layout(plan, (0, 2))
    with pytest.raises(ValueError, match="whole number"):
        box_grid(plan, (64, 96))


def test_wide_mn_major_view_is_one_canonical_operand():
    # (k, n) boxes of 64 x 64 bf16, four along n: the (n, k) view is an MN-major 128B operand whose
    # leading byte offset steps from one 64-wide box to the next (8 KB)
    view = permutedims(shared_layout(TMATile(bf16, (64, 64)), (1, 4)), (1, 0))
    st = swizzled_structure(view, 2)
    assert (st.major, st.swizzle_bytes, st.leading_byte_offset, st.stride_byte_offset) == ("MN", 128, 8192, 1024)


@tylo.jit
def boxes_kernel(out, src, dst, N0: tylo.constexpr):
    s = tylo.shared_array(tylo.bf16, (4 * 64 * 64,), align=1024)
    bars = tylo.shared_array(tylo.u64, (1,))
    tile = tma.shared_tile(src, s, (1, 4))
    if tylo.thread_idx.x == 0:
        mb.mbarrier_init(bars.ptr, 1)
        mb.fence_mbarrier_init()
        mb.fence_view_async_shared()
    mb.named_barrier_sync(0, 128)         # every thread waits on the barrier only after its init
    if tylo.thread_idx.x == 0:
        mb.mbarrier_arrive_expect_tx(bars.ptr, tma.transfer_bytes(src.plan, (1, 4)))
        tma.tma_load(tile, src, (8, N0), bars.ptr)
    mb.mbarrier_wait(bars.ptr, 0)
    plan = wg.WGMMA64(tylo.bf16, n=256, k=64)
    a = wg.wgmma_operand(wg.WGMMA64(tylo.bf16, n=256, k=64), wg.OperandA, tylo.permutedims(tile, (1, 0)),
                         (64 * (tylo.thread_idx.x // 128), 0))
    b = wg.wgmma_operand(plan, wg.OperandB, tylo.permutedims(tile, (1, 0)))
    f = wg.finish_mma(wg.wait_mma(wg.mma_async(plan, a, b, tylo.zero_accumulator(plan))))
    tylo.store(tylo.GlobalTile(out, tylo.Layout((64, 256), (256, 1))), f)
    if tylo.thread_idx.x == 0:
        tma.tma_store(dst, tile, (8, N0))
        tma.commit_tma_stores()
        tma.wait_tma_stores(0)


def test_one_bulk_copy_per_box_at_shifted_coordinates():
    plan = TMATile(bf16, (64, 64))
    ck = boxes_kernel.compile(signature=["*f32", plan, plan], constexprs={"N0": 128}, arch="sm_90a", block=128)
    loads = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\S* \[(%r\d+)\], "
                       r"\[%rd\d+, \{(%r\d+), (%r\d+)\}\]", ck.ptx)
    stores = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\S* \[%rd\d+, \{(%r\d+), (%r\d+)\}\], "
                        r"\[(%r\d+)\]", ck.ptx)
    assert len(loads) == 4 and len(stores) == 4
    # four boxes: four shared addresses and inner (n) coordinates, one outer (k) coordinate
    assert len({d for d, _, _ in loads}) == 4 and len({n for _, n, _ in loads}) == 4 and len({k for _, _, k in loads}) == 1
    assert len({d for _, _, d in stores}) == 4 and len({n for n, _, _ in stores}) == 4
    # MN-major A and B: the transpose immediates are set
    mma = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n256k16\.f32\.bf16\.bf16 [^;]*;", ck.ptx)
    assert len(mma) == 4 and all(m.rstrip(";").endswith("1, 1, 1, 1") for m in mma)
    assert ".local" not in ck.ptx


@tylo.jit
def permuted_load(src):
    s = tylo.shared_array(tylo.bf16, (2 * 64 * 64,), align=1024)
    bars = tylo.shared_array(tylo.u64, (1,))
    tma.tma_load(tylo.permutedims(tma.shared_tile(src, s, (1, 2)), (1, 0)), src, (0, 0), bars.ptr)


def test_a_permuted_tile_is_not_a_tma_destination():
    with pytest.raises(tylo.CompileError, match="not the plan's|not where TMA puts"):
        permuted_load.compile(signature=[TMATile(bf16, (64, 64))], arch="sm_90a", block=128)


@pytest.mark.gpu
def test_four_box_tile_round_trip_and_mn_major_wgmma_on_the_gpu():
    from tylo.runtime import compute_capability
    if compute_capability() < (9, 0):
        pytest.skip("needs sm_90")
    import ml_dtypes
    import numpy as np

    rng = np.random.default_rng()
    K_ROWS, N_COLS, N0 = 80, 448, 128
    src = rng.integers(-3, 4, size=(K_ROWS, N_COLS)).astype(ml_dtypes.bfloat16)    # exact products
    poison = np.float32(-7.0).astype(ml_dtypes.bfloat16)
    out = tylo.to_device(np.full((64, 256), np.nan, np.float32))
    dst = tylo.to_device(np.full((K_ROWS, N_COLS), poison, ml_dtypes.bfloat16))
    plan = TMATile(bf16, (64, 64))
    s_dev = tylo.to_device(src)
    boxes_kernel[1, 128](out, tylo.prepare_tma(plan, s_dev), tylo.prepare_tma(plan, dst), N0=N0)
    t = src.astype(np.float64)[8:72, N0:N0 + 256]            # (k, n) as loaded
    np.testing.assert_array_equal(out.to_host(), t[:, :64].T @ t)   # A (m, k) = t[:, m], B (n, k) = t[:, n]
    want = np.full((K_ROWS, N_COLS), poison, ml_dtypes.bfloat16)
    want[8:72, N0:N0 + 256] = src[8:72, N0:N0 + 256]
    np.testing.assert_array_equal(dst.to_host().view(np.uint16), want.view(np.uint16))


@tylo.jit
def negative_store(dst, R0: tylo.constexpr):
    s = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    tma.tma_store(dst, tma.shared_tile(dst, s), (R0, 0))


def test_a_compile_time_negative_store_origin_is_an_error():
    plan = TMATile(bf16, (64, 64))
    negative_store.compile(signature=[plan], constexprs={"R0": 0}, arch="sm_90a", block=128)
    with pytest.raises(tylo.CompileError, match="negative; TMA stores at negative coordinates fault"):
        negative_store.compile(signature=[plan], constexprs={"R0": -8}, arch="sm_90a", block=128)
