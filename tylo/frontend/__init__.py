"""Python AST -> typed IR: scopes, constexpr evaluation, source locations, errors."""
from .errors import CompileError
from .generator import generate_kernel

__all__ = ["CompileError", "generate_kernel"]
