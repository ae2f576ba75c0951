"""Fixtures for the autotuner's CPU tests (the fakes are in fakes.py)."""
import pytest
from fakes import FakeClock, FakeDeviceArray, FakeTimer


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def timer(clock):
    return FakeTimer(clock)


@pytest.fixture
def arrays():
    return FakeDeviceArray(1000), FakeDeviceArray(1000, ptr=0x7F0000100000)
