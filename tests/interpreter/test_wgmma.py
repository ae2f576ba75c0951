"""WGMMA in the interpreter: A from registers, and a wrong descriptor gives a wrong result (as on the GPU)."""
import ml_dtypes
import numpy as np
from hopper_support import gemm_args, gemm_ir, gemm_operands, relative_error

import tylo
import tylo.lang.mbarrier as mb
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo.interpreter import run
from tylo.lang.mma import zero_accumulator
from tylo.layouts import Layout

PLAN = wg.WGMMA64(tylo.bf16, n=64, k=64)
B_TILE = tma.TMATile(tylo.bf16, (64, 64))         # B^T (n, k), K-major


@tylo.jit(interpret=True)
def register_a(c, a, b_map):
    sb = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    bar = tylo.shared_array(tylo.u64, (1,), align=8)
    tid = tylo.thread_idx.x
    if tid == 0:
        mb.mbarrier_init(bar.ptr, 1)
        mb.fence_mbarrier_init()
    tylo.sync_threads()
    if tid == 0:
        mb.mbarrier_arrive_expect_tx(bar.ptr, tma.transfer_bytes(B_TILE))
        tma.tma_load(tma.shared_tile(b_map, sb.ptr), b_map, (0, 0), bar.ptr)
    mb.mbarrier_wait(bar.ptr, 0)
    af = tylo.load(tylo.GlobalTile(a, Layout((64, 64), (64, 1))), wg.a_register_ownership(PLAN))
    b = wg.wgmma_operand(PLAN, wg.OperandB, tma.shared_tile(b_map, sb.ptr), (0, 0))
    acc = wg.wait_mma(wg.mma_async(PLAN, af, b, zero_accumulator(PLAN)))
    tylo.store(tylo.GlobalTile(c, Layout((64, 64), (64, 1))), wg.finish_mma(acc))


def test_wgmma_with_a_in_registers_matches_float64():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    bt = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    c = np.full((64, 64), np.nan, np.float32)
    register_a[1, 128](c, a, tylo.prepare_tma(B_TILE, bt))
    ref = a.astype(np.float64) @ bt.astype(np.float64).T
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-6


def test_a_wrong_descriptor_reads_the_wrong_bytes():
    # the GEMM's descriptors carry SBO = 1024 bytes (8 rows of 128 bytes); halve it in the constant every
    # descriptor is built from: the WGMMA reads other rows and the product is wrong, with no error
    import copy

    from tylo.ir.nv.bitfields import unpack_fields
    from tylo.ir.nv.wgmma import WGMMA_DESCRIPTOR_FIELDS

    kernel = copy.deepcopy(gemm_ir())
    consts = [op for op in kernel.body.walk() if op.name == "arith.constant" and isinstance(op.attrs["value"], int)
              and op.attrs["value"] > (1 << 32) and unpack_fields(WGMMA_DESCRIPTOR_FIELDS, op.attrs["value"])
              ["stride_byte_offset"] == 1024 >> 4]
    assert consts, "no descriptor constant found"
    for op in consts:
        op.attrs["value"] -= (512 >> 4) << 32
    a, b, c = gemm_operands(128, 256, 64)
    run(kernel, gemm_args(a, b, c), grid=(1,), block=(384,), hazards=False)
    assert relative_error(a, b, c) > 0.5
