"""mma.sync, ldmatrix/stmatrix and cp.async on a real GPU, against the host ownership tables.

Inputs are random; outputs are poisoned first. The registers are packed on the host from the
atom's ownership (slot order = PTX element order), so a wrong table fails here.
"""
import dataclasses

import ml_dtypes
import numpy as np
import pytest
import warp_kernels as wk

import tylo
import tylo.lang.mma as mma
from tylo.codegen import targets
from tylo.lang.copy import ldmatrix_ownership
from tylo.layouts import ownership_table

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()

_NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "i8": np.int8, "u8": np.uint8,
       "f8e4m3": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2}


def dev(a):
    return tylo.to_device(np.ascontiguousarray(a))


def _operand(dtype, shape):
    if dtype is mma.tf32:
        x = rng.standard_normal(shape).astype(np.float32)
        return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)  # exact in tf32
    if dtype.name in ("i8", "u8"):
        lo, hi = (-128, 128) if dtype.name == "i8" else (0, 256)
        return rng.integers(lo, hi, shape).astype(_NP[dtype.name])
    return rng.uniform(-2, 2, shape).astype(_NP[dtype.name])


def _pack(own, X, per_reg):
    """Per-lane registers [lane * regs + r] from logical X via the ownership table."""
    tab = ownership_table(own)
    vals = np.ascontiguousarray(X[tab[..., 0], tab[..., 1]])  # [32, slots]
    if per_reg == 1:
        return vals.reshape(-1)
    return vals.view(np.uint32).reshape(-1)


@pytest.mark.parametrize("atom", mma.MMA_ATOMS, ids=str)
def test_mma_atom_on_gpu(atom, monkeypatch):
    if atom.min_sm >= 89:  # fp8 mma.sync needs PTX 8.4; the H200 target is sm_90a
        for name in ("sm_89", "sm_90", "sm_90a"):
            t = targets.TARGETS[name]
            monkeypatch.setitem(targets.TARGETS, name, dataclasses.replace(t, ptx_version=max(t.ptx_version, 84)))
    A = _operand(atom.a_dtype, (atom.M, atom.K))
    B = _operand(atom.b_dtype, (atom.K, atom.N))
    acc = atom.acc_dtype.name
    if acc == "i32":
        C = rng.integers(-1000, 1000, (atom.M, atom.N)).astype(np.int32)
    else:
        C = rng.uniform(-1, 1, (atom.M, atom.N)).astype(np.float16 if acc == "f16" else np.float32)
    pa = _pack(atom.a_ownership, A, atom.elements_per_reg)
    pb = _pack(atom.b_ownership, B, atom.elements_per_reg)
    pc = _pack(atom.c_ownership, C, atom.acc_elements_per_reg)
    out = dev(np.full(pc.shape, 0x7FC07FC0 if pc.dtype == np.uint32 else -7, dtype=pc.dtype))
    wk.mma_once[1, 32](out, dev(pa), dev(pb), dev(pc), atom)
    got_regs = out.to_host()
    tab = ownership_table(atom.c_ownership)
    vals = got_regs.view(C.dtype).reshape(32, -1) if acc == "f16" else got_regs.reshape(32, -1)
    D = np.full((atom.M, atom.N), np.nan)
    D[tab[..., 0], tab[..., 1]] = vals.astype(np.float64)
    ref = A.astype(np.float64) @ B.astype(np.float64) + C.astype(np.float64)
    if acc == "i32":
        assert np.array_equal(D, ref)
    else:
        tol = 2e-2 if acc == "f16" else 1e-4 * (1 + np.abs(ref).max())
        np.testing.assert_allclose(D, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_stmatrix_on_gpu(num, trans):
    src = rng.integers(0, 1 << 16, 256).astype(np.uint16)
    out = dev(np.full(32 * num, 0xDEADBEEF, np.uint32))
    back = dev(np.full(256, 0xBEEF, np.uint16))
    wk.ldmatrix_roundtrip[1, 32](out, back, dev(src), num, trans, True)
    S = src.reshape(32, 8)  # logical (8 * num, 8): row R is shared row R (addressed by lane R)
    tab = ownership_table(ldmatrix_ownership(num, trans))
    want = np.ascontiguousarray(S[tab[..., 0], tab[..., 1]]).view(np.uint32).reshape(-1)
    assert np.array_equal(out.to_host(), want)
    b = back.to_host().reshape(32, 8)
    assert np.array_equal(b[:8 * num], S[:8 * num])  # stmatrix inverts ldmatrix
    assert not b[8 * num:].any()


@pytest.mark.parametrize("nbytes", [4, 8, 16])
def test_cp_async_zero_fill_on_gpu(nbytes):
    src = rng.integers(1, 1 << 32, 128, dtype=np.uint64).astype(np.uint32)
    out = dev(np.full(128, 0xDEADBEEF, np.uint32))
    wk.cp_async_zfill[1, 32](out, dev(src), nbytes)
    got = out.to_host().reshape(32, 4)
    S = src.reshape(32, 4)
    for lane in range(32):
        words = lane % (nbytes // 4 + 1)
        w = nbytes // 4
        assert np.array_equal(got[lane, :words], S[lane, :words])
        assert not got[lane, words:w].any()
        assert (got[lane, w:] == 0xFFFFFFFF).all()
