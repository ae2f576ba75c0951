"""``fence_acq_rel`` / ``fence_sc``: the PTX each emits, the release/acquire pattern of a last-block
reduction (write a partial, fence, count arrivals with an atomic; the last block fences and reads every
partial) in PTX and in the interpreter, and the errors for a bad scope or target."""
import re

import numpy as np
import pytest

import tylo


@tylo.jit
def last_block_sum(partials, counter, out, x, n, BLOCK: tylo.constexpr):
    """Block b writes the sum of its slice of ``x`` to ``partials[b]``; the block that arrives last adds
    the partials in block order into ``out`` and resets the counter (no spin-wait)."""
    flag = tylo.shared_array(tylo.i32, (1,))
    t = tylo.thread_idx.x
    b = tylo.block_idx.x
    if t == 0:
        s = 0.0
        for i in range(b * BLOCK, tylo.minimum(b * BLOCK + BLOCK, n)):
            s = s + x[i]
        partials[b] = s
        tylo.fence_acq_rel("gpu")                           # release: the partial before the arrival
        last = tylo.atomic_add(counter, 1) == tylo.grid_dim.x - 1
        flag[0] = tylo.where(last, 1, 0)
        if last:
            tylo.fence_acq_rel("gpu")                       # acquire: the other blocks' partials
            total = 0.0
            for j in range(tylo.grid_dim.x):
                total = total + partials[j]
            out[0] = total
            tylo.atomic_exch(counter, 0)
    tylo.sync_threads()


SIGNATURE = "*f32, *i32, *f32, *f32, i32"


def test_fences_lower_to_one_ptx_instruction_each_around_relaxed_atomics():
    ck = last_block_sum.compile(signature=SIGNATURE, arch="sm_90a", constexprs={"BLOCK": 32})
    assert len(re.findall(r"^\s*fence\.acq_rel\.gpu;", ck.ptx, re.M)) == 2
    # the arrival is a relaxed gpu-scope atomic (no .sem: relaxed, no .scope: gpu), so the fences
    # carry the release and acquire
    arrival = re.search(r"atom\.global(\.\w+)*\.add\.(u32|s32)", ck.ptx)
    assert arrival and not re.search(r"\.(acquire|release|acq_rel)", arrival.group(0))
    body = ck.ptx[ck.ptx.index(".entry"):]
    fence1, atom = body.index("fence.acq_rel.gpu"), body.index(arrival.group(0))
    assert fence1 < atom < body.index("fence.acq_rel.gpu", fence1 + 1)
    assert ".local" not in ck.ptx


@tylo.jit
def fences(out, SCOPE: tylo.constexpr):
    tylo.fence_acq_rel(SCOPE)
    tylo.fence_sc(SCOPE)
    out[0] = 1


@pytest.mark.parametrize("scope", ["cta", "cluster", "gpu", "sys"], ids=lambda s: f"{s}-scope")   # not "gpu": a marker
def test_each_scope_is_spelled_in_ptx(scope):
    ck = fences.compile(signature="*i32", arch="sm_90a", constexprs={"SCOPE": scope})
    assert f"fence.acq_rel.{scope};" in ck.ptx and f"fence.sc.{scope};" in ck.ptx


def test_a_bad_scope_or_target_is_a_compile_error():
    with pytest.raises(tylo.CompileError, match="scope must be one of 'cta', 'cluster', 'gpu', 'sys'"):
        fences.compile(signature="*i32", arch="sm_90a", constexprs={"SCOPE": "device"})
    with pytest.raises(tylo.CompileError, match="needs sm_90"):
        fences.compile(signature="*i32", arch="sm_80", constexprs={"SCOPE": "cluster"})
    assert "fence.acq_rel.gpu;" in fences.compile(signature="*i32", arch="sm_80", constexprs={"SCOPE": "gpu"}).ptx


@pytest.mark.parametrize("n", [1, 100, 200])
def test_last_block_reduction_in_the_interpreter(n):
    kernel = tylo.jit(last_block_sum.fn, interpret=True)
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    blocks = -(-n // 32)
    partials = np.full(blocks, np.nan, np.float32)
    counter = np.zeros(1, np.int32)
    out = np.full(1, np.nan, np.float32)
    for _ in range(2):        # the counter is back at 0 after each launch: a second launch works alike
        kernel[(blocks,), (32,)](partials, counter, out, x, n, 32)
        want = np.float32(0)
        for b in range(blocks):
            want = np.float32(want + partials[b])
        assert counter[0] == 0 and out[0] == want
        assert abs(float(out[0]) - float(x.astype(np.float64).sum())) < 1e-4 * max(1.0, np.abs(x).sum())
