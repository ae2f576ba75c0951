"""Shared test setup: the ``gpu`` marker skips only when no GPU is present; every test gets its own cache dir."""
import os
import sys

import pytest
from hypothesis import settings

# No per-example deadline: a loaded 2-core CI machine must not turn slow examples into failures.
settings.register_profile("tylo", deadline=None)
settings.load_profile("tylo")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))


def _gpu_available() -> bool:
    try:
        from tylo.runtime import driver
        return driver.gpu_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (none present)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Each test compiles into a fresh cache so results never depend on test order."""
    if "TYLO_CACHE_DIR" not in os.environ or os.environ.get("TYLO_TEST_SHARED_CACHE") != "1":
        monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path / "tylo-cache"))
    yield
