"""Kernels of the scalar subset shared by the golden-IR, codegen and GPU tests."""
import tylo

SCALE = 3  # a global constexpr the kernels read


@tylo.jit
def saxpy(out, x, y, a: tylo.f32, n: tylo.i32, BLOCK: tylo.constexpr):
    i = tylo.block_idx.x * BLOCK + tylo.thread_idx.x
    if i < n:
        out[i] = a * x[i] + y[i]


@tylo.jit
def branches(out, x, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i >= n:
        return
    v = x[i]
    if v < -1.0:
        r = -v
    elif v < 1.0:
        r = v * v
    else:
        r = v + SCALE
    out[i] = r


@tylo.jit
def loops(out, x, n, m):
    """A runtime loop with carried values, continue and break, and a while loop."""
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        acc = 0.0
        count = 0
        for j in range(m):
            v = x[i * m + j]
            if v < 0.0:
                continue
            if v > 2.5:
                break
            acc += v
            count += 1
        k = 1
        while k < m:
            k *= 2
        out[i] = acc + count * 1000.0 + k * 1.0e6


@tylo.func
def clamp(v, lo, hi):
    return tylo.min(tylo.max(v, lo), hi)


@tylo.func
def warp_sum(v):
    for k in tylo.static_range(5):
        v += tylo.shfl_xor(v, 16 >> k)
    return v


@tylo.jit
def helpers(out, x, n, LO: tylo.constexpr = -0.5, HI: tylo.constexpr = 0.5):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    v = clamp(x[i], LO, HI) if i < n else 0.0
    s = warp_sum(v)
    if i < n:
        out[i] = s


@tylo.jit
def shared_atomics(counts, total, x, n, BLOCK: tylo.constexpr):
    hist = tylo.shared_array(tylo.i32, (4,))
    t = tylo.thread_idx.x
    if t < 4:
        hist[t] = 0
    tylo.sync_threads()
    i = tylo.block_idx.x * BLOCK + t
    if i < n:
        bucket = tylo.min(tylo.max((x[i] + 2.0).to(tylo.i32), 0), 3)
        tylo.atomic_add(hist.ptr + bucket, 1)
        tylo.atomic_max(total, bucket)
    tylo.sync_threads()
    if t < 4:
        tylo.atomic_add(counts + t, hist[t])


@tylo.jit
def casts(out_i, out_h, x, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        v = x[i]
        q, r = i // 7, i % 7
        out_i[i] = v.to(tylo.i32) * 8 + q - r + (i >> 1)
        out_h[i] = tylo.f16(v * 0.5)


@tylo.jit
def grid2d(out, x, rows, cols):
    r = tylo.block_idx.y * tylo.block_dim.y + tylo.thread_idx.y
    c = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if r < rows and c < cols:
        out[c * rows + r] = x[r * cols + c] * 2.0


GOLDEN = {
    "saxpy": (saxpy, "*f32, *f32, *f32, f32, i32", {"BLOCK": 128}),
    "branches": (branches, "*f32, *f32, i32", {}),
    "loops": (loops, "*f32, *f32, i32, i32", {}),
    "helpers": (helpers, "*f32, *f32, i32", {}),
    "shared_atomics": (shared_atomics, "*i32, *i32, *f32, i32", {"BLOCK": 128}),
    "casts": (casts, "*i32, *f16, *f32, i32", {}),
    "grid2d": (grid2d, "*f32, *f32, i32, i32", {}),
}
