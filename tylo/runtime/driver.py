"""The CUDA driver, through cuda-bindings (everything except the launch fast
path, which lives in ``launch.py`` and calls libcuda through ctypes).

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

import threading

import numpy as np

from .errors import DRIVER_NOT_FOUND, CudaError, NoGPUError

__all__ = [
    "gpu_available", "driver_version", "devices", "device_count", "ensure_context",
    "current_context", "current_device", "compute_capability", "load_module",
    "unload_module", "get_function", "function_attributes",
    "set_max_dynamic_shared_memory", "mem_alloc", "mem_free", "memcpy_htod",
    "memcpy_dtoh", "memcpy_dtod", "memset_d8", "synchronize", "stream_synchronize",
    "pointer_device",
]

_lock = threading.RLock()
_state: dict = {"init": None}      # None: not tried; True: ok; NoGPUError: failed
_primary: dict[int, int] = {}      # device ordinal -> retained primary CUcontext
_modules: dict[int, bytes] = {}    # CUmodule -> image bytes kept alive
_d = None                          # cuda.bindings.driver, imported lazily

_NO_GPU_CODES = {100, 34}          # CUDA_ERROR_NO_DEVICE, CUDA_ERROR_STUB_LIBRARY


def _bindings():
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
    d = _bindings()
    name = text = None
    try:
        err, s = d.cuGetErrorName(d.CUresult(code))
        if int(err) == 0 and s:
            name = s.decode() if isinstance(s, bytes) else str(s)
        err, s = d.cuGetErrorString(d.CUresult(code))
        if int(err) == 0 and s:
            text = s.decode() if isinstance(s, bytes) else str(s)
    except Exception:
        pass
    return name, text


def _raise(code: int, call: str):
    code = int(code)
    name, text = _error_name_and_text(code)
    if code in _NO_GPU_CODES:
        raise NoGPUError(code, name, call, text)
    raise CudaError(code, name, call, text)


def _call(fn, *args, name: str | None = None):
    """Call a cuda.bindings function, raise CudaError on failure, return the
    result value(s) without the status."""
    call = name or fn.__name__
    try:
        res = fn(*args)
    except CudaError:
        raise
    except Exception as e:
        if _state["init"] is not True:
            raise NoGPUError(DRIVER_NOT_FOUND, call=call, description=str(e)) from None
        raise
    if isinstance(res, tuple):
        err, rest = res[0], res[1:]
    else:
        err, rest = res, ()
    if int(err) != 0:
        _raise(int(err), call)
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


def _init():
    """Initialise the driver once; raise NoGPUError (cached) when impossible."""
    st = _state["init"]
    if st is True:
        return
    if st is not None:
        raise st
    with _lock:
        st = _state["init"]
        if st is True:
            return
        if st is not None:
            raise st
        try:
            d = _bindings()
            res = d.cuInit(0)
            err = int(res[0] if isinstance(res, tuple) else res)
            if err != 0:
                name, text = _error_name_and_text(err)
                if err in _NO_GPU_CODES:
                    exc = NoGPUError(err, name, "cuInit", text)
                else:
                    exc = CudaError(err, name, "cuInit", text)
                    _state["init"] = exc
                    raise exc
                raise exc
            cnt = d.cuDeviceGetCount()
            if int(cnt[0]) != 0 or int(cnt[1]) == 0:
                raise NoGPUError(100, None, "cuDeviceGetCount", "no CUDA device found")
        except NoGPUError as e:
            _state["init"] = e
            raise
        except CudaError:
            raise
        except Exception as e:  # libcuda missing: cuda.pathfinder raises here
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
        return int(_call(_bindings().cuDriverGetVersion))
    except Exception:
        return None


def device_count() -> int:
    """Number of CUDA devices; 0 without a GPU (never raises)."""
    try:
        _init()
        return int(_call(_bindings().cuDeviceGetCount))
    except Exception:
        return 0


def _device(ordinal: int):
    _init()
    return _call(_bindings().cuDeviceGet, int(ordinal))


def _attr(dev, attr) -> int:
    return int(_call(_bindings().cuDeviceGetAttribute, attr, dev))


def compute_capability(device: int = 0) -> tuple[int, int]:
    """(major, minor) of ``device``; raises NoGPUError without a GPU."""
    d = _bindings()
    dev = _device(device)
    A = d.CUdevice_attribute
    return (_attr(dev, A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            _attr(dev, A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))


def devices() -> list[dict]:
    """One dict per device: ordinal, name, compute_capability ('sm_90'), major,
    minor, total_memory (bytes), sm_count, max_shared_memory_per_block_optin,
    max_threads_per_block. [] without a GPU; never raises."""
    try:
        _init()
        d = _bindings()
        A = d.CUdevice_attribute
        out = []
        for i in range(int(_call(d.cuDeviceGetCount))):
            dev = _call(d.cuDeviceGet, i)
            raw = _call(d.cuDeviceGetName, 256, dev)
            name = raw.split(b"\0", 1)[0].decode(errors="replace")
            major = _attr(dev, A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
            minor = _attr(dev, A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
            out.append({
                "ordinal": i,
                "name": name,
                "compute_capability": f"sm_{major}{minor}",
                "major": major,
                "minor": minor,
                "total_memory": int(_call(d.cuDeviceTotalMem, dev)),
                "sm_count": _attr(dev, A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
                "max_shared_memory_per_block_optin":
                    _attr(dev, A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
                "max_threads_per_block": _attr(dev, A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            })
        return out
    except Exception:
        return []


# ----------------------------------------------------------------- contexts

def current_context() -> int:
    """The CUcontext current on this thread as an int (0 when none)."""
    _init()
    return int(_call(_bindings().cuCtxGetCurrent))


def _primary_context(device: int) -> int:
    ctx = _primary.get(device)
    if ctx is None:
        with _lock:
            ctx = _primary.get(device)
            if ctx is None:
                dev = _device(device)
                ctx = int(_call(_bindings().cuDevicePrimaryCtxRetain, dev))
                _primary[device] = ctx
    return ctx


def ensure_context(device: int = 0) -> int:
    """Make sure a context for ``device`` is current on this thread; return it.

    A context already current on this thread for the same device (torch's and
    cupy's, for example) is used as is. Otherwise the device's primary context
    is retained (once per process, cached) and made current.
    """
    d = _bindings()
    _init()
    cur = int(_call(d.cuCtxGetCurrent))
    if cur:
        if int(_call(d.cuCtxGetDevice)) == device:
            return cur
    ctx = _primary_context(device)
    _call(d.cuCtxSetCurrent, d.CUcontext(ctx))
    return ctx


def _need_context() -> int:
    """The current context, or device 0's primary context made current."""
    _init()
    cur = int(_call(_bindings().cuCtxGetCurrent))
    return cur if cur else ensure_context(0)


def current_device() -> int:
    """Ordinal of the device of this thread's context (making device 0's
    primary context current when there is none)."""
    _need_context()
    return int(_call(_bindings().cuCtxGetDevice))


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
    mod = int(_call(_bindings().cuModuleLoadData, image))
    _modules[mod] = image
    return mod


def unload_module(module: int) -> None:
    d = _bindings()
    _call(d.cuModuleUnload, d.CUmodule(int(module)))
    _modules.pop(int(module), None)


def get_function(module: int, name: str) -> int:
    """CUfunction (as int) of kernel ``name`` in ``module``."""
    d = _bindings()
    _init()
    return int(_call(d.cuModuleGetFunction, d.CUmodule(int(module)), name.encode()))


def function_attributes(func: int) -> dict:
    """num_regs, shared_size_bytes (static), max_threads_per_block,
    local_size_bytes, const_size_bytes, ptx_version, binary_version,
    max_dynamic_shared_size_bytes."""
    d = _bindings()
    _init()
    F = d.CUfunction_attribute
    f = d.CUfunction(int(func))
    keys = {
        "num_regs": F.CU_FUNC_ATTRIBUTE_NUM_REGS,
        "shared_size_bytes": F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
        "max_threads_per_block": F.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
        "local_size_bytes": F.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
        "const_size_bytes": F.CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,
        "ptx_version": F.CU_FUNC_ATTRIBUTE_PTX_VERSION,
        "binary_version": F.CU_FUNC_ATTRIBUTE_BINARY_VERSION,
        "max_dynamic_shared_size_bytes": F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
    }
    return {k: int(_call(d.cuFuncGetAttribute, a, f)) for k, a in keys.items()}


def set_max_dynamic_shared_memory(func: int, nbytes: int) -> None:
    """cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES): needed before
    launching with more than 48 KiB of dynamic shared memory."""
    d = _bindings()
    _init()
    _call(d.cuFuncSetAttribute, d.CUfunction(int(func)),
          d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(nbytes))


# ------------------------------------------------------------------- memory

def mem_alloc(nbytes: int) -> int:
    """cuMemAlloc; returns the device pointer as int. ``mem_alloc(0)`` is 0."""
    nbytes = int(nbytes)
    if nbytes < 0:
        raise ValueError(f"mem_alloc: negative size {nbytes}")
    _need_context()
    if nbytes == 0:
        return 0
    return int(_call(_bindings().cuMemAlloc, nbytes))


def mem_free(ptr: int) -> None:
    """cuMemFree; ``mem_free(0)`` does nothing."""
    if not ptr:
        return
    d = _bindings()
    _need_context()
    _call(d.cuMemFree, d.CUdeviceptr(int(ptr)))


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
    d = _bindings()
    _need_context()
    _call(d.cuMemcpyHtoD, d.CUdeviceptr(int(dst)), addr, n)
    del keep


def memcpy_dtoh(host_buffer, src: int, nbytes: int | None = None) -> None:
    """Copy device memory at ``src`` into a writable C-contiguous host buffer."""
    addr, size, keep = _host_address(host_buffer, writable=True)
    n = size if nbytes is None else int(nbytes)
    if n > size:
        raise ValueError(f"memcpy_dtoh: {n} bytes requested, host buffer has {size}")
    if n == 0:
        return
    d = _bindings()
    _need_context()
    _call(d.cuMemcpyDtoH, addr, d.CUdeviceptr(int(src)), n)
    del keep


def memcpy_dtod(dst: int, src: int, nbytes: int) -> None:
    if not nbytes:
        return
    d = _bindings()
    _need_context()
    _call(d.cuMemcpyDtoD, d.CUdeviceptr(int(dst)), d.CUdeviceptr(int(src)), int(nbytes))


def memset_d8(ptr: int, value: int, nbytes: int) -> None:
    """Set ``nbytes`` bytes at ``ptr`` to ``value`` (0..255)."""
    if not 0 <= int(value) <= 255:
        raise ValueError(f"memset_d8: byte value {value} is not in 0..255")
    if not nbytes:
        return
    d = _bindings()
    _need_context()
    _call(d.cuMemsetD8, d.CUdeviceptr(int(ptr)), int(value), int(nbytes))


def synchronize() -> None:
    """cuCtxSynchronize on the current context."""
    _need_context()
    _call(_bindings().cuCtxSynchronize)


def stream_synchronize(handle: int) -> None:
    """cuStreamSynchronize(handle); 0 is the legacy default stream."""
    d = _bindings()
    _need_context()
    _call(d.cuStreamSynchronize, d.CUstream(int(handle)))


def pointer_device(ptr: int) -> int | None:
    """Device ordinal owning device pointer ``ptr``, or None when unknown
    (no GPU, or not a device pointer)."""
    try:
        _init()
        d = _bindings()
        v = _call(d.cuPointerGetAttribute,
                  d.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                  d.CUdeviceptr(int(ptr)))
        return int(v)
    except Exception:
        return None
