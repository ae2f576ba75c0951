"""CUDA stream arguments -> raw CUstream handles (ints).

Semantics of ``stream=None``: when an argument is a torch tensor (or a cupy
array), the launch goes to that framework's *current* stream, as Triton does,
so ``with torch.cuda.stream(s): kernel[grid, block](x, ...)`` is ordered with
the work queued on ``s``; the first such argument decides. Otherwise handle 0,
the CUDA *legacy default stream*. An explicit ``stream=`` always wins.
``current_stream_getter(type)`` gives the cheap per-launch lookup (a raw
handle from torch's C API; no Python stream object per launch); a getter that
is a composition of two calls says so in ``__tylo_compose__ = (outer, inner)``.

Accepted: None, int handles (0 = legacy default, 2 = per-thread default),
objects with ``__cuda_stream__()`` -> (version, handle) (the CUDA stream
protocol; a property form is accepted too), torch.cuda.Stream
(``.cuda_stream``), cupy.cuda.Stream (``.ptr``), cuda.bindings
``CUstream``/``cudaStream_t`` (``int(obj)``). torch and cupy are never
imported here.
"""

from __future__ import annotations

import threading

__all__ = ["stream_handle", "stream_resolver", "current_stream_getter", "launch_stream"]

_resolvers: dict[type, object] = {}
_lock = threading.Lock()


def _none(s):
    return 0


def _int(s):
    if s < 0:
        raise ValueError(f"stream handle must be a non-negative int, got {s}")
    return s


def _protocol(s):
    v = s.__cuda_stream__
    if callable(v):
        v = v()
    try:
        _version, handle = v
    except (TypeError, ValueError):
        raise TypeError(f"{type(s).__qualname__}.__cuda_stream__ returned {v!r}, expected "
                        "(version, handle)") from None
    return int(handle)


def _torch(s):
    return int(s.cuda_stream)


def _cupy(s):
    return int(s.ptr)


def _bindings(s):
    return int(s)


def _bad(s):
    t = type(s)
    raise TypeError(
        f"stream must be None (the legacy default stream), an int CUstream handle, or a "
        f"stream object (torch.cuda.Stream, cupy.cuda.Stream, cuda.bindings CUstream, or any "
        f"object with __cuda_stream__); got {t.__module__}.{t.__qualname__}: {s!r:.80}")


def _make_resolver(t: type):
    if t is type(None):
        return _none
    if t is bool:
        return _bad
    if issubclass(t, int):
        return _int
    mod = getattr(t, "__module__", "") or ""
    if mod.startswith("torch") and hasattr(t, "cuda_stream"):
        return _torch
    if hasattr(t, "__cuda_stream__"):
        return _protocol
    if mod.startswith("cupy") and hasattr(t, "ptr"):
        return _cupy
    if mod.startswith("cuda.") and t.__name__ in ("CUstream", "cudaStream_t") \
            and hasattr(t, "__int__"):
        return _bindings
    return _bad


def stream_resolver(t: type):
    """``f(stream) -> int`` for stream objects of type ``t`` (cached per type).
    For unsupported types ``f`` raises TypeError naming what was given."""
    try:
        return _resolvers[t]
    except KeyError:
        pass
    f = _make_resolver(t)
    with _lock:
        _resolvers[t] = f
    return f


def stream_handle(stream) -> int:
    """The raw CUstream handle of ``stream`` (see module doc). None -> 0."""
    if stream is None:
        return 0
    return stream_resolver(type(stream))(stream)


def _torch_current_stream_getter(torch):
    get_raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    get_device = getattr(torch._C, "_cuda_getDevice", None)
    if get_raw is not None and get_device is not None:
        getter = lambda: get_raw(get_device())
        # the same call as (outer, inner): the native launcher calls outer(inner()) without a frame
        getter.__tylo_compose__ = (get_raw, get_device)
        return getter
    return lambda: int(torch.cuda.current_stream().cuda_stream)  # pragma: no cover - older torch


def _cupy_current_stream_getter(cupy):
    return lambda: int(cupy.cuda.get_current_stream().ptr)


_getters: dict = {}     # array type -> its current-stream getter (or None): asked on launch paths


def current_stream_getter(array_type: type):
    """A zero-argument function returning the current stream handle of the framework that
    owns arrays of ``array_type`` (torch tensors, cupy arrays), or None for other types; one
    per type (cached: an array of a framework's type exists only once that framework is imported)."""
    try:
        return _getters[array_type]
    except KeyError:
        pass
    except TypeError:       # an unhashable "type": never a framework's array type
        return None
    getter = _getters[array_type] = _make_getter(array_type)
    return getter


def _make_getter(array_type):
    import sys

    mod = getattr(array_type, "__module__", "") or ""
    if mod.startswith("torch"):
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(array_type, type) and issubclass(array_type, torch.Tensor):
            return _torch_current_stream_getter(torch)
    if mod.startswith("cupy"):
        cupy = sys.modules.get("cupy")
        if cupy is not None and isinstance(array_type, type) and issubclass(array_type, cupy.ndarray):
            return _cupy_current_stream_getter(cupy)
    return None


def launch_stream(stream, like) -> int:
    """The raw handle of the stream a launch goes to (module doc): ``stream`` when given, else the current
    stream of ``like``'s framework (torch, cupy), else 0."""
    if stream is not None:
        return stream_handle(stream)
    getter = current_stream_getter(type(like))
    return int(getter()) if getter is not None else 0
