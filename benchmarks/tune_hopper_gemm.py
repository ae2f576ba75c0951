"""Time variants of the Hopper GEMM (STAGES, GROUP_M, C_BUFS) at 4096^3 next to cuBLAS, in one run.

    python benchmarks/tune_hopper_gemm.py
"""
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import torch  # noqa: E402

import hopper_gemm as hg  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemm import bench  # noqa: E402
n = 4096
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16); b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
t_cublas = bench(lambda: torch.matmul(a, b), torch)
for stages, gm, cb in [(4, 8, 2), (3, 8, 2), (4, 16, 2), (4, 4, 2), (3, 8, 4), (4, 8, 1)]:
    try:
        t = bench(lambda: hg.launch(c, a, b, n, n, n, stages=stages, group_m=gm, c_bufs=cb), torch)
        print(f"stages={stages} group_m={gm} c_bufs={cb}: {2*n**3/t/1e9:.1f} TFLOP/s, ratio {t_cublas/t:.3f}", flush=True)
    except Exception as e:
        print(stages, gm, cb, "failed", type(e).__name__, str(e)[:100], flush=True)
