"""WGMMA plans, the matrix descriptor bit fields and the instruction text (host only)."""
import pytest

from tylo.ir import types as T
from tylo.ir.types import bf16
from tylo.lang.tma import TMATile, shared_layout
from tylo.lang.wgmma import (
    DESCRIPTOR_FIELDS,
    WGMMA64,
    OperandA,
    OperandB,
    accumulator_ownership,
    decode_fields,
    encode_fields,
    smem_descriptor,
    validate_wgmma,
    wgmma_instruction,
)
from tylo.layouts import Layout, Ownership, SwizzledStructure, permutedims, swizzled_structure


def test_seed_plan():
    p = WGMMA64(bf16, n=8, k=64, partitions=4)
    assert (p.m, p.n, p.k, p.instr_k, p.instructions, p.partitions) == (64, 8, 64, 16, 4, 4)
    assert validate_wgmma(p) is p
    assert accumulator_ownership(p) == Ownership.wgmma_accumulator(8)


@pytest.mark.parametrize("args, rule", [
    ((T.f32, 64, 16, 1), "bf16, f16, f8e4m3 or f8e5m2"),
    ((bf16, 12, 16, 1), "8..256 in steps of 8"),
    ((bf16, 264, 16, 1), "8..256 in steps of 8"),
    ((bf16, 64, 40, 1), "K must be a multiple of 16 in 16..256"),
    ((bf16, 64, 272, 1), "K must be a multiple of 16 in 16..256"),
    ((T.f8e4m3, 64, 16, 1), "K must be a multiple of 32 in 32..256"),
    ((bf16, 64, 32, 4), "must divide the 2"),
    ((bf16, 256, 32, 2), "exceed the 128-register budget"),
    ((bf16, 136, 64, 2), "exceed the 128-register budget"),
])
def test_plan_rules(args, rule):
    dt, n, k, p = args
    with pytest.raises(ValueError, match=rule):
        WGMMA64(dt, n=n, k=k, partitions=p)


def test_every_legal_plan_fits_the_register_budget():
    for dt, ks in ((bf16, (16, 32, 64, 176, 256)), (T.f16, (16, 32, 64, 80)), (T.f8e5m2, (32, 64, 256))):
        for n in range(8, 257, 8):
            for k in ks:
                for p in (1, 2, 4):
                    try:
                        plan = WGMMA64(dt, n=n, k=k, partitions=p)
                    except ValueError:
                        continue
                    assert plan.partitions * plan.n // 2 <= 128 and plan.instructions % plan.partitions == 0


def test_descriptor_table_matches_the_ptx_isa():
    # PTX ISA "Matrix Descriptor Format": 13-0 start, 29-16 LBO, 45-32 SBO, 51-49 base offset, 63-62 swizzle
    assert DESCRIPTOR_FIELDS == (("start_address", 0, 14), ("leading_byte_offset", 16, 14),
                                 ("stride_byte_offset", 32, 14), ("base_offset", 49, 3), ("swizzle", 62, 2))
    spans = [set(range(lo, lo + w)) for _, lo, w in DESCRIPTOR_FIELDS]
    assert all(not (a & b) for i, a in enumerate(spans) for b in spans[i + 1:])
    d = encode_fields(start_address=0x3FFF, leading_byte_offset=5, stride_byte_offset=0x2AAA, base_offset=7, swizzle=3)
    assert decode_fields(d) == dict(start_address=0x3FFF, leading_byte_offset=5, stride_byte_offset=0x2AAA,
                                    base_offset=7, swizzle=3)
    with pytest.raises(ValueError, match="does not fit in 2 bits"):
        encode_fields(swizzle=4)


def test_smem_descriptor_hand_computed():
    # bf16 64x64 K-major 128B tile at shared address 1024: start 64, LBO unused (1), SBO 1024>>4 = 64, mode 1
    s = swizzled_structure(shared_layout(TMATile(bf16, (64, 64), axis=1)), 2)
    assert s == SwizzledStructure("K", 128, None, 1024, 64)
    assert smem_descriptor(s, 1024) == 0x4000004000010040
    # 64B: mode 2; SBO 512 -> 32; start 0x200 -> 32
    assert smem_descriptor(SwizzledStructure("K", 64, None, 512, 32), 0x200) == 0x8000002000010020
    # 32B: mode 3
    assert smem_descriptor(SwizzledStructure("K", 32, None, 256, 16), 0) == 0xC000001000010000
    # interleaved: LBO 128 -> 8, SBO 256 -> 16, start 256 -> 16, mode 0
    assert smem_descriptor(SwizzledStructure("K", 0, 128, 256, 8), 256) == 0x0000001000080010
    # MN-major 128B with LBO 8192 (-> 512) and SBO 1024 (-> 64), base offset 3
    d = smem_descriptor(SwizzledStructure("MN", 128, 8192, 1024, 64), 0x4000, base_offset=3)
    assert decode_fields(d) == dict(start_address=0x400, leading_byte_offset=512, stride_byte_offset=64,
                                    base_offset=3, swizzle=1)


@pytest.mark.parametrize("address, rule", [(1032, "multiple of 16"), (1 << 18, "2\\^18")])
def test_smem_descriptor_rules(address, rule):
    with pytest.raises(ValueError, match=rule):
        smem_descriptor(SwizzledStructure("K", 128, None, 1024, 64), address)


def test_instruction_text():
    from tylo.codegen.ptx.wgmma import wgmma_opcode

    def opcode(ins):
        return wgmma_opcode({"shape": ins.shape, "dtype": ins.dtype})

    i = wgmma_instruction(WGMMA64(bf16, n=128, k=64))
    assert opcode(i) == "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"
    assert (i.accumulators, i.descriptors, i.immediates) == (64, 2, (1, 1, 0, 0))
    t = wgmma_instruction(WGMMA64(T.f16, n=8, k=16), a_major="MN", b_major="MN")
    assert opcode(t) == "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16" and t.immediates == (1, 1, 1, 1)
    f = wgmma_instruction(WGMMA64(T.f8e4m3, n=256, k=64))
    assert opcode(f) == "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" and f.immediates == (1, 1)
    with pytest.raises(ValueError, match="fp8 operands must both be K-major"):
        wgmma_instruction(WGMMA64(T.f8e5m2, n=64, k=32), b_major="MN")


def test_validate_operand_layouts():
    p = WGMMA64(bf16, n=128, k=64)
    a = shared_layout(TMATile(bf16, (64, 64), axis=1))
    b = permutedims(shared_layout(TMATile(bf16, (64, 128), axis=0)))   # B(K, N), K inner -> (n, k)
    assert validate_wgmma(p, a, b) is p
    with pytest.raises(ValueError, match="needs a logical \\(mn, k\\) tile of \\(128, 64\\)"):
        validate_wgmma(p, a, a)
    with pytest.raises(ValueError, match="not a canonical shared-memory encoding"):
        validate_wgmma(p, Layout((64, 64), (64, 1)))
    with pytest.raises(ValueError, match="fp8 operands must be K-major"):
        # (n, k) = (128, 64) with N contiguous: the MN-major encoding
        validate_wgmma(WGMMA64(T.f8e4m3, n=128, k=64), None, shared_layout(TMATile(T.f8e4m3, (128, 64), axis=0)))
    assert OperandA() == OperandA() and OperandA() != OperandB()
