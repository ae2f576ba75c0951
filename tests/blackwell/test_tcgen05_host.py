"""tcgen05 MMA plans, instruction and shared-memory descriptors (host only)."""
import pytest

from tylo.ir.types import bf16, f8e4m3, f8e5m2, f16, f32, i8, i32, u8
from tylo.lang.tcgen05 import IDESC_FIELDS, SMEM_DESC_FIELDS, Tcgen05MMA, decode_fields, smem_descriptor, tmem_columns
from tylo.layouts import Layout, Swizzle, compose, swizzled_structure


def _no_overlap(table, bits):
    used = 0
    for _, lo, w in table:
        mask = ((1 << w) - 1) << lo
        assert not used & mask and lo + w <= bits
        used |= mask


def test_tables_are_disjoint():
    _no_overlap(IDESC_FIELDS, 32)
    _no_overlap(SMEM_DESC_FIELDS, 64)
    # reserved bits of the instruction descriptor stay zero
    assert {lo for _, lo, _ in IDESC_FIELDS}.isdisjoint({6, 23, 29})


# hand-computed from the PTX ISA table (bit: value)
@pytest.mark.parametrize("plan, expect", [
    (Tcgen05MMA((128, 256), bf16, bf16, f32), (1 << 4) | (1 << 7) | (1 << 10) | (32 << 17) | (8 << 24)),
    (Tcgen05MMA((64, 8), f16, f16, f16), (1 << 17) | (4 << 24)),
    (Tcgen05MMA((128, 128, 8), f32, f32, f32), (1 << 4) | (2 << 7) | (2 << 10) | (16 << 17) | (8 << 24)),
    (Tcgen05MMA((128, 64), f8e4m3, f8e5m2, f32, b_major="MN"), (1 << 4) | (1 << 10) | (1 << 16) | (8 << 17) | (8 << 24)),
    (Tcgen05MMA((256, 256), i8, u8, i32, saturate=True), (1 << 3) | (2 << 4) | (1 << 7) | (32 << 17) | (16 << 24)),
    (Tcgen05MMA((128, 16), bf16, bf16, f32, a_major="MN", negate_a=True, negate_b=True),
     (1 << 4) | (1 << 7) | (1 << 10) | (1 << 13) | (1 << 14) | (1 << 15) | (2 << 17) | (8 << 24)),
])
def test_instruction_descriptor(plan, expect):
    assert plan.idesc == expect
    f = decode_fields(IDESC_FIELDS, plan.idesc)
    assert f["n_dim"] << 3 == plan.n and f["m_dim"] << 4 == plan.m


def test_hex_values():
    assert hex(Tcgen05MMA((128, 256), bf16, bf16, f32).idesc) == "0x8400490"
    assert hex(Tcgen05MMA((256, 256), i8, u8, i32, saturate=True).idesc) == "0x104000a8"


def test_kinds_and_k():
    assert Tcgen05MMA((128, 64), f16, f16, f32).kind == "f16"
    assert Tcgen05MMA((128, 64), f32, f32, f32).k == 8
    assert Tcgen05MMA((128, 64), f8e5m2, f8e5m2, f32).k == 32
    m = Tcgen05MMA((256, 128), bf16, bf16, f32)
    assert m.cta_group == 2 and m.instruction == "tcgen05.mma.cta_group::2.kind::f16"
    assert Tcgen05MMA((128, 64), bf16, bf16, f32, cta_group=2).cta_group == 2


@pytest.mark.parametrize("args, kwargs, message", [
    (((96, 64), bf16, bf16, f32), {}, "takes M in"),
    (((256, 64), bf16, bf16, f32), {"cta_group": 1}, "takes M in"),
    (((128, 12), bf16, bf16, f32), {}, "N = 12 is not allowed"),
    (((128, 264), bf16, bf16, f32), {}, "N = 264"),
    (((256, 24), bf16, bf16, f32), {}, "steps of 16"),
    (((128, 64, 32), bf16, bf16, f32), {}, "K = 16"),
    (((128, 64), bf16, f16, f32), {}, "one type"),
    (((128, 64), bf16, bf16, f16), {}, "bf16 accumulates in f32|f16 inputs"),
    (((128, 64), bf16, f8e4m3, f32), {}, "no tcgen05.mma kind"),
    (((128, 64), i8, i8, f32), {}, "accumulates in i32"),
    (((128, 64), i8, i8, i32), {"negate_a": True}, "cannot negate"),
    (((128, 64), bf16, bf16, f32), {"saturate": True}, "saturate"),
    (((128, 64), bf16, bf16, f32), {"a_major": "M"}, "a_major"),
    (((128, 24), i8, i8, i32), {}, "kind::i8"),
])
def test_mma_rejections(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        Tcgen05MMA(*args, **kwargs)


def test_smem_descriptor_k_major_128b():
    tile = compose(Swizzle(3, 3, 3), Layout((128, 64), (64, 1)))  # bf16, 128-byte rows
    s = swizzled_structure(tile, 2)
    d = smem_descriptor(s)
    assert d == (1 << 16) | (64 << 32) | (1 << 46) | (2 << 61)
    assert hex(d) == "0x4000404000010000"
    f = decode_fields(SMEM_DESC_FIELDS, smem_descriptor(s, start_address=0x2400))
    assert f["start_address"] == 0x240 and f["stride_byte_offset"] == 64 and f["version"] == 1
    assert f["swizzle"] == 2 and f["base_offset"] == 0 and f["lbo_mode"] == 0


@pytest.mark.parametrize("sw, code", [(128, 2), (64, 4), (32, 6)])
def test_smem_descriptor_swizzle_modes(sw, code):
    elems = sw // 2
    tile = compose(Swizzle((sw // 16).bit_length() - 1, 3, 3), Layout((64, elems), (elems, 1)))
    s = swizzled_structure(tile, 2)
    assert s.swizzle_bytes == sw
    f = decode_fields(SMEM_DESC_FIELDS, smem_descriptor(s))
    assert f["swizzle"] == code and f["stride_byte_offset"] == (8 * sw) >> 4


def test_smem_descriptor_interleaved_k_major():
    # ((8,m),(8,k)):((8,SBO),(1,LBO)) in bf16 elements: LBO 128 B, SBO 256 B
    tile = Layout(((8, 2), (8, 2)), ((8, 128), (1, 64)))
    s = swizzled_structure(tile, 2)
    f = decode_fields(SMEM_DESC_FIELDS, smem_descriptor(s))
    assert s.swizzle_bytes == 0 and f["swizzle"] == 0
    assert f["leading_byte_offset"] << 4 == s.leading_byte_offset
    assert f["stride_byte_offset"] << 4 == s.stride_byte_offset


def test_smem_descriptor_rules():
    with pytest.raises(ValueError, match="16-byte aligned"):
        smem_descriptor(swizzled_structure(compose(Swizzle(3, 3, 3), Layout((8, 64), (64, 1))), 2), 8)
    with pytest.raises(ValueError, match="canonical"):
        smem_descriptor(None)


@pytest.mark.parametrize("n", [32, 64, 128, 256, 512])
def test_tmem_columns_ok(n):
    assert tmem_columns(n) == n


@pytest.mark.parametrize("n", [0, 16, 48, 1024, 96])
def test_tmem_columns_rejected(n):
    with pytest.raises(ValueError, match="power of two in 32..512"):
        tmem_columns(n)
