"""The CUDA driver, called through ctypes on ``libcuda.so.1`` (the launch fast
path lives in ``launch.py`` and uses the same library handle, ``_dll()``).

cuda-bindings is not imported here: importing ``cuda.bindings.driver`` costs
about 23 ms, which used to dominate the first launch of a cached kernel in a
fresh process. Each driver entry point is resolved once, on first use, from the
one ``ctypes.CDLL('libcuda.so.1')`` handle, with argtypes/restype set from the
prototypes in ``cuda.h``; where ``cuda.h`` maps the API name to a versioned
symbol (``#define cuMemAlloc cuMemAlloc_v2``) the versioned symbol is the one
called. Errors name the API call as the header spells it (``cuMemAlloc``).

Importing this module makes no driver call. The driver is initialised lazily
(``cuInit``) on the first function that needs it, once, under a lock. On a
machine without libcuda or without a device, those functions raise
``NoGPUError``; ``gpu_available()`` returns False and never raises.

Contexts: ``ensure_context(device)`` uses the context that is current on the
calling thread when it belongs to ``device`` (so a context made by torch or
cupy, normally the device's primary context, is shared); otherwise it
retains the device's primary context (once per process) and makes it current.
The other functions here use whatever context is current, and fall back to
``ensure_context(0)`` when the thread has none.
"""

from __future__ import annotations

import copy
import ctypes
import os
import threading

import numpy as np

from .compat import cuda_version, load_failure_hint
from .errors import DRIVER_NOT_FOUND, CudaError, NoGPUError

__all__ = [
    "gpu_available", "driver_version", "devices", "device_count", "ensure_context",
    "current_context", "current_device", "compute_capability", "load_module",
    "unload_module", "get_function", "function_attributes",
    "set_max_dynamic_shared_memory", "mem_alloc", "mem_free", "memcpy_htod",
    "memcpy_dtoh", "memcpy_dtod", "memset_d8", "synchronize", "stream_synchronize",
    "pointer_device", "sm_count",
]

_lock = threading.RLock()
_state: dict = {"init": None}      # None: not tried; True: ok; NoGPUError: failed
_primary: dict[int, int] = {}      # device ordinal -> retained primary CUcontext
_modules: dict[int, bytes] = {}    # CUmodule -> image bytes kept alive
_lib: dict = {}                    # "handle": the ctypes.CDLL of libcuda.so.1
_fns: dict = {}                    # API name -> resolved ctypes function
_d = None                          # cuda.bindings.driver, only for _bindings()

_NO_GPU_CODES = {100, 34}          # CUDA_ERROR_NO_DEVICE, CUDA_ERROR_STUB_LIBRARY
_LIBCUDA = "libcuda.so.1"

# --------------------------------------------------------------- cuda.h values
# CUdevice_attribute
_DEV_MAX_THREADS_PER_BLOCK = 1
_DEV_MULTIPROCESSOR_COUNT = 16
_DEV_COMPUTE_CAPABILITY_MAJOR = 75
_DEV_COMPUTE_CAPABILITY_MINOR = 76
_DEV_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
# CUfunction_attribute
_FUNC_MAX_THREADS_PER_BLOCK = 0
_FUNC_SHARED_SIZE_BYTES = 1
_FUNC_CONST_SIZE_BYTES = 2
_FUNC_LOCAL_SIZE_BYTES = 3
_FUNC_NUM_REGS = 4
_FUNC_PTX_VERSION = 5
_FUNC_BINARY_VERSION = 6
_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
# CUpointer_attribute
_PTR_DEVICE_ORDINAL = 9

# ------------------------------------------------------------------ prototypes
# CUresult is an enum (int); CUdevice is int; CUdeviceptr is unsigned long long
# (64-bit hosts); CUcontext/CUmodule/CUfunction/CUstream are pointers.
_i, _u, _uc, _sz, _ull = ctypes.c_int, ctypes.c_uint, ctypes.c_ubyte, ctypes.c_size_t, \
    ctypes.c_ulonglong
_vp, _cp = ctypes.c_void_p, ctypes.c_char_p
_P = ctypes.POINTER

# API name -> (libcuda symbol, argtypes)
_PROTOS: dict[str, tuple[str, list]] = {
    "cuInit": ("cuInit", [_u]),                                       # (unsigned Flags)
    "cuDriverGetVersion": ("cuDriverGetVersion", [_P(_i)]),           # (int*)
    "cuDeviceGetCount": ("cuDeviceGetCount", [_P(_i)]),               # (int*)
    "cuDeviceGet": ("cuDeviceGet", [_P(_i), _i]),                     # (CUdevice*, int)
    "cuDeviceGetName": ("cuDeviceGetName", [_cp, _i, _i]),            # (char*, int, CUdevice)
    "cuDeviceGetAttribute": ("cuDeviceGetAttribute", [_P(_i), _i, _i]),  # (int*, attr, CUdevice)
    "cuDeviceTotalMem": ("cuDeviceTotalMem_v2", [_P(_sz), _i]),       # (size_t*, CUdevice)
    "cuDevicePrimaryCtxRetain": ("cuDevicePrimaryCtxRetain", [_P(_vp), _i]),  # (CUcontext*, CUdevice)
    "cuCtxGetCurrent": ("cuCtxGetCurrent", [_P(_vp)]),                # (CUcontext*)
    "cuCtxSetCurrent": ("cuCtxSetCurrent", [_vp]),                    # (CUcontext)
    "cuCtxGetDevice": ("cuCtxGetDevice", [_P(_i)]),                   # (CUdevice*)
    "cuCtxSynchronize": ("cuCtxSynchronize", []),                     # (void)
    "cuModuleLoadData": ("cuModuleLoadData", [_P(_vp), _cp]),         # (CUmodule*, const void*)
    "cuModuleUnload": ("cuModuleUnload", [_vp]),                      # (CUmodule)
    "cuModuleGetFunction": ("cuModuleGetFunction", [_P(_vp), _vp, _cp]),  # (CUfunction*, CUmodule, const char*)
    "cuFuncGetAttribute": ("cuFuncGetAttribute", [_P(_i), _i, _vp]),  # (int*, attr, CUfunction)
    "cuFuncSetAttribute": ("cuFuncSetAttribute", [_vp, _i, _i]),      # (CUfunction, attr, int)
    # (int*, CUfunction, const CUlaunchConfig*): runtime/launch.py's max_active_clusters
    "cuOccupancyMaxActiveClusters": ("cuOccupancyMaxActiveClusters", [_P(_i), _vp, _vp]),
    "cuMemAlloc": ("cuMemAlloc_v2", [_P(_ull), _sz]),                 # (CUdeviceptr*, size_t)
    "cuMemFree": ("cuMemFree_v2", [_ull]),                            # (CUdeviceptr)
    "cuMemcpyHtoD": ("cuMemcpyHtoD_v2", [_ull, _vp, _sz]),            # (CUdeviceptr, const void*, size_t)
    "cuMemcpyDtoH": ("cuMemcpyDtoH_v2", [_vp, _ull, _sz]),            # (void*, CUdeviceptr, size_t)
    "cuMemcpyDtoD": ("cuMemcpyDtoD_v2", [_ull, _ull, _sz]),           # (CUdeviceptr, CUdeviceptr, size_t)
    "cuMemsetD8": ("cuMemsetD8_v2", [_ull, _uc, _sz]),                # (CUdeviceptr, unsigned char, size_t)
    "cuStreamSynchronize": ("cuStreamSynchronize", [_vp]),            # (CUstream)
    # events and a stream-ordered memset, for timing (runtime/events.py)
    "cuEventCreate": ("cuEventCreate", [_P(_vp), _u]),                # (CUevent*, unsigned Flags)
    "cuEventRecord": ("cuEventRecord", [_vp, _vp]),                   # (CUevent, CUstream)
    "cuEventSynchronize": ("cuEventSynchronize", [_vp]),              # (CUevent)
    "cuEventElapsedTime": ("cuEventElapsedTime_v2", [_P(ctypes.c_float), _vp, _vp]),  # (float*, CUevent, CUevent)
    "cuEventDestroy": ("cuEventDestroy_v2", [_vp]),                   # (CUevent)
    "cuMemsetD8Async": ("cuMemsetD8Async", [_ull, _uc, _sz, _vp]),    # (CUdeviceptr, unsigned char, size_t, CUstream)
    "cuPointerGetAttribute": ("cuPointerGetAttribute", [_vp, _i, _ull]),  # (void*, attr, CUdeviceptr)
    "cuGetErrorName": ("cuGetErrorName", [_i, _P(_cp)]),              # (CUresult, const char**)
    "cuGetErrorString": ("cuGetErrorString", [_i, _P(_cp)]),          # (CUresult, const char**)
    # (CUtensorMap*, dataType, rank, globalAddress, globalDim*, globalStrides*, boxDim*,
    #  elementStrides*, interleave, swizzle, l2Promotion, oobFill): runtime/tma.py
    "cuTensorMapEncodeTiled": ("cuTensorMapEncodeTiled", [_vp, _i, _u, _vp, _P(ctypes.c_uint64),
                                                          _P(ctypes.c_uint64), _P(ctypes.c_uint32),
                                                          _P(ctypes.c_uint32), _i, _i, _i, _i]),
}


def _dll() -> ctypes.CDLL:
    """The process's one ctypes handle of libcuda.so.1 (shared with launch.py);
    raises NoGPUError when the library cannot be loaded."""
    lib = _lib.get("handle")
    if lib is not None:
        return lib
    with _lock:
        lib = _lib.get("handle")
        if lib is None:
            try:
                lib = ctypes.CDLL(_LIBCUDA)
            except OSError as e:
                raise NoGPUError(DRIVER_NOT_FOUND, call=f"dlopen({_LIBCUDA})",
                                 description=str(e)) from None
            _lib["handle"] = lib
        return lib


def _resolve(name: str):
    symbol, argtypes = _PROTOS[name]
    try:
        lib = _dll()
    except NoGPUError as e:
        raise NoGPUError(DRIVER_NOT_FOUND, call=name, description=e.description) from None
    try:
        fn = lib[symbol]
    except AttributeError:
        raise NoGPUError(DRIVER_NOT_FOUND, call=name,
                         description=f"{_LIBCUDA} has no symbol {symbol} "
                                     "(the CUDA driver is too old)") from None
    fn.argtypes = argtypes
    fn.restype = ctypes.c_int
    _fns[name] = fn
    return fn


def _fn(name: str):
    fn = _fns.get(name)
    return fn if fn is not None else _resolve(name)


def _bindings():
    """cuda.bindings.driver, imported on demand. Nothing in tylo's load/launch
    path uses it; it is kept for the launch-cost comparisons (launch.py's
    ``_launch_cost_ns``, tests/runtime/bench_launch_detail.py)."""
    global _d
    if _d is None:
        try:
            from cuda.bindings import driver
        except Exception as e:  # pragma: no cover - cuda-python is a dependency
            raise NoGPUError(DRIVER_NOT_FOUND, call="import cuda.bindings.driver",
                             description=str(e)) from None
        _d = driver
    return _d


def _error_name_and_text(code: int) -> tuple[str | None, str | None]:
    name = text = None
    try:
        s = ctypes.c_char_p()
        if _fn("cuGetErrorName")(code, ctypes.byref(s)) == 0 and s.value:
            name = s.value.decode(errors="replace")
        s = ctypes.c_char_p()
        if _fn("cuGetErrorString")(code, ctypes.byref(s)) == 0 and s.value:
            text = s.value.decode(errors="replace")
    except Exception:
        pass
    return name, text


def _raise(code: int, call: str):
    code = int(code)
    name, text = _error_name_and_text(code)
    if code in _NO_GPU_CODES:
        raise NoGPUError(code, name, call, text)
    raise CudaError(code, name, call, text)


def _call(name: str, *args) -> None:
    """Call driver API ``name`` (as cuda.h spells it) with ctypes arguments;
    raise CudaError (NoGPUError for no device / no driver) on failure."""
    err = _fn(name)(*args)
    if err:
        _raise(err, name)


def _u64(value, what: str) -> int:
    """``value`` as a CUdeviceptr / handle value: ctypes would wrap a negative
    or too-large int silently, so check it here."""
    v = int(value)
    if not 0 <= v < 1 << 64:
        raise OverflowError(f"{what} {value!r} does not fit in 64 unsigned bits")
    return v


def _out_int(name: str, *args) -> int:
    """Call ``name(int *out, *args)``; return ``out``."""
    out = ctypes.c_int()
    _call(name, ctypes.byref(out), *args)
    return out.value


def _out_ptr(name: str, *args) -> int:
    """Call ``name(void **out, *args)``; return ``out`` as int (0 for NULL)."""
    out = ctypes.c_void_p()
    _call(name, ctypes.byref(out), *args)
    return out.value or 0


def _set_current(ctx: int) -> None:
    """cuCtxSetCurrent(ctx) (used by launch.py's retry path)."""
    _call("cuCtxSetCurrent", _u64(ctx, "CUcontext"))


def _init():
    """Initialise the driver once; raise NoGPUError (cached) when impossible."""
    st = _state["init"]
    if st is True:
        return
    if st is not None:
        raise copy.copy(st)  # a fresh exception each time: the cached one's traceback must not grow
    with _lock:
        st = _state["init"]
        if st is True:
            return
        if st is not None:
            raise copy.copy(st)
        try:
            try:
                _dll()
            except NoGPUError as e:
                raise OSError(e.description) from None
            err = _fn("cuInit")(0)
            if err != 0:
                name, text = _error_name_and_text(err)
                if err in _NO_GPU_CODES:
                    exc = NoGPUError(err, name, "cuInit", text)
                else:
                    exc = CudaError(err, name, "cuInit", text)
                    _state["init"] = exc
                    raise exc
                raise exc
            cnt = ctypes.c_int()
            if _fn("cuDeviceGetCount")(ctypes.byref(cnt)) != 0 or cnt.value == 0:
                raise NoGPUError(100, "CUDA_ERROR_NO_DEVICE", "cuDeviceGetCount",
                                 "no CUDA device found")
        except NoGPUError as e:
            _state["init"] = e
            raise
        except CudaError:
            raise
        except Exception as e:  # libcuda missing (dlopen failed) or unusable
            exc = NoGPUError(DRIVER_NOT_FOUND, None, "cuInit",
                             f"the CUDA driver library could not be loaded: {e}")
            _state["init"] = exc
            raise exc from None
        _state["init"] = True


def gpu_available() -> bool:
    """True when a CUDA driver and at least one device are present. Never raises."""
    try:
        _init()
        return True
    except Exception:
        return False


def driver_version() -> int | None:
    """The driver's CUDA version as an int (e.g. 13000), or None without a driver."""
    try:
        _init()
        return _out_int("cuDriverGetVersion")
    except Exception:
        return None


def device_count() -> int:
    """Number of CUDA devices; 0 without a GPU (never raises)."""
    try:
        _init()
        return _out_int("cuDeviceGetCount")
    except Exception:
        return 0


def _device(ordinal: int) -> int:
    _init()
    return _out_int("cuDeviceGet", int(ordinal))


def _attr(dev: int, attr: int) -> int:
    return _out_int("cuDeviceGetAttribute", attr, dev)


def compute_capability(device: int = 0) -> tuple[int, int]:
    """(major, minor) of ``device``; raises NoGPUError without a GPU."""
    dev = _device(device)
    return (_attr(dev, _DEV_COMPUTE_CAPABILITY_MAJOR),
            _attr(dev, _DEV_COMPUTE_CAPABILITY_MINOR))


def interpreting() -> bool:
    """``TYLO_INTERPRET=1``: kernels run in tylo's CPU interpreter on host (numpy) arrays."""
    return os.environ.get("TYLO_INTERPRET") == "1"


#: the device ``devices()`` reports under TYLO_INTERPRET=1 on a machine without a GPU
INTERPRETER_DEVICE = {"ordinal": 0, "name": "tylo interpreter", "compute_capability": "sm_90a", "major": 9,
                      "minor": 0, "total_memory": 0, "sm_count": 4, "max_shared_memory_per_block_optin": 232448,
                      "max_threads_per_block": 1024}


def devices() -> list[dict]:
    """One dict per device: ordinal, name, compute_capability ('sm_90'), major,
    minor, total_memory (bytes), sm_count, max_shared_memory_per_block_optin,
    max_threads_per_block. [] without a GPU; never raises. Under TYLO_INTERPRET=1 without
    a GPU: the interpreter's pseudo-device (``INTERPRETER_DEVICE``, 4 SMs)."""
    if interpreting():
        found = _devices()
        return found or [dict(INTERPRETER_DEVICE)]
    return _devices()


_SM_COUNTS: dict = {}


def sm_count(device: int = 0) -> int:
    """Streaming multiprocessors of ``device`` (``devices()``'s ``sm_count``), cached: persistent-grid
    launch paths ask on every call. IndexError without such a device."""
    key = (device, interpreting())          # the interpreter's pseudo-device has its own count
    n = _SM_COUNTS.get(key)
    if n is None:
        n = _SM_COUNTS[key] = devices()[device]["sm_count"]
    return n


def _devices() -> list[dict]:
    try:
        _init()
        out = []
        for i in range(_out_int("cuDeviceGetCount")):
            dev = _out_int("cuDeviceGet", i)
            buf = ctypes.create_string_buffer(256)
            _call("cuDeviceGetName", buf, 256, dev)
            name = buf.raw.split(b"\0", 1)[0].decode(errors="replace")
            major = _attr(dev, _DEV_COMPUTE_CAPABILITY_MAJOR)
            minor = _attr(dev, _DEV_COMPUTE_CAPABILITY_MINOR)
            total = ctypes.c_size_t()
            _call("cuDeviceTotalMem", ctypes.byref(total), dev)
            out.append({
                "ordinal": i,
                "name": name,
                "compute_capability": f"sm_{major}{minor}",
                "major": major,
                "minor": minor,
                "total_memory": int(total.value),
                "sm_count": _attr(dev, _DEV_MULTIPROCESSOR_COUNT),
                "max_shared_memory_per_block_optin":
                    _attr(dev, _DEV_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
                "max_threads_per_block": _attr(dev, _DEV_MAX_THREADS_PER_BLOCK),
            })
        return out
    except Exception:
        return []


# ----------------------------------------------------------------- contexts

def current_context() -> int:
    """The CUcontext current on this thread as an int (0 when none)."""
    _init()
    return _out_ptr("cuCtxGetCurrent")


def _primary_context(device: int) -> int:
    ctx = _primary.get(device)
    if ctx is None:
        with _lock:
            ctx = _primary.get(device)
            if ctx is None:
                dev = _device(device)
                ctx = _out_ptr("cuDevicePrimaryCtxRetain", dev)
                _primary[device] = ctx
    return ctx


def ensure_context(device: int = 0) -> int:
    """Make sure a context for ``device`` is current on this thread; return it.

    A context already current on this thread for the same device (torch's and
    cupy's, for example) is used as is. Otherwise the device's primary context
    is retained (once per process, cached) and made current.
    """
    _init()
    cur = _out_ptr("cuCtxGetCurrent")
    if cur:
        if _out_int("cuCtxGetDevice") == device:
            return cur
    ctx = _primary_context(device)
    _call("cuCtxSetCurrent", ctx)
    return ctx


def _need_context() -> int:
    """The current context, or device 0's primary context made current."""
    _init()
    cur = _out_ptr("cuCtxGetCurrent")
    return cur if cur else ensure_context(0)


def current_device() -> int:
    """Ordinal of the device of this thread's context (making device 0's
    primary context current when there is none)."""
    _need_context()
    return _out_int("cuCtxGetDevice")


# ------------------------------------------------------------------ modules

def load_module(image: bytes) -> int:
    """Load a cubin (or PTX text, NUL-terminated here if needed) with
    cuModuleLoadData into the current context; return the CUmodule as int.
    The image bytes are kept alive until ``unload_module``."""
    if not isinstance(image, (bytes, bytearray, memoryview)):
        raise TypeError(f"load_module expects bytes (a cubin or PTX), got {type(image).__name__}")
    image = bytes(image)
    if not image.startswith(b"\x7fELF") and not image.endswith(b"\0"):
        image += b"\0"  # PTX text must be NUL-terminated
    _need_context()
    try:
        mod = _out_ptr("cuModuleLoadData", image)
    except CudaError as exc:  # a toolchain newer than the driver: say which to upgrade
        hint = load_failure_hint(exc.name, cuda_version(driver_version()))
        if hint is None or exc.hint:
            raise
        raise CudaError(exc.code, exc.name, exc.call, exc.description, hint) from None
    _modules[mod] = image
    return mod


def unload_module(module: int) -> None:
    _call("cuModuleUnload", _u64(module, "CUmodule"))
    _modules.pop(int(module), None)


def get_function(module: int, name: str) -> int:
    """CUfunction (as int) of kernel ``name`` in ``module``."""
    _init()
    return _out_ptr("cuModuleGetFunction", _u64(module, "CUmodule"), name.encode())


_FUNC_ATTRS = (
    ("num_regs", _FUNC_NUM_REGS),
    ("shared_size_bytes", _FUNC_SHARED_SIZE_BYTES),
    ("max_threads_per_block", _FUNC_MAX_THREADS_PER_BLOCK),
    ("local_size_bytes", _FUNC_LOCAL_SIZE_BYTES),
    ("const_size_bytes", _FUNC_CONST_SIZE_BYTES),
    ("ptx_version", _FUNC_PTX_VERSION),
    ("binary_version", _FUNC_BINARY_VERSION),
    ("max_dynamic_shared_size_bytes", _FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES),
)


def function_attributes(func: int) -> dict:
    """num_regs, shared_size_bytes (static), max_threads_per_block,
    local_size_bytes, const_size_bytes, ptx_version, binary_version,
    max_dynamic_shared_size_bytes."""
    _init()
    f = _u64(func, "CUfunction")
    return {k: _out_int("cuFuncGetAttribute", a, f) for k, a in _FUNC_ATTRS}


def set_max_dynamic_shared_memory(func: int, nbytes: int) -> None:
    """cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES): needed before
    launching with more than 48 KiB of dynamic shared memory."""
    _init()
    n = int(nbytes)
    if not -(1 << 31) <= n < 1 << 31:
        raise OverflowError(f"set_max_dynamic_shared_memory: {nbytes!r} does not fit in an int")
    _call("cuFuncSetAttribute", _u64(func, "CUfunction"),
          _FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES, n)


# ------------------------------------------------------------------- memory

def mem_alloc(nbytes: int) -> int:
    """cuMemAlloc; returns the device pointer as int. ``mem_alloc(0)`` is 0."""
    nbytes = int(nbytes)
    if nbytes < 0:
        raise ValueError(f"mem_alloc: negative size {nbytes}")
    _need_context()
    if nbytes == 0:
        return 0
    out = ctypes.c_ulonglong()
    _call("cuMemAlloc", ctypes.byref(out), _u64(nbytes, "mem_alloc size"))
    return out.value


def mem_free(ptr: int) -> None:
    """cuMemFree; ``mem_free(0)`` does nothing."""
    if not ptr:
        return
    p = _u64(ptr, "device pointer")
    _need_context()
    _call("cuMemFree", p)


def _host_address(buf, writable: bool) -> tuple[int, int, object]:
    """(address, nbytes, keepalive) of a C-contiguous host buffer."""
    if isinstance(buf, np.ndarray):
        arr = buf
    else:
        arr = np.frombuffer(memoryview(buf).cast("B"), dtype=np.uint8)
    if not arr.flags.c_contiguous:
        raise ValueError("host buffer must be C-contiguous")
    if writable and not arr.flags.writeable:
        raise ValueError("destination host buffer is read-only")
    return arr.ctypes.data, arr.nbytes, arr


def memcpy_htod(dst: int, host_buffer, nbytes: int | None = None) -> None:
    """Copy a C-contiguous host buffer (numpy array, bytes, ...) to device
    pointer ``dst`` (synchronous). ``nbytes`` defaults to the buffer's size."""
    addr, size, keep = _host_address(host_buffer, writable=False)
    n = size if nbytes is None else int(nbytes)
    if n > size:
        raise ValueError(f"memcpy_htod: {n} bytes requested, host buffer has {size}")
    if n == 0:
        return
    d = _u64(dst, "device pointer")
    n = _u64(n, "memcpy_htod size")
    _need_context()
    _call("cuMemcpyHtoD", d, addr, n)
    del keep


def memcpy_dtoh(host_buffer, src: int, nbytes: int | None = None) -> None:
    """Copy device memory at ``src`` into a writable C-contiguous host buffer."""
    addr, size, keep = _host_address(host_buffer, writable=True)
    n = size if nbytes is None else int(nbytes)
    if n > size:
        raise ValueError(f"memcpy_dtoh: {n} bytes requested, host buffer has {size}")
    if n == 0:
        return
    s = _u64(src, "device pointer")
    n = _u64(n, "memcpy_dtoh size")
    _need_context()
    _call("cuMemcpyDtoH", addr, s, n)
    del keep


def memcpy_dtod(dst: int, src: int, nbytes: int) -> None:
    if not nbytes:
        return
    d, s = _u64(dst, "device pointer"), _u64(src, "device pointer")
    n = _u64(nbytes, "memcpy_dtod size")
    _need_context()
    _call("cuMemcpyDtoD", d, s, n)


def memset_d8(ptr: int, value: int, nbytes: int) -> None:
    """Set ``nbytes`` bytes at ``ptr`` to ``value`` (0..255)."""
    if not 0 <= int(value) <= 255:
        raise ValueError(f"memset_d8: byte value {value} is not in 0..255")
    if not nbytes:
        return
    p, n = _u64(ptr, "device pointer"), _u64(nbytes, "memset_d8 size")
    _need_context()
    _call("cuMemsetD8", p, int(value), n)


def synchronize() -> None:
    """cuCtxSynchronize on the current context."""
    _need_context()
    _call("cuCtxSynchronize")


def stream_synchronize(handle: int) -> None:
    """cuStreamSynchronize(handle); 0 is the legacy default stream."""
    h = _u64(handle, "CUstream")
    _need_context()
    _call("cuStreamSynchronize", h)


def pointer_device(ptr: int) -> int | None:
    """Device ordinal owning device pointer ``ptr``, or None when unknown
    (no GPU, or not a device pointer)."""
    try:
        _init()
        out = ctypes.c_int()
        _call("cuPointerGetAttribute", ctypes.byref(out), _PTR_DEVICE_ORDINAL,
              _u64(ptr, "device pointer"))
        return out.value
    except Exception:
        return None
