"""stream_handle / stream_resolver on real protocol inputs (no GPU needed)."""

import pytest

from tylo.runtime import stream_handle, stream_resolver


class ProtocolStream:
    """An object implementing the CUDA stream protocol (__cuda_stream__)."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


class PropertyProtocolStream:
    """Early cuda.core spelled __cuda_stream__ as a property."""

    @property
    def __cuda_stream__(self):
        return (0, 0xABC)


def test_none_is_legacy_default_stream():
    assert stream_handle(None) == 0


def test_int_is_itself():
    assert stream_handle(0) == 0
    assert stream_handle(2) == 2
    assert stream_handle(0x7F00_1234_5000) == 0x7F00_1234_5000


def test_negative_int_and_bool_rejected():
    with pytest.raises(ValueError):
        stream_handle(-1)
    with pytest.raises(TypeError):
        stream_handle(True)


def test_cuda_stream_protocol():
    assert stream_handle(ProtocolStream(0x1234)) == 0x1234
    assert stream_handle(PropertyProtocolStream()) == 0xABC


def test_cuda_bindings_custream():
    from cuda.bindings import driver
    assert stream_handle(driver.CUstream(0)) == 0
    assert stream_handle(driver.CUstream(0x5000)) == 0x5000


def test_unsupported_type_names_what_was_given():
    with pytest.raises(TypeError, match=r"stream must be .*got builtins\.str"):
        stream_handle("default")
    with pytest.raises(TypeError, match="float"):
        stream_handle(1.0)


def test_resolver_is_cached_per_type():
    r1 = stream_resolver(ProtocolStream)
    assert stream_resolver(ProtocolStream) is r1
    assert r1(ProtocolStream(7)) == 7
    assert stream_resolver(int)(5) == 5
    assert stream_resolver(type(None))(None) == 0
