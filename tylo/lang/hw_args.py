"""Argument checks shared by the hardware builtins (mbarrier, fence, sync, ...): target and i32 operands."""
from __future__ import annotations

from ..ir import types as T
from ..ir.core import Value
from .base import LangError

__all__ = ["require_sm", "i32_operand"]


def require_sm(ctx, sm: int, what: str):
    """Raise a LangError naming ``what`` unless the target is sm_``sm`` or newer."""
    if ctx.sm < sm:
        raise LangError(f"{what} needs sm_{sm} or newer (target {ctx.arch})")


def i32_operand(ctx, x, what: str) -> Value:
    """``x`` (a runtime integer or a Python int) as an i32 value; ``what`` names it in errors."""
    from .core import cast, to_value

    if isinstance(x, Value):
        if not (isinstance(x.type, T.ScalarType) and (x.type.is_int or x.type.is_bool)):
            raise LangError(f"{what} must be an integer, got {x.type}")
        return cast(x, T.i32, _ctx=ctx)
    if not isinstance(x, int):
        raise LangError(f"{what} must be an integer, got {x!r}")
    return to_value(ctx, x, T.i32)
