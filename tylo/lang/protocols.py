"""The ``__tylo_*__`` hooks: how kernel-side objects take part in compilation.

The frontend never checks a class by name: it asks an object's *type* for one of these hooks
(``getattr(type(x), "__tylo_flatten__", None)``) and calls it. Each Protocol below names one
group of hooks and says what the frontend expects; a class defines the hooks it needs inside
its own body. ``ctx`` is always the emission ``tylo.lang.base.Context`` (builder, kernel,
target) of the statement being compiled; hooks raise ``LangError`` for a misuse, which the
frontend reports as a ``CompileError`` at the user's line.
"""
from __future__ import annotations

from typing import Any, Hashable, Protocol, Sequence, runtime_checkable

from ..ir.core import Value
from .base import Context

__all__ = ["StaticPart", "StructuredValue", "OperatorHooks", "AccessHooks", "ViewHooks", "MMAPlanHooks",
           "ByValueParameter", "BuiltinMarker", "HelperMarker"]


@runtime_checkable
class StaticPart(Hashable, Protocol):
    """The compile-time half of a structured value: a small frozen dataclass (value equality and
    hash). At a join or loop back-edge the static parts of both sides must be equal; when they are
    not, the error shows ``describe()`` of each (for example "a tile with layout (64,32):(32,1)")."""

    def describe(self) -> str:
        """The static part in words, as a noun phrase ("an f32 fragment of the MMA C ownership")."""
        ...


@runtime_checkable
class StructuredValue(Protocol):
    """A kernel value made of runtime SSA leaves and a static part (a tile, a fragment, a pending
    accumulator, a TMA binding), rebuilt like a pytree at control-flow joins and loop back-edges."""

    def __tylo_flatten__(self) -> tuple[Sequence[Value], Any]:
        """``(leaves, static)``: the runtime SSA values, in a fixed order, and the static part
        (a ``StaticPart``; plain hashable tuples are accepted from older feature modules)."""
        ...

    @classmethod
    def __tylo_unflatten__(cls, static: Any, leaves: Sequence[Value], ctx: Context) -> "StructuredValue":
        """Rebuild a value from ``static`` and new ``leaves`` (the results of an ``scf.if`` or the
        block arguments of a loop). ``ctx`` is passed here, never stored in ``static``, for parts
        that wrap leaves in context-bound helpers (a runtime stride)."""
        ...


class OperatorHooks(Protocol):
    """Python operators on a structured value (a fragment's element-wise arithmetic)."""

    def __tylo_binary__(self, ctx: Context, op: str, other: Any, reflected: bool) -> Any:
        """``self <op> other`` (``other <op> self`` when ``reflected``); ``op`` is the Python
        spelling: ``+``, ``-``, ``*``, ``/``, ``//``, ``%``, ``**``, ``<<``, ``>>``, ``&``, ``|``, ``^``, ``@``."""
        ...

    def __tylo_unary__(self, ctx: Context, op: str) -> Any:
        """``-self``, ``+self``, ``~self`` or ``not self`` (``op`` is ``-``, ``+``, ``~``, ``not``)."""
        ...

    def __tylo_compare__(self, ctx: Context, op: str, other: Any) -> Any:
        """``self <op> other`` for ``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=``."""
        ...


class AccessHooks(Protocol):
    """Attribute and subscript access on a kernel value."""

    def __tylo_getattr__(self, ctx: Context, name: str) -> Any:
        """``self.name`` in a kernel (a method may come back as a builtin-marked callable)."""
        ...

    def __tylo_getitem__(self, ctx: Context, index: Any) -> Any:
        """``self[index]``; ``index`` is a tuple for ``self[i, j]``."""
        ...

    def __tylo_setitem__(self, ctx: Context, index: Any, value: Any) -> None:
        """``self[index] = value``."""
        ...


class ViewHooks(Protocol):
    """Views of a value, dispatched by ``tylo.layouts.window``/``permutedims`` (host and kernel).
    The layouts package cannot import ``tylo.lang``: this Protocol documents the spelling it uses."""

    def __tylo_window__(self, origin: Any, shape: Any, check: bool) -> Any:
        """The window at ``origin`` with static ``shape``; ``check`` asks to verify it lies inside."""
        ...

    def __tylo_permutedims__(self, perm: tuple[int, ...]) -> Any:
        """The value with its top-level modes reordered: new axis ``i`` is old axis ``perm[i]``."""
        ...


class MMAPlanHooks(Protocol):
    """Plans that bring their own MMA, used by ``tylo.mma``/``tylo.zero_accumulator``."""

    def __tylo_mma__(self, ctx: Context, *args: Any, **kwargs: Any) -> Any:
        """``tylo.mma(plan, *args, **kwargs)`` for this plan (its own argument order)."""
        ...

    def __tylo_zero_accumulator__(self, ctx: Context) -> Any:
        """``tylo.zero_accumulator(plan)``: the plan's zero accumulator."""
        ...


class ByValueParameter(Protocol):
    """A host object passed to a kernel by value (a TMA descriptor)."""

    def __tylo_signature__(self) -> Any:
        """The parameter's specialisation, part of the cache key."""
        ...

    def __tylo_param__(self) -> tuple:
        """``(kind, *static, data)``: the blob kind (``BLOB_KINDS``), its static facts and the bytes."""
        ...


class BuiltinMarker(Protocol):
    """A callable the frontend calls with ``_ctx=``: ``tylo.lang.base.builtin`` sets the marker."""

    __tylo_builtin__: bool


class HelperMarker(Protocol):
    """A ``@tylo.func`` helper: ``__tylo_func__`` is the Python function whose source is inlined."""

    __tylo_func__: Any
