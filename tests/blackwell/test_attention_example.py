"""examples/blackwell_attention_tile.py assembled for sm_100a (no Blackwell GPU runs it here)."""
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import blackwell_attention_tile as ex  # noqa: E402


@pytest.fixture(scope="module")
def compiled():
    kernel, sig, constexprs, block = ex.AOT[0]
    return kernel.compile(signature=sig, arch="sm_100a", constexprs=constexprs, block=block)


def test_instruction_mix(compiled):
    ptx = compiled.ptx
    qk = len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], %rd\d+, %rd\d+, %r\d+", ptx))
    pv = len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], \[%r\d+\], %rd\d+, %r\d+", ptx))
    assert (qk, pv) == (ex.D // 16, ex.N // 16) == (4, 8)
    assert ptx.count("tcgen05.mma") == 12
    assert ptx.count("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64") == 2
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x128.b32") == 1  # S: one row per thread
    assert ptx.count("tcgen05.st.sync.aligned.32x32b.x64.b32") == 1  # P: 128 bf16 = 64 words
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x64.b32") == 1  # O
    assert ptx.count("tcgen05.wait::ld.sync.aligned;") == 2 and ptx.count("tcgen05.wait::st.sync.aligned;") == 1
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes") == 3
    assert ptx.count("mbarrier.init.shared::cta.b64") == 3
    assert ptx.count("mbarrier.arrive.expect_tx.shared::cta.b64") == 1
    assert "fence.mbarrier_init.release.cluster" in ptx
    assert ptx.count("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32") == 1
    assert ptx.count("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;") == 1
    assert ptx.count("tcgen05.dealloc.cta_group::1.sync.aligned.b32") == 1
    assert ptx.count("tcgen05.fence::before_thread_sync;") == 3
    assert ptx.count("tcgen05.fence::after_thread_sync;") == 4
    assert len(re.findall(r"cvt\.rn\.bf16x2\.f32", ptx)) == 64
    assert "shfl" not in ptx  # the softmax row lives in one thread
    assert ptx.count("st.global.v4.b32") == 16 and "st.global.f32" not in ptx  # a 64-float row per thread
    assert ptx.count("ex2.approx.f32") == 128


def test_resources(compiled):
    ptx = compiled.ptx
    assert ".local" not in ptx and "call.uni" not in ptx and "call " not in ptx
    r = compiled.resources
    assert r.spill_bytes == 0 and r.stack_bytes == 0
    assert compiled.shared_bytes >= 3 * 128 * 64 * 2
    print(f"\nblackwell_attention_tile sm_100a: {r.registers} registers, {r.spill_bytes} spill bytes, "
          f"{compiled.shared_bytes} shared bytes")


def test_run_needs_sm100a():
    with pytest.raises(RuntimeError, match="sm_100a"):
        ex.run()


def test_tylo_mma_takes_the_seed_spelling_for_tcgen05():
    import tylo
    from tylo.lang import tcgen05 as tc
    from tylo.lang.tcgen05 import Tcgen05MMA

    plan = Tcgen05MMA((128, 64), tylo.bf16, tylo.bf16, tylo.f32)

    @tylo.jit
    def one_mma(base):
        a_s = tylo.shared_array(tylo.bf16, (128 * 64,), align=1024)
        b_s = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
        a_tile = tylo.SharedTile(a_s.ptr, tylo.lang.tma.shared_layout(tylo.lang.tma.TMATile(tylo.bf16, (128, 64))),
                                 align=1024)
        b_tile = tylo.SharedTile(b_s.ptr, tylo.lang.tma.shared_layout(tylo.lang.tma.TMATile(tylo.bf16, (64, 64))),
                                 align=1024)
        if tylo.thread_idx.x == 0:
            a = tc.tcgen05_operand(plan, tc.OperandA, a_tile, (0, 0))
            b = tc.tcgen05_operand(plan, tc.OperandB, b_tile, (0, 0))
            tylo.mma(plan, tc.accumulator(plan), a, b, accumulate=False, taddr=base)

    ck = one_mma.compile(signature="u32", arch="sm_100a")
    assert ck.ptx.count("tcgen05.mma.cta_group::1.kind::f16") == 1 and ck.resources.spill_bytes == 0
