"""tylo's CUDA runtime: driver access, the launch fast path, array and
stream interop. Imports nothing else of tylo; makes no driver call at import.
"""

from .arrays import (
    DTYPE_NAMES,
    ArrayInfo,
    DeviceArray,
    array_extractor,
    describe_array,
    dtype_name,
    empty,
    numpy_dtype,
    to_device,
    zeros,
)
from .driver import (
    compute_capability,
    current_context,
    current_device,
    device_count,
    devices,
    driver_version,
    ensure_context,
    function_attributes,
    get_function,
    gpu_available,
    load_module,
    mem_alloc,
    mem_free,
    memcpy_dtod,
    memcpy_dtoh,
    memcpy_htod,
    memset_d8,
    pointer_device,
    set_max_dynamic_shared_memory,
    stream_synchronize,
    synchronize,
    unload_module,
)
from .errors import CudaError, NoGPUError
from .launch import ArgPacker, Launcher
from .streams import stream_handle, stream_resolver

__all__ = [
    "CudaError", "NoGPUError",
    "gpu_available", "driver_version", "devices", "device_count", "ensure_context",
    "current_context", "current_device", "compute_capability", "load_module",
    "unload_module", "get_function", "function_attributes", "set_max_dynamic_shared_memory",
    "mem_alloc", "mem_free", "memcpy_htod", "memcpy_dtoh", "memcpy_dtod", "memset_d8",
    "synchronize", "stream_synchronize", "pointer_device",
    "Launcher", "ArgPacker",
    "ArrayInfo", "array_extractor", "describe_array", "DeviceArray", "to_device", "empty",
    "zeros", "dtype_name", "numpy_dtype", "DTYPE_NAMES",
    "stream_handle", "stream_resolver",
]
