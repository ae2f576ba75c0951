"""Which (shape, layout) families the 2 x 1 cluster GEMM (GemmConfig(cluster_m=2)) gets right on this GPU:
each case runs into a NaN-poisoned C and prints the unwritten count and the error against float64."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import hopper_gemm as hg  # noqa: E402

CASES = [(300, 776, 4104, "rc"), (2900, 5000, 2000, "rc"), (256, 776, 4104, "rr"), (2816, 5000, 2000, "rr"),
         (300, 776, 4104, "rr"), (2900, 5000, 2000, "rr"), (384, 512, 256, "rr"), (384, 512, 256, "rc")]
for M, N, K, lay in CASES:
    for name, cfg in (("128x256", hg.GemmConfig(cluster_m=2)),
                      ("64x128", hg.GemmConfig(consumers=1, tn=128, stages=8, cluster_m=2))):
        g = torch.Generator(device="cuda").manual_seed(M + N + K)
        a = torch.randn(M, K, generator=g, device="cuda").bfloat16()
        b = (torch.randn(K, N, generator=g, device="cuda").bfloat16() if lay[1] == "r"
             else torch.randn(N, K, generator=g, device="cuda").bfloat16().T)
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        hg.launch(c, a, b, M, N, K, config=cfg)
        torch.cuda.synchronize()
        nan = ~torch.isfinite(c)
        rows = torch.nonzero(nan.any(1)).flatten()
        ref = a.double() @ b.double()
        err = float((torch.nan_to_num(c.double()) - ref).norm() / ref.norm())
        print(f"{M}x{N}x{K} {lay} {name}: unwritten {int(nan.sum())} "
              f"(rows {rows[:3].tolist()}..{rows[-3:].tolist() if len(rows) else []}) rel err {err:.2e}", flush=True)
