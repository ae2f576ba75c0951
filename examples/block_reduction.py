"""Sum reductions: warp shuffles, shared memory with sync_threads, atomics.

Each block reduces its slice with a warp-shuffle tree, combines warps through
shared memory, and one thread adds the block's sum to the output atomically.
"""
import numpy as np

import tylo


@tylo.func
def warp_sum(v):
    for k in tylo.static_range(5):
        v += tylo.shfl_xor(v, 16 >> k)
    return v


@tylo.jit
def block_sum(out, x, n, BLOCK: tylo.constexpr):
    partial = tylo.shared_array(tylo.f32, (BLOCK // 32,))
    i = tylo.block_idx.x * BLOCK + tylo.thread_idx.x
    v = 0.0
    if i < n:
        v = x[i]
    v = warp_sum(v)
    if tylo.lane_id() == 0:
        partial[tylo.warp_id()] = v
    tylo.sync_threads()
    if tylo.thread_idx.x == 0:
        total = 0.0
        for w in range(BLOCK // 32):
            total += partial[w]
        tylo.atomic_add(out, total)


@tylo.jit
def row_max(out, x, rows, cols):
    """One warp per row: strided loads, then a shuffle max; loops carry the running max."""
    row = tylo.block_idx.x
    if row < rows:
        m = -3.0e38
        for c in range(tylo.lane_id(), cols, 32):
            m = max(m, x[row * cols + c])
        for k in tylo.static_range(5):
            m = max(m, tylo.shfl_xor(m, 1 << k))
        if tylo.lane_id() == 0:
            out[row] = m


AOT = [
    (block_sum, "*f32:16, *f32:16, i32", {"BLOCK": 256}, 256),
    (row_max, "*f32:16, *f32:16, i32, i32", {}, 32),
]


def run(n: int = 1 << 20) -> None:
    rng = np.random.default_rng()
    x = rng.standard_normal(n, dtype=np.float32)
    out = tylo.to_device(np.zeros(1, dtype=np.float32))
    block_sum[(n + 255) // 256, 256](out, tylo.to_device(x), n, BLOCK=256)
    got, ref = float(out.to_host()[0]), float(x.astype(np.float64).sum())
    assert abs(got - ref) <= 1e-3 * np.abs(x).sum() / np.sqrt(n) + 1e-2, (got, ref)
    rows, cols = 300, 1000
    m = rng.standard_normal((rows, cols), dtype=np.float32)
    res = tylo.to_device(np.full(rows, np.nan, dtype=np.float32))
    row_max[rows, 32](res, tylo.to_device(m), rows, cols)
    np.testing.assert_array_equal(res.to_host(), m.max(axis=1))
    print(f"block_sum over {n} values: {got:.4f} (float64 {ref:.4f}); row_max {rows}x{cols} exact")


if __name__ == "__main__":
    from run_examples import main
    main(["block_reduction"])
