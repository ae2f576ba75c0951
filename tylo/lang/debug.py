"""Device-side checks: ``tylo.device_assert(cond, message)``.

Compiled into a check only with ``@tylo.jit(debug=True)`` or ``TYLO_DEBUG=1``: a thread whose
``cond`` is false prints ``file:line``, its block and thread and the message, and traps; the
launch (or the next synchronisation) then fails with a ``tylo.CudaError``. Without debug nothing
is emitted, so the checks cost nothing. A compile-time ``cond`` is checked at compile time, as
``static_assert`` does, debug or not. A plain ``assert cond, "message"`` on a runtime condition
does the same as ``device_assert``.
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.core import Value
from ..ir.types import ScalarType
from .base import LangError, builtin
from .core import cast

__all__ = ["device_assert", "emit_assert"]


def emit_assert(ctx, cond, message: str = "") -> None:
    """The check for ``cond`` with ``message`` (a runtime bool, or a compile-time value)."""
    if not isinstance(message, str):
        raise LangError(f"the assert message must be a compile-time string, got {message!r}")
    if not isinstance(cond, Value):
        if not cond:
            raise LangError(f"assertion failed{': ' + message if message else ''}")
        return
    if not ctx.kernel.attrs.get("debug"):
        return  # off by default: no code at all
    if not (isinstance(cond.type, ScalarType) and (cond.type.is_bool or cond.type.is_int)):
        raise LangError(f"an assert needs a bool or integer condition, got a runtime {cond.type}")
    if cond.type != T.bool_:
        cond = cast(cond, T.bool_, _ctx=ctx)  # != 0
    ctx.builder.create("nv.assert", [cond], [], {"message": message})


@builtin
def device_assert(cond, message: str = "", *, _ctx):
    """Stop the kernel with file:line and ``message`` when ``cond`` is false (debug compiles only)."""
    emit_assert(_ctx, cond, message)
