"""MMAAtom / TiledMMA host geometry against the ISA formulas (tests/warp/isa_formulas.py)."""
import isa_formulas as isa
import numpy as np
import pytest

import tylo.lang.mma as mma
from tylo.codegen.ptx.mma import mma_opcode
from tylo.ir.types import bf16, f8e4m3, f8e5m2, f16, f32, i8, i32, u8
from tylo.layouts import is_complete, is_injective, ownership_table, replication

ATOMS = mma.MMA_ATOMS


def test_atom_catalogue():
    assert len(ATOMS) == 20
    ops = {mma_opcode(a.shape, a.types) for a in ATOMS}
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in ops
    assert "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16" in ops
    assert "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32" in ops
    assert "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32" in ops
    assert "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32" in ops


@pytest.mark.parametrize("atom", ATOMS, ids=str)
def test_ownership_matches_isa(atom):
    kind, K = isa.kind_of(atom), atom.K
    for name, own, fn, shape in (
        ("A", atom.a_ownership, lambda l, i: isa.mma_a(kind, K, l, i), (atom.M, atom.K)),
        ("B", atom.b_ownership, lambda l, i: isa.mma_b(kind, K, l, i), (atom.K, atom.N)),
        ("C", atom.c_ownership, isa.mma_c, (atom.M, atom.N)),
    ):
        assert own.shape == shape and own.threads == 32
        n = shape[0] * shape[1] // 32
        assert own.values == n, name
        tab = ownership_table(own)
        want = np.array([[fn(l, i) for i in range(n)] for l in range(32)])
        assert np.array_equal(tab, want), name
        assert is_complete(own) and is_injective(own), name


@pytest.mark.parametrize("atom", ATOMS, ids=str)
def test_register_counts(atom):
    bits = 32 if atom.a_dtype is mma.tf32 else atom.a_dtype.bits
    assert atom.elements_per_reg == 32 // bits
    assert atom.a_regs * atom.elements_per_reg == atom.a_ownership.values
    assert atom.b_regs * atom.elements_per_reg == atom.b_ownership.values
    assert atom.c_regs * atom.acc_elements_per_reg == atom.c_ownership.values
    assert atom.min_sm == (89 if atom.a_dtype in (f8e4m3, f8e5m2) else (75 if atom.shape == (16, 8, 8) and atom.a_dtype == f16 else 80))
    assert hash(atom) == hash(mma.MMAAtom(atom.shape, atom.a_dtype, atom.b_dtype, atom.acc_dtype))


@pytest.mark.parametrize("args,rule", [
    (((16, 8, 16), f32, f32, f32), "pass tylo.lang.mma.tf32"),
    (((16, 8, 16), f16, bf16, f32), "A and B types must match"),
    (((16, 8, 32), f8e4m3, f16, f32), "A and B types must match"),
    (((16, 8, 16), bf16, bf16, f16), "bf16 mma.sync accumulates in f32"),
    (((16, 8, 16), i8, u8, f32), "accumulates in i32"),
    (((16, 8, 4), f16, f16, f32), "f16 mma.sync shapes are"),
    (((16, 8, 16), f8e4m3, f8e4m3, f32), "fp8 mma.sync has shape (16, 8, 32) only"),
    (((16, 8, 32), f8e5m2, f8e5m2, f16), "fp8 mma.sync accumulates in f32"),
    (((16, 8, 16), mma.tf32, mma.tf32, f32), "shapes are (16, 8, 4), (16, 8, 8)"),
    (((16, 8), f16, f16, f32), "shape must be a tuple (M, N, K)"),
    (((16, 8, 16), i32, i32, i32), "not an mma.sync multiplicand type"),
])
def test_invalid_atoms_name_the_rule(args, rule):
    with pytest.raises(ValueError, match="MMAAtom.*" + rule.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        mma.MMAAtom(*args)


def _tiled_expect(t):
    """Brute force from the documented conventions and the ISA formulas."""
    a = t.atom
    (wm, wn), (rm, rn) = t.warps, t.repeats
    kind = isa.kind_of(a)
    C, A, B = a.c_ownership.values, a.a_ownership.values, a.b_ownership.values
    c = np.zeros((t.threads, C * rm * rn, 2), int)
    ak = np.zeros((t.threads, A * rm * t.k_steps, 2), int)
    bk = np.zeros((t.threads, B * rn * t.k_steps, 2), int)
    for T in range(t.threads):
        lane, w = T % 32, T // 32
        wi, wj = w % wm, w // wm
        for ri in range(rm):
            for rj in range(rn):
                for s in range(C):
                    r, q = isa.mma_c(lane, s)
                    c[T, s + C * (ri + rm * rj)] = ((ri * wm + wi) * a.M + r, (rj * wn + wj) * a.N + q)
        for ks in range(t.k_steps):
            for ri in range(rm):
                for s in range(A):
                    r, q = isa.mma_a(kind, a.K, lane, s)
                    ak[T, s + A * (ri + rm * ks)] = ((ri * wm + wi) * a.M + r, ks * a.K + q)
            for rj in range(rn):
                for s in range(B):
                    r, q = isa.mma_b(kind, a.K, lane, s)
                    bk[T, s + B * (rj + rn * ks)] = (ks * a.K + r, (rj * wn + wj) * a.N + q)
    return c, ak, bk


@pytest.mark.parametrize("atom", [ATOMS[3], ATOMS[6], ATOMS[12], ATOMS[16]], ids=str)
@pytest.mark.parametrize("warps,repeats,ksteps", [((1, 1), (1, 1), 1), ((2, 2), (2, 4), 2), ((4, 1), (1, 2), 3),
                                                   ((1, 2), (3, 1), 1)])
def test_tiled_mma_ownership(atom, warps, repeats, ksteps):
    t = mma.TiledMMA(atom, warps=warps, repeats=repeats, k=atom.K * ksteps)
    assert t.threads == 32 * warps[0] * warps[1] and t.k_steps == ksteps
    assert t.tile == (warps[0] * repeats[0] * atom.M, warps[1] * repeats[1] * atom.N)
    c, ak, bk = _tiled_expect(t)
    assert np.array_equal(ownership_table(t.c_ownership), c)
    assert np.array_equal(ownership_table(t.a_ownership_k), ak)
    assert np.array_equal(ownership_table(t.b_ownership_k), bk)
    A, B = atom.a_ownership.values * repeats[0], atom.b_ownership.values * repeats[1]
    assert np.array_equal(ownership_table(t.a_ownership), ak[:, :A])
    assert np.array_equal(ownership_table(t.b_ownership), bk[:, :B])
    assert is_complete(t.c_ownership) and is_injective(t.c_ownership)
    assert replication(t.a_ownership_k) == warps[1] and replication(t.b_ownership_k) == warps[0]


def test_tiled_mma_errors():
    atom = ATOMS[3]
    with pytest.raises(ValueError, match="k must be a positive multiple of the atom's K = 16"):
        mma.TiledMMA(atom, k=24)
    with pytest.raises(ValueError, match="warps must be two positive ints"):
        mma.TiledMMA(atom, warps=(2,))
    with pytest.raises(ValueError, match="exceed the 1024"):
        mma.TiledMMA(atom, warps=(8, 8))
    with pytest.raises(ValueError, match="atom must be an MMAAtom"):
        mma.TiledMMA("m16n8k16")
