"""Where the elements of a shared-memory MMA operand are, from the fields of its descriptor.

WGMMA and tcgen05 describe an operand in shared memory the same way (PTX ISA, "Matrix Descriptor"
of ``wgmma`` and of ``tcgen05``; the "canonical layouts" of K-major and MN-major operands): core
matrices of 8 rows x 16 bytes, a leading and a stride byte offset between them, and an optional
128/64/32-byte swizzle applied to the final address. Only the descriptor's bit layout differs, so
each backend module decodes its own bits and both call ``operand_addresses``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["operand_addresses", "swizzle_address"]


def swizzle_address(a, swizzle_bytes: int):
    """The address after the 128/64/32-byte swizzle: bits [4, 7) XOR bits [7, 10), as many as the mode has."""
    if not swizzle_bytes:
        return a
    return a ^ ((a >> 3) & ((swizzle_bytes // 16 - 1) << 4))


def operand_addresses(start: int, lbo: int, sbo: int, swizzle_bytes: int, rows: int, k: int, elem_bytes: int,
                      mn_major: bool) -> np.ndarray:
    """Byte address of element ``[mn, k]`` of a ``rows x k`` operand (offsets in bytes)."""
    mn = np.arange(rows)[:, None]
    kk = np.arange(k)[None, :]
    eb, swb = elem_bytes, swizzle_bytes
    if not mn_major:
        if swb:
            a = start + (mn % 8) * swb + (mn // 8) * sbo + kk * eb
        else:
            a = start + (mn % 8) * 16 + (mn // 8) * sbo + (kk * eb) % 16 + (kk * eb // 16) * lbo
    elif swb:
        a = start + (mn * eb) % swb + (kk % 8) * swb + (mn * eb // swb) * lbo + (kk // 8) * sbo
    else:
        a = start + (mn * eb) % 16 + (kk % 8) * 16 + (mn * eb // 16) * sbo + (kk // 8) * lbo
    return swizzle_address(a, swb)
