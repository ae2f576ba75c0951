"""CPU cost of a cached launch, everything but the driver (no GPU: cuLaunchKernel is a no-op C
function compiled here), for the native launcher and the ctypes path side by side.

    PYTHONPATH=$PWD python benchmarks/launch_path_cpu.py [--gemm]

Measures ``kernel[grid, block](*args)`` for a hit: argument binding, classification, the
dependency check, the specialisation lookup, packing the parameters and the call of the launch
function. Arguments: two tylo DeviceArrays (fake pointers), an int and a float; then the same
with three TMA-binding-like frozen blobs and eight constexprs, the shape of a GEMM launch, also in 2 x 1
clusters (``kernel[grid, block, cluster]``, and the full ``kernel.launch(..., cluster=)`` form);
``--gemm``: examples/hopper_gemm.launch itself (compiled here for sm_90a; TMA encoding faked).
Prints medians over repeats, in microseconds.
"""
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import tylo
from tylo.runtime import native
from tylo.runtime.arrays import DeviceArray
from tylo.runtime.launch import ArgPacker, Launcher

SCALE = 2.0

NOOP_C = r"""
int noop_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned shared, void *stream, void **params, void **extra) { return 0; }
int noop_launch_ex(const void *config, void *f, void **params, void **extra) { return 0; }
"""


def noop_library():
    folder = tempfile.mkdtemp()
    src, lib = os.path.join(folder, "noop.c"), os.path.join(folder, "noop.so")
    with open(src, "w") as f:
        f.write(NOOP_C)
    subprocess.run([*native.compiler_command(), "-O2", "-shared", "-fPIC", src, "-o", lib], check=True)
    return ctypes.CDLL(lib)


def fake_launchers(lib, param_ctypes):
    """(ctypes Launcher, native Launcher) of a kernel whose launch functions are no-ops."""
    slow = Launcher.__new__(Launcher)
    ArgPacker.__init__(slow, param_ctypes)
    slow.function, slow.shared_bytes, slow._ctx = 0, 0, None
    slow._owner, slow._clones, slow._clone_lock = threading.get_ident(), {}, threading.Lock()
    vp = ctypes.c_void_p
    slow._cu_launch = lib.noop_launch
    slow._cu_launch_ex = lib.noop_launch_ex
    slow._cu_launch_ex.argtypes = [vp, vp, vp, vp]
    slow._cu_launch_ex.restype = ctypes.c_int
    module = native.load()
    if module is None:
        return slow, None
    addr = ctypes.cast(lib.noop_launch, vp).value
    addr_ex = ctypes.cast(lib.noop_launch_ex, vp).value
    return slow, module.Launcher(0, addr, addr_ex, slow.slots, slow.param_bytes, 0, slow)


class FrozenBlob:
    """A stand-in for a TMA binding: 128 bytes by value, static description (kind, plan, rank)."""
    __tylo_param_frozen__ = True

    def __init__(self, plan, seed):
        self.plan = plan
        self.data = bytes((seed + i) % 256 for i in range(128))

    def __tylo_param__(self):
        return ("tma", self.plan, 2, self.data)


def saxpy(out, x, n, a):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] * a * SCALE


def gemm_like(c_map, a_map, b_map, c, m, n, k, ld_row, ld_col, splits, STAGES: tylo.constexpr,
              GROUP_M: tylo.constexpr, C_BUFS: tylo.constexpr, A_MN: tylo.constexpr, B_MN: tylo.constexpr,
              TN: tylo.constexpr, CONSUMERS: tylo.constexpr, DIRECT: tylo.constexpr):
    i = tylo.thread_idx.x
    if i < m:
        c[i] = 0.0


def compile_offline(kernel, args, block):
    """Compile the specialisation a launch with ``args`` needs (no GPU: its launcher is faked)."""
    key = [block]
    full = list(args)
    for i, v in enumerate(full):
        c = kernel._classifiers[i] = (type(v), *kernel._classifier(i, v))
        key.append(c[1](v)[0])
    return kernel._compile_for(tuple(key), full, block)


def timed(call, batch, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for _ in range(batch):
            call()
        times.append((time.perf_counter_ns() - t0) / batch / 1e3)
    return statistics.median(times), min(times)


def measure(lib, fn, args, grid, block, batch, repeat, cluster=None, full_form=False):
    rows = {}
    for path in ("ctypes", "native"):
        kernel = tylo.jit(arch="sm_80")(fn)
        if path == "ctypes":
            kernel._native_tried = True  # the Python _Bound and the ctypes Launcher
        launch = kernel[grid, block] if cluster is None else kernel[grid, block, cluster]
        if full_form:
            def launch(*a, kernel=kernel):
                kernel.launch(*a, grid=grid, block=block, cluster=cluster)
        ck = compile_offline(kernel, args, tuple(block))
        slow, fast = fake_launchers(lib, ck.param_ctypes)
        if path == "native" and fast is None:
            rows[path] = None
            continue
        kernel._launchers[next(iter(kernel._kernels))] = slow if path == "ctypes" else fast
        kernel._classifiers = [None] * kernel._nparams
        launch(*args)
        if path == "native" and not full_form:
            assert type(launch).__name__ == "Bound"
        rows[path] = timed(lambda: launch(*args), batch, repeat)
    return rows


def fake_array(ptr, dtype):
    a = DeviceArray.__new__(DeviceArray)
    a.ptr, a.dtype_name = ptr, dtype
    return a


def gemm_host_path(lib, batch, repeat, M=256, N=256, K=256):
    """examples/hopper_gemm.launch for a cached M x N x K bf16 configuration, both paths: the TMA
    descriptor encoding, the SM count and the fixup's scratch faked (driver calls), the launch a no-op,
    the kernels compiled for sm_90a here (a few seconds)."""
    import numpy as np
    from ml_dtypes import bfloat16

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
    import hopper_gemm as hg

    from tylo.runtime import tma as rt_tma

    rt_tma.encode_tiled = lambda ptr, dtype, dims, strides, box, swizzle: bytes(128)
    from tylo.runtime import driver
    driver._SM_COUNTS[(0, False)] = 132
    hg.stream_scratch = lambda name, elems, dtype, device, stream, zero=True: fake_array(0x7F0003000000, dtype)
    rows = {}
    for path in ("ctypes", "native"):
        def launcher(ck, path=path):
            if ck._launcher is None:
                slow, fast = fake_launchers(lib, ck.param_ctypes)
                ck._launcher = slow if path == "ctypes" or fast is None else fast
            return ck._launcher
        tylo.CompiledKernel.launcher = property(launcher)
        for k in (hg.hopper_gemm,):
            k._arch = "sm_90a"
            k._native_tried = path == "ctypes"
            k._dispatcher = None
            k._bound_cache.clear()
            k._launchers.clear()
        hg._PREPARED.clear()
        arrays = []
        for shape, ptr in (((M, N), 0x7F0000000000), ((M, K), 0x7F0001000000), ((K, N), 0x7F0002000000)):
            a = DeviceArray.__new__(DeviceArray)
            a.ptr, a.dtype_name, a.shape, a.device, a.dtype = ptr, "bf16", shape, 0, np.dtype(bfloat16)
            arrays.append(a)
        c, a, b = arrays
        hg.launch(c, a, b, M, N, K)
        rows[path] = timed(lambda: hg.launch(c, a, b, M, N, K), batch, repeat)
    return rows


def main(batch=5000, repeat=40):
    lib = noop_library()
    out, x = (DeviceArray.__new__(DeviceArray) for _ in range(2))
    for a, ptr in ((out, 0x7F0000000000), (x, 0x7F0000010000)):
        a.ptr, a.dtype_name = ptr, "f32"
    from tylo.lang import tma
    plans = [tma.TMATile(tylo.bf16, (128, 64)), tma.TMATile(tylo.bf16, (256, 64)), tma.TMATile(tylo.bf16, (128, 64))]
    blobs = [FrozenBlob(p, s) for s, p in enumerate(plans)]
    gemm_args = (*blobs, out, 256, 512, 1024, 512, 1, 1, 4, 8, 2, False, False, 256, 2, False)
    cases = [
        ("vector add: 2 arrays, int, float", saxpy, (out, x, 1000, 1.5), (8, 1, 1), (128, 1, 1)),
        ("GEMM-like: 3 blobs, array, 6 ints, 8 constexprs", gemm_like, gemm_args, (132, 1, 1), (384, 1, 1)),
    ]
    state = "loaded" if native.load() is not None else f"NOT loaded: {native.status()}"
    print(f"native launcher {state}")
    print(f"{'case':<52} {'ctypes path us':>15} {'native us':>10} {'ratio':>6}")
    for name, fn, args, grid, block, *cluster in cases + [
            ("GEMM-like, 2 x 1 clusters: kernel[grid, block, cluster]", gemm_like, gemm_args, (132, 1, 1),
             (384, 1, 1), (2, 1, 1), False),
            ("GEMM-like, 2 x 1 clusters: kernel.launch(cluster=)", gemm_like, gemm_args, (132, 1, 1), (384, 1, 1),
             (2, 1, 1), True)]:
        rows = measure(lib, fn, args, grid, block, batch, repeat, *cluster)
        c, n = rows["ctypes"], rows["native"]
        ratio = f"{c[0] / n[0]:>5.1f}x" if n else "   -"
        print(f"{name:<52} {c[0]:>15.3f} {n[0] if n else float('nan'):>10.3f} {ratio}")
    if "--gemm" in sys.argv:
        for name, shape in (("256^3", (256, 256, 256)), ("1x4096x4096, split-K cluster", (1, 4096, 4096))):
            rows = gemm_host_path(lib, batch // 5, repeat, *shape)
            c, n = rows["ctypes"], rows["native"]
            print(f"{f'hopper_gemm.launch {name}':<52} {c[0]:>15.3f} {n[0]:>10.3f} {c[0] / n[0]:>5.1f}x")


if __name__ == "__main__":
    sys.exit(main())
