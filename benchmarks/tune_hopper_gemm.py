"""Time variants of the Hopper GEMM (STAGES, GROUP_M, C_BUFS) next to cuBLAS, in one run.

    python benchmarks/tune_hopper_gemm.py [--shapes 4096,8192x8192x1024]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

VARIANTS = [(4, 8, 2), (3, 8, 2), (4, 16, 2), (4, 4, 2), (3, 8, 4), (4, 8, 1), (3, 16, 4), (4, 32, 2)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096")
    args = ap.parse_args()
    import hopper_gemm as hg
    import torch
    from gemm import bench, parse_shape
    for M, N, K in [parse_shape(s) for s in args.shapes.split(",")]:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        flops = 2.0 * M * N * K
        t_cublas = bench(lambda: torch.matmul(a, b), torch)
        print(f"{M}x{N}x{K}: cuBLAS {flops / t_cublas / 1e9:.1f} TFLOP/s", flush=True)
        for stages, gm, cb in VARIANTS:
            try:
                t = bench(lambda: hg.launch(c, a, b, M, N, K, stages=stages, group_m=gm, c_bufs=cb), torch)
                print(f"  stages={stages} group_m={gm} c_bufs={cb}: {flops / t / 1e9:.1f} TFLOP/s, "
                      f"ratio {t_cublas / t:.3f}", flush=True)
            except Exception as e:
                print(f"  stages={stages} group_m={gm} c_bufs={cb}: failed: {type(e).__name__}: {str(e)[:100]}",
                      flush=True)


if __name__ == "__main__":
    main()
