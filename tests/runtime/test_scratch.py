"""tylo.runtime.scratch and streams.launch_stream without a GPU (TYLO_INTERPRET=1: numpy buffers)."""
import numpy as np
import pytest

from tylo.runtime import scratch
from tylo.runtime.streams import launch_stream


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setenv("TYLO_INTERPRET", "1")
    monkeypatch.setattr(scratch, "_BUFFERS", {})
    monkeypatch.setattr(scratch, "_RETIRED", [])


def test_one_zeroed_buffer_per_name_device_and_stream(fresh):
    a = scratch.stream_scratch("k.counters", 2, "i32", 0, 7)
    assert a.dtype == np.int32 and a.shape[0] >= 2 and not a.any()
    a[:2] = 5                                           # what a launch on stream 7 would leave (it must not)
    assert scratch.stream_scratch("k.counters", 2, "i32", 0, 7) is a        # reused: the same stream
    for other in (("k.counters", 2, "i32", 0, 9), ("k.counters", 2, "i32", 1, 7), ("k.ws", 2, "i32", 0, 7)):
        b = scratch.stream_scratch(*other)
        assert b is not a and not b.any()               # another stream, device or name: its own zeros
    assert [x is a for x in scratch.scratch_buffers("k.counters")].count(True) == 1


def test_a_larger_request_replaces_the_buffer_and_keeps_the_old_alive(fresh):
    a = scratch.stream_scratch("k.ws", 10, "f32", 0, 0, zero=False)
    big = scratch.stream_scratch("k.ws", a.shape[0] + 1, "f32", 0, 0, zero=False)
    assert big.shape[0] == a.shape[0] + 1 and big.dtype == np.float32
    assert scratch._RETIRED == [a] and scratch.stream_scratch("k.ws", 10, "f32", 0, 0, zero=False) is big


def test_launch_stream_prefers_the_explicit_stream():
    assert launch_stream(None, np.zeros(1)) == 0       # no framework stream: the legacy default stream
    assert launch_stream(2, np.zeros(1)) == 2
