"""TMA descriptor encoding: ``cuTensorMapEncodeTiled`` through ctypes.

``encode_tiled`` takes plain ints and strings (no plan objects) and returns the
128-byte ``CUtensorMap``.  Every rule this module knows is checked before the
driver is called, and a violation raises ``ValueError`` naming the rule
(the driver's own answer is only ``CUDA_ERROR_INVALID_VALUE``).

Conventions follow the driver: dimensions are innermost first;
``global_strides_bytes`` has ``rank - 1`` entries (the innermost stride is the
element size); element strides are all 1; interleave NONE; L2 promotion
128 bytes; out-of-bounds elements are filled with zeros
(``CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE``; the NaN fill is opt-in).

The enum values below are cuda.h's; tests/hopper/test_tma_host.py checks them
against cuda-bindings' ``CUtensorMap*`` enums.
"""
from __future__ import annotations

import ctypes

from .errors import CudaError

__all__ = ["encode_tiled", "validate_tiled", "DATA_TYPES", "SWIZZLE_MODES", "TENSOR_MAP_BYTES"]

TENSOR_MAP_BYTES = 128

#: tylo dtype name -> CUtensorMapDataType.  fp8 and the 8/16-bit signed ints
#: move as unsigned bit patterns of their width (TMA only copies bits).
DATA_TYPES = {
    "u8": 0, "i8": 0, "f8e4m3": 0, "f8e5m2": 0, "bool": 0,   # UINT8
    "u16": 1, "i16": 1,                                       # UINT16
    "u32": 2,                                                 # UINT32
    "i32": 3,                                                 # INT32
    "u64": 4,                                                 # UINT64
    "i64": 5,                                                 # INT64
    "f16": 6,                                                 # FLOAT16
    "f32": 7,                                                 # FLOAT32
    "f64": 8,                                                 # FLOAT64
    "bf16": 9,                                                # BFLOAT16
}
ITEMSIZE = {"u8": 1, "i8": 1, "f8e4m3": 1, "f8e5m2": 1, "bool": 1, "u16": 2, "i16": 2, "f16": 2,
            "bf16": 2, "u32": 4, "i32": 4, "f32": 4, "u64": 8, "i64": 8, "f64": 8}
#: swizzle row bytes (0: none) -> CUtensorMapSwizzle
SWIZZLE_MODES = {0: 0, 32: 1, 64: 2, 128: 3}
INTERLEAVE_NONE = 0
L2_PROMOTION_128B = 2
OOB_FILL_NONE = 0                 # zeros
OOB_FILL_NAN_REQUEST_ZERO_FMA = 1

_MAX_DIM = 1 << 32
_MAX_STRIDE = 1 << 40


def validate_tiled(ptr, dtype_name, global_dims, global_strides_bytes, box_dims, swizzle_bytes) -> None:
    """Raise ValueError naming the first rule the arguments break (see module doc)."""
    if dtype_name not in DATA_TYPES:
        raise ValueError(f"encode_tiled: dtype {dtype_name!r} has no tensor-map data type "
                         f"(supported: {', '.join(sorted(DATA_TYPES))})")
    e = ITEMSIZE[dtype_name]
    rank = len(global_dims)
    if not 2 <= rank <= 5:
        raise ValueError(f"encode_tiled: the rank must be 2..5, got {rank}")
    if len(box_dims) != rank:
        raise ValueError(f"encode_tiled: {len(box_dims)} box dims for rank {rank}")
    if len(global_strides_bytes) != rank - 1:
        raise ValueError(f"encode_tiled: rank {rank} needs {rank - 1} global strides "
                         f"(the innermost is implied), got {len(global_strides_bytes)}")
    if ptr <= 0 or ptr % 16:
        raise ValueError(f"encode_tiled: the global address 0x{ptr:x} must be non-null and 16-byte aligned")
    for i, d in enumerate(global_dims):
        if not 0 < d <= _MAX_DIM:
            raise ValueError(f"encode_tiled: global dim {i} = {d} must be in 1..2^32")
    for i, s in enumerate(global_strides_bytes):
        if s <= 0 or s % 16 or s >= _MAX_STRIDE:
            raise ValueError(f"encode_tiled: global stride {i + 1} = {s} bytes must be a positive "
                             "multiple of 16 below 2^40")
    for i, b in enumerate(box_dims):
        if not 0 < b <= 256:
            raise ValueError(f"encode_tiled: box dim {i} = {b} must be in 1..256")
    if swizzle_bytes not in SWIZZLE_MODES:
        raise ValueError(f"encode_tiled: swizzle must be 0, 32, 64 or 128 bytes, got {swizzle_bytes!r}")
    inner = box_dims[0] * e
    if inner % 16:
        raise ValueError(f"encode_tiled: the inner box ({box_dims[0]} x {e} bytes = {inner}) must be a "
                         "multiple of 16 bytes")
    if swizzle_bytes and inner > swizzle_bytes:
        raise ValueError(f"encode_tiled: the inner box ({inner} bytes) must not exceed the swizzle "
                         f"row ({swizzle_bytes} bytes)")


def encode_tiled(ptr: int, dtype_name: str, global_dims, global_strides_bytes, box_dims,
                 swizzle_bytes: int, oob_fill_zero: bool = True) -> bytes:
    """The 128-byte CUtensorMap of a tiled view (dimensions innermost first)."""
    global_dims = tuple(int(d) for d in global_dims)
    global_strides_bytes = tuple(int(s) for s in global_strides_bytes)
    box_dims = tuple(int(b) for b in box_dims)
    validate_tiled(int(ptr), dtype_name, global_dims, global_strides_bytes, box_dims, swizzle_bytes)
    from . import driver

    driver.ensure_context()
    fn = driver._fn("cuTensorMapEncodeTiled")     # libcuda's one handle and prototype table
    rank = len(global_dims)
    buf = ctypes.create_string_buffer(TENSOR_MAP_BYTES + 64)
    addr = (ctypes.addressof(buf) + 63) & ~63   # the driver wants a 64-byte aligned CUtensorMap
    dims = (ctypes.c_uint64 * rank)(*global_dims)
    strides = (ctypes.c_uint64 * max(rank - 1, 1))(*global_strides_bytes)
    box = (ctypes.c_uint32 * rank)(*box_dims)
    estr = (ctypes.c_uint32 * rank)(*([1] * rank))
    err = fn(addr, DATA_TYPES[dtype_name], rank, ctypes.c_void_p(int(ptr)), dims, strides, box, estr,
             INTERLEAVE_NONE, SWIZZLE_MODES[swizzle_bytes], L2_PROMOTION_128B,
             OOB_FILL_NONE if oob_fill_zero else OOB_FILL_NAN_REQUEST_ZERO_FMA)
    if err != 0:
        raise CudaError(err, None, "cuTensorMapEncodeTiled",
                        f"dims={global_dims} strides={global_strides_bytes} box={box_dims} "
                        f"swizzle={swizzle_bytes} dtype={dtype_name}")
    return ctypes.string_at(addr, TENSOR_MAP_BYTES)
