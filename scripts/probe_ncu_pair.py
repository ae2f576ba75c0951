"""One launch of a tylo kernel and one of the library users would pick instead, inside an NVTX range named
``measured`` (after warm-up launches outside it), for Nsight Compute to profile side by side on the H200
(session 7: validation.md runs 2; docs/attention.md and docs/hopper.md quote them):

    ncu --nvtx --nvtx-include "measured/" --section SpeedOfLight --section WarpStateStats \\
        --section SchedulerStats --section ComputeWorkloadAnalysis python scripts/probe_ncu_pair.py attention 8 2048 128 0
    ncu --nvtx --nvtx-include "measured/" --section SpeedOfLight python scripts/probe_ncu_pair.py gemm 64 4096 4096

``attention B S D CAUSAL``: examples/hopper_attention.py against PyTorch SDPA's cuDNN backend (bf16, heads =
2048 / D, BSHD). ``gemm M N K``: examples/hopper_gemm.py (its heuristic's pick) against torch.matmul (cuBLAS),
bf16, A row-major and B column-major. ``cublas-names``: torch.matmul alone over the shapes tylo loses, each in
an NVTX range of its shape, for ``ncu --nvtx --metrics gpu__time_duration.sum`` (the kernel names give
cuBLAS's tile, stages and cluster shape).
"""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

LOSING_SHAPES = [(64, 4096, 4096), (128, 1024, 8192), (256, 4096, 4096), (256, 1024, 8192), (512, 4096, 4096),
                 (512, 28672, 8192), (1000, 1000, 1000), (3001, 5000, 2008), (3000, 5000, 2048), (257, 776, 4104),
                 (4096, 4096, 4096), (2048, 2048, 2048), (128, 4096, 4096)]


def measured(launch_ours, launch_peer, warmup=3):
    for _ in range(warmup):
        launch_ours()
        launch_peer()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("measured")
    launch_ours()
    launch_peer()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def attention(batch, seqlen, head_dim, causal):
    import hopper_attention as ha
    from torch.nn.attention import SDPBackend, sdpa_kernel

    heads = 2048 // head_dim
    q, k, v = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def cudnn():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    measured(lambda: ha.attention(q, k, v, causal=causal), cudnn)


def gemm(M, N, K):
    import hopper_gemm as hg

    a = torch.randn(M, K, device="cuda").bfloat16()
    b = torch.randn(N, K, device="cuda").bfloat16().T
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    measured(lambda: hg.launch(c, a, b, M, N, K), lambda: torch.matmul(a, b))


def cublas_names():
    for M, N, K in LOSING_SHAPES:
        a = torch.randn(M, K, device="cuda").bfloat16()
        b = torch.randn(N, K, device="cuda").bfloat16().T
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(f"{M}x{N}x{K}rc")
        torch.matmul(a, b)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    what, args = sys.argv[1], [int(x) for x in sys.argv[2:]]
    if what == "attention":
        attention(*args[:3], bool(args[3]))
    elif what == "gemm":
        gemm(*args)
    elif what == "cublas-names":
        cublas_names()
    else:
        raise SystemExit(f"probe_ncu_pair.py: attention B S D CAUSAL | gemm M N K | cublas-names, got {what!r}")
