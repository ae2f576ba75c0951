"""JIT overhead of tylo next to Triton (when installed), measured in the same run.

For each framework:
  cold compile  : first launch of a vector-add in a fresh process with an empty cache (import excluded)
  warm first call: first launch in a fresh process whose disk cache already holds the kernel
  launch         : host time per launch in a loop of cached launches (median of batches)

    python benchmarks/jit_overhead.py [--n-launch 20000]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# the tylo kernel and inputs both tylo children time
VADD = r'''
import tylo
@tylo.jit
def vadd(out, x, y, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] + y[i]
n = 1 << 20
x = torch.randn(n, device="cuda"); y = torch.randn(n, device="cuda"); out = torch.empty_like(x)
'''

TYLO_CHILD = r'''
import sys, time, json
import torch
''' + VADD + r'''
torch.cuda.synchronize()
t0 = time.perf_counter()
vadd[(n + 255) // 256, 256](out, x, y, n)
torch.cuda.synchronize()
first = time.perf_counter() - t0
assert torch.allclose(out, x + y)
launches = []
if len(sys.argv) > 1:
    reps = int(sys.argv[1])
    grid = (n + 255) // 256
    launch = vadd[grid, 256]
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            launch(out, x, y, n)
        launches.append((time.perf_counter() - t) / reps)
        torch.cuda.synchronize()
ck = next(iter(vadd._kernels.values()))
print(json.dumps({"first": first, "launch": sorted(launches)[len(launches) // 2] if launches else None,
                  "stages_ms": ck.compile_ms if not ck.from_cache else "from cache"}))
'''

TRITON_CHILD = r'''
import sys, time, json
import torch
import triton
import triton.language as tl
@triton.jit
def vadd(out, x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)
n = 1 << 20
x = torch.randn(n, device="cuda"); y = torch.randn(n, device="cuda"); out = torch.empty_like(x)
torch.cuda.synchronize()
t0 = time.perf_counter()
vadd[((n + 255) // 256,)](out, x, y, n, BLOCK=256)
torch.cuda.synchronize()
first = time.perf_counter() - t0
assert torch.allclose(out, x + y)
launches = []
if len(sys.argv) > 1:
    reps = int(sys.argv[1])
    grid = ((n + 255) // 256,)
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            vadd[grid](out, x, y, n, BLOCK=256)
        launches.append((time.perf_counter() - t) / reps)
        torch.cuda.synchronize()
print(json.dumps({"first": first, "launch": sorted(launches)[len(launches) // 2] if launches else None}))
'''

BARE_CHILD = r'''
import time, json, torch
from cuda.bindings import driver as cu
''' + VADD + r'''
vadd[(n + 255) // 256, 256](out, x, y, n)
torch.cuda.synchronize()
ck = next(iter(vadd._kernels.values()))
import ctypes, numpy as np
err, mod = cu.cuModuleLoadData(ck.cubin)
err, fn = cu.cuModuleGetFunction(mod, b"vadd")
args = (out.data_ptr(), x.data_ptr(), y.data_ptr(), n)
types = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
grid = (n + 255) // 256
res = []
for _ in range(5):
    t = time.perf_counter()
    for _ in range(20000):
        cu.cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, 0, (args, types), 0)
    res.append((time.perf_counter() - t) / 20000)
    torch.cuda.synchronize()
print(json.dumps({"launch": sorted(res)[2]}))
'''


def run_child(code, env_extra, extra_args=()):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **env_extra)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:  # kernels need a source file
        f.write(code)
    out = subprocess.run([sys.executable, f.name, *extra_args], env=env, capture_output=True, text=True)
    os.unlink(f.name)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(name, code, cache_var, n_launch):
    with tempfile.TemporaryDirectory() as cache:
        env = {cache_var: cache}
        cold = run_child(code, env)["first"]
        warm = run_child(code, env, [str(n_launch)])
        cold_detail = run_child(code, {cache_var: tempfile.mkdtemp()}).get("stages_ms")
    if cold_detail:
        print(f"{name} cold compile stages (ms, second fresh process): "
              + ", ".join(f"{k} {v:.1f}" for k, v in cold_detail.items()))
    return {"framework": name, "cold_ms": cold * 1e3, "warm_ms": warm["first"] * 1e3, "launch_us": warm["launch"] * 1e6}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-launch", type=int, default=20000)
    args = ap.parse_args()
    rows = [measure("tylo", TYLO_CHILD, "TYLO_CACHE_DIR", args.n_launch)]
    try:
        import triton  # noqa: F401
        rows.append(measure("triton", TRITON_CHILD, "TRITON_CACHE_DIR", args.n_launch))
    except ImportError:
        print("triton is not installed: tylo only")
    bare = run_child(BARE_CHILD, {"TYLO_CACHE_DIR": tempfile.mkdtemp()})["launch"] * 1e6
    print(f"\n{'framework':<10} {'cold compile ms':>16} {'warm first call ms':>19} {'launch us':>10}")
    for r in rows:
        print(f"{r['framework']:<10} {r['cold_ms']:>16.1f} {r['warm_ms']:>19.1f} {r['launch_us']:>10.2f}")
    print(f"{'bare cuLaunchKernel (cuda-bindings)':<47} {bare:>10.2f}")
    if len(rows) == 2:
        t, tr = rows
        print(f"\nratios triton/tylo: cold {tr['cold_ms'] / t['cold_ms']:.1f}x, warm {tr['warm_ms'] / t['warm_ms']:.1f}x, "
              f"launch {tr['launch_us'] / t['launch_us']:.2f}x")
    print(json.dumps({"rows": rows, "bare_launch_us": bare}))


if __name__ == "__main__":
    main()
