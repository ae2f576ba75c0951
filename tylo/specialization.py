"""A kernel's specialisation as typed records, and the one text grammar that names it.

Each parameter of a compiled kernel is described by one small frozen record:

* ``PointerSpec("f32", aligned16)``: a global pointer, known 16-byte aligned or not;
* ``IntSpec("i32", one, div16)``: an unannotated integer, specialised on ``== 1`` (compiled as
  the constant 1) and ``% 16 == 0``;
* ``ScalarSpec("f32")``: a scalar that is not specialised (floats, bools, annotated ints);
* ``BlobSpec("tma", static, 128)``: bytes passed by value (a TMA binding), ``static`` shapes the code;
* ``ConstexprSpec(value)``: a ``tylo.constexpr`` parameter.

The signature text lists the runtime parameters in order, separated by commas. ``tylo compile
--signature``, ``kernel.compile(signature=...)``, ``CompiledKernel.signature`` and ``tylo cache
list`` all use it, and it round-trips exactly (``format_signature(parse(text)) == text`` for a
text in canonical spacing)::

    *f32        pointer to f32              *f32:16     ... 16-byte aligned (no other :N)
    i32         integer (unannotated: neither 1 nor a multiple of 16; annotated: any value)
    i32:16      integer divisible by 16     i32=1       integer equal to 1
    f32, bool   floats and bools: never specialised
    tma(TMATile(dtype=bf16, shape=(64, 64), axis=1, swizzle=128), 2)[128B]
                a by-value blob: kind, static description (tylo names only), bytes

The launch path keeps its per-argument key parts as cheap tuples and turns them into these
records only on a miss (see ``tylo.jit``).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .ir import types as T

__all__ = ["PointerSpec", "IntSpec", "ScalarSpec", "BlobSpec", "ConstexprSpec", "parse_signature",
           "format_signature", "split_signature"]


@dataclass(frozen=True)
class PointerSpec:
    dtype: str
    aligned16: bool = False

    @property
    def text(self) -> str:
        return f"*{self.dtype}" + (":16" if self.aligned16 else "")

    def param_type(self):
        return T.PointerType(T.scalar_type(self.dtype), "global")

    def binding(self):
        return ("runtime", self.param_type(), ("align16",) if self.aligned16 else ())


@dataclass(frozen=True)
class IntSpec:
    dtype: str
    one: bool = False
    div16: bool = False

    def __post_init__(self):
        if self.one and self.div16:
            raise ValueError("an integer equal to 1 is not divisible by 16")

    @property
    def text(self) -> str:
        return self.dtype + ("=1" if self.one else ":16" if self.div16 else "")

    def param_type(self):
        return T.scalar_type(self.dtype)

    def binding(self):
        if self.one:
            return ("const", 1, self.param_type())
        return ("runtime", self.param_type(), ("div16",) if self.div16 else ())


@dataclass(frozen=True)
class ScalarSpec:
    dtype: str

    @property
    def text(self) -> str:
        return self.dtype

    def param_type(self):
        return T.scalar_type(self.dtype)

    def binding(self):
        return self.param_type()


@dataclass(frozen=True)
class BlobSpec:
    kind: str
    static: tuple
    nbytes: int

    @property
    def text(self) -> str:
        # the static part (a TMA binding's plan and rank) shapes the code: it is in the text and the key
        return f"{self.kind}{self.static!r}[{self.nbytes}B]"

    def param_type(self):
        return T.ParamBlobType(self.kind, self.nbytes, 64, self.static)

    def binding(self):
        return ("runtime", self.param_type(), ())


@dataclass(frozen=True)
class ConstexprSpec:
    value: object


RUNTIME_SPECS = (PointerSpec, IntSpec, ScalarSpec, BlobSpec)

_POINTER = re.compile(r"\*([a-z][a-z0-9_]*)(?::(\S*))?")
_SCALAR = re.compile(r"([a-z][a-z0-9_]*)(?:([:=])(\S*))?")
_BLOB = re.compile(r"([a-z_][a-z0-9_]*)(\(.*\))\[(\d+)B\]", re.S)


def split_signature(text: str) -> list[str]:
    """The entries of a signature text, split at top-level commas; empty entries are errors."""
    if not isinstance(text, str):
        raise TypeError(f"a signature is a str or a list, not {type(text).__name__}")
    if not text.strip():
        return []
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    for i, p in enumerate(parts):
        if not p.strip():
            raise ValueError(f"bad signature {text!r}: entry {i + 1} is empty")
    return [p.strip() for p in parts]


def _dtype(name: str, entry: str) -> str:
    if name not in T.SCALAR_TYPES:
        raise ValueError(f"bad signature entry {entry!r}: unknown dtype {name!r}; expected one of "
                         f"{', '.join(T.SCALAR_TYPES)}")
    return name


def parse_entry(entry: str):
    """One signature entry -> a runtime record (an integer is an ``IntSpec``)."""
    m = _POINTER.fullmatch(entry)
    if m:
        dtype, align = _dtype(m.group(1), entry), m.group(2)
        if align is None:
            return PointerSpec(dtype)
        if align == "16":
            return PointerSpec(dtype, True)
        raise ValueError(f"bad signature entry {entry!r}: a pointer takes ':16' (16-byte aligned) or "
                         f"nothing, not ':{align}'")
    m = _SCALAR.fullmatch(entry)
    if m:
        dtype, sep, arg = _dtype(m.group(1), entry), m.group(2), m.group(3)
        t = T.scalar_type(dtype)
        if sep is None:
            return IntSpec(dtype) if t.is_int else ScalarSpec(dtype)
        if not t.is_int:
            raise ValueError(f"bad signature entry {entry!r}: only integers are specialised "
                             f"(':16' divisible by 16, '=1' equal to 1)")
        if (sep, arg) == (":", "16"):
            return IntSpec(dtype, div16=True)
        if (sep, arg) == ("=", "1"):
            return IntSpec(dtype, one=True)
        raise ValueError(f"bad signature entry {entry!r}: an integer takes ':16' (divisible by 16), "
                         f"'=1' (equal to 1) or nothing")
    m = _BLOB.fullmatch(entry)
    if m:
        static = _eval_static(m.group(2), entry)
        return BlobSpec(m.group(1), static, int(m.group(3)))
    raise ValueError(f"bad signature entry {entry!r}: expected '*dtype', '*dtype:16', 'int', 'int:16', "
                     f"'int=1', a float or bool dtype, or a blob 'kind(static)[NB]'")


_STATIC_NODES = (ast.Expression, ast.Tuple, ast.List, ast.Call, ast.Name, ast.Load, ast.Constant, ast.keyword,
                 ast.UnaryOp, ast.USub)


def _eval_static(text: str, entry: str) -> tuple:
    """The static description of a blob, written with dtype and TMA plan names and literals only."""
    from .lang import tma

    names = {**T.SCALAR_TYPES, **{n: getattr(tma, n) for n in tma.__all__}}
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError(f"bad signature entry {entry!r}: its static part is not an expression") from None
    for node in ast.walk(tree):
        if not isinstance(node, _STATIC_NODES):
            raise ValueError(f"bad signature entry {entry!r}: its static part may hold only tylo names, "
                             f"calls and literals")
        if isinstance(node, ast.Name) and node.id not in names:
            raise ValueError(f"bad signature entry {entry!r}: {node.id!r} is not a tylo name")
    try:
        value = eval(compile(tree, "<signature>", "eval"), {"__builtins__": {}}, names)
    except Exception as exc:
        raise ValueError(f"bad signature entry {entry!r}: {exc}") from None
    if not isinstance(value, tuple):
        raise ValueError(f"bad signature entry {entry!r}: the static part must be a tuple")
    return value


def parse_signature(signature) -> list:
    """A signature (text, or a list of entries: text, tylo types, records, or plans such as a
    ``TMATile`` standing for a TMA binding) -> runtime records, in order."""
    items = split_signature(signature) if isinstance(signature, str) else list(signature)
    out = []
    for item in items:
        if isinstance(item, RUNTIME_SPECS):
            out.append(item)
        elif isinstance(item, str):
            out.append(parse_entry(item.strip()))
        elif isinstance(item, T.PointerType):
            out.append(PointerSpec(item.elem.name))
        elif isinstance(item, T.ScalarType):
            out.append(IntSpec(item.name) if item.is_int else ScalarSpec(item.name))
        elif isinstance(item, T.ParamBlobType):
            out.append(BlobSpec(item.kind, item.static, item.nbytes))
        elif hasattr(item, "__tylo_signature__"):  # a by-value parameter described by its plan (a TMA tile)
            tag, kind, static, nbytes = item.__tylo_signature__()
            out.append(BlobSpec(kind, tuple(static), nbytes))
        else:
            raise ValueError(f"bad signature entry {item!r}: expected a type name, a tylo type or a plan "
                             f"(TMATile, tma.batched(plan))")
    return out


def format_signature(specs) -> str:
    """The canonical text of the runtime records among ``specs``."""
    return ", ".join(s.text for s in specs if not isinstance(s, ConstexprSpec))
