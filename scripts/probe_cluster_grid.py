"""Does the 2 x 1 cluster GEMM lose its speed to a grid larger than the co-resident clusters?

Times GemmConfig(cluster_m=2) (K-major operands) with the persistent grid sized for several SM counts
(``hopper_gemm.driver.sm_count`` replaced), next to the same tile without clusters and cuBLAS, and asks
the driver (cuOccupancyMaxActiveClusters) how many 2-CTA clusters of the kernel fit at once."""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import hopper_gemm as hg  # noqa: E402
from gemm import bench  # noqa: E402


def max_active_clusters(config):
    from cuda.bindings import driver as cu
    fn = None
    for launcher in hg.hopper_gemm._launchers.values():
        if launcher is not None:
            fn = getattr(launcher, "function", None) or getattr(getattr(launcher, "slow", None), "function", None)
            shared = getattr(launcher, "shared_bytes", None) or getattr(launcher.slow, "shared_bytes", 0)
    if fn is None:
        return "no launcher"
    cfg = cu.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = 132, 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = config.threads, 1, 1
    cfg.sharedMemBytes = shared
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = 2, 1, 1
    cfg.attrs = [attr]
    cfg.numAttrs = 1
    return cu.cuOccupancyMaxActiveClusters(cu.CUfunction(fn), cfg)


real_sms = hg.driver.sm_count
CLUSTER = hg.GemmConfig(cluster_m=2)


def probe(M, N, K):
    a = torch.randn(M, K, device="cuda").bfloat16()
    b = torch.randn(N, K, device="cuda").bfloat16().T
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    flops = 2.0 * M * N * K
    t_cublas = bench(lambda: torch.matmul(a, b), torch)
    t_plain = bench(lambda: hg.launch(c, a, b, M, N, K, config=hg.GemmConfig()), torch)
    print(f"{M}x{N}x{K}: cuBLAS {flops / t_cublas / 1e9:.0f} TFLOP/s, 128x256 {flops / t_plain / 1e9:.0f}", flush=True)
    for sms in (132, 130, 128, 124, 120, 116, 112):
        hg.driver.sm_count = lambda device=0, sms=sms: sms
        hg._PREPARED.clear()
        t = bench(lambda: hg.launch(c, a, b, M, N, K, config=CLUSTER), torch)
        ref = a.float() @ b.float()
        err = float((c.float() - ref).norm() / ref.norm())
        print(f"  cluster 2x1, grid for {sms} SMs: {flops / t / 1e9:.0f} TFLOP/s ({t_cublas / t:.3f}x cuBLAS)"
              f" rel err {err:.1e}", flush=True)
    hg.driver.sm_count = real_sms
    hg._PREPARED.clear()
    try:
        print("  cuOccupancyMaxActiveClusters:", max_active_clusters(hg.GemmConfig(cluster_m=2)), flush=True)
    except Exception as e:  # the probe's own diagnostics
        print("  occupancy query failed:", type(e).__name__, e, flush=True)


for shape in [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 2048, 2048), (3000, 5000, 2000)]:
    probe(*shape)
