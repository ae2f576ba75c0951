"""JIT overhead of tylo next to the C floor, cuda-bindings and Triton (when installed), in one run.

Launch host time (a cached launch of a vector add on small arrays, so the GPU never falls behind):
  C floor        cuLaunchKernel called in a loop from C (a program built here with the C compiler,
                 libcuda through dlopen) on the cubin tylo compiled, with the same grid and arguments
  tylo native    kernel[grid, block](out, x, y, n): the native launcher (tylo/runtime/native_launch.c)
  tylo ctypes    the same with TYLO_NATIVE_LAUNCH=0 (the ctypes path, the fallback)
  cuda-bindings  cuda.bindings.driver.cuLaunchKernel with (values, ctypes types) arguments
  triton         the same vector add written in Triton
Each is the median over --repeat batches of --batch launches (host time of the loop; the stream
is synchronised between batches), every framework in a fresh process.

GEMM host path: examples/hopper_gemm.launch for a cached configuration (bf16, --gemm-shape) next to
torch.matmul on the same tensors, batches interleaved, in one process (and the tylo launch again
with TYLO_NATIVE_LAUNCH=0).

Compile: cold compile (first launch, empty cache) and warm first call (fresh process, cache holds
the kernel) of tylo and Triton.

    python scripts/build_native.py     # the native launcher, in place (else tylo builds it on first use)
    python benchmarks/jit_overhead.py [--batch 256] [--repeat 60] [--gemm-shape 256 256 256]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# the tylo kernel and inputs the tylo children time; small arrays for the launch loops
VADD = r'''
import tylo
@tylo.jit
def vadd(out, x, y, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] + y[i]
n = 1 << 20
x = torch.randn(n, device="cuda"); y = torch.randn(n, device="cuda"); out = torch.empty_like(x)
ns = 4096
xs = torch.randn(ns, device="cuda"); ys = torch.randn(ns, device="cuda"); outs = torch.empty_like(xs)
'''

TIMING = r'''
def timed(call, batch, repeat):
    import statistics
    for _ in range(batch):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(batch):
            call()
        times.append((time.perf_counter() - t) / batch)
        torch.cuda.synchronize()
    return statistics.median(times)
'''

TYLO_CHILD = r'''
import sys, time, json
import torch
''' + VADD + TIMING + r'''
torch.cuda.synchronize()
t0 = time.perf_counter()
vadd[(n + 255) // 256, 256](out, x, y, n)
torch.cuda.synchronize()
first = time.perf_counter() - t0
assert torch.allclose(out, x + y)
result = {"first": first}
if len(sys.argv) > 1:
    batch, repeat, cubin_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    launch = vadd[(ns + 255) // 256, 256]
    launch(outs, xs, ys, ns)
    torch.cuda.synchronize()
    assert torch.allclose(outs, xs + ys)
    result["launch"] = timed(lambda: launch(outs, xs, ys, ns), batch, repeat)
    result["bound"] = type(launch).__name__
    ck = vadd._kernels[[k for k in vadd._launchers if vadd._launchers[k] is not None][-1]]
    with open(cubin_path, "wb") as f:
        f.write(ck.cubin)
    result["params"] = [str(t) for t in ck.param_types]
from tylo.runtime import native
result["native"] = native.status()
ck = next(iter(vadd._kernels.values()))
result["stages_ms"] = ck.compile_ms if not ck.from_cache else "from cache"
print(json.dumps(result))
'''

TRITON_CHILD = r'''
import sys, time, json
import torch
import triton
import triton.language as tl
''' + TIMING + r'''
@triton.jit
def vadd(out, x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)
n = 1 << 20
x = torch.randn(n, device="cuda"); y = torch.randn(n, device="cuda"); out = torch.empty_like(x)
ns = 4096
xs = torch.randn(ns, device="cuda"); ys = torch.randn(ns, device="cuda"); outs = torch.empty_like(xs)
torch.cuda.synchronize()
t0 = time.perf_counter()
vadd[((n + 255) // 256,)](out, x, y, n, BLOCK=256)
torch.cuda.synchronize()
first = time.perf_counter() - t0
assert torch.allclose(out, x + y)
result = {"first": first}
if len(sys.argv) > 1:
    batch, repeat = int(sys.argv[1]), int(sys.argv[2])
    grid = ((ns + 255) // 256,)
    result["launch"] = timed(lambda: vadd[grid](outs, xs, ys, ns, BLOCK=256), batch, repeat)
print(json.dumps(result))
'''

BINDINGS_CHILD = r'''
import sys, time, json, ctypes
import torch
from cuda.bindings import driver as cu
''' + VADD + TIMING + r'''
vadd[(ns + 255) // 256, 256](outs, xs, ys, ns)
torch.cuda.synchronize()
ck = next(iter(vadd._kernels.values()))
err, mod = cu.cuModuleLoadData(ck.cubin)
err, fn = cu.cuModuleGetFunction(mod, b"vadd")
args = (outs.data_ptr(), xs.data_ptr(), ys.data_ptr(), ns)
types = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
grid = (ns + 255) // 256
batch, repeat = int(sys.argv[1]), int(sys.argv[2])
launch = lambda: cu.cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, 0, (args, types), 0)
print(json.dumps({"launch": timed(launch, batch, repeat)}))
'''

GEMM_CHILD = r'''
import sys, time, json, statistics
import torch
sys.path.insert(0, sys.argv[1])
import hopper_gemm as hg
M, N, K, batch, repeat = (int(v) for v in sys.argv[2:7])
torch.manual_seed(0)
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
hg.launch(c, a, b, M, N, K)          # compiles (or loads) and prepares
ref = a.double() @ b.double()
torch.cuda.synchronize()
rel = ((c.double() - ref).norm() / ref.norm()).item()
assert rel < 1e-2, rel
def tylo_call():
    hg.launch(c, a, b, M, N, K)
def torch_call():
    torch.matmul(a, b)
times = {"tylo": [], "torch": []}
for f in (tylo_call, torch_call):
    for _ in range(batch):
        f()
torch.cuda.synchronize()
for _ in range(repeat):            # interleaved batches: both see the same machine state
    for name, f in (("tylo", tylo_call), ("torch", torch_call)):
        t = time.perf_counter()
        for _ in range(batch):
            f()
        times[name].append((time.perf_counter() - t) / batch)
        torch.cuda.synchronize()
print(json.dumps({k: statistics.median(v) for k, v in times.items()} | {"rel_error": rel}))
'''

# cuLaunchKernel in a loop from C: the floor every Python launcher is measured against. libcuda is
# opened with dlopen (no CUDA headers or import library needed); prototypes as in cuda.h.
FLOOR_C = r'''
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*init_t)(unsigned);
typedef int (*device_get_t)(int *, int);
typedef int (*retain_t)(void **, int);
typedef int (*set_current_t)(void *);
typedef int (*load_t)(void **, const void *);
typedef int (*get_function_t)(void **, void *, const char *);
typedef int (*alloc_t)(unsigned long long *, size_t);
typedef int (*sync_t)(void);
typedef int (*launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                        void **, void **);

static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) { fprintf(stderr, "libcuda has no %s\n", name); exit(2); }
    return p;
}
#define CHECK(call) do { int r_ = (call); if (r_) { fprintf(stderr, "%s failed: %d\n", #call, r_); exit(3); } } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* floor <cubin> <kernel> <grid> <block> <batch> <repeat> <param>...   param: ptr:<bytes> | i32:<value> */
int main(int argc, char **argv) {
    if (argc < 7) { fprintf(stderr, "usage\n"); return 1; }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror()); return 2; }
    CHECK(((init_t)sym(lib, "cuInit"))(0));
    int dev; void *ctx, *mod, *fn;
    CHECK(((device_get_t)sym(lib, "cuDeviceGet"))(&dev, 0));
    CHECK(((retain_t)sym(lib, "cuDevicePrimaryCtxRetain"))(&ctx, dev));
    CHECK(((set_current_t)sym(lib, "cuCtxSetCurrent"))(ctx));
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    fseek(f, 0, SEEK_END); long size = ftell(f); fseek(f, 0, SEEK_SET);
    char *image = malloc(size);
    if (fread(image, 1, size, f) != (size_t)size) { perror("read"); return 1; }
    fclose(f);
    CHECK(((load_t)sym(lib, "cuModuleLoadData"))(&mod, image));
    CHECK(((get_function_t)sym(lib, "cuModuleGetFunction"))(&fn, mod, argv[2]));
    unsigned grid = atoi(argv[3]), block = atoi(argv[4]);
    int batch = atoi(argv[5]), repeat = atoi(argv[6]);
    int n = argc - 7;
    unsigned long long values[64];
    void *params[64];
    alloc_t alloc = (alloc_t)sym(lib, "cuMemAlloc_v2");
    for (int i = 0; i < n && i < 64; i++) {
        if (strncmp(argv[7 + i], "ptr:", 4) == 0) {
            CHECK(alloc(&values[i], strtoull(argv[7 + i] + 4, 0, 10)));
        } else if (strncmp(argv[7 + i], "i32:", 4) == 0) {
            int v = atoi(argv[7 + i] + 4);
            memcpy(&values[i], &v, 4);
        } else { fprintf(stderr, "bad parameter %s\n", argv[7 + i]); return 1; }
        params[i] = &values[i];
    }
    launch_t launch = (launch_t)sym(lib, "cuLaunchKernel");
    sync_t sync = (sync_t)sym(lib, "cuCtxSynchronize");
    double *times = malloc(repeat * sizeof *times);
    for (int i = 0; i < batch; i++) CHECK(launch(fn, grid, 1, 1, block, 1, 1, 0, 0, params, 0));
    CHECK(sync());
    for (int r = 0; r < repeat; r++) {
        double t0 = now();
        for (int i = 0; i < batch; i++) CHECK(launch(fn, grid, 1, 1, block, 1, 1, 0, 0, params, 0));
        times[r] = (now() - t0) / batch;
        CHECK(sync());
    }
    qsort(times, repeat, sizeof *times, cmp);
    printf("{\"launch\": %.9g}\n", times[repeat / 2]);
    return 0;
}
'''


def child_env(extra):
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra)


def run_child(code, env_extra, extra_args=()):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:  # kernels need a source file
        f.write(code)
    out = subprocess.run([sys.executable, f.name, *extra_args], env=child_env(env_extra), capture_output=True,
                         text=True)
    os.unlink(f.name)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def build_floor(folder):
    """The C floor program, or (None, why not)."""
    from tylo.runtime import native
    cc = native.compiler_command()
    if shutil.which(cc[0]) is None:
        return None, f"no C compiler ({cc[0]} not found)"
    src, exe = os.path.join(folder, "floor.c"), os.path.join(folder, "floor")
    with open(src, "w") as f:
        f.write(FLOOR_C)
    out = subprocess.run([*cc, "-O2", src, "-o", exe, "-ldl"], capture_output=True, text=True)
    if out.returncode != 0:
        return None, f"the C floor program did not build: {out.stderr.strip()[-500:]}"
    return exe, None


def measure_floor(exe, cubin, params, batch, repeat):
    ns = 4096
    args = [f"ptr:{ns * 4}" if p.startswith("*") else f"i32:{ns}" for p in params]
    if any(not (p.startswith("*") or p == "i32") for p in params):
        raise RuntimeError(f"the floor program passes pointers and i32 only; the kernel takes {params}")
    out = subprocess.run([exe, cubin, "vadd", str((ns + 255) // 256), "256", str(batch), str(repeat), *args],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"the C floor program failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout)["launch"]


def measure_compile(name, code, cache_var):
    with tempfile.TemporaryDirectory() as cache:
        env = {cache_var: cache}
        cold = run_child(code, env)
        warm = run_child(code, env)
    return {"framework": name, "cold_ms": cold["first"] * 1e3, "warm_ms": warm["first"] * 1e3,
            "stages": cold.get("stages_ms")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=256, help="launches per timed batch")
    ap.add_argument("--repeat", type=int, default=60, help="timed batches (the median is reported)")
    ap.add_argument("--gemm-shape", type=int, nargs=3, default=(256, 256, 256), metavar=("M", "N", "K"))
    ap.add_argument("--skip-compile", action="store_true", help="launch and GEMM host paths only")
    args = ap.parse_args()
    b, r = str(args.batch), str(args.repeat)
    work = tempfile.mkdtemp()
    cache = os.path.join(work, "cache")
    launch_rows = []   # (label, seconds or None, note)

    # tylo first: its cubin is what the C floor launches
    cubin = os.path.join(work, "vadd.cubin")
    native_run = run_child(TYLO_CHILD, {"TYLO_CACHE_DIR": cache}, [b, r, cubin])
    ctypes_run = run_child(TYLO_CHILD, {"TYLO_CACHE_DIR": cache, "TYLO_NATIVE_LAUNCH": "0"}, [b, r, cubin])
    print(f"native launcher: {native_run['native']} (kernel[grid, block] is a {native_run['bound']})")
    exe, why = build_floor(work)
    if exe is None:
        print(f"C floor: NOT MEASURED: {why}")
        launch_rows.append(("C cuLaunchKernel loop (floor)", None, why))
    else:
        launch_rows.append(("C cuLaunchKernel loop (floor)", measure_floor(exe, cubin, native_run["params"],
                                                                           args.batch, args.repeat), ""))
    launch_rows.append((f"tylo, native launcher ({native_run['bound']})", native_run["launch"], ""))
    launch_rows.append(("tylo, ctypes path (TYLO_NATIVE_LAUNCH=0)", ctypes_run["launch"], ""))
    try:
        launch_rows.append(("cuda-bindings cuLaunchKernel", run_child(BINDINGS_CHILD, {"TYLO_CACHE_DIR": cache},
                                                                      [b, r])["launch"], ""))
    except RuntimeError as e:
        launch_rows.append(("cuda-bindings cuLaunchKernel", None, str(e).strip().splitlines()[-1]))
    try:
        import triton  # noqa: F401
        with tempfile.TemporaryDirectory() as tcache:
            launch_rows.append(("triton", run_child(TRITON_CHILD, {"TRITON_CACHE_DIR": tcache}, [b, r])["launch"], ""))
    except ImportError:
        launch_rows.append(("triton", None, "not installed"))

    floor = launch_rows[0][1]
    print(f"\nlaunch host time, vector add on {4096} elements (median of {r} batches of {b} launches)")
    print(f"{'path':<48} {'us':>8} {'x floor':>8}")
    for label, t, note in launch_rows:
        us = f"{t * 1e6:>8.2f}" if t is not None else f"{'-':>8}"
        ratio = f"{t / floor:>8.2f}" if t is not None and floor else f"{'-':>8}"
        print(f"{label:<48} {us} {ratio}" + (f"  ({note})" if note else ""))
    if floor:
        verdict = native_run["launch"] / floor
        print(f"target: tylo native within 1.5x of the floor: {verdict:.2f}x -> "
              f"{'met' if verdict <= 1.5 else 'NOT met'}")

    M, N, K = args.gemm_shape
    gemm_args = [os.path.join(ROOT, "examples"), str(M), str(N), str(K), b, r]
    gemm = run_child(GEMM_CHILD, {"TYLO_CACHE_DIR": cache}, gemm_args)
    gemm_ctypes = run_child(GEMM_CHILD, {"TYLO_CACHE_DIR": cache, "TYLO_NATIVE_LAUNCH": "0"}, gemm_args)
    print(f"\nGEMM host path, bf16 {M}x{N}x{K}, cached configuration (median of {r} interleaved batches of {b} calls)")
    print(f"{'call':<48} {'us':>8} {'x torch':>8}")
    for label, t, ref in (("torch.matmul(a, b)", gemm["torch"], gemm["torch"]),
                          ("hopper_gemm.launch, native launcher", gemm["tylo"], gemm["torch"]),
                          ("torch.matmul(a, b) (second process)", gemm_ctypes["torch"], gemm_ctypes["torch"]),
                          ("hopper_gemm.launch, ctypes path", gemm_ctypes["tylo"], gemm_ctypes["torch"])):
        print(f"{label:<48} {t * 1e6:>8.2f} {t / ref:>8.2f}")
    print(f"target: hopper_gemm.launch no slower than torch.matmul: {gemm['tylo'] / gemm['torch']:.2f}x -> "
          f"{'met' if gemm['tylo'] <= gemm['torch'] else 'NOT met'}")

    compile_rows = []
    if not args.skip_compile:
        compile_rows.append(measure_compile("tylo", TYLO_CHILD, "TYLO_CACHE_DIR"))
        try:
            import triton  # noqa: F401, F811
            compile_rows.append(measure_compile("triton", TRITON_CHILD, "TRITON_CACHE_DIR"))
        except ImportError:
            pass
        print(f"\n{'framework':<10} {'cold compile ms':>16} {'warm first call ms':>19}")
        for row in compile_rows:
            print(f"{row['framework']:<10} {row['cold_ms']:>16.1f} {row['warm_ms']:>19.1f}")
        stages = compile_rows[0]["stages"]
        if isinstance(stages, dict):
            print("tylo cold compile stages (ms): " + ", ".join(f"{k} {v:.1f}" for k, v in stages.items()))
    print(json.dumps({"launch_us": {label: (t * 1e6 if t is not None else None) for label, t, _ in launch_rows},
                      "gemm_us": {"torch": gemm["torch"] * 1e6, "tylo_native": gemm["tylo"] * 1e6,
                                  "tylo_ctypes": gemm_ctypes["tylo"] * 1e6, "torch_second": gemm_ctypes["torch"] * 1e6},
                      "compile": compile_rows, "native": native_run["native"]}))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
