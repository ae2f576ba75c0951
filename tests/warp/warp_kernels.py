"""Kernels shared by the compile tests and the GPU tests of tests/warp."""
import tylo
import tylo.lang.copy as cp
import tylo.lang.mma as mma


@tylo.jit
def mma_once(out, pa, pb, pc, ATOM: tylo.constexpr):
    """One mma.sync per warp on registers loaded lane-major: p[lane * regs + j]."""
    lane = tylo.lane_id()
    a = [pa[lane * ATOM.a_regs + j] for j in tylo.static_range(ATOM.a_regs)]
    b = [pb[lane * ATOM.b_regs + j] for j in tylo.static_range(ATOM.b_regs)]
    c = [pc[lane * ATOM.c_regs + j] for j in tylo.static_range(ATOM.c_regs)]
    d = mma.mma_sync(ATOM, a, b, c)
    for j in tylo.static_range(ATOM.c_regs):
        out[lane * ATOM.c_regs + j] = d[j]


@tylo.jit
def mma_loop(out, pa, pb, n, ATOM: tylo.constexpr):
    """Accumulators carried through a runtime loop (stay in registers)."""
    lane = tylo.lane_id()
    a = [pa[lane * ATOM.a_regs + j] for j in tylo.static_range(ATOM.a_regs)]
    b = [pb[lane * ATOM.b_regs + j] for j in tylo.static_range(ATOM.b_regs)]
    c = (out[lane * ATOM.c_regs + j] for j in tylo.static_range(ATOM.c_regs))  # a tuple, like mma_sync's result
    for _ in range(n):
        c = mma.mma_sync(ATOM, a, b, c)
    for j in tylo.static_range(ATOM.c_regs):
        out[lane * ATOM.c_regs + j] = c[j]


@tylo.jit
def ldmatrix_roundtrip(out, back, src, NUM: tylo.constexpr, TRANS: tylo.constexpr, STORE: tylo.constexpr):
    """cp.async 32 rows of 8 u16 into shared, ldmatrix .xNUM; optionally stmatrix them back."""
    lane = tylo.lane_id()
    s = tylo.shared_array(tylo.u16, (32, 8))
    t = tylo.shared_array(tylo.u16, (32, 8))
    cp.cp_async(s.ptr + lane * 8, src + lane * 8, 16)
    cp.commit_copies()
    cp.wait_copies(0)
    for k in tylo.static_range(8):
        t[lane, k] = 0
    tylo.sync_threads()
    r = cp.ldmatrix(s.ptr + lane * 8, NUM, TRANS)
    for j in tylo.static_range(NUM):
        out[lane * NUM + j] = r[j]
    if STORE:
        cp.stmatrix(t.ptr + lane * 8, r, TRANS)
        tylo.sync_threads()
        for k in tylo.static_range(8):
            back[lane * 8 + k] = t[lane, k]


@tylo.jit
def cp_async_zfill(out, src, NBYTES: tylo.constexpr):
    """Lane l copies NBYTES from src row l with src_bytes = 4 * (l % (NBYTES // 4 + 1)); rest zero."""
    lane = tylo.lane_id()
    s = tylo.shared_array(tylo.u32, (32, 4))
    for k in tylo.static_range(4):
        s[lane, k] = 0xFFFFFFFF
    tylo.sync_threads()
    nb = (lane % (NBYTES // 4 + 1)) * 4
    cp.cp_async(s.ptr + lane * 4, src + lane * 4, NBYTES, nb)
    cp.commit_copies()
    cp.cp_async(s.ptr + lane * 4, src + lane * 4, NBYTES, nb)  # a second group, waited with n = 0
    cp.commit_copies()
    cp.wait_copies(1)
    cp.wait_copies(0)
    tylo.sync_threads()
    for k in tylo.static_range(4):
        out[lane * 4 + k] = s[lane, k]
