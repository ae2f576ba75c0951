"""Blackwell tcgen05: MMA plans, descriptors, TMEM allocation and the kernel builtins.

Host side (pure Python): ``Tcgen05MMA`` validates a ``tcgen05.mma`` shape and
builds its 32-bit instruction descriptor from ``IDESC_FIELDS``;
``smem_descriptor`` builds the 64-bit shared-memory matrix descriptor from a
``tylo.layouts.swizzled_structure`` result; ``tmem_columns`` checks an
allocation size.  Every bit position is one row of a table below, taken
from the PTX ISA (tcgen05 "Instruction descriptor", "Shared memory
descriptor").

Kernel side: the ``nv.tcgen05.*`` IR ops (registered here) and the builtins
that emit them.  Codegen is ``tylo.codegen.ptx.tcgen05``.  Nothing here
inserts a wait, fence or barrier that the kernel did not ask for.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir import types as T
from ..ir.core import Value
from ..ir.ops import register_op
from ..ir.types import PointerType
from . import core as L
from .base import LangError, builtin
from .tmem import TmemAccess, slots_per_word

__all__ = [
    "IDESC_FIELDS", "SMEM_DESC_FIELDS", "SWIZZLE_CODES", "encode_fields", "decode_fields",
    "Tcgen05MMA", "smem_descriptor", "smem_descriptor_encode", "tmem_columns",
    "tmem_alloc", "tmem_dealloc", "tmem_relinquish_alloc_permit", "tcgen05_ld", "tcgen05_st",
    "tcgen05_wait_ld", "tcgen05_wait_st", "fence_before_thread_sync", "fence_after_thread_sync",
    "tcgen05_mma", "tcgen05_commit", "load_async", "wait_load", "store_async", "wait_stores",
    "TmemLoad",
]

# --------------------------------------------------------------------------
# bit tables (PTX ISA: tcgen05 "Instruction descriptor" for .kind::tf32/f16/f8f6f4/i8)

#: (field, lowest bit, width) of the 32-bit instruction descriptor.
IDESC_FIELDS = (
    ("sparsity_selector", 0, 2),
    ("sparse", 2, 1),
    ("saturate", 3, 1),
    ("d_type", 4, 2),
    # bit 6 reserved
    ("a_type", 7, 3),
    ("b_type", 10, 3),
    ("negate_a", 13, 1),
    ("negate_b", 14, 1),
    ("transpose_a", 15, 1),
    ("transpose_b", 16, 1),
    ("n_dim", 17, 6),  # N >> 3
    # bit 23 reserved
    ("m_dim", 24, 5),  # M >> 4
    # bit 29 reserved
    ("max_shift", 30, 2),  # .ws only
)

#: (field, lowest bit, width) of the 64-bit tcgen05 shared-memory descriptor.
SMEM_DESC_FIELDS = (
    ("start_address", 0, 14),  # (addr & 0x3FFFF) >> 4
    ("leading_byte_offset", 16, 14),  # (LBO & 0x3FFFF) >> 4
    ("stride_byte_offset", 32, 14),  # (SBO & 0x3FFFF) >> 4
    ("version", 46, 3),  # fixed 0b001 on sm_100 (bits 46-48)
    ("base_offset", 49, 3),
    ("lbo_mode", 52, 1),  # 0: relative byte offset, 1: absolute address (sm_103a)
    # bits 53-60 fixed 0
    ("swizzle", 61, 3),
)

#: swizzle byte size -> 3-bit mode of the shared-memory descriptor (0: none).
SWIZZLE_CODES = {0: 0, "128B_base32B": 1, 128: 2, 64: 4, 32: 6}

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
    names = {n for n, _, _ in table}
    for k in values:
        if k not in names:
            raise ValueError(f"unknown descriptor field {k!r}")
    out = 0
    for name, lo, width in table:
        v = values.get(name, 0)
        if type(v) is bool:
            v = int(v)
        if type(v) is not int or not 0 <= v < (1 << width):
            raise ValueError(f"descriptor field {name} = {v!r} does not fit in {width} bits")
        out |= v << lo
    assert out < (1 << bits)
    return out


def decode_fields(table, word: int) -> dict:
    return {name: (word >> lo) & ((1 << width) - 1) for name, lo, width in table}


# --------------------------------------------------------------------------
# the MMA plan


def _name(dt) -> str:
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
        a, b, acc = _name(self.a_dtype), _name(self.b_dtype), _name(self.acc_dtype)
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
        return _kind(_name(self.a_dtype), _name(self.b_dtype))

    @property
    def fields(self) -> dict:
        kind = self.kind
        return {
            "saturate": int(self.saturate),
            "d_type": _D_TYPE[_name(self.acc_dtype)],
            "a_type": _AB_TYPE[kind][_name(self.a_dtype)],
            "b_type": _AB_TYPE[kind][_name(self.b_dtype)],
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


def smem_descriptor_encode(x: int) -> int:
    """matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4."""
    return (x & 0x3FFFF) >> 4


def smem_descriptor(structure, start_address: int = 0, base_offset: int = 0) -> int:
    """The 64-bit tcgen05 shared-memory descriptor of a canonical operand tile.

    ``structure``: a ``tylo.layouts.SwizzledStructure`` (from
    ``swizzled_structure(layout, elem_bytes)``).  A byte offset the tile does
    not determine (``None``) is encoded as 16 bytes for LBO (the ISA says a
    swizzled K-major LBO is "assumed 1") and 0 for SBO.  ``start_address``
    is the shared-memory byte address (16-byte aligned); ``base_offset`` the
    3-bit pattern phase (0 when the tile starts on the swizzle repeat).
    """
    if structure is None:
        raise ValueError("smem_descriptor: the tile matches no canonical shared-memory encoding")
    if type(start_address) is int and start_address % 16:
        raise ValueError(f"smem_descriptor: start address {start_address} is not 16-byte aligned")
    lbo = structure.leading_byte_offset
    sbo = structure.stride_byte_offset
    fields = {
        "start_address": smem_descriptor_encode(start_address),
        "leading_byte_offset": smem_descriptor_encode(16 if lbo is None else lbo),
        "stride_byte_offset": smem_descriptor_encode(0 if sbo is None else sbo),
        "version": 1,
        "base_offset": base_offset,
        "lbo_mode": 0,
        "swizzle": SWIZZLE_CODES[structure.swizzle_bytes],
    }
    return encode_fields(SMEM_DESC_FIELDS, fields, 64)


def tmem_columns(columns) -> int:
    """Check a ``tcgen05.alloc`` size: a power of two in 32..512 columns."""
    if type(columns) is not int or columns < 32 or columns > 512 or columns & (columns - 1):
        raise ValueError(f"tmem_alloc: columns must be a power of two in 32..512, got {columns!r}")
    return columns


# --------------------------------------------------------------------------
# IR ops


def _u32(v) -> bool:
    return isinstance(v.type, T.ScalarType) and v.type.is_int and v.type.bits == 32


def _check_addr(op):
    if not op.operands or not _u32(op.operands[0]):
        return "the TMEM address must be a 32-bit integer"
    return None


def _check_alloc(op):
    (p,) = op.operands
    if not isinstance(p.type, PointerType) or p.type.space != "shared":
        return "tcgen05.alloc writes the address to a shared-memory pointer"
    return None


def _check_mma(op):
    d, a, b, idesc, en = op.operands
    if not _u32(d) or not _u32(idesc):
        return "d (TMEM address) and idesc must be 32-bit integers"
    if b.type.bits != 64 or (a.type.bits != (32 if op.attrs.get("a_tmem") else 64)):
        return "A and B descriptors are 64-bit (A a 32-bit TMEM address with a_tmem)"
    if en.type != T.bool_:
        return "enable_input_d must be bool"
    return None


def _check_wait_ld(op):
    if [v.type for v in op.operands] != [r.type for r in op.results]:
        return "wait_ld passes its registers through unchanged"
    return None


register_op("nv.tcgen05.alloc", 1, 0, False, _check_alloc)
register_op("nv.tcgen05.dealloc", 1, 0, False, _check_addr)
register_op("nv.tcgen05.relinquish_alloc_permit", 0, 0, False)
register_op("nv.tcgen05.ld", 1, None, False, _check_addr)
register_op("nv.tcgen05.st", None, 0, False, _check_addr)
register_op("nv.tcgen05.wait_ld", None, None, False, _check_wait_ld)
register_op("nv.tcgen05.wait_st", 0, 0, False)
register_op("nv.tcgen05.fence_before", 0, 0, False)
register_op("nv.tcgen05.fence_after", 0, 0, False)
register_op("nv.tcgen05.mma", 5, 0, False, _check_mma)
register_op("nv.tcgen05.commit", 1, 0, False, _check_alloc)

# --------------------------------------------------------------------------
# builtins


def _need_sm100(ctx, what):
    if ctx.sm < 100 or not ctx.arch.endswith("a"):
        raise LangError(f"{what} needs sm_100a (tcgen05); this kernel targets {ctx.arch}")


def _cta(cta_group):
    if cta_group not in (1, 2):
        raise LangError(f"cta_group must be 1 or 2, got {cta_group!r}")
    return cta_group


def _as_u32(ctx, x, what) -> Value:
    from . import core as L

    if isinstance(x, int) and not isinstance(x, bool):
        return L.to_value(ctx, x, T.u32)
    x = getattr(x, "value", x) if type(x).__name__ == "RuntimeInt" else x
    if not isinstance(x, Value) or not isinstance(x.type, T.ScalarType) or not x.type.is_int:
        raise LangError(f"{what} must be a 32-bit integer TMEM address, got {x!r}")
    return x if x.type.bits == 32 else L.cast(x, T.u32, _ctx=ctx)


def _shared_ptr(x, what) -> Value:
    ptr = getattr(x, "ptr", x)
    if not isinstance(ptr, Value) or not isinstance(ptr.type, PointerType) or ptr.type.space != "shared":
        raise LangError(f"{what} needs a shared-memory pointer (or shared array), got {x!r}")
    return ptr


@builtin
def tmem_alloc(dst, columns, cta_group=1, *, _ctx):
    """``tcgen05.alloc``: allocate ``columns`` TMEM columns (power of two,
    32..512) and write the base address to shared memory at ``dst``.
    One whole warp executes it."""
    _need_sm100(_ctx, "tmem_alloc")
    try:
        tmem_columns(columns)
    except ValueError as e:
        raise LangError(str(e)) from None
    _ctx.builder.create("nv.tcgen05.alloc", [_shared_ptr(dst, "tmem_alloc")], [],
                        {"columns": columns, "cta_group": _cta(cta_group)})


@builtin
def tmem_dealloc(taddr, columns, cta_group=1, *, _ctx):
    """``tcgen05.dealloc`` of ``columns`` columns at ``taddr`` (the allocating warp)."""
    _need_sm100(_ctx, "tmem_dealloc")
    try:
        tmem_columns(columns)
    except ValueError as e:
        raise LangError(str(e).replace("tmem_alloc", "tmem_dealloc")) from None
    _ctx.builder.create("nv.tcgen05.dealloc", [_as_u32(_ctx, taddr, "tmem_dealloc")], [],
                        {"columns": columns, "cta_group": _cta(cta_group)})


@builtin
def tmem_relinquish_alloc_permit(cta_group=1, *, _ctx):
    """``tcgen05.relinquish_alloc_permit``: this CTA allocates no more TMEM."""
    _need_sm100(_ctx, "tmem_relinquish_alloc_permit")
    _ctx.builder.create("nv.tcgen05.relinquish_alloc_permit", [], [], {"cta_group": _cta(cta_group)})


def _access_address(ctx, access: TmemAccess, taddr) -> Value:
    from . import core as L

    if not isinstance(access, TmemAccess):
        raise LangError(f"expected a TMEM access from partition(transfer, view), got {access!r}")
    addr = access.address
    if taddr is None:
        return _as_u32(ctx, addr, "the access address")
    base = _as_u32(ctx, taddr, "taddr")
    if isinstance(addr, int) and addr == 0:
        return base
    return L.binary(ctx, "+", base, _as_u32(ctx, addr, "the access address"))


def _reg_type(access: TmemAccess):
    dt = access.dtype
    return T.f32 if (slots_per_word(dt) == 1 and dt.is_float) else T.i32


def _ld_attrs(access: TmemAccess) -> dict:
    attrs = {"shape": access.atom, "num": access.num, "pack": False}
    if access.split is not None:
        attrs["split"] = access.split
    return attrs


@builtin
def tcgen05_ld(access, taddr=None, *, _ctx):
    """``tcgen05.ld.sync.aligned<access.instruction>.b32``: start the load of
    this warp's registers (a tuple of Values: f32 for 32-bit float tiles,
    i32 words otherwise; 16-bit tiles come packed two per word, low half
    first).  ``taddr``: runtime TMEM base added to ``access.address``.  The
    registers are not ready until ``tcgen05_wait_ld`` passes them through."""
    _need_sm100(_ctx, "tcgen05_ld")
    addr = _access_address(_ctx, access, taddr)
    rt = _reg_type(access)
    op = _ctx.builder.create("nv.tcgen05.ld", [addr], [rt] * access.registers, _ld_attrs(access))
    return tuple(op.results)


@builtin
def tcgen05_wait_ld(values, *, _ctx):
    """``tcgen05.wait::ld``: completes prior loads and returns ``values``
    through a compiler dependency (use the returned registers)."""
    _need_sm100(_ctx, "tcgen05_wait_ld")
    values = tuple(values)
    if not all(isinstance(v, Value) for v in values):
        raise LangError("tcgen05_wait_ld takes the tuple of registers returned by tcgen05_ld")
    op = _ctx.builder.create("nv.tcgen05.wait_ld", list(values), [v.type for v in values])
    return tuple(op.results)


@builtin
def tcgen05_st(access, values, taddr=None, *, _ctx):
    """``tcgen05.st.sync.aligned<access.instruction>.b32``: store this warp's
    registers (``access.registers`` 32-bit values) to the access's TMEM."""
    _need_sm100(_ctx, "tcgen05_st")
    from . import core as L

    values = tuple(values)
    if len(values) != access.registers:
        raise LangError(
            f"tcgen05_st: {access.instruction} stores {access.registers} registers per thread, got {len(values)}"
        )
    regs = []
    for v in values:
        v = L.to_value(_ctx, v, _reg_type(access)) if not isinstance(v, Value) else v
        if not isinstance(v.type, T.ScalarType) or v.type.bits != 32:
            raise LangError(f"tcgen05_st: registers must be 32-bit, got {v.type}")
        regs.append(v)
    addr = _access_address(_ctx, access, taddr)
    _ctx.builder.create("nv.tcgen05.st", [addr, *regs], [], _ld_attrs(access))


@builtin
def tcgen05_wait_st(*, _ctx):
    """``tcgen05.wait::st``: completes this thread's prior TMEM stores."""
    _need_sm100(_ctx, "tcgen05_wait_st")
    _ctx.builder.create("nv.tcgen05.wait_st", [], [])


@builtin
def fence_before_thread_sync(*, _ctx):
    """``tcgen05.fence::before_thread_sync`` (order prior tcgen05 ops before a barrier)."""
    _need_sm100(_ctx, "fence_before_thread_sync")
    _ctx.builder.create("nv.tcgen05.fence_before", [], [])


@builtin
def fence_after_thread_sync(*, _ctx):
    """``tcgen05.fence::after_thread_sync`` (order later tcgen05 ops after a barrier)."""
    _need_sm100(_ctx, "fence_after_thread_sync")
    _ctx.builder.create("nv.tcgen05.fence_after", [], [])


@builtin
def tcgen05_mma(plan, d_taddr, a, b_desc, enable_input_d, a_tmem=False, *, _ctx):
    """``tcgen05.mma.cta_group::G.kind::K [d], a, b_desc, idesc, p`` with the
    plan's instruction descriptor.  ``a``: a 64-bit shared-memory descriptor,
    or a 32-bit TMEM address with ``a_tmem=True``; ``enable_input_d``: bool
    (False overwrites D).  Issued by one thread; completion via tcgen05_commit."""
    _need_sm100(_ctx, "tcgen05_mma")
    from . import core as L

    if not isinstance(plan, Tcgen05MMA):
        raise LangError(f"tcgen05_mma needs a Tcgen05MMA plan, got {plan!r}")
    d = _as_u32(_ctx, d_taddr, "d_taddr")
    a_v = _as_u32(_ctx, a, "a (TMEM address)") if a_tmem else L.to_value(_ctx, a, T.u64)
    b_v = L.to_value(_ctx, b_desc, T.u64)
    idesc = L.to_value(_ctx, plan.idesc, T.u32)
    en = L.to_bool(_ctx, enable_input_d) if isinstance(enable_input_d, Value) else L.to_value(_ctx, bool(enable_input_d), T.bool_)
    _ctx.builder.create("nv.tcgen05.mma", [d, a_v, b_v, idesc, en], [],
                        {"kind": plan.kind, "cta_group": plan.cta_group, "a_tmem": bool(a_tmem)})


@builtin
def tcgen05_commit(mbarrier, cta_group=1, *, _ctx):
    """``tcgen05.commit...mbarrier::arrive::one``: the mbarrier at the shared
    pointer ``mbarrier`` gets one arrival when this thread's prior async
    tcgen05 ops complete."""
    _need_sm100(_ctx, "tcgen05_commit")
    _ctx.builder.create("nv.tcgen05.commit", [_shared_ptr(mbarrier, "tcgen05_commit")], [],
                        {"cta_group": _cta(cta_group)})


# -- seed spelling: load_async / wait_load / store_async / wait_stores ---------


class TmemLoad:
    """A TMEM load in flight or completed: the access (static) and its
    registers (runtime).  ``values`` are 32-bit registers (packed pairs for
    16-bit tiles); ``ownership`` says which logical element each slot holds
    (slot ``2k``/``2k+1`` are the low/high halves of register ``k`` when
    ``packed``).  Wrap in a Fragment once ``tylo.lang.fragment`` lands."""

    def __init__(self, access: TmemAccess, values: tuple, ready: bool):
        self.access = access
        self.values = tuple(values)
        self.ready = ready

    dtype = property(lambda self: self.access.dtype)
    ownership = property(lambda self: self.access.ownership)
    packed = property(lambda self: self.access.packed)

    def __tylo_flatten__(self):
        return list(self.values), ("TmemLoad", self.access, self.ready)

    @classmethod
    def __tylo_unflatten__(cls, static, leaves):
        return cls(static[1], tuple(leaves), static[2])

    def __repr__(self):
        return f"TmemLoad({self.access.instruction}, {len(self.values)} registers, ready={self.ready})"


@builtin
def load_async(access, taddr=None, *, _ctx):
    """Start ``access``'s ``tcgen05.ld``; returns a pending ``TmemLoad``."""
    return TmemLoad(access, tcgen05_ld(access, taddr, _ctx=_ctx), False)


@builtin
def wait_load(pending, *, _ctx):
    """``tcgen05.wait::ld``; returns the ready ``TmemLoad`` (registers carried
    through the wait)."""
    if not isinstance(pending, TmemLoad):
        raise LangError(f"wait_load takes the result of load_async, got {pending!r}")
    from .fragment import Fragment, PackedFragment

    regs = tcgen05_wait_ld(pending.values, _ctx=_ctx)
    access = pending.access
    if access.packed:  # two 16-bit values per word, low half first: the seed's PackedFragment
        return PackedFragment(access.dtype, access.ownership, regs)
    vals = [v if v.type == access.dtype else _ctx.builder.value("arith.bitcast", [v], access.dtype) for v in regs]
    return Fragment(access.dtype, access.ownership, vals)


@builtin
def store_async(access, values, taddr=None, *, _ctx):
    """Start ``access``'s ``tcgen05.st`` of ``values`` (a tuple of 32-bit
    registers, or a ``TmemLoad`` whose ownership matches)."""
    from .fragment import Fragment, PackedFragment

    if isinstance(values, TmemLoad):
        if values.access.ownership != access.ownership or values.access.dtype != access.dtype:
            raise LangError("store_async: the registers' ownership does not match the access")
        values = values.values
    elif isinstance(values, (Fragment, PackedFragment)):
        if values.ownership != access.ownership:
            raise LangError(f"store_async: the fragment's ownership {values.ownership.name or values.ownership!r} "
                            f"is not the transfer's {access.ownership.name or access.ownership!r}")
        if isinstance(values, PackedFragment):
            values = values.words
        else:
            rt = _reg_type(access)
            values = [L.cast(v, access.dtype, _ctx=_ctx) for v in values.values]
            values = [v if v.type == rt else _ctx.builder.value("arith.bitcast", [v], rt) for v in values]
    tcgen05_st(access, values, taddr, _ctx=_ctx)


@builtin
def wait_stores(*, _ctx):
    """``tcgen05.wait::st``."""
    tcgen05_wait_st(_ctx=_ctx)
