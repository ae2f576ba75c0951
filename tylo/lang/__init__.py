"""What a kernel can call, one module per hardware feature."""
from . import core
from .base import Context, LangError, builtin, is_builtin

__all__ = ["core", "Context", "LangError", "builtin", "is_builtin"]
