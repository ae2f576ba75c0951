"""GEMM throughput of tylo's kernels next to torch.matmul (cuBLAS) and Triton, in the same run.

    python benchmarks/gemm.py [--kernel warp-mma|hopper] [--sizes 4096,8192] [--plot gemm.png]

Checks each result against a float64 product first (relative error < 1e-2), then times
with CUDA events (median of repeats, after warm-up) and prints TFLOP/s and the ratios.
``--kernel hopper`` runs examples/hopper_gemm.py (sm_90a: TMA + WGMMA, warp-specialised,
persistent); its B operand is the (N, K) transpose, prepared once outside the timing.
A Triton column is added when triton imports (a plain tiled ``tl.dot`` kernel written here,
measured in the same run), and a PNG plot is written when matplotlib imports.
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))


def bench(fn, torch, warmup=3, reps=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return sorted(times)[len(times) // 2]


def check(c, a, b, alpha, torch):
    ref = alpha * (a.double() @ b.double())
    rel = (c.double() - ref).norm() / ref.norm()
    assert rel < 1e-2, f"relative error {rel:.2e}"
    return float(rel)


def make_triton():
    """A plain Triton matmul (C = A @ B, bf16, fp32 accumulation), or None without triton."""
    try:
        import triton
        import triton.language as tl
    except Exception:
        return None

    @triton.jit
    def _mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP: tl.constexpr):
        pid = tl.program_id(0)
        grid_m = tl.cdiv(M, BLOCK_M)
        grid_n = tl.cdiv(N, BLOCK_N)
        width = GROUP * grid_n
        first = (pid // width) * GROUP
        rows = tl.minimum(grid_m - first, GROUP)
        pm = first + (pid % width) % rows
        pn = (pid % width) // rows
        rm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pn * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            ka = k0 + rk
            x = tl.load(a + rm[:, None] * sam + ka[None, :] * sak, mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
            y = tl.load(b + ka[:, None] * sbk + rn[None, :] * sbn, mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(x, y, acc)
        tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))

    def run(c, a, b):
        M, K = a.shape
        N = b.shape[1]
        bm, bn, bk = 128, 256, 64
        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
        _mm[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                  BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP=8, num_warps=8, num_stages=3)
    return run


def plot(rows, kernel, path, with_triton):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        print("(matplotlib not available: no plot)")
        return
    labels = [r[0] for r in rows]
    xs = range(len(rows))
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(xs, [r[1] for r in rows], "o-", label=f"tylo {kernel}")
    ax.plot(xs, [r[2] for r in rows], "s-", label="cuBLAS (torch.matmul)")
    if with_triton:
        ax.plot(xs, [r[3] for r in rows], "^-", label="Triton")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=20)
    ax.set_ylabel("TFLOP/s")
    ax.set_title("bf16 GEMM, fp32 accumulation")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", default="warp-mma", choices=["warp-mma", "hopper"])
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--plot", default=None, help="PNG path (default: gemm_<kernel>.png when matplotlib imports)")
    args = ap.parse_args()
    import torch

    if args.kernel == "hopper":
        import hopper_gemm

        def prepare(a, b):
            return b.T.contiguous()          # (N, K): K-major B, once per shape

        def launch(c, a, bt, M, N, K):
            hopper_gemm.launch(c, a, bt, M, N, K)
    else:
        import warp_gemm

        def prepare(a, b):
            return b

        def launch(c, a, b, M, N, K):
            warp_gemm.launch(c, a, b, M, N, K, 1.0)
    triton_mm = make_triton()

    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        M = N = K = n
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        bb = prepare(a, b)
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        launch(c, a, bb, M, N, K)
        torch.cuda.synchronize()
        rel = check(c, a, b, 1.0, torch)
        t_tylo = bench(lambda: launch(c, a, bb, M, N, K), torch)
        t_cublas = bench(lambda: torch.matmul(a, b), torch)
        flops = 2.0 * M * N * K
        t_triton = None
        if triton_mm is not None:
            ct = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            triton_mm(ct, a, b)
            torch.cuda.synchronize()
            check(ct, a, b, 1.0, torch)
            t_triton = bench(lambda: triton_mm(ct, a, b), torch)
        rows.append((f"{M}x{N}x{K}", flops / t_tylo / 1e9, flops / t_cublas / 1e9,
                     flops / t_triton / 1e9 if t_triton else None, rel))
    head = f"\n{'shape':<16} {'tylo ' + args.kernel + ' TFLOP/s':>24} {'cuBLAS TFLOP/s':>15} {'ratio':>7}"
    if triton_mm is not None:
        head += f" {'Triton TFLOP/s':>15} {'vs Triton':>10}"
    print(head + f" {'rel err':>9}")
    for shape, tt, tc, tr, rel in rows:
        line = f"{shape:<16} {tt:>24.1f} {tc:>15.1f} {tt / tc:>7.3f}"
        if triton_mm is not None:
            line += f" {tr:>15.1f} {tt / tr:>10.3f}"
        print(line + f" {rel:>9.1e}")
    if triton_mm is None:
        print("(triton not importable: no Triton column)")
    plot(rows, args.kernel, args.plot or f"gemm_{args.kernel}.png", triton_mm is not None)


if __name__ == "__main__":
    main()
