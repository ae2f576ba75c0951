"""What every ``tylo.lang`` module shares: the builtin marker and the error type.

A *builtin* is a function a kernel can call; the frontend passes it the
emission context as ``_ctx`` (builder, kernel, target) and converts any
``LangError`` it raises into a ``CompileError`` at the call's location.
"""
from __future__ import annotations

import functools
import inspect
import types

__all__ = ["LangError", "builtin", "is_builtin", "Context", "BLOB_KINDS", "register_blob_kind", "describe_object"]

# Kernel values of by-value blob parameters: kind -> fn(ctx, address_value, static) building
# the structured value a kernel sees (a TMA descriptor binding). Filled by the feature modules.
BLOB_KINDS: dict = {}


def register_blob_kind(kind: str, make):
    BLOB_KINDS[kind] = make


class LangError(Exception):
    """A kernel used an operation wrongly; the frontend adds the source location."""


def describe_object(x) -> str:
    """A compile-time Python object in words for an error message: modules, classes and functions by
    name, other objects by type and short repr, never a default ``<... at 0x...>`` repr."""
    if isinstance(x, types.ModuleType):
        return f"the module {x.__name__}"
    if isinstance(x, type):
        return f"the Python type {x.__qualname__}"
    if inspect.isroutine(x):
        return f"the function {getattr(x, '__qualname__', getattr(x, '__name__', '?'))}"
    text = repr(x)
    if " object at 0x" in text or text.startswith("<"):
        return f"an object of type {type(x).__qualname__}"
    if len(text) > 80:
        text = text[:60] + "..."
    return f"{type(x).__name__} {text}"


def builtin(fn):
    """Mark ``fn`` as callable from kernels. It must accept ``_ctx`` as a keyword."""

    @functools.wraps(fn)
    def wrapper(*args, _ctx=None, **kwargs):
        if _ctx is None:
            raise RuntimeError(f"tylo.{fn.__name__} can only be called inside a @tylo.jit kernel")
        return fn(*args, _ctx=_ctx, **kwargs)

    wrapper.__tylo_builtin__ = True
    return wrapper


def is_builtin(obj) -> bool:
    return getattr(obj, "__tylo_builtin__", False) is True


class Context:
    """The emission context handed to builtins (created by the frontend).

    ``builder``: the IR builder at the current insertion point;
    ``kernel``: the IR kernel being built (kernel-level attributes);
    ``arch``: the target name (``sm_90a``) for feature checks.
    """

    def __init__(self, builder, kernel, arch: str):
        self.builder = builder
        self.kernel = kernel
        self.arch = arch
        # per (asynchronous unit, IR block): the commit groups issued directly in that block so far, in
        # program order (lang/wgmma's wait_mma reads it to tell which groups a wait_group n completes)
        self.commit_counts: dict = {}

    def count_commit(self, unit: str) -> tuple:
        """Record a commit group of ``unit`` in the current block; returns its mark ``(block, index)``."""
        block = self.builder.block
        key = (unit, block)
        self.commit_counts[key] = self.commit_counts.get(key, 0) + 1
        return block, self.commit_counts[key]

    def commits_since(self, unit: str, mark) -> int | None:
        """How many groups of ``unit`` were committed after ``mark`` in straight-line code (commits in
        nested regions are not counted: they may not run), or None when the current block is not the
        mark's (the count is then unknown)."""
        if mark is None or mark[0] is not self.builder.block:
            return None
        return self.commit_counts.get((unit, mark[0]), 0) - mark[1]

    @property
    def sm(self) -> int:
        """The numeric SM version (90 for sm_90a)."""
        return int("".join(ch for ch in self.arch[3:] if ch.isdigit()))
