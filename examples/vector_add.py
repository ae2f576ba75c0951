"""Vector add and saxpy: the smallest tylo kernels.

Run: python examples/vector_add.py   (needs a GPU; without one it compiles only)
"""
import numpy as np

import tylo


@tylo.jit
def vector_add(out, x, y, n, BLOCK: tylo.constexpr):
    i = tylo.block_idx.x * BLOCK + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] + y[i]


@tylo.jit
def saxpy(out, x, y, a: tylo.f32, n: tylo.i32, BLOCK: tylo.constexpr):
    i = tylo.block_idx.x * BLOCK + tylo.thread_idx.x
    if i < n:
        out[i] = a * x[i] + y[i]


# (kernel, signature of the runtime parameters, constexprs, block) compiled ahead of time by run_examples.py
AOT = [
    (vector_add, "*f32:16, *f32:16, *f32:16, i32", {"BLOCK": 256}, 256),
    (saxpy, "*f32:16, *f32:16, *f32:16, f32, i32", {"BLOCK": 256}, 256),
]


def run(n: int = 1_000_003) -> None:
    rng = np.random.default_rng()
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    dx, dy = tylo.to_device(x), tylo.to_device(y)
    out = tylo.to_device(np.full(n, np.nan, dtype=np.float32))  # poisoned
    grid = (n + 255) // 256
    vector_add[grid, 256](out, dx, dy, n, BLOCK=256)
    np.testing.assert_allclose(out.to_host(), x.astype(np.float64) + y, rtol=1e-6)
    saxpy[grid, 256](out, dx, dy, 2.5, n, BLOCK=256)
    np.testing.assert_allclose(out.to_host(), 2.5 * x.astype(np.float64) + y, rtol=1e-5, atol=1e-6)
    print(f"vector_add, saxpy: {n} elements match numpy")


if __name__ == "__main__":
    from run_examples import main
    main(["vector_add"])
