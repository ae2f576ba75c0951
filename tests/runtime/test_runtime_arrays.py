"""Array interop on a CPU machine: host arrays refused, real protocol inputs
(__cuda_array_interface__ dicts, DLPack capsules) parsed."""

import ml_dtypes
import numpy as np
import pytest

from tylo.runtime import ArrayInfo, array_extractor, describe_array, dtype_name, numpy_dtype
from tylo.runtime.arrays import DeviceArray, _parse_dlpack_capsule


class CAIArray:
    """A producer of the v3 CUDA Array Interface (as numba/cupy expose it)."""

    def __init__(self, ptr, shape, typestr, strides=None, dtype=None, readonly=False):
        self._cai = {"shape": shape, "typestr": typestr, "data": (ptr, readonly),
                     "version": 3, "strides": strides, "stream": None}
        if dtype is not None:
            self.dtype = np.dtype(dtype)

    @property
    def __cuda_array_interface__(self):
        return self._cai


class DLPackOnly:
    """Exposes only the DLPack protocol of a wrapped producer."""

    def __init__(self, inner):
        self.inner = inner

    def __dlpack__(self, stream=None):
        return self.inner.__dlpack__()

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()


class ArrayInterfaceOnly:
    def __init__(self, a):
        self.a = a

    @property
    def __array_interface__(self):
        return self.a.__array_interface__


def test_numpy_is_refused_with_host_message():
    f = array_extractor(np.ndarray)
    assert f is not None
    with pytest.raises(TypeError, match=r"host memory.*tylo\.to_device"):
        f(np.zeros(4))
    with pytest.raises(TypeError, match=r"host memory.*\.cuda\(\)"):
        describe_array(np.zeros(4))


def test_array_interface_only_is_host():
    x = ArrayInterfaceOnly(np.zeros(3))
    with pytest.raises(TypeError, match="host memory"):
        array_extractor(ArrayInterfaceOnly)(x)
    with pytest.raises(TypeError, match="host memory"):
        describe_array(x)


def test_scalars_and_other_objects_are_not_arrays():
    for t in (int, float, bool, np.float32, np.int64, str, tuple, type(None)):
        assert array_extractor(t) is None
    with pytest.raises(TypeError, match="is not an array"):
        describe_array(object())


def test_extractor_cached_per_type():
    assert array_extractor(CAIArray) is array_extractor(CAIArray)
    assert array_extractor(DeviceArray) is array_extractor(DeviceArray)


@pytest.mark.parametrize("typestr,name", [
    ("<f4", "f32"), ("<f2", "f16"), ("<f8", "f64"), ("|b1", "bool"), ("|i1", "i8"),
    ("<i2", "i16"), ("<i4", "i32"), ("<i8", "i64"), ("|u1", "u8"), ("<u2", "u16"),
    ("<u4", "u32"), ("<u8", "u64"),
])
def test_cuda_array_interface_v3(typestr, name):
    x = CAIArray(0x7F00_0000_4000, (4, 8), typestr)
    f = array_extractor(CAIArray)
    assert f(x) == (0x7F00_0000_4000, name)


def test_cuda_array_interface_describe_strides_in_elements():
    x = CAIArray(0x1000, (4, 8), "<f4", strides=(4, 16), readonly=True)
    info = describe_array(x)
    assert isinstance(info, ArrayInfo)
    assert info.ptr == 0x1000 and info.dtype_name == "f32"
    assert info.shape == (4, 8) and info.strides == (1, 4)
    assert info.readonly is True
    c = describe_array(CAIArray(0x1000, (4, 8), "<f2"))
    assert c.strides == (8, 1)
    with pytest.raises(TypeError, match="multiple of the element size"):
        describe_array(CAIArray(0x1000, (4,), "<f4", strides=(6,)))


def test_cuda_array_interface_ml_dtypes_use_dtype_attribute():
    f = array_extractor(CAIArray)
    bf = CAIArray(0x2000, (8,), np.dtype(ml_dtypes.bfloat16).str, dtype=ml_dtypes.bfloat16)
    assert f(bf) == (0x2000, "bf16")
    e4 = CAIArray(0x2000, (8,), np.dtype(ml_dtypes.float8_e4m3fn).str,
                  dtype=ml_dtypes.float8_e4m3fn)
    assert f(e4)[1] == "f8e4m3"
    e5 = CAIArray(0x2000, (8,), np.dtype(ml_dtypes.float8_e5m2).str, dtype=ml_dtypes.float8_e5m2)
    assert f(e5)[1] == "f8e5m2"
    with pytest.raises(TypeError, match="cannot tell the element type"):
        f(CAIArray(0x2000, (8,), "<V2"))


def test_cuda_array_interface_rejects_mask_and_big_endian():
    x = CAIArray(0x1000, (4,), "<f4")
    x._cai["mask"] = object()
    with pytest.raises(TypeError, match="masked"):
        array_extractor(CAIArray)(x)
    with pytest.raises(TypeError, match="big-endian"):
        array_extractor(CAIArray)(CAIArray(0x1000, (4,), ">f4"))


def test_dlpack_cpu_producer_is_host():
    x = DLPackOnly(np.arange(6, dtype=np.float32))
    f = array_extractor(DLPackOnly)
    with pytest.raises(TypeError, match="host"):
        f(x)
    with pytest.raises(TypeError, match="host"):
        describe_array(x)


def test_dlpack_capsule_parser_on_numpy():
    a = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    info, dev_type = _parse_dlpack_capsule(a.__dlpack__())
    assert dev_type == 1                                   # kDLCPU
    assert info.ptr == a.ctypes.data
    assert info.dtype_name == "i16"
    assert info.shape == (2, 3, 4)
    assert info.strides == (12, 4, 1)


def test_dlpack_capsule_parser_offset_and_strides():
    base = np.arange(40, dtype=np.float64).reshape(5, 8)
    view = base[1:, ::2]                                   # offset and non-unit stride
    info, _ = _parse_dlpack_capsule(view.__dlpack__())
    assert info.ptr == view.ctypes.data == base.ctypes.data + 8 * 8
    assert info.dtype_name == "f64"
    assert info.shape == (4, 4) and info.strides == (8, 2)


@pytest.mark.parametrize("dt,name", [(np.bool_, "bool"), (np.uint8, "u8"), (np.uint64, "u64"),
                                     (np.float16, "f16"), (np.float32, "f32")])
def test_dlpack_capsule_dtypes(dt, name):
    info, _ = _parse_dlpack_capsule(np.zeros(3, dtype=dt).__dlpack__())
    assert info.dtype_name == name


def test_dlpack_capsule_not_consumed_and_versioned():
    a = np.arange(5, dtype=np.int32)
    cap = a.__dlpack__()
    _parse_dlpack_capsule(cap)
    info, _ = _parse_dlpack_capsule(cap)                    # still readable: not renamed
    assert info.shape == (5,)
    try:
        vcap = a.__dlpack__(max_version=(1, 0))
    except TypeError:
        pytest.skip("numpy without versioned DLPack")
    info, dev = _parse_dlpack_capsule(vcap)
    assert (info.ptr, info.dtype_name, info.shape, dev) == (a.ctypes.data, "i32", (5,), 1)


def test_dlpack_rejects_non_capsules():
    with pytest.raises(TypeError, match="not a DLPack capsule"):
        _parse_dlpack_capsule(object())


def test_dtype_names_round_trip():
    for name in ("bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16",
                 "f32", "f64", "f8e4m3", "f8e5m2"):
        assert dtype_name(numpy_dtype(name)) == name
    assert numpy_dtype("bf16") == np.dtype(ml_dtypes.bfloat16)
    assert dtype_name(np.float32) == "f32"
    with pytest.raises(TypeError, match="not supported"):
        dtype_name(np.complex64)


# ---- DeviceArray exports DLPack; instance-attribute __cuda_array_interface__ (issue 15 item 14)

def _fake_device_array(shape, dtype, ptr=0x7F0000001000):
    """A DeviceArray over a made-up address, for host-side protocol checks (no GPU touched)."""
    from tylo.runtime import arrays as A

    x = object.__new__(DeviceArray)
    x.shape, x.dtype = tuple(shape), A.numpy_dtype(dtype)
    x.dtype_name = A.dtype_name(x.dtype)
    x.ptr, x.device, x.size = ptr, 0, int(np.prod(shape))
    x.nbytes = x.size * x.dtype.itemsize
    x._driver = None
    return x


@pytest.mark.parametrize("dtype,name", [(np.float32, "f32"), (np.int8, "i8"), ("bf16", "bf16"), (np.bool_, "bool")])
def test_device_array_dlpack_capsule_describes_the_array(dtype, name):
    from tylo.runtime import arrays as A

    x = _fake_device_array((3, 5, 7), dtype)
    cap = x.__dlpack__(stream=None)
    info, dev_type = _parse_dlpack_capsule(cap)
    assert (info.ptr, info.dtype_name, info.shape, info.strides) == (x.ptr, name, (3, 5, 7), (35, 7, 1))
    assert dev_type == 2 and x.__dlpack_device__() == (2, 0)
    assert len(A._exports) == 1
    del cap                                     # never consumed: the capsule's destructor releases it
    assert not A._exports
    x.ptr = 0


def test_device_array_dlpack_consumer_deleter_releases_the_export():
    import ctypes

    from tylo.runtime import arrays as A

    x = _fake_device_array((4,), np.float32)
    cap = x.__dlpack__()
    address = ctypes.pythonapi.PyCapsule_GetPointer
    address.restype, address.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    managed = address(cap, b"dltensor")
    set_name = ctypes.pythonapi.PyCapsule_SetName
    set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
    assert set_name(cap, b"used_dltensor") == 0          # what a consumer does when it takes the tensor
    del cap                                              # consumed: the destructor must not release it ...
    assert managed in A._exports
    mt = A._DLManagedTensor.from_address(managed)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(mt.deleter)(managed)  # ... the consumer's deleter call does
    assert managed not in A._exports
    x.ptr = 0


def test_device_array_dlpack_refuses_copy_and_other_devices():
    x = _fake_device_array((4,), np.float32)
    with pytest.raises(BufferError, match="without copying"):
        x.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="device 0"):
        x.__dlpack__(dl_device=(2, 3))
    x.ptr = 0


def test_instance_attribute_cuda_array_interface_is_an_array():
    class Holder:
        pass

    h = Holder()
    h.__cuda_array_interface__ = {"shape": (8,), "typestr": "<f4", "data": (0x1000, False), "version": 3}
    f = array_extractor(Holder, h)
    assert f(h) == (0x1000, "f32")
    with pytest.raises(TypeError, match="no __cuda_array_interface__"):
        f(Holder())                                      # a sibling without the attribute: a clear TypeError
