"""What the assembler's log says about a kernel, turned into warnings that name the cause.

ptxas (and nvJitLink, the same engine) serialises every ``wgmma.mma_async`` of a function when
something in it breaks the asynchronous WGMMA pipeline, and says so only as an info line (C7509,
C7510: "wgmma.mma_async instructions are serialized due to ..."). The kernel still runs, several
times slower. Measured with nvJitLink 13 on sm_90a: one IEEE ``f32`` division anywhere in the kernel
(``a / b``, which ptxas compiles to a subroutine call for its slow path) is enough.
"""
from __future__ import annotations

import re

__all__ = ["WGMMASerializationWarning", "wgmma_serialization", "serialization_causes"]


class WGMMASerializationWarning(UserWarning):
    """The assembler serialised the kernel's WGMMAs (C7509/C7510): correct but slow."""


_SERIALIZED = re.compile(r"\((C75\d\d)\)[^\n]*wgmma[^\n]*serializ[^\n]*", re.IGNORECASE)

# PTX whose slow path ptxas turns into a subroutine call, and what tylo offers instead
_CAUSES = (
    (re.compile(r"\bdiv\.rn\.f32\b"), "IEEE f32 division (div.rn.f32)",
     "tylo.fdiv(a, b, fast=True) or a * tylo.rcp(b, fast=True)"),
    (re.compile(r"\brcp\.rn\.f32\b"), "IEEE f32 reciprocal (rcp.rn.f32)", "tylo.rcp(x, fast=True)"),
    (re.compile(r"\bsqrt\.rn\.f32\b"), "IEEE f32 square root (sqrt.rn.f32)", "tylo.rsqrt or sqrt.approx"),
    (re.compile(r"\b(div|rcp|sqrt)\.rn\.f64\b"), "f64 division, reciprocal or square root", "f32 fast forms"),
    (re.compile(r"\bcall(\.uni)?\b"), "a function call", "inline the callee"),
)


def serialization_causes(ptx: str) -> list[str]:
    """``"<count> x <what> (use <instead>)"`` for each known cause found in the PTX."""
    found = []
    for pattern, what, instead in _CAUSES:
        n = len(pattern.findall(ptx))
        if n:
            found.append(f"{n} x {what} (use {instead})")
    return found


def wgmma_serialization(log: str, ptx: str, name: str) -> str | None:
    """The warning text when the assembler log says the kernel's WGMMAs were serialised, else None."""
    hit = _SERIALIZED.search(log or "")
    if hit is None:
        return None
    line = hit.group(0).strip()
    causes = serialization_causes(ptx)
    why = "; ".join(causes) if causes else "no known cause found in the PTX"
    return (f"kernel {name}: the assembler serialised every wgmma.mma_async ({line}). Likely cause: {why}. "
            f"The kernel is correct but its WGMMAs no longer overlap.")
