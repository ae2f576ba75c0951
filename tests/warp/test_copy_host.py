"""ldmatrix_ownership against the ISA, and its use: an ldmatrix.x4 of a row-major A tile is
exactly the m16n8k16 A fragment; an ldmatrix.x2.trans of a row-major B tile the B fragment."""
import isa_formulas as isa
import numpy as np
import pytest

import tylo.lang.mma as mma
from tylo.ir.types import bf16, f32
from tylo.lang.copy import ldmatrix_ownership
from tylo.layouts import is_complete, is_injective, ownership_table


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_ownership_matches_isa(num, trans):
    o = ldmatrix_ownership(num, trans)
    assert o.shape == (8 * num, 8) and o.threads == 32 and o.values == 2 * num
    want = np.array([[isa.ldmatrix(l, s // 2, s % 2, trans) for s in range(2 * num)] for l in range(32)])
    assert np.array_equal(ownership_table(o), want)
    assert is_complete(o) and is_injective(o)


def test_ldmatrix_ownership_rejects_bad_num():
    with pytest.raises(ValueError, match="num must be 1, 2 or 4"):
        ldmatrix_ownership(3)


def _deliver(num, trans, rows):
    """Simulate ldmatrix: rows[j*8 + r] is the 8-element row lane 8j + r addresses."""
    tab = ownership_table(ldmatrix_ownership(num, trans))
    return rows[tab[..., 0], tab[..., 1]]  # [lane, slot]


def test_ldmatrix_x4_delivers_the_mma_a_fragment():
    atom = mma.MMAAtom((16, 8, 16), bf16, bf16, f32)
    A = np.arange(16 * 16).reshape(16, 16)
    # matrix j: rows 8*(j%2) .. +8, columns 8*(j//2) .. +8 of A (a0a1 | a2a3 | a4a5 | a6a7)
    rows = np.concatenate([A[8 * (j % 2):8 * (j % 2) + 8, 8 * (j // 2):8 * (j // 2) + 8] for j in range(4)])
    got = _deliver(4, False, rows)
    tab = ownership_table(atom.a_ownership)
    assert np.array_equal(got, A[tab[..., 0], tab[..., 1]])


def test_ldmatrix_x2_trans_delivers_the_mma_b_fragment():
    atom = mma.MMAAtom((16, 8, 16), bf16, bf16, f32)
    B = np.arange(16 * 8).reshape(16, 8)  # (K, N) row-major: N contiguous
    rows = np.concatenate([B[0:8], B[8:16]])
    got = _deliver(2, True, rows)
    tab = ownership_table(atom.b_ownership)
    assert np.array_equal(got, B[tab[..., 0], tab[..., 1]])
