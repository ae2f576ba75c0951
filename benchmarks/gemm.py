"""GEMM throughput of tylo's kernels next to torch.matmul (cuBLAS) and Triton, in the same run.

    python benchmarks/gemm.py [--kernel warp-mma] [--sizes 4096,8192]

Checks each result against a float64 product first (relative error < 1e-2), then times
with CUDA events (median of repeats, after warm-up) and prints TFLOP/s and the ratios.
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", default="warp-mma", choices=["warp-mma"])
    ap.add_argument("--sizes", default="4096,8192")
    args = ap.parse_args()
    import torch

    import warp_gemm

    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        M = N = K = n
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        warp_gemm.launch(c, a, b, M, N, K, 1.0)
        torch.cuda.synchronize()
        rel = check(c, a, b, 1.0, torch)
        t_tylo = bench(lambda: warp_gemm.launch(c, a, b, M, N, K, 1.0), torch)
        t_cublas = bench(lambda: torch.matmul(a, b), torch)
        flops = 2.0 * M * N * K
        rows.append((f"{M}x{N}x{K}", flops / t_tylo / 1e9, flops / t_cublas / 1e9, rel))
    print(f"\n{'shape':<16} {'tylo ' + args.kernel + ' TFLOP/s':>24} {'cuBLAS TFLOP/s':>15} {'ratio':>7} {'rel err':>9}")
    for shape, tt, tc, rel in rows:
        print(f"{shape:<16} {tt:>24.1f} {tc:>15.1f} {tt / tc:>7.3f} {rel:>9.1e}")


if __name__ == "__main__":
    main()
