"""A minimal ctypes binding of nvJitLink (PTX -> cubin in process).

Loading ``libnvJitLink`` directly from the ``nvidia-nvjitlink`` wheel skips
the import of cuda-bindings' library finder, which costs more than the
assembly of a small kernel. Only the calls tylo needs are bound.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os

__all__ = ["available", "version", "link_ptx", "library_path", "NvJitLinkError"]


class NvJitLinkError(RuntimeError):
    pass


def _candidates():
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else []
    for root in roots:
        for pattern in ("cu*/lib/libnvJitLink.so*", "nvjitlink/lib/libnvJitLink.so*"):
            yield from sorted(glob.glob(os.path.join(root, pattern)), reverse=True)
    yield "libnvJitLink.so"


@functools.lru_cache(maxsize=None)
def library_path() -> str | None:
    """The libnvJitLink file the pip package installed (None: only a system library, if any)."""
    for path in _candidates():
        if os.path.isabs(path) and os.path.exists(path):
            return os.path.realpath(path)
    return None


@functools.lru_cache(maxsize=None)
def _lib():
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        vp = ctypes.c_void_p
        lib.nvJitLinkCreate.argtypes = [ctypes.POINTER(vp), ctypes.c_uint32, ctypes.POINTER(ctypes.c_char_p)]
        lib.nvJitLinkAddData.argtypes = [vp, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]
        lib.nvJitLinkComplete.argtypes = [vp]
        lib.nvJitLinkGetLinkedCubinSize.argtypes = [vp, ctypes.POINTER(ctypes.c_size_t)]
        lib.nvJitLinkGetLinkedCubin.argtypes = [vp, ctypes.c_char_p]
        for name in ("nvJitLinkGetInfoLogSize", "nvJitLinkGetErrorLogSize"):
            getattr(lib, name).argtypes = [vp, ctypes.POINTER(ctypes.c_size_t)]
        for name in ("nvJitLinkGetInfoLog", "nvJitLinkGetErrorLog"):
            getattr(lib, name).argtypes = [vp, ctypes.c_char_p]
        lib.nvJitLinkDestroy.argtypes = [ctypes.POINTER(vp)]
        lib.nvJitLinkVersion.argtypes = [ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint)]
        return lib
    return None


def available() -> bool:
    return _lib() is not None


def version() -> tuple[int, int]:
    major, minor = ctypes.c_uint(), ctypes.c_uint()
    _lib().nvJitLinkVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


_INPUT_PTX = 2  # NVJITLINK_INPUT_PTX (NONE=0, CUBIN=1, PTX=2, LTOIR=3)


def _log(lib, handle, kind: str) -> str:
    size = ctypes.c_size_t()
    getattr(lib, f"nvJitLinkGet{kind}LogSize")(handle, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value + 1)
    getattr(lib, f"nvJitLinkGet{kind}Log")(handle, buf)
    return buf.value.decode(errors="replace")


def link_ptx(ptx: str, arch: str, name: str = "kernel", options=("-O3",)) -> tuple[bytes, str]:
    """Assemble one PTX module for ``arch``: (cubin, info log). Raises NvJitLinkError with the error log."""
    lib = _lib()
    opts = [f"-arch={arch}", "-verbose", *options]
    argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    handle = ctypes.c_void_p()
    rc = lib.nvJitLinkCreate(ctypes.byref(handle), len(opts), argv)
    if rc != 0:
        raise NvJitLinkError(f"nvJitLinkCreate failed with code {rc} for options {opts}")
    try:
        data = ptx.encode()
        rc = lib.nvJitLinkAddData(handle, _INPUT_PTX, data, len(data), name.encode())
        if rc == 0:
            rc = lib.nvJitLinkComplete(handle)
        if rc != 0:
            raise NvJitLinkError(f"nvJitLink failed for {arch} (code {rc}):\n{_log(lib, handle, 'Error')}")
        size = ctypes.c_size_t()
        lib.nvJitLinkGetLinkedCubinSize(handle, ctypes.byref(size))
        cubin = ctypes.create_string_buffer(size.value)
        lib.nvJitLinkGetLinkedCubin(handle, cubin)
        return cubin.raw, _log(lib, handle, "Info")
    finally:
        lib.nvJitLinkDestroy(ctypes.byref(handle))
