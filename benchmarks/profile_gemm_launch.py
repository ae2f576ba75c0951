"""Where the host time of one ``hopper_gemm.launch`` call goes (cProfile), next to torch.matmul.

    python benchmarks/profile_gemm_launch.py

Small shapes, so the GPU keeps up and the host path is what is measured.
"""
import cProfile
import os
import pstats
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gemm import host_microseconds  # noqa: E402


def main():
    import hopper_gemm as hg
    import torch
    n = 256
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    cases = {"bf16 rr": (a, b), "bf16 rc": (a, b.T.contiguous().T),
             "fp8 rc": (a.to(torch.float8_e4m3fn), b.T.contiguous().to(torch.float8_e4m3fn).T)}
    for name, (x, y) in cases.items():
        fn = lambda: hg.launch(c, x, y, n, n, n)  # noqa: E731
        print(f"{name}: {host_microseconds(fn, torch, 2000):.1f} us per launch; torch.matmul "
              f"{host_microseconds(lambda: torch.matmul(a, b), torch, 2000):.1f} us", flush=True)
    x, y = cases["bf16 rr"]
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        hg.launch(c, x, y, n, n, n)
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
