"""Array arguments: device pointers and dtypes from torch, cupy, tylo's own
DeviceArray and any ``__cuda_array_interface__`` / DLPack producer.

Fast path: ``array_extractor(type(x))`` returns (cached per type) a function
``f(x) -> (ptr, dtype_name)``. Slow path: ``describe_array(x)`` returns the
full ``ArrayInfo`` (shape, strides in elements, device) for TMA descriptors
and checks.

Host arrays (numpy, CPU tensors, DLPack producers on kDLCPU, objects with
only ``__array_interface__``) raise TypeError telling the user to copy to the
device first. torch and cupy are never imported by this module unless an
object of theirs is seen (detected by the type's module name).

Protocol notes:
* ``__cuda_array_interface__`` (v2/v3): 'data' (ptr, readonly), 'typestr',
  'shape', 'strides' (bytes, None = C-contiguous), 'mask' must be None. A
  v3 'stream' entry is not synchronised on: launch on the producer's stream
  (pass ``stream=``) or synchronise first. ml_dtypes types have ambiguous
  typestrs ('<V2' for bfloat16); for those the object's ``.dtype`` decides.
* DLPack: ``x.__dlpack__()`` is called without arguments (so the producer
  orders its pending work before the legacy default stream, per the
  protocol), and the capsule is READ WITHOUT BEING CONSUMED: its name stays
  'dltensor', so when it is garbage collected its destructor calls the
  producer's deleter, as for any unconsumed capsule. The pointer stays valid
  because ``x`` itself (which the launch holds) owns the memory. Both
  'dltensor' (DLManagedTensor) and 'dltensor_versioned'
  (DLManagedTensorVersioned) capsules are understood.
* The protocol attributes are looked up on the TYPE (properties or class
  attributes), as every real producer defines them; an instance attribute
  ``__cuda_array_interface__`` is accepted too (``array_extractor(type, sample)``).
* ``DeviceArray.__dlpack__`` exports a 'dltensor' capsule (DLPack 0.8 layout), so
  ``torch.from_dlpack(x)`` and ``cupy.from_dlpack(x)`` wrap a DeviceArray without copying.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import NamedTuple

import numpy as np

try:
    import ml_dtypes as _mld
except Exception:  # pragma: no cover - ml_dtypes is a dependency
    _mld = None

__all__ = ["ArrayInfo", "array_extractor", "array_fingerprint", "native_array_access", "describe_array",
           "DeviceArray", "to_device", "empty", "zeros", "dtype_name", "numpy_dtype", "DTYPE_NAMES"]

DTYPE_NAMES = ("bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
               "f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2")

# numpy dtype name -> tylo name
_NP_NAME = {
    "bool": "bool", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
    "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2",
}
_TYLO_TO_NP: dict[str, np.dtype] = {}
for _n, _t in _NP_NAME.items():
    if _n in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        if _mld is not None:
            _TYLO_TO_NP[_t] = np.dtype(getattr(_mld, _n))
    else:
        _TYLO_TO_NP[_t] = np.dtype(_n)

# __cuda_array_interface__ typestr (without byte order) -> tylo name
_TYPESTR = {"b1": "bool", "i1": "i8", "i2": "i16", "i4": "i32", "i8": "i64",
            "u1": "u8", "u2": "u16", "u4": "u32", "u8": "u64",
            "f2": "f16", "f4": "f32", "f8": "f64"}

# DLPack (code, bits) -> tylo name (dlpack.h DLDataTypeCode)
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_BOOL = 0, 1, 2, 4, 6
_DL_F8E4M3FN, _DL_F8E5M2 = 10, 12
_DLPACK_DTYPES = {
    (_DL_INT, 8): "i8", (_DL_INT, 16): "i16", (_DL_INT, 32): "i32", (_DL_INT, 64): "i64",
    (_DL_UINT, 8): "u8", (_DL_UINT, 16): "u16", (_DL_UINT, 32): "u32", (_DL_UINT, 64): "u64",
    (_DL_FLOAT, 16): "f16", (_DL_FLOAT, 32): "f32", (_DL_FLOAT, 64): "f64",
    (_DL_BFLOAT, 16): "bf16", (_DL_BOOL, 8): "bool",
    (_DL_F8E4M3FN, 8): "f8e4m3", (_DL_F8E5M2, 8): "f8e5m2",
}
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13

_ITEMSIZE = {"bool": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "u8": 1, "u16": 2,
             "u32": 4, "u64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8,
             "f8e4m3": 1, "f8e5m2": 1}


class ArrayInfo(NamedTuple):
    ptr: int
    dtype_name: str
    shape: tuple
    strides: tuple           # in elements
    device_ordinal: int | None
    readonly: bool = False


def dtype_name(dtype) -> str:
    """tylo's dtype name of a numpy / ml_dtypes dtype (or a tylo name)."""
    if isinstance(dtype, str) and dtype in _ITEMSIZE:
        return dtype
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"not a dtype: {dtype!r}") from None
    try:
        return _NP_NAME[dt.name]
    except KeyError:
        raise TypeError(f"dtype {dt.name} is not supported by tylo kernels "
                        f"(supported: {', '.join(DTYPE_NAMES)})") from None


def numpy_dtype(dtype) -> np.dtype:
    """numpy dtype (ml_dtypes for bf16/fp8) of a tylo name or numpy-like dtype."""
    if isinstance(dtype, str) and dtype in _TYLO_TO_NP:
        return _TYLO_TO_NP[dtype]
    dt = np.dtype(dtype)
    dtype_name(dt)  # validates
    return dt


def _host_error(obj, what: str | None = None) -> TypeError:
    what = what or f"{type(obj).__module__}.{type(obj).__qualname__}"
    return TypeError(
        f"{what} is in host memory, but kernels need device (GPU) memory: copy it first "
        "with tylo.to_device(x) (or x.cuda() for a torch tensor, cupy.asarray(x) for cupy)")


# ---------------------------------------------------------------- fast path

_extractors: dict[type, object] = {}
_extractor_lock = threading.Lock()
_torch_dtypes: dict = {}


def array_extractor(obj_type: type, sample=None):
    """A fast ``f(obj) -> (ptr, dtype_name)`` for objects of ``obj_type``, or
    None when the type is not an array type. Cached per type. For host array
    types the function raises TypeError (host memory) when called.

    ``sample`` (an instance) lets an object whose ``__cuda_array_interface__`` is an
    instance attribute, not a property of its type, be recognised too."""
    try:
        f = _extractors[obj_type]
    except KeyError:
        f = _make_extractor(obj_type)
        with _extractor_lock:
            _extractors[obj_type] = f
    if f is None and sample is not None and "__cuda_array_interface__" in getattr(sample, "__dict__", ()):
        return _extract_cai
    return f


def native_array_access(obj_type: type):
    """How the native launcher reads arrays of ``obj_type`` without calling Python code of tylo:
    ``(pointer attribute, pointer is a method, dtype attribute, {dtype: tylo name}, attribute that
    must be True or None)``, for the types whose extractor is that simple (torch tensors, tylo
    DeviceArrays); None for the others (their Python extractor is called)."""
    f = array_extractor(obj_type)
    if f is _extract_torch:
        return ("data_ptr", True, "dtype", dict(_torch_dtypes), "is_cuda")
    if f is _extract_device_array:
        return ("ptr", False, "dtype_name", {name: name for name in DTYPE_NAMES}, None)
    return None


def _make_extractor(t: type):
    if t in (int, float, bool, complex, str, bytes, type(None)):
        return None
    if issubclass(t, DeviceArray):
        return _extract_device_array
    mod = getattr(t, "__module__", "") or ""
    if mod.startswith("torch"):
        torch = sys.modules.get("torch")
        if torch is None:
            import torch
        if issubclass(t, torch.Tensor):
            if not _torch_dtypes:
                _init_torch_dtypes(torch)
            return _extract_torch
    if mod.startswith("cupy"):
        cupy = sys.modules.get("cupy")
        if cupy is None:
            import cupy
        if issubclass(t, cupy.ndarray):
            return _extract_cupy
    if issubclass(t, np.generic):
        return None  # numpy scalars are scalars
    if issubclass(t, np.ndarray):
        return _extract_host
    if hasattr(t, "__cuda_array_interface__"):
        return _extract_cai
    if hasattr(t, "__dlpack__") and hasattr(t, "__dlpack_device__"):
        return _extract_dlpack
    if hasattr(t, "__array_interface__") or hasattr(t, "__array_struct__"):
        return _extract_host
    return None


def _extract_device_array(obj):
    return obj.ptr, obj.dtype_name


def _init_torch_dtypes(torch):
    names = {"bool": "bool", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
             "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
             "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
             "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}
    for attr, name in names.items():
        dt = getattr(torch, attr, None)
        if dt is not None:
            _torch_dtypes[dt] = name


def _extract_torch(obj):
    if not obj.is_cuda:
        raise _host_error(obj, f"torch tensor on device '{obj.device}'")
    try:
        return obj.data_ptr(), _torch_dtypes[obj.dtype]
    except KeyError:
        raise TypeError(f"torch dtype {obj.dtype} is not supported by tylo kernels") from None


def _extract_cupy(obj):
    try:
        return obj.data.ptr, _NP_NAME[obj.dtype.name]
    except KeyError:
        raise TypeError(f"cupy dtype {obj.dtype} is not supported by tylo kernels") from None


def _extract_host(obj):
    raise _host_error(obj)


def _cai_dtype(obj, typestr: str) -> str:
    ts = typestr[1:] if typestr[:1] in "<>|=" else typestr
    if typestr[:1] == ">" and not ts.endswith("1"):
        raise TypeError(f"big-endian array (typestr {typestr!r}) is not supported")
    name = _TYPESTR.get(ts)
    if name is not None and ts != "f1":
        return name
    # ambiguous typestrs ('<V2' bfloat16, '<V1'/'<f1' fp8): ask the object's dtype
    dt = getattr(obj, "dtype", None)
    if dt is not None:
        try:
            return dtype_name(dt)
        except TypeError:
            pass
    raise TypeError(f"cannot tell the element type of typestr {typestr!r} from "
                    "__cuda_array_interface__ (bfloat16/fp8 need an object with a numpy-style "
                    "'.dtype', or pass it through DLPack)")


def _extract_cai(obj):
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:  # an instance-attribute producer whose sibling lacks it
        raise TypeError(f"{type(obj).__qualname__} object has no __cuda_array_interface__") from None
    if cai.get("mask") is not None:
        raise TypeError("masked __cuda_array_interface__ arrays are not supported")
    return int(cai["data"][0]), _cai_dtype(obj, cai["typestr"])


def _extract_dlpack(obj):
    info = _describe_dlpack(obj)
    return info.ptr, info.dtype_name


# -------------------------------------------------------------------- DLPack

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version_major", ctypes.c_uint32), ("version_minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_DLPACK_FLAG_READ_ONLY = 1
# own prototypes (not mutating ctypes.pythonapi's shared function objects)
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def _parse_dlpack_capsule(capsule) -> tuple[ArrayInfo, int]:
    """Read a DLPack capsule without consuming it: (ArrayInfo, DLDeviceType).
    ``ArrayInfo.ptr`` is data + byte_offset; strides are in elements (filled in
    as C-contiguous when the producer gives NULL)."""
    readonly = False
    if _capsule_is_valid(capsule, b"dltensor"):
        mt = _DLManagedTensor.from_address(_capsule_get_pointer(capsule, b"dltensor"))
        t = mt.dl_tensor
    elif _capsule_is_valid(capsule, b"dltensor_versioned"):
        mt = _DLManagedTensorVersioned.from_address(
            _capsule_get_pointer(capsule, b"dltensor_versioned"))
        if mt.version_major != 1:
            raise TypeError(f"unsupported DLPack version {mt.version_major}.{mt.version_minor}")
        t = mt.dl_tensor
        readonly = bool(mt.flags & _DLPACK_FLAG_READ_ONLY)
    else:
        raise TypeError("not a DLPack capsule (expected the name 'dltensor' or "
                        "'dltensor_versioned'; 'used_dltensor' means it was already consumed)")
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    if lanes != 1:
        raise TypeError(f"DLPack vector dtype (lanes={lanes}) is not supported")
    name = _DLPACK_DTYPES.get((code, bits))
    if name is None:
        raise TypeError(f"DLPack dtype (code={code}, bits={bits}) is not supported by tylo "
                        "kernels")
    ndim = t.ndim
    shape = tuple(t.shape[i] for i in range(ndim))
    if t.strides:
        strides = tuple(t.strides[i] for i in range(ndim))
    else:
        strides = _c_strides(shape)
    ptr = (t.data or 0) + t.byte_offset
    info = ArrayInfo(ptr, name, shape, strides, t.device.device_id, readonly)
    return info, t.device.device_type


def _describe_dlpack(obj) -> ArrayInfo:
    dev_type, dev_id = obj.__dlpack_device__()
    dev_type = int(dev_type)
    if dev_type not in (_DL_CUDA, _DL_CUDA_MANAGED):
        if dev_type in (_DL_CPU, _DL_CUDA_HOST):
            raise _host_error(obj, f"{type(obj).__qualname__} (DLPack device type "
                                   f"{dev_type}, host)")
        raise TypeError(f"{type(obj).__qualname__} lives on DLPack device type {dev_type}; "
                        "tylo kernels need CUDA device memory (kDLCUDA=2 or kDLCUDAManaged=13)")
    capsule = obj.__dlpack__()
    info, _ = _parse_dlpack_capsule(capsule)
    return info


def _c_strides(shape) -> tuple:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(strides))


def _byte_strides_to_elements(strides, itemsize: int, shape) -> tuple:
    if strides is None:
        return _c_strides(shape)
    out = []
    for s in strides:
        if s % itemsize:
            raise TypeError(f"byte stride {s} is not a multiple of the element size {itemsize}")
        out.append(s // itemsize)
    return tuple(out)


# ---------------------------------------------------------------- slow path

def array_fingerprint(obj):
    """A hashable value that differs whenever ``describe_array(obj)`` would (pointer, dtype, shape,
    strides, device), cheap for torch tensors and DeviceArrays: the key of host-side memos such as
    prepared launches (examples/hopper_gemm.py ``launch``)."""
    f = array_extractor(type(obj))
    if f is _extract_torch:
        # the pointer names the device (one virtual address space for host and every GPU); is_cuda
        # is a cheap flag where .device would make an object per call
        return (obj.data_ptr(), obj.dtype, obj.shape, obj.stride(), obj.is_cuda)
    if f is _extract_device_array:
        return (obj.ptr, obj.dtype_name, obj.shape, obj.device)
    return tuple(describe_array(obj)[:5])


def describe_array(obj) -> ArrayInfo:
    """Full description of a device array argument: ArrayInfo(ptr, dtype_name,
    shape, strides (elements), device_ordinal, readonly). TypeError for host
    arrays and non-arrays."""
    t = type(obj)
    if isinstance(obj, DeviceArray):
        return ArrayInfo(obj.ptr, obj.dtype_name, obj.shape, _c_strides(obj.shape), obj.device)
    f = array_extractor(t)
    if f is _extract_torch:
        ptr, name = f(obj)
        return ArrayInfo(ptr, name, tuple(obj.shape), tuple(obj.stride()), obj.device.index)
    if f is _extract_cupy:
        ptr, name = f(obj)
        return ArrayInfo(ptr, name, tuple(obj.shape),
                         _byte_strides_to_elements(obj.strides, obj.itemsize, obj.shape),
                         obj.device.id)
    if f is _extract_host:
        from .driver import interpreting
        if interpreting():  # TYLO_INTERPRET=1: the interpreter runs kernels on host arrays
            item = obj.itemsize
            return ArrayInfo(obj.ctypes.data, dtype_name(obj.dtype), tuple(obj.shape),
                             tuple(s // item for s in obj.strides), None, not obj.flags.writeable)
        f(obj)
    if hasattr(obj, "__cuda_array_interface__"):  # also instance attributes here
        cai = obj.__cuda_array_interface__
        if cai.get("mask") is not None:
            raise TypeError("masked __cuda_array_interface__ arrays are not supported")
        ptr, readonly = cai["data"]
        name = _cai_dtype(obj, cai["typestr"])
        shape = tuple(int(n) for n in cai["shape"])
        strides = _byte_strides_to_elements(cai.get("strides"), _ITEMSIZE[name], shape)
        from . import driver
        dev = driver.pointer_device(ptr) if ptr else None
        return ArrayInfo(int(ptr), name, shape, strides, dev, bool(readonly))
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _describe_dlpack(obj)
    if hasattr(obj, "__array_interface__") or hasattr(obj, "__array_struct__"):
        raise _host_error(obj)
    raise TypeError(f"{t.__module__}.{t.__qualname__} is not an array: expected a torch "
                    "tensor, cupy array, tylo DeviceArray or an object with "
                    "__cuda_array_interface__ / __dlpack__")


# ------------------------------------------------------------- DeviceArray

class DeviceArray:
    """A minimal C-contiguous device array, for use without torch or cupy.

    Allocated with cuMemAlloc in the current context (device 0's primary
    context when none is current) and freed by ``free()`` or when garbage
    collected. Only C-contiguous layouts exist: there are no views or slicing.
    Exposes ``__cuda_array_interface__`` (v3) so torch/cupy/numba can wrap it
    without copying (``torch.as_tensor(x, device='cuda')``, ``cupy.asarray(x)``).
    """

    def __init__(self, shape, dtype, *, _ptr: int | None = None):
        from . import driver

        if isinstance(shape, (int, np.integer)):
            shape = (int(shape),)
        self.shape = tuple(int(n) for n in shape)
        if any(n < 0 for n in self.shape):
            raise ValueError(f"negative dimension in shape {self.shape}")
        self.dtype = numpy_dtype(dtype)
        self.dtype_name = _NP_NAME[self.dtype.name]
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.nbytes = self.size * self.dtype.itemsize
        self.ptr = 0
        self._driver = driver
        self.ptr = driver.mem_alloc(self.nbytes) if _ptr is None else int(_ptr)
        self.device = driver.current_device()

    ndim = property(lambda self: len(self.shape))
    itemsize = property(lambda self: self.dtype.itemsize)
    strides = property(lambda self: tuple(s * self.dtype.itemsize for s in _c_strides(self.shape)),
                       doc="byte strides (numpy convention)")

    def __repr__(self):
        return (f"DeviceArray(shape={self.shape}, dtype={self.dtype_name}, "
                f"ptr=0x{self.ptr:x}, device={self.device})")

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self.shape[0]

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3, "strides": None, "descr": self.dtype.descr}

    def __dlpack_device__(self):
        return (_DL_CUDA, self.device)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        """A 'dltensor' capsule over this array's memory (no copy).

        tylo's copies are synchronous and DeviceArray has no pending work, so
        ``stream`` needs no ordering. The consumer's deleter call (or the capsule's
        destructor when it is never consumed) releases the array reference it holds."""
        if copy:
            raise BufferError("DeviceArray.__dlpack__ exports without copying (copy=True is not supported)")
        if dl_device is not None and tuple(int(v) for v in dl_device) != (_DL_CUDA, self.device):
            raise BufferError(f"DeviceArray lives on CUDA device {self.device}; cannot export to {dl_device}")
        return _export_dlpack(self)

    def copy_from_host(self, array) -> "DeviceArray":
        a = np.ascontiguousarray(array)
        if a.shape != self.shape or a.dtype != self.dtype:
            raise ValueError(f"copy_from_host: host array is {a.dtype.name}{list(a.shape)}, "
                             f"device array is {self.dtype.name}{list(self.shape)}")
        self._driver.memcpy_htod(self.ptr, a, self.nbytes)
        return self

    def to_host(self) -> np.ndarray:
        out = np.empty(self.shape, dtype=self.dtype)
        self._driver.memcpy_dtoh(out, self.ptr, self.nbytes)
        return out

    def fill_bytes(self, byte: int) -> "DeviceArray":
        """Set every byte to ``byte`` (cuMemsetD8): poisons outputs before tests."""
        self._driver.memset_d8(self.ptr, byte, self.nbytes)
        return self

    def free(self) -> None:
        ptr, self.ptr = self.ptr, 0
        if ptr:
            self._driver.mem_free(ptr)

    def __del__(self):
        try:
            if self.ptr and not sys.is_finalizing():
                self.free()
        except Exception:
            pass  # interpreter shutdown or context already gone: nothing to do


# -------------------------------------------------------------- DLPack export

_DLDeleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, _CapsuleDestructor)(
    ("PyCapsule_New", ctypes.pythonapi))
# PYFUNCTYPE: these C-API calls must run holding the GIL (the destructor callback holds it)
_raw_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_raw_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
# exported tensors alive in a consumer: address of the DLManagedTensor -> (array, ctypes buffers)
_exports: dict[int, tuple] = {}
_exports_lock = threading.Lock()


def _dl_dtype(name: str) -> _DLDataType:
    for (code, bits), n in _DLPACK_DTYPES.items():
        if n == name:
            return _DLDataType(code, bits, 1)
    raise BufferError(f"dtype {name} has no DLPack code")  # pragma: no cover - every tylo dtype has one


def _release_export(address: int) -> None:
    with _exports_lock:
        _exports.pop(address, None)


@_DLDeleter
def _dlpack_deleter(managed_address):
    """Called by the consumer when it no longer needs the memory (dlpack.h DLManagedTensor.deleter)."""
    _release_export(managed_address)


@_CapsuleDestructor
def _dlpack_capsule_destructor(capsule_address):
    """A capsule still named 'dltensor' at destruction was never consumed: release it ourselves."""
    if _raw_capsule_is_valid(capsule_address, b"dltensor"):
        _release_export(_raw_capsule_get_pointer(capsule_address, b"dltensor"))


def _export_dlpack(array: DeviceArray):
    ndim = len(array.shape)
    shape = (ctypes.c_int64 * max(ndim, 1))(*array.shape)
    strides = (ctypes.c_int64 * max(ndim, 1))(*_c_strides(array.shape))
    managed = _DLManagedTensor()
    managed.dl_tensor = _DLTensor(array.ptr, _DLDevice(_DL_CUDA, array.device), ndim, _dl_dtype(array.dtype_name),
                                  shape, strides, 0)
    managed.manager_ctx = None
    managed.deleter = ctypes.cast(_dlpack_deleter, ctypes.c_void_p)
    address = ctypes.addressof(managed)
    with _exports_lock:
        _exports[address] = (array, managed, shape, strides)
    return _capsule_new(address, b"dltensor", _dlpack_capsule_destructor)


def empty(shape, dtype) -> DeviceArray:
    """Uninitialised device array (C-contiguous); a numpy array under TYLO_INTERPRET=1, where kernels run
    in the interpreter on host arrays (so host code that allocates a workspace runs unchanged)."""
    from .driver import interpreting
    if interpreting():
        return np.empty(shape, numpy_dtype(dtype))
    return DeviceArray(shape, dtype)


def zeros(shape, dtype) -> DeviceArray:
    """Zeroed device array (a numpy array under TYLO_INTERPRET=1, as ``empty``)."""
    from .driver import interpreting
    if interpreting():
        return np.zeros(shape, numpy_dtype(dtype))
    return DeviceArray(shape, dtype).fill_bytes(0)


def to_device(array, dtype=None) -> DeviceArray:
    """Copy a host array (numpy, or anything np.asarray accepts) to a new
    C-contiguous DeviceArray."""
    a = np.ascontiguousarray(np.asarray(array, dtype=None if dtype is None else numpy_dtype(dtype)))
    out = DeviceArray(a.shape, a.dtype)
    return out.copy_from_host(a)
