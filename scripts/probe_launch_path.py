"""Where the host time of a cached ``hopper_gemm.launch`` goes: each piece of the call timed alone
(median of batches, the GPU drained between batches), next to torch.matmul on the same tensors; then a
4-parameter kernel's launch by argument kind (torch tensors, DeviceArrays) and stream source."""
import os
import sys
import time  # noqa: F401 (TIMING uses it)

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import hopper_gemm as hg  # noqa: E402

from tylo.runtime.arrays import array_fingerprint  # noqa: E402
from tylo.runtime.streams import launch_stream  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from jit_overhead import TIMING  # noqa: E402

exec(TIMING)        # timed(call, batch, repeat): jit_overhead's host-time loop (median seconds per call)


def us(call):
    return timed(call, 256, 40) * 1e6  # noqa: F821 (defined by TIMING)


M = N = K = 256
a = torch.randn(M, K, device="cuda").bfloat16()
b = torch.randn(K, N, device="cuda").bfloat16()
c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
hg.launch(c, a, b, M, N, K)
run = next(iter(hg._PREPARED.values()))
key = next(iter(hg._PREPARED))
rows = [
    ("torch.matmul", lambda: torch.matmul(a, b)),
    ("hopper_gemm.launch", lambda: hg.launch(c, a, b, M, N, K)),
    ("prepared run() alone", run),
    ("_check_arguments", lambda: hg._check_arguments(M, N, K, None)),
    ("array_fingerprint x3", lambda: (array_fingerprint(c), array_fingerprint(a), array_fingerprint(b))),
    ("launch_stream(None, c)", lambda: launch_stream(None, c)),
    ("_PREPARED.get(key)", lambda: hg._PREPARED.get(key)),
    ("hash(key)", lambda: hash(key)),
]
for label, call in rows:
    print(f"{label:28s} {us(call):8.2f} us", flush=True)
print("key:", key)

# the generic launch path (a 4-parameter kernel), by argument kind and stream source
import tylo  # noqa: E402


@tylo.jit
def vadd(out, x, y, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] + y[i]


ns = 4096
xs, ys = torch.randn(ns, device="cuda"), torch.randn(ns, device="cuda")
outs = torch.empty_like(xs)
dx, dy, dout = (tylo.to_device(t.cpu().numpy()) for t in (xs, ys, outs))
bound = vadd[(ns + 255) // 256, 256]
bound(outs, xs, ys, ns)
bound(dout, dx, dy, ns)
torch.cuda.synchronize()
rows = [
    ("vadd(torch tensors)", lambda: bound(outs, xs, ys, ns)),
    ("vadd(torch tensors, stream=0)", lambda: bound(outs, xs, ys, ns, stream=0)),
    ("vadd(DeviceArrays)", lambda: bound(dout, dx, dy, ns)),
    ("vadd(DeviceArrays, stream=0)", lambda: bound(dout, dx, dy, ns, stream=0)),
    ("3 x (is_cuda, data_ptr(), dtype)", lambda: [(t.is_cuda, t.data_ptr(), t.dtype) for t in (outs, xs, ys)]),
    ("torch current raw stream", lambda: torch._C._cuda_getCurrentRawStream(torch._C._cuda_getDevice())),
]
for label, call in rows:
    print(f"{label:34s} {us(call):8.2f} us", flush=True)
