"""tylo's environment variables (knobs), in one place; docs/knobs.md is their table.

They are read when a kernel is compiled (not on each launch): set them before the first launch
of a kernel, or before ``kernel.compile(...)``. ``TYLO_CACHE_DIR`` and ``TYLO_CACHE`` are read by
``tylo.cache.disk``, which imports nothing of tylo; they are listed here for the table.
"""
from __future__ import annotations

import os

__all__ = ["KNOBS", "env_flag", "debug_enabled", "lineinfo_enabled", "always_compile", "dump_folder",
           "print_autotuning"]

# name -> what it does (docs/knobs.md holds the full table; a test keeps the two in step)
KNOBS = {
    "TYLO_CACHE_DIR": "the cache folder (default ~/.cache/tylo)",
    "TYLO_CACHE": "0 keeps compiled kernels in memory only",
    "TYLO_ALWAYS_COMPILE": "1 compiles every kernel even when the cache holds it, and stores the result",
    "TYLO_DUMP": "a folder: the IR, LLVM and PTX of every kernel compiled or loaded are written there",
    "TYLO_DEBUG": "1 compiles kernels as with @tylo.jit(debug=True): device_assert and runtime asserts checked",
    "TYLO_LINEINFO": "0 compiles kernels without line info (.file/.loc in the PTX, -lineinfo in the cubin)",
    "TYLO_INTERPRET": "1 runs kernels in the CPU interpreter (see docs/interpreter.md)",
    "TYLO_NATIVE_LAUNCH": "0 launches through ctypes instead of the native launcher (tylo/runtime/native.py)",
    "TYLO_PRINT_AUTOTUNING": "1 prints every tuning's progress and winner, and each stored choice when first used",
}

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def env_flag(name: str, default: bool) -> bool:
    """The boolean knob ``name``: 1/true/yes/on or 0/false/no/off (any case); unset or empty is
    ``default``; anything else is a ValueError naming the knob (a typo must not pass silently)."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{name}={os.environ[name]!r}: expected 1 or 0 (true/false, yes/no, on/off)")


def _option(name: str, value, knob: str, default: bool) -> bool:
    """A boolean jit option: given explicitly it wins over the knob."""
    if value is None:
        return env_flag(knob, default)
    if not isinstance(value, bool):
        raise TypeError(f"the jit option {name} must be True or False, got {value!r}")
    return value


def debug_enabled(option=None) -> bool:
    """``debug=`` of ``@tylo.jit``, else ``TYLO_DEBUG`` (default off)."""
    return _option("debug", option, "TYLO_DEBUG", False)


def lineinfo_enabled(option=None) -> bool:
    """``lineinfo=`` of ``@tylo.jit``, else ``TYLO_LINEINFO`` (default on)."""
    return _option("lineinfo", option, "TYLO_LINEINFO", True)


def always_compile() -> bool:
    """``TYLO_ALWAYS_COMPILE``: compile even on a cache hit (and store the result)."""
    return env_flag("TYLO_ALWAYS_COMPILE", False)


def dump_folder() -> str | None:
    """``TYLO_DUMP``: the folder to write each kernel's IR, LLVM and PTX into, or None."""
    return os.environ.get("TYLO_DUMP") or None


def print_autotuning() -> bool:
    """``TYLO_PRINT_AUTOTUNING``: report every tuning and every stored choice on stderr (default: only tunings that
    take more than a second)."""
    return env_flag("TYLO_PRINT_AUTOTUNING", False)
