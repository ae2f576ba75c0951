"""The seed's TMEM kernel: load a transfer partition, reduce along the local axis, store back.

Assembled for sm_100a only (no Blackwell GPU here): the reduction must be thread-local (no
shuffles) in both orientations, and bf16 loads come back as packed fragments.
"""
import re

import tylo
from tylo.ir.types import bf16, f32
from tylo.lang import tcgen05 as tc
from tylo.lang.tmem import TmemTile, TmemTransfer, partition
from tylo.layouts import Layout, permutedims, window

TILE = TmemTile(f32, 0, Layout((128, 128), (1, 128)))
VIEW = window(TILE, (64, 32), (32, 64))
ACCESS = partition(TmemTransfer((32, 64), axis=1), VIEW)
SWAPPED = partition(permutedims(TmemTransfer((32, 64), axis=1)), permutedims(VIEW))
PACKED = partition(TmemTransfer((32, 128), axis=1),
                   window(TmemTile(bf16, 0, Layout((128, 256), (1, 128))), (64, 0), (32, 128)))


@tylo.jit
def subtract_row_max(base, ACC: tylo.constexpr, AXIS: tylo.constexpr):
    f = tc.wait_load(tc.load_async(ACC, base))
    g = f - f.max(axis=AXIS)
    tc.store_async(ACC, g, base)
    tc.wait_stores()


@tylo.jit
def packed_roundtrip(base):
    p = tc.wait_load(tc.load_async(PACKED, base))
    f = tylo.unpack(p).astype(tylo.f32) * 2.0
    tc.store_async(PACKED, tylo.pack(tylo.bf16, f), base)
    tc.wait_stores()


def test_reduction_along_the_local_axis_is_thread_local_in_both_orientations():
    assert ACCESS.address == (64 << 16) + 32 and SWAPPED.address == ACCESS.address
    for acc, axis in ((ACCESS, 1), (SWAPPED, 0)):
        ck = subtract_row_max.compile(signature="u32", arch="sm_100a", constexprs={"ACC": acc, "AXIS": axis})
        assert "tcgen05.ld.sync.aligned.32x32b.x64.b32" in ck.ptx
        assert "tcgen05.st.sync.aligned.32x32b.x64.b32" in ck.ptx
        assert "tcgen05.wait::ld.sync.aligned" in ck.ptx and "tcgen05.wait::st.sync.aligned" in ck.ptx
        assert "shfl" not in ck.ptx
        assert ".local" not in ck.ptx and ck.resources.spill_bytes == 0


def test_packed_bf16_load_unpack_and_pack_back():
    ck = packed_roundtrip.compile(signature="u32", arch="sm_100a")
    assert "tcgen05.ld.sync.aligned.32x32b.x64.b32" in ck.ptx
    assert len(re.findall(r"cvt\.rn\.bf16x2\.f32", ck.ptx)) == 64
    assert ck.resources.spill_bytes == 0
