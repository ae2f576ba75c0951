"""Kernel and helper source: parsing, locations and the dependency fingerprint.

``FunctionSource`` parses a Python function once and keeps what the frontend
needs (AST, file, line offset, globals, closure). ``dependency_sources``
walks the names a kernel reaches (helpers, plain Python functions, global
compile-time values) to build the cache key without compiling anything.
"""
from __future__ import annotations

import ast
import builtins
import functools
import inspect
import textwrap
import types

__all__ = ["FunctionSource", "function_source", "dependency_sources"]


class FunctionSource:
    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError) as exc:
            raise TypeError(f"cannot read the source of {fn.__qualname__}: {exc}; tylo kernels must be defined in a file") from None
        self.filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
        self.text = textwrap.dedent("".join(lines))
        self.line_offset = first - 1
        indent = len(lines[0]) - len(lines[0].lstrip())
        self.col_offset = indent
        module = ast.parse(self.text)
        defs = [n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if not defs:
            raise TypeError(f"{fn.__qualname__} is not a function definition")
        self.tree: ast.FunctionDef = defs[0]
        self.globals = fn.__globals__
        self.closure = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:
                    pass
        self.file_lines = None

    def location(self, node) -> tuple[int, int]:
        """File line (1-based) and column (0-based) of an AST node."""
        lineno = getattr(node, "lineno", 1) + self.line_offset
        col = getattr(node, "col_offset", 0) + self.col_offset
        return lineno, col

    def source_line(self, lineno: int) -> str | None:
        if self.file_lines is None:
            import linecache
            self.file_lines = linecache.getlines(self.filename)
        if 1 <= lineno <= len(self.file_lines):
            return self.file_lines[lineno - 1]
        return None


@functools.lru_cache(maxsize=None)
def _cached_source(fn):
    return FunctionSource(fn)


def function_source(fn) -> FunctionSource:
    return _cached_source(fn)


def _stable_repr(value) -> str | None:
    """A deterministic, cheap text for a compile-time global, or None when it has none.

    Plain constants and tylo's own objects (dtypes, layouts, plans: small, stable reprs) are
    spelled out; anything else is named by its type only, because an arbitrary repr can be
    slow (a tensor) or differ between processes (an address).
    """
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value)
    if isinstance(value, (tuple, list, frozenset)):
        parts = [_stable_repr(v) for v in value]
        return None if None in parts else f"{type(value).__name__}({', '.join(parts)})"
    module = type(value).__module__
    if module.startswith("tylo"):
        text = repr(value)
        return None if " at 0x" in text else f"{module}.{type(value).__qualname__}:{text}"
    return f"<{module}.{type(value).__qualname__}>"


def _local_names(tree) -> set:
    """Parameters and names assigned in the function: they shadow globals of the same name."""
    names = {a.arg for a in tree.args.args + tree.args.kwonlyargs + tree.args.posonlyargs}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    return names


def dependency_sources(fn, helper_attr: str = "__tylo_func__") -> list[str]:
    """Texts of everything ``fn`` reaches: its source, helpers' and Python functions' sources,
    and the values of the global names it reads (recursively through helpers)."""
    out: list[str] = []
    seen: set[int] = set()

    def visit(f):
        if id(f) in seen:
            return
        seen.add(id(f))
        src = function_source(f)
        out.append(f"def {f.__qualname__}:\n{src.text}")  # not the module name: `tylo compile` imports by path
        local = _local_names(src.tree)
        # the signature and body: decorators (tylo.jit, functools.lru_cache) are not dependencies
        parts = [src.tree.args, *src.tree.body] + ([src.tree.returns] if src.tree.returns else [])
        for node in (n for part in parts for n in ast.walk(part)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                chain = [node.id]
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                chain = []
                cur = node
                while isinstance(cur, ast.Attribute):
                    chain.append(cur.attr)
                    cur = cur.value
                if not isinstance(cur, ast.Name):
                    continue
                chain.append(cur.id)
                chain.reverse()
            else:
                continue
            if chain[0] in local:
                continue
            if chain[0] in src.closure:
                value = src.closure[chain[0]]
            elif chain[0] in src.globals:
                value = src.globals[chain[0]]
            else:
                continue
            for attr in chain[1:]:
                if isinstance(value, types.ModuleType) and getattr(value, "__name__", "").startswith(("tylo", "numpy", "math")):
                    value = None
                    break
                try:
                    value = getattr(value, attr)
                except Exception:
                    value = None
                    break
            if value is None or isinstance(value, types.ModuleType):
                continue
            inner = getattr(value, helper_attr, None) or getattr(value, "__tylo_kernel_fn__", None)
            if inner is None and callable(value) and hasattr(value, "__wrapped__"):
                value = inspect.unwrap(value)   # functools.lru_cache / wraps: fingerprint the source
            if inner is not None:
                visit(inner)
            elif isinstance(value, types.FunctionType) and not (value.__module__ or "").startswith("tylo"):
                try:
                    visit(value)
                except TypeError:
                    out.append(f"{'.'.join(chain)}=<function without source>")
            elif isinstance(value, (types.FunctionType, type)) and (value.__module__ or "").startswith("tylo") \
                    or value is getattr(builtins, chain[0], object()):
                continue
            else:
                text = _stable_repr(value)
                if text is not None:
                    out.append(f"{'.'.join(chain)}={text}")

    visit(fn)
    return out
