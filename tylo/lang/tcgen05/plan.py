"""The tcgen05 plan (host side, pure Python).

``Tcgen05MMA`` validates a ``tcgen05.mma`` shape and builds its 32-bit instruction descriptor from
``IDESC_FIELDS``; ``smem_descriptor`` builds the 64-bit shared-memory matrix descriptor from a
``tylo.layouts.swizzled_structure`` result; ``tmem_columns`` checks an allocation size. The bit
tables are the PTX ISA's (tcgen05 "Instruction descriptor", "Shared memory descriptor"), defined
beside the ops in ``tylo.ir.nv.tcgen05``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir.nv.bitfields import descriptor_offset_field, pack_fields, unpack_fields
from ...ir.nv.tcgen05 import (
    TCGEN05_IDESC_FIELDS,
    TCGEN05_SMEM_DESCRIPTOR_FIELDS,
    TCGEN05_SWIZZLE_MODES,
    tcgen05_smem_descriptor,
)

__all__ = [
    "IDESC_FIELDS", "SMEM_DESC_FIELDS", "SWIZZLE_CODES", "encode_fields", "decode_fields", "Tcgen05MMA",
    "smem_descriptor", "smem_descriptor_encode", "tmem_columns",
]


# --------------------------------------------------------------------------
# bit tables (PTX ISA: tcgen05 "Instruction descriptor" for .kind::tf32/f16/f8f6f4/i8)

# The descriptors' bit tables are ISA data of the nv.tcgen05 ops (tylo.ir.nv.tcgen05); these names are this
# module's API for them.
IDESC_FIELDS = TCGEN05_IDESC_FIELDS
SMEM_DESC_FIELDS = TCGEN05_SMEM_DESCRIPTOR_FIELDS
SWIZZLE_CODES = TCGEN05_SWIZZLE_MODES

_D_TYPE = {"f16": 0, "f32": 1, "i32": 2}
_AB_TYPE = {
    "f16": {"f16": 0, "bf16": 1},
    "tf32": {"f32": 2},  # tf32 operands are stored as f32
    "f8f6f4": {"f8e4m3": 0, "f8e5m2": 1},
    "i8": {"u8": 0, "i8": 1},
}
_K = {"f16": 16, "tf32": 8, "f8f6f4": 32, "i8": 32}
_ACC = {"f16": ("f16", "f32"), "tf32": ("f32",), "f8f6f4": ("f32",), "i8": ("i32",)}


def encode_fields(table, values: dict, bits: int) -> int:
    """Pack ``values`` (field -> int) into a ``bits``-bit word per ``table``."""
    return pack_fields(table, values, bits)


def decode_fields(table, word: int) -> dict:
    return unpack_fields(table, word)


# --------------------------------------------------------------------------
# the MMA plan


def dtype_name(dt) -> str:
    return dt if isinstance(dt, str) else getattr(dt, "name", repr(dt))


def _kind(a: str, b: str) -> str:
    for kind, types in _AB_TYPE.items():
        if a in types and b in types:
            return kind
    raise ValueError(
        f"Tcgen05MMA: no tcgen05.mma kind takes A={a} and B={b} (f16: f16/bf16 pairs; tf32: f32; "
        "f8f6f4: f8e4m3/f8e5m2; i8: i8/u8)"
    )


def _n_ok(kind: str, m: int, n: int, cta_group: int) -> str | None:
    if cta_group == 1:
        if kind == "i8" and m == 128:
            ok = n % 16 == 0 and 16 <= n <= 256
            rule = "N = 16, 32, ..., 256 (steps of 16) for kind::i8 with M = 128"
        elif kind == "i8":
            ok = n in (8, 16, 24) or (n % 16 == 0 and 32 <= n <= 256)
            rule = "N = 8, 16, 24, 32, 48, ..., 256 for kind::i8 with M = 64"
        else:
            ok = n % 8 == 0 and 8 <= n <= 256
            rule = "N = 8, 16, ..., 256 (steps of 8) with cta_group::1"
    else:
        ok = n % 16 == 0 and 16 <= n <= 256
        rule = "N = 16, 32, ..., 256 (steps of 16) with cta_group::2"
    return None if ok else rule


@dataclass(frozen=True)
class Tcgen05MMA:
    """A dense ``tcgen05.mma`` (no ``.ws``, no block scaling): D[M,N] (+)= A[M,K] B[K,N].

    ``shape``: ``(M, N)`` or ``(M, N, K)`` (K is fixed by the kind: 32 bytes);
    ``a_major`` / ``b_major``: ``'K'`` (not transposed) or ``'MN'``;
    ``cta_group``: 1 (M = 64, 128) or 2 (M = 128, 256; default for M = 256).

    >>> from tylo.ir.types import bf16, f32
    >>> mma = Tcgen05MMA((128, 256), bf16, bf16, f32)
    >>> mma.kind, mma.k, hex(mma.idesc)
    ('f16', 16, '0x8400490')
    """

    shape: tuple
    a_dtype: Any
    b_dtype: Any
    acc_dtype: Any
    a_major: str = "K"
    b_major: str = "K"
    negate_a: bool = False
    negate_b: bool = False
    saturate: bool = False
    cta_group: int | None = None

    def __post_init__(self):
        shape = tuple(self.shape)
        if len(shape) not in (2, 3) or not all(type(s) is int and s > 0 for s in shape):
            raise ValueError(f"Tcgen05MMA: shape must be (M, N) or (M, N, K) positive ints, got {self.shape!r}")
        a, b, acc = dtype_name(self.a_dtype), dtype_name(self.b_dtype), dtype_name(self.acc_dtype)
        kind = _kind(a, b)
        if kind == "f16" and a != b:
            raise ValueError(f"Tcgen05MMA: kind::f16 needs A and B of one type, got {a} and {b}")
        if acc not in _ACC[kind]:
            raise ValueError(f"Tcgen05MMA: kind::{kind} accumulates in {' or '.join(_ACC[kind])}, not {acc}")
        if kind == "f16" and acc == "f16" and a != "f16":
            raise ValueError("Tcgen05MMA: an f16 accumulator needs f16 inputs (bf16 accumulates in f32)")
        m, n = shape[0], shape[1]
        k = _K[kind]
        if len(shape) == 3 and shape[2] != k:
            raise ValueError(f"Tcgen05MMA: kind::{kind} has K = {k} (32 bytes of A/B), got K = {shape[2]}")
        cg = self.cta_group if self.cta_group is not None else (2 if m == 256 else 1)
        if cg not in (1, 2):
            raise ValueError(f"Tcgen05MMA: cta_group must be 1 or 2, got {cg!r}")
        allowed = (64, 128) if cg == 1 else (128, 256)
        if m not in allowed:
            raise ValueError(f"Tcgen05MMA: cta_group::{cg} takes M in {allowed}, got M = {m}")
        rule = _n_ok(kind, m, n, cg)
        if rule:
            raise ValueError(f"Tcgen05MMA: N = {n} is not allowed; the ISA takes {rule}")
        for which, major in (("a_major", self.a_major), ("b_major", self.b_major)):
            if major not in ("K", "MN"):
                raise ValueError(f"Tcgen05MMA: {which} must be 'K' or 'MN', got {major!r}")
        if kind == "i8" and (self.negate_a or self.negate_b):
            raise ValueError("Tcgen05MMA: kind::i8 cannot negate A or B")
        if self.saturate and kind != "i8":
            raise ValueError(f"Tcgen05MMA: saturate applies to kind::i8 only, not kind::{kind}")
        object.__setattr__(self, "shape", (m, n, k))
        object.__setattr__(self, "cta_group", cg)

    m = property(lambda self: self.shape[0])
    n = property(lambda self: self.shape[1])
    k = property(lambda self: self.shape[2])

    @property
    def kind(self) -> str:
        return _kind(dtype_name(self.a_dtype), dtype_name(self.b_dtype))

    @property
    def fields(self) -> dict:
        kind = self.kind
        return {
            "saturate": int(self.saturate),
            "d_type": _D_TYPE[dtype_name(self.acc_dtype)],
            "a_type": _AB_TYPE[kind][dtype_name(self.a_dtype)],
            "b_type": _AB_TYPE[kind][dtype_name(self.b_dtype)],
            "negate_a": int(self.negate_a),
            "negate_b": int(self.negate_b),
            "transpose_a": int(self.a_major == "MN"),
            "transpose_b": int(self.b_major == "MN"),
            "n_dim": self.n >> 3,
            "m_dim": self.m >> 4,
        }

    @property
    def idesc(self) -> int:
        """The 32-bit instruction descriptor (dense, no .ws)."""
        return encode_fields(IDESC_FIELDS, self.fields, 32)

    @property
    def instruction(self) -> str:
        return f"tcgen05.mma.cta_group::{self.cta_group}.kind::{self.kind}"

    @property
    def a_bytes(self) -> int:
        return {"f16": 2, "tf32": 4, "f8f6f4": 1, "i8": 1}[self.kind]


# --------------------------------------------------------------------------
# shared-memory descriptor


smem_descriptor_encode = descriptor_offset_field  # matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4
smem_descriptor = tcgen05_smem_descriptor


def tmem_columns(columns) -> int:
    """Check a ``tcgen05.alloc`` size: a power of two in 32..512 columns."""
    if type(columns) is not int or columns < 32 or columns > 512 or columns & (columns - 1):
        raise ValueError(f"tmem_alloc: columns must be a power of two in 32..512, got {columns!r}")
    return columns
