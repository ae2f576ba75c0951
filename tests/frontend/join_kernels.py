"""Kernels whose structured values change their static part across a join (tests/frontend/test_structured_joins.py)."""
import tylo
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo import Layout


@tylo.jit
def tile_layout_differs(out, n):
    t = tylo.GlobalTile(out, Layout((4, 8), (1, 4)))
    if n > 0:  # error: tile_layout_differs
        t = tylo.GlobalTile(out, Layout((4, 8), (8, 1)))
    t[0, 0] = 1.0


@tylo.jit
def runtime_stride_tile_differs(out, n, ld):
    t = tylo.GlobalTile(out, Layout((4, 8), (1, ld)))
    if n > 0:  # error: runtime_stride_tile_differs
        t = tylo.GlobalTile(out, Layout((4, 8), (ld, 1)))
    t[0, 0] = 1.0


@tylo.jit
def fragment_ownership_differs(out, n):
    a = tylo.full(tylo.f32, tylo.Ownership.local((32, 8), axis=1), 0.0)
    if n > 0:  # error: fragment_ownership_differs
        a = tylo.full(tylo.f32, tylo.Ownership.local((32, 8), axis=0), 0.0)
    tylo.store(tylo.GlobalTile(out, Layout((32, 8), (8, 1))), a)


@tylo.jit
def tile_layout_changes_in_loop(out, n):
    t = tylo.GlobalTile(out, Layout((4, 8), (1, 4)))
    for i in range(n):  # error: tile_layout_changes_in_loop
        t = tylo.permutedims(t)
    t[0, 0] = 1.0


PLAN64 = wg.WGMMA64(tylo.bf16, n=64, k=64)
PLAN128 = wg.WGMMA64(tylo.bf16, n=128, k=64)
TMA_TILE = tma.TMATile(tylo.bf16, (64, 64))


@tylo.jit
def pending_accumulator_differs(out, n):
    sa = tylo.shared_array(tylo.bf16, (128 * 64,), align=1024)
    t64 = tma.shared_tile(TMA_TILE, sa)
    t128 = tma.shared_tile(TMA_TILE, sa, boxes=(2, 1))
    a = wg.wgmma_operand(PLAN64, wg.OperandA, t64)
    p = wg.mma_async(PLAN64, a, wg.wgmma_operand(PLAN64, wg.OperandB, t64), tylo.zero_accumulator(PLAN64))
    if n > 0:  # error: pending_accumulator_differs
        a2 = wg.wgmma_operand(PLAN128, wg.OperandA, t64)
        p = wg.mma_async(PLAN128, a2, wg.wgmma_operand(PLAN128, wg.OperandB, t128), tylo.zero_accumulator(PLAN128))
    wg.wait_mma(p)


@tylo.jit
def wgmma_operand_differs(out, n):
    sa = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    t = tma.shared_tile(TMA_TILE, sa)
    x = wg.wgmma_operand(PLAN64, wg.OperandA, t)
    if n > 0:  # error: wgmma_operand_differs
        x = wg.wgmma_operand(PLAN64, wg.OperandB, t)
    acc = wg.wait_mma(wg.mma_async(PLAN64, x, x, tylo.zero_accumulator(PLAN64)))
    tylo.store(tylo.GlobalTile(out, Layout((64, 64), (64, 1))), wg.finish_mma(acc))
