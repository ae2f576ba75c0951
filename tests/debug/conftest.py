"""The debug tests state the knobs they depend on: unset unless a test sets them."""
import pytest


@pytest.fixture(autouse=True)
def _no_debug_knobs(monkeypatch):
    for knob in ("TYLO_DEBUG", "TYLO_LINEINFO", "TYLO_ALWAYS_COMPILE"):
        monkeypatch.delenv(knob, raising=False)
