"""Where the first launch of a kernel spends its time (cProfile), in a fresh process.

    TYLO_CACHE_DIR=... python benchmarks/profile_first_call.py
"""
import cProfile
import pstats
import time

import torch

import tylo


@tylo.jit
def vadd(out, x, y, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] + y[i]


n = 1 << 20
x = torch.randn(n, device="cuda")
y = torch.randn(n, device="cuda")
out = torch.empty_like(x)
torch.cuda.synchronize()
t0 = time.perf_counter()
prof = cProfile.Profile()
prof.enable()
vadd[(n + 255) // 256, 256](out, x, y, n)
torch.cuda.synchronize()
prof.disable()
print(f"first call {1e3 * (time.perf_counter() - t0):.1f} ms")
pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
