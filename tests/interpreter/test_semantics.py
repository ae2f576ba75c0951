"""The frontend's semantics, checked on the CPU with the reference interpreter (tylo.interpreter):
control flow with break/continue/return, C integer semantics, promotion, collectives through shared
memory and shuffles, fragment reductions. Fresh random data, poisoned outputs, float64 references."""
import fragment_kernels as fk
import numpy as np
import pytest
import simt_kernels as sk
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.interpreter import InterpreterError, run

rng = np.random.default_rng()


def test_loops_break_continue_and_while():
    n, m = 10, 13
    x = rng.uniform(-1.0, 3.0, (n, m)).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    run(sk.loops.lower(signature="*f32, *f32, i32, i32"), [out, x, n, m], grid=(1,), block=(16,))
    k = 1
    while k < m:
        k *= 2
    for i in range(n):
        acc, count = np.float32(0), 0
        for v in x[i]:
            if v < 0:
                continue
            if v > 2.5:
                break
            acc = np.float32(acc + v)
            count += 1
        assert out[i] == np.float32(np.float32(acc + np.float32(count * 1000.0)) + np.float32(k * 1.0e6))


def test_branches_and_early_return_leave_other_elements_untouched():
    n = 50
    x = rng.uniform(-3, 3, n).astype(np.float32)
    out = np.full(n + 14, np.nan, np.float32)
    run(sk.branches.lower(signature="*f32, *f32, i32"), [out, x, n], grid=(1,), block=(64,))
    xd = x.astype(np.float64)
    np.testing.assert_allclose(out[:n], np.where(xd < -1, -xd, np.where(xd < 1, xd * xd, xd + 3)), rtol=1e-6)
    assert np.isnan(out[n:]).all()


@tylo.jit
def int_ops(q, r, sl, sr, a, b, s):
    i = tylo.thread_idx.x
    x = a[i]
    y = b[i]
    q[i] = x // y
    r[i] = x % y
    sl[i] = x << s[i]
    sr[i] = x >> s[i]


def c_div(a, b):
    qq = abs(a) // abs(b)
    return qq if (a < 0) == (b < 0) else -qq


@settings(max_examples=25)
@given(st.sampled_from(["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]), st.integers(0, 2**32 - 1))
def test_integer_division_modulo_and_shifts_follow_c(dt, seed):
    t = tylo.ir.types.scalar_type(dt)
    npdt = np.dtype(dt.replace("i", "int").replace("uint", "uint") if dt.startswith("i") else "uint" + dt[1:])
    r = np.random.default_rng(seed)
    info = np.iinfo(npdt)
    a = r.integers(info.min, info.max, 32, dtype=npdt, endpoint=True)
    b = r.integers(info.min, info.max, 32, dtype=npdt, endpoint=True)
    b[b == 0] = 7
    if t.is_signed:  # INT_MIN / -1 overflows in C too
        b[(a == info.min) & (b == -1)] = 3
    s = r.integers(0, t.bits, 32, dtype=np.int32)
    outs = [np.full(32, 99, npdt) for _ in range(4)]
    kernel = int_ops.lower(signature=f"*{dt}, *{dt}, *{dt}, *{dt}, *{dt}, *{dt}, *i32")
    run(kernel, [*outs, a, b, s], grid=(1,), block=(32,))
    mask = (1 << t.bits) - 1
    for i in range(32):
        ai, bi, si = int(a[i]), int(b[i]), int(s[i])
        assert int(outs[0][i]) == c_div(ai, bi)
        assert int(outs[1][i]) == ai - c_div(ai, bi) * bi
        wrapped = (ai << si) & mask
        if t.is_signed and wrapped >> (t.bits - 1):
            wrapped -= 1 << t.bits
        assert int(outs[2][i]) == wrapped
        assert int(outs[3][i]) == (ai >> si if t.is_signed else (ai & mask) >> si)


@tylo.jit
def folded_vs_runtime(out, a, b):
    out[0] = 17 // -5
    out[1] = a // b
    out[2] = -17 % 5
    out[3] = (0 - a) % (0 - b)


def test_compile_time_arithmetic_is_python_and_runtime_arithmetic_is_c():
    out = np.zeros(4, np.int32)
    run(folded_vs_runtime.lower(signature="*i32, i32, i32"), [out, 17, -5], grid=(1,), block=(1,))
    assert out[0] == 17 // -5 == -4        # both operands compile-time: Python's floor division
    assert out[1] == -3                    # runtime: C truncation toward zero
    assert out[2] == -17 % 5 == 3          # compile-time: Python's modulo
    assert out[3] == -2                    # runtime: C, the remainder has the dividend's sign


@tylo.jit
def folded_constants(out, a):
    b = a * 0 + 7            # a runtime value the passes fold to the constant 7
    out[0] = (0 - b) // 2    # folded by the IR passes: must still be C semantics
    out[1] = (0 - b) % 2


def test_ir_constant_folding_keeps_c_semantics():
    out = np.zeros(2, np.int32)
    ir = folded_constants.lower(signature="*i32, i32")
    run(ir, [out, 123], grid=(1,), block=(1,))
    assert list(out) == [-3, -1]


def test_block_reduction_with_barriers_shuffles_and_atomics():
    import block_reduction as br
    n = 300
    x = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(1, np.float32)
    run(br.block_sum.lower(signature="*f32, *f32, i32", constexprs={"BLOCK": 64}), [out, x, n], grid=(5,),
        block=(64,))
    assert abs(out[0] - x.astype(np.float64).sum()) < 1e-4 * np.abs(x).sum()


@pytest.mark.parametrize("own,axis", [(fk.LOCAL, 1), (fk.STRIPED, 1), (fk.LOCAL, 0), (fk.COLUMNS, 0)])
def test_fragment_reductions_and_broadcast(own, axis):
    R, C = own.shape
    blocks = 2
    x = rng.standard_normal((R * 4096, C)).astype(np.float32)
    x0 = x.copy()
    rs = (R * 4096, 1) if axis == 1 else (4096, C)
    outs = [np.full(rs, np.nan, np.float32) for _ in range(3)]
    run(fk.reduce_rows.lower(signature="*f32, *f32, *f32, *f32", constexprs={"OWN": own, "AXIS": axis}),
        [*outs, x], grid=(blocks,), block=(own.threads,))
    tiles = x0[:R * blocks].astype(np.float64).reshape(blocks, R, C)
    ref_sum = tiles.sum(axis=1 + axis, keepdims=True)
    ref_max = tiles.max(axis=1 + axis, keepdims=True)
    got_sum = outs[0][:ref_sum.size].reshape(ref_sum.shape) if axis == 1 else outs[0][:blocks].reshape(ref_sum.shape)
    got_max = outs[1][:ref_max.size].reshape(ref_max.shape) if axis == 1 else outs[1][:blocks].reshape(ref_max.shape)
    np.testing.assert_allclose(got_sum, ref_sum, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got_max, ref_max)
    np.testing.assert_array_equal(x[:R * blocks].reshape(tiles.shape), (tiles - ref_max).astype(np.float32))


def test_softmax_kernels():
    import softmax
    rows = 64
    x = rng.standard_normal((rows, softmax.COLS)).astype(np.float32) * 3
    out = np.full_like(x, np.nan)
    run(softmax.softmax_lane_local.lower(signature="*f32, *f32, i32"), [out, x, rows], grid=(2,), block=(32,))
    np.testing.assert_allclose(out, softmax.reference(x), rtol=1e-5, atol=1e-6)
    x = rng.standard_normal((16, 64)).astype(np.float32) * 3
    x[3] = -np.inf
    out = np.full_like(x, np.nan)
    run(softmax.softmax_mma_accumulator.lower(signature="*f32, *f32, i32"), [out, x, 16], grid=(1,), block=(32,))
    ref = softmax.reference(np.where(np.isinf(x), 0, x))
    ref[3] = 0
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


@tylo.jit
def divergent_barrier(out):
    v = 1.0
    if tylo.thread_idx.x < 16:
        tylo.sync_threads()
    else:
        v = tylo.shfl_xor(v, 1)
    out[tylo.thread_idx.x] = v


def test_collectives_under_divergent_control_flow_are_reported():
    with pytest.raises(InterpreterError, match="deadlock"):
        run(divergent_barrier.lower(signature="*f32"), [np.zeros(32, np.float32)], block=(32,))
