"""Fragments on the CPU: the PTX follows the ownership plans (shuffle counts, vector widths, no local memory)."""
import re

import fragment_kernels as fk
import pytest

import tylo
from tylo import Layout, Ownership, reduction_plan


def ptx_of(kernel, signature, **cx):
    ck = kernel.compile(signature=signature, arch="sm_90a", constexprs=cx)
    assert ".local" not in ck.ptx and ck.resources.spill_bytes == 0
    return ck.ptx


@pytest.mark.parametrize("own,axis", [(fk.LOCAL, 1), (fk.COLUMNS, 0), (fk.STRIPED, 1), (fk.LOCAL, 0)])
def test_shuffle_count_equals_the_plan(own, axis):
    ptx = ptx_of(fk.reduce_rows, "*f32:16, *f32:16, *f32:16, *f32:16", OWN=own, AXIS=axis)
    plan = reduction_plan(own, axis)
    # three reductions (sum, max, min), each shuffles every group once per mask
    assert len(re.findall(r"shfl\.sync\.bfly", ptx)) == 3 * len(plan.shuffle_masks) * len(plan.groups)


def test_lane_local_rows_use_16_byte_vectors():
    ptx = ptx_of(fk.reduce_rows, "*f32:16, *f32:16, *f32:16, *f32:16", OWN=fk.LOCAL, AXIS=1)
    assert len(re.findall(r"ld\.global\.v4\.(f32|b32)", ptx)) == 2  # 8 floats per thread
    assert len(re.findall(r"st\.global\.v4\.(f32|b32)", ptx)) == 2


def test_pack_uses_cvt_x2_and_packed_stores_are_vectors():
    ptx = ptx_of(fk.pack_roundtrip, "*bf16:16, *f32:16, *f32:16", DT=tylo.bf16)
    assert len(re.findall(r"cvt\.rn\.bf16x2\.f32", ptx)) == 4
    assert re.search(r"st\.global\.v4\.(b32|u32)", ptx)
    ptx = ptx_of(fk.pack_roundtrip, "*f16:16, *f32:16, *f32:16", DT=tylo.f16)
    assert len(re.findall(r"cvt\.rn\.f16x2\.f32", ptx)) == 4


def test_loop_carried_fragment_stays_in_registers():
    ck = fk.accumulate.compile(signature="*f32:16, *f32:16, i32", arch="sm_90a")
    assert ".local" not in ck.ptx and ck.resources.spill_bytes == 0 and ck.resources.stack_bytes == 0
    assert "scf.for" in ck.ir


CROSS_WARP = Ownership((2, 64), Layout((64, 2), (2, 1)), "two-warp rows")


@tylo.jit
def reduce_across_warps(out, x):
    f = tylo.load(tylo.GlobalTile(x, Layout((2, 64), (64, 1))), CROSS_WARP)
    tylo.store(tylo.GlobalTile(out, Layout((2, 1), (1, 1))), f.sum(axis=1))


@tylo.jit
def bad_broadcast(out, x):
    t = tylo.GlobalTile(x, Layout((32, 8), (8, 1)))
    f = tylo.load(t, fk.LOCAL)
    g = tylo.load(tylo.GlobalTile(x, Layout((8, 32), (32, 1))), fk.COLUMNS)
    tylo.store(t, f + g)


@tylo.jit
def wrong_shape_load(out, x):
    f = tylo.load(tylo.GlobalTile(x, Layout((16, 8), (8, 1))), fk.LOCAL)


@pytest.mark.parametrize("kernel,message", [
    (reduce_across_warps, "two-warp rows"),
    (bad_broadcast, "does not broadcast"),
    (wrong_shape_load, "differs from the tile's shape"),
])
def test_fragment_compile_errors(kernel, message):
    with pytest.raises(tylo.CompileError) as info:
        kernel.compile(signature="*f32, *f32", arch="sm_90a")
    assert message in info.value.reason
    assert info.value.lineno > 0 and info.value.filename.endswith("test_fragments_ptx.py")


def test_reduction_across_warps_names_the_rule():
    with pytest.raises(tylo.CompileError, match="warp"):
        reduce_across_warps.compile(signature="*f32, *f32", arch="sm_90a")


from tylo.lang.mma import MMAAtom, TiledMMA  # noqa: E402

ACC_PLAN = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16, tylo.bf16, tylo.f32), warps=(2, 2), repeats=(2, 4))


@tylo.jit
def stage_through_shared(out, x):
    """An MMA accumulator tile staged through shared memory (stmatrix on sm_90, vector stores before)."""
    s = tylo.shared_array(tylo.bf16, (64 * 64,), align=128)
    f = tylo.load(tylo.GlobalTile(x, Layout((64, 64), (64, 1))), ACC_PLAN.c_ownership)
    tylo.store(tylo.SharedTile(s.ptr, Layout((64, 64), (64, 1))), f.astype(tylo.bf16))
    tylo.sync_threads()
    g = tylo.load(tylo.SharedTile(s.ptr, Layout((64, 64), (64, 1))), ACC_PLAN.c_ownership)
    tylo.store(tylo.GlobalTile(out, Layout((64, 64), (64, 1))), g)


def test_accumulator_stores_to_shared_use_stmatrix_on_sm90():
    ck = stage_through_shared.compile(signature="*bf16:16, *f32:16", arch="sm_90a")
    assert re.findall(r"stmatrix\.sync\.aligned\.m8n8\.x\d\.shared\.b16", ck.ptx)
    assert ".local" not in ck.ptx and ck.resources.spill_bytes == 0
    ck80 = stage_through_shared.compile(signature="*bf16:16, *f32:16", arch="sm_80")
    assert "stmatrix" not in ck80.ptx
