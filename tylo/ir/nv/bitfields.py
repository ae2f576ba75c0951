"""Bit-field words of the ISA: descriptors packed from a table of ``(field, lowest bit, width)``.

The wgmma and tcgen05 matrix descriptors and the tcgen05 instruction descriptor are all such
words; their tables live beside their ops (``ir/nv/wgmma.py``, ``ir/nv/tcgen05.py``) and share
this packing, so both encode and decode the same way.
"""
from __future__ import annotations

__all__ = ["pack_fields", "unpack_fields", "descriptor_offset_field"]


def pack_fields(table, values: dict, bits: int, what: str = "descriptor") -> int:
    """Pack ``values`` (field -> int, already encoded) into a ``bits``-bit word laid out by ``table``.

    A field left out is 0. ``what`` names the word in errors: an unknown field, a value that is
    not an int (bool counts as 0/1) or does not fit its width raises ValueError.
    """
    names = {n for n, _, _ in table}
    for k in values:
        if k not in names:
            raise ValueError(f"{what}: unknown descriptor field {k!r}")
    out = 0
    for name, lo, width in table:
        v = values.get(name, 0)
        if type(v) is bool:
            v = int(v)
        if type(v) is not int or not 0 <= v < (1 << width):
            raise ValueError(f"{what}: {name} = {v!r} does not fit in {width} bits")
        out |= v << lo
    assert out < (1 << bits)
    return out


def unpack_fields(table, word: int) -> dict:
    """The raw field values of ``word`` (inverse of ``pack_fields``)."""
    return {name: (word >> lo) & ((1 << width) - 1) for name, lo, width in table}


def descriptor_offset_field(x: int) -> int:
    """The ISA's matrix-descriptor-encode(x) = ``(x & 0x3FFFF) >> 4``: a shared-memory byte address or
    offset as a descriptor stores it (16-byte units, 14 bits)."""
    return (x & 0x3FFFF) >> 4
