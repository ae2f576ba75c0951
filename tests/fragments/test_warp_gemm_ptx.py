"""The warp-MMA GEMM example compiles for sm_80 and sm_90a with the planned instructions."""
import collections
import re

import pytest
import warp_gemm

SIG = "*bf16:16, *bf16:16, *bf16:16, i32, i32, i32, f32"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_warp_gemm_instructions(arch):
    ck = warp_gemm.warp_gemm.compile(signature=SIG, arch=arch, block=warp_gemm.THREADS)
    ptx = ck.ptx
    assert ".local" not in ptx and ck.resources.spill_bytes == 0
    ld = collections.Counter(re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x\d(?:\.trans)?\.shared\.b16", ptx))
    # per K step of 32: A is 4 x4 loads per 16-wide k-slice, B 4 x4.trans, two slices
    assert ld == {"ldmatrix.sync.aligned.m8n8.x4.shared.b16": 8, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16": 8}
    assert len(re.findall(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32", ptx)) == 64
    assert re.search(r"cp\.async\.cg\.shared\.global(\.L2::\w+)? \[", ptx) and "cp.async.wait_group 1" in ptx
