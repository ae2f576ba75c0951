"""Build hook for the optional native launcher (tylo/runtime/native_launch.c); everything else
is in pyproject.toml. ``optional=True``: without a C compiler ``pip install .`` still succeeds and
tylo builds the module on first use, or launches through ctypes (tylo/runtime/native.py)."""
import hashlib
from pathlib import Path

from setuptools import Extension, setup

SOURCE = "tylo/runtime/native_launch.c"
# the module carries its source's digest: tylo does not load a build of another native_launch.c
DIGEST = hashlib.sha256(Path(__file__).parent.joinpath(SOURCE).read_bytes()).hexdigest()

native = Extension(
    "tylo.runtime._native_launch",
    sources=[SOURCE],
    define_macros=[("Py_LIMITED_API", "0x030A0000"), ("TYLO_NATIVE_SOURCE_DIGEST", f'"{DIGEST}"')],
    py_limited_api=True,
    optional=True,
)

# one wheel for every CPython from 3.10 (the module uses the stable ABI only)
setup(ext_modules=[native], options={"bdist_wheel": {"py_limited_api": "cp310"}})
