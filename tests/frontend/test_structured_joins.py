"""Structured values at joins: typed static parts, and errors that name both sides in words."""
import inspect
import re

import join_kernels as jk
import pytest

import tylo
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo import Layout, Ownership
from tylo.ir import types as T
from tylo.lang.core import SharedArrayStatic
from tylo.lang.fragment import FragmentStatic
from tylo.lang.protocols import StaticPart
from tylo.lang.tcgen05.api import Tcgen05OperandStatic
from tylo.lang.tcgen05.plan import Tcgen05MMA
from tylo.lang.tiles import TileStatic
from tylo.lang.tma import TMAMapStatic
from tylo.lang.wgmma.api import PartialAccumulatorStatic, PendingAccumulatorStatic

SOURCE = inspect.getsourcefile(jk)
LINES = open(SOURCE).read().splitlines()


def line_of(tag):
    for i, line in enumerate(LINES, 1):
        if re.search(rf"# error: {tag}\b", line):
            return i
    raise AssertionError(tag)


def compile_error(kernel, signature) -> tylo.CompileError:
    with pytest.raises(tylo.CompileError) as info:
        kernel.compile(signature=signature, arch="sm_90a")
    return info.value


def test_branch_join_names_both_tile_layouts():
    err = compile_error(jk.tile_layout_differs, "*f32, i32")
    assert err.lineno == line_of("tile_layout_differs")
    assert "variable 't'" in err.reason
    assert "layout (4,8):(8,1)" in err.reason and "layout (4,8):(1,4)" in err.reason, err.reason
    assert "object at 0x" not in str(err)


def test_branch_join_of_runtime_stride_tiles_prints_layouts_not_the_context():
    # a tile built from runtime strides used to carry the emission Context in its static part
    err = compile_error(jk.runtime_stride_tile_differs, "*f32, i32, i32")
    assert err.lineno == line_of("runtime_stride_tile_differs")
    assert "(4,8):(?,1)" in err.reason and "(4,8):(1,?)" in err.reason, err.reason
    assert "Context" not in err.reason and "object at 0x" not in err.reason


def test_branch_join_names_both_fragment_ownerships():
    err = compile_error(jk.fragment_ownership_differs, "*f32, i32")
    assert err.lineno == line_of("fragment_ownership_differs")
    assert "variable 'a'" in err.reason
    assert "an f32 fragment with ownership local(32x8, axis=0)" in err.reason, err.reason
    assert "an f32 fragment with ownership local(32x8, axis=1)" in err.reason, err.reason


def test_loop_back_edge_names_both_layouts():
    err = compile_error(jk.tile_layout_changes_in_loop, "*f32, i32")
    assert err.lineno == line_of("tile_layout_changes_in_loop")
    assert "(4,8):(1,4)" in err.reason and "(8,4):(4,1)" in err.reason, err.reason
    assert "before the loop" in err.reason


def test_static_parts_compare_and_hash_by_value_and_describe_themselves():
    own = Ownership.local((32, 8), axis=1)
    a = FragmentStatic(T.f32, own)
    b = FragmentStatic(T.f32, Ownership.local((32, 8), axis=1))
    assert a == b and hash(a) == hash(b)
    assert a != FragmentStatic(T.bf16, own)
    assert FragmentStatic(T.bf16, own).describe().startswith("a bf16 fragment")
    assert FragmentStatic(T.bf16, own, packed=True).describe().startswith("a packed bf16 fragment")
    t1 = TileStatic(Layout((4, 8), (1, 4)), (4, 8), (0, None), 16)
    t2 = TileStatic(Layout((4, 8), (1, 4)), (4, 8), (0, None), 16)
    assert t1 == t2 and hash(t1) == hash(t2) and len({t1, t2}) == 1
    assert t1 != TileStatic(Layout((4, 8), (8, 1)), (4, 8), (0, None), 16)
    assert t1.describe() == "a tile with layout (4,8):(1,4), shape (4,8), origin (0,?) and 16-byte alignment"
    s = SharedArrayStatic((4, 8), T.f16)
    assert s == SharedArrayStatic((4, 8), T.f16) and s.describe() == "a shared f16 array of shape (4, 8)"
    for part in (a, t1, s):
        assert isinstance(part, StaticPart)


def test_branch_join_names_both_pending_accumulators():
    err = compile_error(jk.pending_accumulator_differs, "*f32, i32")
    assert err.lineno == line_of("pending_accumulator_differs")
    assert "variable 'p'" in err.reason
    assert "a pending WGMMA accumulator of WGMMA64(bf16, n=64, k=64, partitions=1) in 1 part" in err.reason, err.reason
    assert "a pending WGMMA accumulator of WGMMA64(bf16, n=128, k=64, partitions=1) in 1 part" in err.reason
    assert "PendingAccumulator with static part" not in err.reason and "(WGMMA64" not in err.reason


def test_branch_join_names_both_wgmma_operands():
    err = compile_error(jk.wgmma_operand_differs, "*f32, i32")
    assert err.lineno == line_of("wgmma_operand_differs")
    assert "variable 'x'" in err.reason
    assert "a WGMMA operand OperandA of WGMMA64(bf16, n=64, k=64, partitions=1) in shared memory" in err.reason, \
        err.reason
    assert "a WGMMA operand OperandB of WGMMA64(bf16, n=64, k=64, partitions=1) in shared memory" in err.reason
    assert "K-major 128B" in err.reason and "static part" not in err.reason


def test_feature_static_parts_compare_by_value_and_describe_themselves():
    plan = wg.WGMMA64(tylo.bf16, n=256, k=64)
    pending = PendingAccumulatorStatic(plan, 2)
    assert pending == PendingAccumulatorStatic(wg.WGMMA64(tylo.bf16, n=256, k=64), 2)
    assert hash(pending) == hash(PendingAccumulatorStatic(wg.WGMMA64(tylo.bf16, n=256, k=64), 2))
    assert pending.describe() == "a pending WGMMA accumulator of WGMMA64(bf16, n=256, k=64, partitions=1) in 2 parts"
    # a partial (unsummed) accumulator never joins with a pending one, and says which it is
    partial = PartialAccumulatorStatic(plan, 2)
    assert partial != pending and partial.describe().startswith("a partial (unsummed) WGMMA accumulator")
    tile = tma.TMATile(tylo.bf16, (64, 64))
    m = TMAMapStatic(tile, 2)
    assert m == TMAMapStatic(tma.TMATile(tylo.bf16, (64, 64)), 2) and m != TMAMapStatic(tile, 3)
    assert m.describe().startswith("a rank-2 TMA binding of TMATile(")
    umma = Tcgen05MMA((128, 64), tylo.bf16, tylo.bf16, tylo.f32)
    op = Tcgen05OperandStatic(umma, "A", True)
    assert op == Tcgen05OperandStatic(Tcgen05MMA((128, 64), tylo.bf16, tylo.bf16, tylo.f32), "A", True)
    assert op != Tcgen05OperandStatic(umma, "B", True)
    assert op.describe().startswith("a tcgen05 operand A of Tcgen05MMA(") and op.describe().endswith("in tensor memory")
    for part in (pending, partial, m, op):
        assert isinstance(part, StaticPart)
