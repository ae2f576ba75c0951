"""The Generator: Python kernel source -> typed IR, in one AST walk.

One visitor class assembled from one module per idea: ``visitor`` (dispatch, errors, names,
statements), ``expressions``, ``control_flow`` (if/for/while, joins, loop-carried values) and
``calls`` (builtins, helper inlining). ``generate_kernel`` binds the kernel's parameters and
walks its body.
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.builder import Builder
from ..ir.core import Kernel, Location
from ..lang import core as L
from ..lang.base import BLOB_KINDS, Context
from .calls import CallsMixin
from .control_flow import ControlFlowMixin
from .expressions import ExpressionsMixin
from .scopes import Undefined
from .source import function_source
from .visitor import VisitorCore

__all__ = ["generate_kernel", "Generator", "Undefined"]


class Generator(ExpressionsMixin, ControlFlowMixin, CallsMixin, VisitorCore):
    """The AST visitor of one kernel or inlined helper (see the module doc)."""


def generate_kernel(fn, name: str, params: list, arch: str, maxntid=None, debug: bool = False) -> Kernel:
    """Build the IR kernel for ``fn``.

    ``params``: ``(name, binding)`` in signature order. A binding is an IR type
    (a runtime parameter), ``("runtime", type, hints)`` with hints ``align16``
    (pointers) or ``div16`` (integers), ``("const", value, type)`` for a runtime
    parameter specialised to a constant (kept in the signature, bound to a typed
    IR constant), or ``("constexpr", value)``. ``debug`` compiles ``device_assert`` and runtime
    ``assert`` statements into checks (``kernel.attrs["debug"]``); otherwise they emit nothing.
    """
    src = function_source(fn)
    norm = []
    for pname, b in params:
        if isinstance(b, T.Type):
            b = ("runtime", b, ())
        norm.append((pname, b))
    ir_params = [(pname, b[1] if b[0] == "runtime" else b[2]) for pname, b in norm if b[0] in ("runtime", "const")]
    lineno, col = src.location(src.tree)
    kernel = Kernel(name, ir_params, Location(src.filename, lineno, col))
    kernel.attrs["maxntid"] = tuple(maxntid) if maxntid else None
    if debug:
        kernel.attrs["debug"] = True
    builder = Builder(kernel.body)
    ctx = Context(builder, kernel, arch)
    scope = {}
    args = iter(kernel.body.args)
    for pname, b in norm:
        if b[0] == "runtime":
            scope[pname] = next(args)
            t = b[1]
            if isinstance(t, T.ParamBlobType) and t.kind in BLOB_KINDS:
                scope[pname] = BLOB_KINDS[t.kind](ctx, scope[pname], t.static)
            if "align16" in b[2]:
                kernel.attrs["param_align"][pname] = 16
            if "div16" in b[2]:
                kernel.attrs["divisible_by_16"].append(pname)
        elif b[0] == "const":
            # a typed IR constant, not the Python int: the kernel types the parameter exactly as when it is not
            # 1 (methods such as .to(), literal promotion, loop-carried types); folding still sees the value
            next(args)
            scope[pname] = L.to_value(ctx, b[1], b[2])
        else:
            scope[pname] = b[1]
    gen = Generator(src, kernel, builder, ctx, scope)
    gen.visit_body(src.tree.body)
    return kernel
