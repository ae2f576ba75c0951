"""Launch-argument errors are TypeErrors naming the parameter, raised before anything reaches a GPU
(these run on machines without one); device printf compiles to vprintf."""
import numpy as np
import pytest

import tylo


@tylo.jit
def add(out, x, n):
    i = tylo.thread_idx.x
    if i < n:
        out[i] = x[i] + 1.0


@tylo.jit
def typed(out: tylo.Ptr[tylo.f32], n: tylo.i32):
    out[0] = n * 1.0


class FakeDeviceArray:
    """A producer of the CUDA array interface (v3) with a made-up device pointer: real protocol input."""

    def __init__(self, typestr):
        self.typestr = typestr

    @property
    def __cuda_array_interface__(self):
        return {"shape": (4,), "typestr": self.typestr, "data": (0x7F0000000000, False), "version": 3,
                "strides": None}


def test_host_numpy_array_names_the_parameter():
    with pytest.raises(TypeError, match="'x'.*host"):
        add[1, 32](FakeDeviceArray("<f4"), np.ones(4, np.float32), 4)


def test_missing_and_extra_arguments():
    with pytest.raises(TypeError, match="missing argument 'n'"):
        add[1, 32](FakeDeviceArray("<f4"), FakeDeviceArray("<f4"))
    with pytest.raises(TypeError, match="takes 3 arguments but 4"):
        add[1, 32](FakeDeviceArray("<f4"), FakeDeviceArray("<f4"), 4, 5)
    with pytest.raises(TypeError, match="unexpected argument 'm'"):
        add[1, 32](FakeDeviceArray("<f4"), FakeDeviceArray("<f4"), m=4)


def test_wrong_dtype_for_an_annotated_pointer():
    with pytest.raises(TypeError, match="'out' is annotated Ptr\\[f32\\] but the array holds f16"):
        typed[1, 1](FakeDeviceArray("<f2"), 3)


def test_float_for_an_annotated_int():
    with pytest.raises(TypeError, match="'n' is annotated i32 but got the float"):
        typed[1, 1](FakeDeviceArray("<f4"), 3.5)


def test_unsupported_argument_type():
    with pytest.raises(TypeError, match="argument 'n' is a builtins.str"):
        add[1, 32](FakeDeviceArray("<f4"), FakeDeviceArray("<f4"), "4")


def test_bad_launch_geometry():
    with pytest.raises(TypeError, match="grid and block"):
        add[1](FakeDeviceArray("<f4"))
    with pytest.raises(ValueError, match="positive"):
        add[0, 32]


def test_calling_a_kernel_like_a_function_explains_the_launch_syntax():
    with pytest.raises(TypeError, match=r"add\[grid, block\]"):
        add(1, 2, 3)


@tylo.jit
def hello(x, n):
    i = tylo.thread_idx.x
    if i < n:
        tylo.printf("thread %d sees %f\n", i, x[i])
        print("value", x[i])


def test_device_printf_compiles_to_vprintf():
    ck = hello.compile(signature="*f32, i32", arch="sm_90a")
    assert ck.ptx.count("vprintf") >= 2 and "thread %d sees %f" not in ck.ptx  # the string is a global
