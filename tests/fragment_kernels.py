"""Fragment kernels shared by the CPU (PTX) and GPU tests."""
import tylo
from tylo import Layout, Ownership

LOCAL = Ownership.local((32, 8), axis=1)          # thread t holds row t
COLUMNS = Ownership.local((8, 32), axis=0)        # thread t holds column t
STRIPED = Ownership.striped((4, 64), axis=1)      # warp w holds row w, lanes stride 32


@tylo.jit
def reduce_rows(sums, maxs, mins, x, OWN: tylo.constexpr, AXIS: tylo.constexpr):
    """Reductions of a (R, C) tile per block along AXIS, broadcast back and stored as x - max."""
    R, C = OWN.shape
    tile = tylo.window(tylo.GlobalTile(x, Layout((R * 4096, C), (C, 1))), (tylo.block_idx.x * R, 0), (R, C),
                       check=False)
    f = tylo.load(tile, OWN)
    s = f.sum(axis=AXIS)
    m = f.max(axis=AXIS)
    n = f.min(axis=AXIS)
    shape = (R, 1) if AXIS == 1 else (1, C)
    rows = R if AXIS == 1 else 1
    cols = 1 if AXIS == 1 else C
    dst_shape = Layout((rows * 4096, cols), (cols, 1))
    origin = (tylo.block_idx.x * rows, 0)
    tylo.store(tylo.window(tylo.GlobalTile(sums, dst_shape), origin, shape, check=False), s)
    tylo.store(tylo.window(tylo.GlobalTile(maxs, dst_shape), origin, shape, check=False), m)
    tylo.store(tylo.window(tylo.GlobalTile(mins, dst_shape), origin, shape, check=False), n)
    tylo.store(tile, f - m)  # broadcast of the reduced fragment back over AXIS


@tylo.jit
def pack_roundtrip(out_words, out_f32, x, DT: tylo.constexpr):
    """Pack f32 pairs to DT, store the words, unpack them again and store as f32."""
    tile = tylo.window(tylo.GlobalTile(x, Layout((32 * 8192, 8), (8, 1))), (tylo.block_idx.x * 32, 0), (32, 8),
                       check=False)
    f = tylo.load(tile, LOCAL)
    p = tylo.pack(DT, f)
    tylo.store(out_words + (tylo.block_idx.x * 32 + tylo.thread_idx.x) * 8, p)
    back = tylo.unpack(p).astype(tylo.f32)
    tylo.store(tylo.window(tylo.GlobalTile(out_f32, Layout((32 * 8192, 8), (8, 1))), (tylo.block_idx.x * 32, 0),
                           (32, 8), check=False), back)


@tylo.jit
def accumulate(out, x, n_tiles):
    """A fragment accumulator carried through a runtime loop (must stay in registers)."""
    acc = tylo.full(tylo.f32, LOCAL, 0.0)
    for k in range(n_tiles):
        tile = tylo.window(tylo.GlobalTile(x, Layout((32 * 1024, 8), (8, 1))), (k * 32, 0), (32, 8), check=False)
        acc = acc + tylo.load(tile, LOCAL) * 0.5
    tylo.store(tylo.GlobalTile(out, Layout((32, 8), (8, 1))), acc)
