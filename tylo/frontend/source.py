"""Kernel and helper source: parsing, locations and the dependency fingerprint.

``FunctionSource`` parses a Python function once and keeps what the frontend
needs (AST, file, line offset, globals, closure). ``collect_dependencies``
walks the names a kernel reaches (helpers, plain Python functions, global
compile-time values) to build the cache key without compiling anything, and
records what it read so that a launch can tell cheaply when a global was
rebound or a helper reloaded (``Dependencies.is_current``).

The key is a promise: every value the compile can read through a global name
is fingerprinted by value (constants, containers, numpy scalars and arrays,
functions by source, objects by their class and attributes); a value tylo
cannot fingerprint is refused with a CompileError that says to pass it as a
``tylo.constexpr`` parameter.
"""
from __future__ import annotations

import ast
import builtins
import enum
import functools
import inspect
import operator
import os
import sys
import sysconfig
import textwrap
import types

from .errors import CompileError

__all__ = ["FunctionSource", "function_source", "dependency_sources", "collect_dependencies",
           "Dependencies"]


class FunctionSource:
    def __init__(self, fn):
        self.fn = fn
        self.code = fn.__code__
        self.name = fn.__name__
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError) as exc:
            raise TypeError(f"cannot read the source of {fn.__qualname__}: {exc}; "
                            f"tylo kernels must be defined in a file") from None
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


_sources: dict = {}


def function_source(fn) -> FunctionSource:
    """The parsed source of ``fn``, parsed again when its code object changed (an autoreload
    that patches ``__code__`` in place)."""
    src = _sources.get(fn)
    if src is None or src.code is not fn.__code__:
        src = _sources[fn] = FunctionSource(fn)
    return src


class Unfingerprintable(Exception):
    """A compile-time value whose changes tylo cannot see; the message says why."""


_MISSING = object()
_LIBRARY_DIRS = tuple({os.path.realpath(p) + os.sep for p in (
    sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib"),
    sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("platlib")) if p})
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_MAX_NODES = 200_000  # a bigger compile-time global must be passed as a constexpr


def _is_tylo_module_name(name: str) -> bool:
    return name == "tylo" or name.startswith("tylo.")


def _is_library_module_name(name: str) -> bool:
    """Modules that are not the user's code: tylo's own (covered by the source digest), the
    standard library and installed packages (their code changes only with their version)."""
    if not name:
        return False
    top = name.partition(".")[0]
    if _is_tylo_module_name(name) or top in _STDLIB or top == "builtins":
        return True
    module = sys.modules.get(top)
    path = getattr(module, "__file__", None)
    return bool(path) and os.path.realpath(path).startswith(_LIBRARY_DIRS)


class Dependencies:
    """What a kernel's compile reads: ``texts`` (the fingerprint, for the cache key) and the
    global bindings behind it, re-checked by ``is_current()`` (identity checks, about 0.1 us)."""

    __slots__ = ("texts", "is_current")

    def __init__(self, texts: list[str], reads: list, codes: list, shallow: list):
        self.texts = texts
        by_namespace: dict = {}
        for mapping, name, value in reads:
            entry = by_namespace.setdefault(id(mapping), (mapping, [], []))
            if name not in entry[1]:
                entry[1].append(name)
                entry[2].append(value)
        self.is_current = _identity_check(list(by_namespace.values()), codes, shallow)


def _identity_check(namespaces, codes, shallow):
    """A function that says whether every recorded read still finds the very same object.

    Identities, not ==: ``C = 3`` rebound to ``3.0`` compares equal but compiles differently. The
    function is generated with the checks unrolled (``v0 is e0 and ...``): on the launch path this
    costs about 0.1 us, a quarter of a loop over ``map(operator.is_, ...)``."""
    env: dict = {}
    lines, tests = [], []
    for i, (mapping, names, values) in enumerate(namespaces):
        env[f"m{i}"] = mapping
        targets = []
        for j, (name, value) in enumerate(zip(names, values)):
            env[f"k{i}_{j}"] = name
            env[f"e{i}_{j}"] = value
            targets.append(f"m{i}[k{i}_{j}]")
            tests.append(f"v{i}_{j} is e{i}_{j}")
        lines.append(f"{', '.join(f'v{i}_{j}' for j in range(len(names)))}, = {', '.join(targets)},")
    for i, (fn, code) in enumerate(codes):
        env[f"f{i}"], env[f"c{i}"] = fn, code
        tests.append(f"f{i}.__code__ is c{i}")
    for i, (current, snapshot) in enumerate(shallow):
        env[f"s{i}"], env[f"n{i}"] = current, snapshot
        tests.append(f"_same(s{i}(), n{i})")
    env["_same"] = _same_items
    body = "\n        ".join(lines) or "pass"
    text = (f"def is_current():\n    try:\n        {body}\n    except KeyError:\n        return False\n"
            f"    return {' and '.join(tests) or 'True'}\n")
    exec(text, env)
    return env["is_current"]


def _same_items(now: tuple, snapshot: tuple) -> bool:
    return len(now) == len(snapshot) and all(map(operator.is_, now, snapshot))


class _Walker:
    def __init__(self, helper_attr: str):
        self.helper_attr = helper_attr
        self.texts: list[str] = []
        self.reads: list = []
        self.codes: list = []
        self.shallow: list = []
        self.visited: set[int] = set()
        self.read_seen: set = set()
        self.nodes = 0

    # -- functions -------------------------------------------------------------------
    def visit(self, f):
        if id(f) in self.visited:
            return
        self.visited.add(id(f))
        src = function_source(f)
        self.codes.append((f, f.__code__))
        self.texts.append(f"def {f.__qualname__}:\n{src.text}")  # not the module name: `tylo compile` imports by path
        params = _parameter_names(src.tree)
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
            # a parameter always shadows; a name assigned in the body does not before its assignment
            # (the frontend then reads the global), so such globals are part of the key too
            if chain[0] in params:
                continue
            try:
                self.read(src, chain)
            except Unfingerprintable as exc:
                lineno, col = src.location(node)
                raise CompileError(
                    f"'{'.'.join(chain)}' cannot be part of the kernel's cache key: {exc}; pass it as a "
                    f"tylo.constexpr parameter, or make it a plain constant (number, string, tuple, dict, "
                    f"dataclass)", src.filename, lineno, col, src.source_line(lineno)) from None

    def read(self, src, chain):
        name = chain[0]
        if name in src.closure:
            cell = src.fn.__closure__[src.fn.__code__.co_freevars.index(name)]
            value = src.closure[name]
            self.shallow.append((lambda cell=cell: (cell.cell_contents,), (value,)))
            mapping = None
        elif name in src.globals:
            mapping, value = src.globals, src.globals[name]
        else:
            return  # a builtin, or a name the frontend binds (loop variables, locals)
        if mapping is not None and value is getattr(builtins, name, _MISSING):
            return
        where = name
        for attr in chain[1:]:
            if not isinstance(value, types.ModuleType):
                break
            if _is_tylo_module_name(getattr(value, "__name__", "") or ""):
                mapping = None  # tylo's own names: covered by the digest of its sources
                break
            self._record(mapping, where.rpartition(".")[2], value)
            mapping = value.__dict__
            where = f"{where}.{attr}"
            value = value.__dict__.get(attr, _MISSING)
            if value is _MISSING:
                return  # the frontend will report it
        if isinstance(value, types.ModuleType):
            self._record(mapping, where.rpartition(".")[2], value)
            return
        if mapping is None and name not in src.closure:
            return
        key = (id(mapping), where)
        if key in self.read_seen:
            return
        self.read_seen.add(key)
        self._record(mapping, where.rpartition(".")[2], value)
        text = self.fingerprint(value, 0, set())
        self.texts.append(f"{where}={text}")

    def _record(self, mapping, name, value):
        if mapping is not None:
            self.reads.append((mapping, name, value))

    # -- values ----------------------------------------------------------------------
    def fingerprint(self, value, depth: int, path: set) -> str:
        self.nodes += 1
        if self.nodes > _MAX_NODES:
            raise Unfingerprintable("it is too large to fingerprint on every compile")
        t = type(value)
        if t in _SCALARS:
            return repr(value)
        if depth > 32:
            raise Unfingerprintable("it nests too deeply")
        if id(value) in path:
            return "<cycle>"
        path = path | {id(value)}
        sub = functools.partial(self.fingerprint, depth=depth + 1, path=path)
        if t in (tuple, list):
            if depth == 0 and t is list:
                self.shallow.append((lambda v=value: tuple(v), tuple(value)))
            return f"{t.__name__}({', '.join(sub(v) for v in value)})"
        if t in (set, frozenset):
            if depth == 0 and t is set:
                self.shallow.append((lambda v=value: tuple(v), tuple(value)))
            return f"{t.__name__}({', '.join(sorted(sub(v) for v in value))})"
        if t is dict:
            if depth == 0:
                self.shallow.append((lambda v=value: (*v, *v.values()), (*value, *value.values())))
            items = sorted(f"{sub(k)}: {sub(v)}" for k, v in value.items())
            return "dict(" + ", ".join(items) + ")"
        module = getattr(t, "__module__", "")
        if not isinstance(module, str):  # a class whose instances carry __module__ (cython functions)
            module = ""
        if module == "numpy" or module.startswith("numpy."):
            return self._numpy(value)
        if isinstance(value, types.ModuleType):
            return f"module {value.__name__}"
        if isinstance(value, enum.Enum):
            return f"enum {module}.{t.__qualname__}.{value.name}={sub(value.value)}"
        inner = getattr(value, self.helper_attr, None) or getattr(value, "__tylo_kernel_fn__", None)
        if inner is not None and isinstance(inner, types.FunctionType):
            self.visit(inner)
            return f"function {inner.__qualname__}"
        if isinstance(value, functools.partial):
            return (f"partial({sub(value.func)}, {sub(value.args)}, "
                    f"{sub(dict(value.keywords))})")
        if callable(value) and hasattr(value, "__wrapped__") and not isinstance(value, type):
            return sub(inspect.unwrap(value))  # functools.lru_cache / wraps: the wrapped source
        if isinstance(value, types.FunctionType):
            return self._function(value)
        if isinstance(value, types.MethodType):
            return f"method({sub(value.__func__)} of {sub(value.__self__)})"
        if isinstance(value, (staticmethod, classmethod)):
            return f"{t.__name__}({sub(value.__func__)})"
        if isinstance(value, property):
            return f"property({sub(value.fget)}, {sub(value.fset)})"
        if isinstance(value, (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)):
            owner = getattr(value, "__self__", None)
            if owner is not None and not isinstance(owner, types.ModuleType):
                return f"builtin {getattr(value, '__qualname__', '?')} of {sub(owner)}"
            return f"builtin {getattr(value, '__module__', None) or ''}.{getattr(value, '__qualname__', '?')}"
        owner = getattr(value, "__module__", None)
        qualname = getattr(value, "__qualname__", None)
        if callable(value) and not isinstance(value, type) and isinstance(owner, str) and isinstance(qualname, str) \
                and not _is_tylo_module_name(owner) and _is_library_module_name(owner):
            # compiled library functions (cython, C extensions): named, with the package's version
            return f"callable {owner}.{qualname}{_library_version(owner)}"
        if isinstance(value, type):
            if depth == 0 and not _is_library_module_name(value.__module__ or ""):
                self.shallow.append((lambda v=value: (*vars(v), *vars(v).values()),
                                     (*vars(value), *vars(value).values())))
            return self._class(value, sub)
        if _is_tylo_module_name(module) or _is_library_module_name(module):
            text = _plain_repr(value)
            if text is not None:
                return f"{module}.{t.__qualname__}:{text}"
            if not _is_tylo_module_name(module):
                # another library's object keeps its state where tylo cannot read it (a tensor's data)
                raise Unfingerprintable(f"a {module}.{t.__qualname__} has no stable text form")
        if getattr(value, "__dict__", None) is not None or hasattr(t, "__slots__"):
            return self._object(value, sub, depth)
        raise Unfingerprintable(f"a {module}.{t.__qualname__} has no stable text form")

    def _function(self, f) -> str:
        if _is_library_module_name(f.__module__ or "") or not _user_file(f):
            return f"function {f.__module__}.{f.__qualname__}{_library_version(f.__module__ or '')}"
        try:
            self.visit(f)
        except TypeError:
            raise Unfingerprintable(f"the source of {f.__qualname__} cannot be read") from None
        return f"function {f.__qualname__}"

    def _class(self, cls, sub) -> str:
        name = f"{cls.__module__}.{cls.__qualname__}"
        if _is_library_module_name(cls.__module__ or ""):
            return f"class {name}{_library_version(cls.__module__ or '')}"
        parts = [sub(b) for b in cls.__bases__ if b is not object]
        for attr, v in sorted(vars(cls).items()):
            if attr.startswith("__") and attr.endswith("__") and not isinstance(v, types.FunctionType):
                continue
            if attr in ("__init__", "__repr__", "__eq__", "__hash__") and not _user_file(v):
                continue  # generated by dataclasses: no source, nothing of the user's to track
            parts.append(f"{attr}={sub(v)}")
        return f"class {name}({', '.join(parts)})"

    def _object(self, value, sub, depth) -> str:
        t = type(value)
        state = dict(vars(value)) if getattr(value, "__dict__", None) is not None else {}
        for cls in t.__mro__:
            for slot in getattr(cls, "__slots__", ()) if not isinstance(getattr(cls, "__slots__", ()), str) \
                    else (cls.__slots__,):
                if slot not in ("__dict__", "__weakref__") and hasattr(value, slot):
                    state[slot] = getattr(value, slot)
        if depth == 0 and getattr(value, "__dict__", None) is not None:
            self.shallow.append((lambda v=value: (*vars(v), *vars(v).values()),
                                 (*vars(value), *vars(value).values())))
        fields = ", ".join(f"{k}={sub(v)}" for k, v in sorted(state.items()))
        return f"{sub(t)}({fields})"

    def _numpy(self, value) -> str:
        import numpy as np

        if isinstance(value, np.generic):
            return f"numpy.{value.dtype}({value.item()!r})"
        if isinstance(value, np.ndarray):
            import hashlib

            data = np.ascontiguousarray(value)
            return f"numpy.ndarray({data.dtype.str}, {data.shape}, {hashlib.sha256(data.tobytes()).hexdigest()})"
        if isinstance(value, np.dtype):
            return f"numpy.dtype({value.str})"
        owner = getattr(value, "__module__", None)
        if callable(value) and isinstance(owner, str):    # np.prod: a dispatcher around a function
            return f"callable {owner}.{getattr(value, '__qualname__', '?')}{_library_version(owner)}"
        text = _plain_repr(value)
        if text is None:
            raise Unfingerprintable(f"a numpy {type(value).__qualname__} has no stable text form")
        return f"numpy:{text}"


def _plain_repr(value) -> str | None:
    """``repr(value)`` when it can name the value: not an address, not abbreviated (a long
    tensor prints as ``[0., 0., ..., 0.]``)."""
    try:
        text = repr(value)
    except Exception:
        return None
    return None if " at 0x" in text or "..." in text else text


def _library_version(module_name: str) -> str:
    """``@1.2.3`` for an installed package that says its version: its code changes with it."""
    top = module_name.partition(".")[0]
    if not top or _is_tylo_module_name(top) or top in _STDLIB:
        return ""
    version = getattr(sys.modules.get(top), "__version__", None)
    return f"@{version}" if isinstance(version, str) else ""


def _user_file(f) -> bool:
    code = getattr(f, "__code__", None)
    return code is not None and not code.co_filename.startswith("<")


def _parameter_names(tree) -> set:
    a = tree.args
    names = {x.arg for x in a.args + a.kwonlyargs + a.posonlyargs}
    names.update(x.arg for x in (a.vararg, a.kwarg) if x is not None)
    return names


def collect_dependencies(fn, helper_attr: str = "__tylo_func__") -> Dependencies:
    """Fingerprint everything ``fn``'s compile can read; raises CompileError for a global whose
    changes tylo cannot see."""
    w = _Walker(helper_attr)
    w.visit(fn)
    return Dependencies(w.texts, w.reads, w.codes, w.shallow)


def dependency_sources(fn, helper_attr: str = "__tylo_func__") -> list[str]:
    """The texts of :func:`collect_dependencies` (the kernel's part of the cache key)."""
    return collect_dependencies(fn, helper_attr).texts
