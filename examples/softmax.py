"""Row softmax with register fragments: lane-local rows and warp-striped rows.

* ``softmax_lane_local``: each thread owns whole rows (``Ownership.local``): the max and the
  sum are thread-local, loads and stores are 16-byte vectors.
* ``softmax_striped``: each warp owns a row, lanes hold every 32nd value
  (``Ownership.striped``): the reductions are five XOR shuffles.
Rows that are entirely ``-inf`` give zeros, without branches (``tylo.row_softmax``).
"""
import numpy as np

import tylo
from tylo import Layout, Ownership
from tylo.lang.mma import MMAAtom, TiledMMA

ROWS, COLS = 32, 64
LOCAL = Ownership.local((ROWS, COLS), axis=1)
WARPS = 4
WIDTH = 256
STRIPED = Ownership.striped((WARPS, WIDTH), axis=1)


@tylo.jit
def softmax_lane_local(out, x, n_rows):
    """Rows of COLS values; one thread per row, ROWS rows per block of 32 threads."""
    row0 = tylo.block_idx.x * ROWS
    src = tylo.window(tylo.GlobalTile(x, Layout((n_rows, COLS), (COLS, 1))), (row0, 0), (ROWS, COLS), check=False)
    f = tylo.load(src, LOCAL)
    p = tylo.row_softmax(f)
    dst = tylo.window(tylo.GlobalTile(out, Layout((n_rows, COLS), (COLS, 1))), (row0, 0), (ROWS, COLS), check=False)
    tylo.store(dst, p)


@tylo.jit
def softmax_striped(out, x, n_rows, ld):
    """One warp per row of WIDTH values (row stride ``ld``), WARPS rows per block of 128 threads."""
    row0 = tylo.block_idx.x * WARPS
    src = tylo.window(tylo.GlobalTile(x, Layout((n_rows, WIDTH), (ld, 1))), (row0, 0), (WARPS, WIDTH), check=False)
    p = tylo.row_softmax(tylo.load(src, STRIPED))
    dst = tylo.window(tylo.GlobalTile(out, Layout((n_rows, WIDTH), (ld, 1))), (row0, 0), (WARPS, WIDTH), check=False)
    tylo.store(dst, p)


# The accumulator of a warp's m16n8k16 MMA tile repeated 8 times along N: a 16 x 64 tile in
# which each row is spread over a quad of lanes (two values per n8 block).
ACC = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16, tylo.bf16, tylo.f32), warps=(1, 1), repeats=(1, 8)).c_ownership


@tylo.jit
def softmax_mma_accumulator(out, x, n_rows):
    """Softmax of rows held in an MMA accumulator layout: reductions are two XOR shuffles per row."""
    row0 = tylo.block_idx.x * 16
    src = tylo.window(tylo.GlobalTile(x, Layout((n_rows, 64), (64, 1))), (row0, 0), (16, 64), check=False)
    p = tylo.row_softmax(tylo.load(src, ACC))
    tylo.store(tylo.window(tylo.GlobalTile(out, Layout((n_rows, 64), (64, 1))), (row0, 0), (16, 64), check=False), p)


AOT = [
    (softmax_lane_local, "*f32:16, *f32:16, i32", {}, 32),
    (softmax_striped, "*f32:16, *f32:16, i32, i32", {}, 128),
    (softmax_mma_accumulator, "*f32:16, *f32:16, i32", {}, 32),
]


def reference(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def run() -> None:
    rng = np.random.default_rng()
    rows = 32 * 37
    x = rng.standard_normal((rows, COLS)).astype(np.float32) * 4
    out = tylo.to_device(np.full_like(x, np.nan))
    softmax_lane_local[rows // ROWS, 32](out, tylo.to_device(x), rows)
    err = np.abs(out.to_host() - reference(x)).max()
    assert err < 1e-5, err
    rows = 4 * 50
    x = rng.standard_normal((rows, WIDTH)).astype(np.float32) * 4
    out = tylo.to_device(np.full_like(x, np.nan))
    softmax_striped[rows // WARPS, 128](out, tylo.to_device(x), rows, WIDTH)
    err2 = np.abs(out.to_host() - reference(x)).max()
    assert err2 < 1e-5, err2
    rows = 16 * 40
    x = rng.standard_normal((rows, 64)).astype(np.float32) * 4
    x[5] = -np.inf  # a fully masked row gives zeros
    out = tylo.to_device(np.full_like(x, np.nan))
    softmax_mma_accumulator[rows // 16, 32](out, tylo.to_device(x), rows)
    ref = reference(np.where(np.isinf(x), 0, x))
    ref[5] = 0
    err3 = np.abs(out.to_host() - ref).max()
    assert err3 < 1e-5, err3
    print(f"softmax lane-local, warp-striped and MMA-accumulator match float64 (max abs error "
          f"{max(err, err2, err3):.1e})")


if __name__ == "__main__":
    from run_examples import main
    main(["softmax"])
