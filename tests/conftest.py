"""Shared test setup: the ``gpu`` marker skips only when no GPU is present; every test gets its own cache dir;
the stand-in libcuda (``fake_libcuda``)."""
import os
import shutil
import subprocess
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


@pytest.fixture(scope="session")
def fake_libcuda(tmp_path_factory):
    """A folder holding ``libcuda.so.1`` built from tests/fake_libcuda.c, the stand-in driver: put it
    first on a subprocess's LD_LIBRARY_PATH to drive tylo's driver layer without a GPU."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler to build the stand-in libcuda")
    folder = tmp_path_factory.mktemp("fake_libcuda")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(folder / "libcuda.so.1"),
                    os.path.join(ROOT, "tests", "fake_libcuda.c")], check=True, capture_output=True)
    return str(folder)
