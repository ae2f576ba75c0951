"""Ad-hoc launch-cost breakdown on a GPU machine (not a test):
PYTHONPATH=. python tests/runtime/bench_launch_detail.py"""
import ctypes
import statistics
import struct
import time

from tylo.runtime import driver, launch

driver.ensure_context(0)
mod = driver.load_module(launch._EMPTY_PTX)
fn = driver.get_function(mod, "tylo_empty")
L = launch.Launcher(fn, [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32, ctypes.c_float])
vals = (0, 0, 1024, 1.5)
d = driver._bindings()


def med(f, batch=64, repeat=30):
    for _ in range(batch): f()
    driver.synchronize()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for _ in range(batch): f()
        t1 = time.perf_counter_ns()
        driver.synchronize()
        ts.append((t1 - t0) / batch)
    return round(statistics.median(ts)), round(min(ts))


def proc(name, ver=12000, flags=1):
    r = d.cuGetProcAddress(name, ver, flags)
    assert int(r[0]) == 0, r
    return int(r[1])

vp, u = ctypes.c_void_p, ctypes.c_uint
LK = ctypes.CFUNCTYPE(ctypes.c_int, vp, u, u, u, u, u, u, u, vp, vp, vp)(proc(b"cuLaunchKernel"))
LX = ctypes.CFUNCTYPE(ctypes.c_int, vp, vp, vp, vp)(proc(b"cuLaunchKernelEx"))
print("dlsym cuLaunchKernel addr", hex(ctypes.cast(L._cu_launch, vp).value), "proc", hex(proc(b"cuLaunchKernel")))
L.pack(vals, block=(32, 1, 1))
ex, cfg, func, params = L._cu_launch_ex, L._cfg_addr, L.function, L._params_addr
cl = L._cu_launch
f = d.CUfunction(fn)
print("Ex addr dlsym", hex(ctypes.cast(ex, vp).value), "proc", hex(proc(b"cuLaunchKernelEx")))
pk, st, base = L._pack_plain, L._storage, L._base
s4 = struct.Struct("<QQif").pack_into
slots = [t() for t in L.param_ctypes]
def setslots():
    for s, v in zip(slots, vals): s.value = v
methods = {
    "dlsym ex-call": lambda: ex(cfg, func, params, None),
    "proc ex-call": lambda: LX(cfg, func, params, None),
    "dlsym basic-call": lambda: cl(func, 1, 1, 1, 32, 1, 1, 0, 0, params, None),
    "bindings cuLaunchKernel": lambda: d.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, 0),
    "Launcher.launch": lambda: L.launch(1, 1, 1, 32, 1, 1, 0, vals),
    "Launcher.launch_basic": lambda: L.launch_basic(1, 1, 1, 32, 1, 1, 0, vals),
    "pack4+ex-call": lambda: (s4(st, base, *vals), ex(cfg, func, params, None)),
    "pack14+ex-call": lambda: (pk(st, base, *vals, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0), ex(cfg, func, params, None)),
    "slots+bindings": lambda: (setslots(), d.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, 0)),
}
res = {k: [] for k in methods}
for rnd in range(25):
    for k, m in methods.items():
        res[k].append(med(m, batch=64, repeat=3)[0])
for k, v in res.items():
    print(f"{k:28s} median {statistics.median(v):6.0f}  min {min(v):6.0f}")
pk, st, base = L._pack_plain, L._storage, L._base
print("pack_into 14", med(lambda: pk(st, base, *vals, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0), 256))
s4 = struct.Struct("<QQif").pack_into
print("pack_into 4", med(lambda: s4(st, base, *vals), 256))
slots = [t() for t in L.param_ctypes]
def setslots():
    for s, v in zip(slots, vals): s.value = v
print("slots 4", med(setslots, 256))
