"""The PTX ISA fragment formulas, transcribed independently of tylo.lang.mma / tylo.lang.copy.

Each function maps (lane, element index i) to (row, col) exactly as the ISA text
"Matrix Fragments for mma.m16n8kK" / ldmatrix states it, with
groupID = lane >> 2 and threadID_in_group = lane % 4.
"""


def _gt(lane):
    return lane >> 2, lane % 4


def mma_a(kind, K, lane, i):
    g, t = _gt(lane)
    if kind == "16bit" and K == 8:  # a0..a3
        return (g if i < 2 else g + 8), t * 2 + (i & 1)
    if kind == "16bit" and K == 16:  # a0..a7
        row = g if (0 <= i < 2 or 4 <= i < 6) else g + 8
        col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
        return row, col
    if kind == "tf32" and K == 4:  # a0, a1
        return (g if i == 0 else g + 8), t
    if kind == "tf32" and K == 8:  # a0..a3
        return (g if i in (0, 2) else g + 8), (t if i < 2 else t + 4)
    if kind == "8bit" and K == 16:  # a0..a7
        return (g if i < 4 else g + 8), t * 4 + (i & 3)
    if kind == "8bit" and K == 32:  # a0..a15
        row = g if (i < 4 or 8 <= i < 12) else g + 8
        col = t * 4 + (i & 3) + (16 if i >= 8 else 0)
        return row, col
    raise KeyError((kind, K))


def mma_b(kind, K, lane, i):
    g, t = _gt(lane)
    if kind == "16bit" and K == 8:  # b0, b1
        return t * 2 + i, g
    if kind == "16bit" and K == 16:  # b0..b3
        return t * 2 + (i & 1) + (8 if i >= 2 else 0), g
    if kind == "tf32" and K == 4:  # b0
        return t, g
    if kind == "tf32" and K == 8:  # b0, b1
        return (t if i == 0 else t + 4), g
    if kind == "8bit" and K == 16:  # b0..b3
        return t * 4 + i, g
    if kind == "8bit" and K == 32:  # b0..b7
        return t * 4 + (i & 3) + (16 if i >= 4 else 0), g
    raise KeyError((kind, K))


def mma_c(lane, i):
    """C/D of every m16n8 shape (f32, f16x2 or s32): c0..c3."""
    g, t = _gt(lane)
    return (g if i < 2 else g + 8), t * 2 + (i & 1)


def ldmatrix(lane, j, e, trans):
    """Matrix j, half e of register j: rows are the addresses of lanes 8j..8j+7."""
    g, t = _gt(lane)
    if trans:
        return 8 * j + 2 * t + e, g
    return 8 * j + g, 2 * t + e


def kind_of(atom):
    n = atom.a_dtype.name
    return "tf32" if n == "tf32" else ("16bit" if n in ("f16", "bf16") else "8bit")
