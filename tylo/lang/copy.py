"""Warp-level and asynchronous copies: ``ldmatrix``, ``stmatrix``, ``cp.async``.

Raw, ISA-level builtins (the fragment and tile layers decide when to use them):

* ``ldmatrix(ptr, num=1|2|4, trans=False)``: ``ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16``;
  returns ``num`` u32 registers. Lanes ``8j .. 8j+7`` give the row addresses of matrix ``j``
  (each row: 8 contiguous 16-bit elements, 16-byte aligned); ``ldmatrix_ownership`` says what
  each lane receives.
* ``stmatrix(ptr, regs, trans=False)``: the inverse (sm_90+).
* ``cp_async(dst, src, nbytes=4|8|16, src_bytes=None)``: ``cp.async.{ca,cg}.shared.global``
  (``cg`` for 16 bytes, ``ca`` otherwise); ``src_bytes`` < ``nbytes`` zero-fills the rest.
* ``commit_copies()`` / ``wait_copies(n)``: ``cp.async.commit_group`` / ``cp.async.wait_group n``.

Every op here is ordered with respect to other memory operations (LLVM sees a side effect and
a memory clobber); none of them implies a barrier between threads: after ``wait_copies`` the
data is visible to the issuing thread only, a ``sync_threads`` makes it visible to others.
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.core import Value
from ..ir.types import PointerType, ScalarType
from ..layouts import Layout, Ownership
from .base import LangError, builtin

__all__ = ["ldmatrix", "stmatrix", "cp_async", "commit_copies", "wait_copies", "ldmatrix_ownership"]

_B16 = ("f16", "bf16", "i16", "u16")
_B32 = ("u32", "i32")


# -- host side ------------------------------------------------------------------------------------

def ldmatrix_ownership(num: int = 4, trans: bool = False) -> Ownership:
    """What ``ldmatrix .xnum [.trans]`` delivers to each of the 32 lanes.

    Logical shape ``(8 * num, 8)`` of 16-bit elements: the ``num`` 8x8 matrices stacked along
    rows, matrix ``j`` in rows ``8j .. 8j+7``; row ``r`` of matrix ``j`` is the 16-byte row whose
    address lane ``8j + r`` supplies, column ``c`` is its ``c``-th 16-bit element. Slot
    ``e + 2j`` is the low (``e = 0``) or high (``e = 1``) half of returned register ``j``.

    Without ``.trans`` lane ``l`` receives row ``8j + l // 4``, columns ``2(l % 4) + e``; with
    ``.trans`` row ``8j + 2(l % 4) + e``, column ``l // 4`` (PTX ISA, ldmatrix).

    >>> o = ldmatrix_ownership(4)
    >>> o.coord(5, 0), o.coord(5, 1), o.coord(5, 6)
    ((1, 2), (1, 3), (25, 2))
    >>> ldmatrix_ownership(1, trans=True).coord(5, 1)
    (3, 1)
    """
    if num not in (1, 2, 4):
        raise ValueError(f"ldmatrix_ownership: num must be 1, 2 or 4 (ldmatrix .x1/.x2/.x4), got {num!r}")
    R = 8 * num
    if trans:  # index = (8j + 2t + e) + R * g
        tv = Layout(((4, 8), (2, num)), ((2, R), (1, 8)))
    else:  # index = (8j + g) + R * (2t + e)
        tv = Layout(((4, 8), (2, num)), ((2 * R, 1), (R, 8)))
    return Ownership((R, 8), tv, f"ldmatrix.x{num}{'.trans' if trans else ''}")


# -- builtins --------------------------------------------------------------------------------------

def _shared_b16(ptr, what: str) -> None:
    if not isinstance(ptr, Value) or not isinstance(ptr.type, PointerType):
        raise LangError(f"{what} needs a shared-memory pointer, got {ptr!r}")
    if ptr.type.space != "shared":
        raise LangError(f"{what} reads and writes shared memory only; got a {ptr.type} pointer")
    if ptr.type.elem.name not in _B16 + _B32:
        raise LangError(f"{what} moves 16-bit elements: the pointer must point to f16, bf16, i16, u16 "
                        f"(or u32/i32 pairs), got {ptr.type}")


def _num(num, what: str) -> int:
    if num not in (1, 2, 4) or isinstance(num, bool):
        raise LangError(f"{what}: num must be a compile-time 1, 2 or 4 (.x1/.x2/.x4), got {num!r}")
    return num


def _flag(x, what: str) -> bool:
    if isinstance(x, Value) or not isinstance(x, bool):
        raise LangError(f"{what}: trans must be a compile-time bool, got {x!r}")
    return x


@builtin
def ldmatrix(ptr, num: int = 1, trans: bool = False, *, _ctx) -> tuple:
    """``ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16``: ``num`` u32 registers.

    ``ptr`` is this lane's row address (lanes ``8j..8j+7`` address matrix ``j``; every row is
    16 contiguous, 16-byte aligned bytes). All lanes of the warp must execute it.
    """
    _shared_b16(ptr, "ldmatrix")
    num, trans = _num(num, "ldmatrix"), _flag(trans, "ldmatrix")
    op = _ctx.builder.create("nv.ldmatrix", [ptr], [T.u32] * num, {"num": num, "trans": trans})
    return tuple(op.results)


@builtin
def stmatrix(ptr, regs, trans: bool = False, *, _ctx) -> None:
    """``stmatrix.sync.aligned.m8n8.x{len(regs)}[.trans].shared.b16`` (sm_90+): the inverse of
    ``ldmatrix``, same addressing and register layout."""
    if _ctx.sm < 90:
        raise LangError(f"stmatrix needs sm_90 or newer (target {_ctx.arch}); store the fragment "
                        "with ordinary shared stores instead")
    _shared_b16(ptr, "stmatrix")
    if isinstance(regs, Value) or not isinstance(regs, (tuple, list)):
        raise LangError(f"stmatrix: regs must be a tuple of 1, 2 or 4 u32 registers, got {regs!r}")
    _num(len(regs), "stmatrix")
    for i, r in enumerate(regs):
        if not isinstance(r, Value) or r.type not in (T.u32, T.i32):
            got = r.type if isinstance(r, Value) else repr(r)
            raise LangError(f"stmatrix: regs[{i}] must be a u32 register (two packed 16-bit values), got {got}")
    trans = _flag(trans, "stmatrix")
    _ctx.builder.create("nv.stmatrix", [ptr, *regs], [], {"num": len(regs), "trans": trans})


@builtin
def cp_async(dst, src, nbytes: int = 16, src_bytes=None, cache=None, *, _ctx) -> None:
    """Asynchronously copy ``nbytes`` (4, 8 or 16) from global ``src`` to shared ``dst``.

    Both addresses must be ``nbytes``-aligned (not checked: they are runtime values).
    ``src_bytes`` (runtime or compile-time, ``<= nbytes``) reads only that many bytes and fills
    the rest with zeros (the predicated-off tail of a tile). ``cache``: ``"cg"`` (L2 only,
    16 bytes only; the default for 16) or ``"ca"`` (the default otherwise). Complete with
    ``commit_copies()`` and ``wait_copies(n)``.
    """
    if _ctx.sm < 80:
        raise LangError(f"cp_async needs sm_80 or newer (target {_ctx.arch})")
    if not isinstance(dst, Value) or not isinstance(dst.type, PointerType) or dst.type.space != "shared":
        raise LangError(f"cp_async: dst must be a shared-memory pointer, got "
                        f"{dst.type if isinstance(dst, Value) else repr(dst)}")
    if not isinstance(src, Value) or not isinstance(src.type, PointerType) or src.type.space != "global":
        raise LangError(f"cp_async: src must be a global-memory pointer, got "
                        f"{src.type if isinstance(src, Value) else repr(src)}")
    if nbytes not in (4, 8, 16) or isinstance(nbytes, bool):
        raise LangError(f"cp_async: nbytes must be a compile-time 4, 8 or 16, got {nbytes!r}")
    if cache is None:
        cache = "cg" if nbytes == 16 else "ca"
    if cache not in ("ca", "cg"):
        raise LangError(f"cp_async: cache must be 'ca' or 'cg', got {cache!r}")
    if cache == "cg" and nbytes != 16:
        raise LangError(f"cp_async: cp.async.cg copies 16 bytes only, got nbytes={nbytes}; use cache='ca'")
    operands = [dst, src]
    if src_bytes is not None:
        if isinstance(src_bytes, Value):
            t = src_bytes.type
            if not isinstance(t, ScalarType) or not (t.is_int or t.is_bool):
                raise LangError(f"cp_async: src_bytes must be an integer, got {t}")
            if t != T.u32:
                src_bytes = _ctx.builder.value("arith.cast", [src_bytes], T.u32)
        elif isinstance(src_bytes, int) and not isinstance(src_bytes, bool) and 0 <= src_bytes <= nbytes:
            src_bytes = _ctx.builder.constant(src_bytes, T.u32)
        else:
            raise LangError(f"cp_async: src_bytes must be an integer in 0..{nbytes}, got {src_bytes!r}")
        operands.append(src_bytes)
    _ctx.builder.create("nv.cp_async", operands, [], {"nbytes": nbytes, "cache": cache})


@builtin
def commit_copies(*, _ctx) -> None:
    """``cp.async.commit_group``: close the group of this thread's outstanding ``cp_async``s."""
    _ctx.builder.create("nv.cp_async.commit", [], [], {})


@builtin
def wait_copies(n: int = 0, *, _ctx) -> None:
    """``cp.async.wait_group n``: wait until at most ``n`` of this thread's committed groups are
    pending (``n`` compile-time). Other threads' copies need a ``sync_threads`` as well."""
    if isinstance(n, Value) or not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise LangError(f"wait_copies: n must be a compile-time integer >= 0, got {n!r}")
    _ctx.builder.create("nv.cp_async.wait", [], [], {"n": n})
