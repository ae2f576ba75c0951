"""tylo.fragment_coords: each slot's logical (row, col) as a runtime base plus compile-time offsets, on
an mma.sync accumulator and a WGMMA accumulator, checked in the interpreter against the host ownership
table, and used for a column mask (tylo.where(cols < n, x, -inf)); the PTX for sm_90a."""
import numpy as np
import pytest

import tylo
from tylo import Layout, MMAAtom, Ownership, TiledMMA
from tylo.layouts import ownership_table

MMA_C = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16, tylo.bf16, tylo.f32), warps=(2, 2), repeats=(2, 2), k=16).c_ownership
WGMMA_C = Ownership.wgmma_accumulator(64)


@tylo.jit
def coords_and_mask(out, masked, x, n, OWN: tylo.constexpr):
    rows, cols = tylo.fragment_coords(OWN)
    shape = OWN.shape
    tile = Layout(shape, (shape[1], 1))
    tylo.store(tylo.GlobalTile(out, tile), rows * 1000 + cols)
    f = tylo.load(tylo.GlobalTile(x, tile), OWN)
    tylo.store(tylo.GlobalTile(masked, tile), tylo.where(cols < n, f, -float("inf")))


@pytest.mark.parametrize("own", [MMA_C, WGMMA_C], ids=["mma_accumulator", "wgmma_accumulator"])
def test_coordinates_and_mask_in_the_interpreter(own):
    rows, cols = own.shape
    rng = np.random.default_rng()
    n = int(rng.integers(1, cols))
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = np.full((rows, cols), -7, np.int32)
    masked = np.full((rows, cols), np.nan, np.float32)
    tylo.jit(coords_and_mask.fn, interpret=True)[1, own.threads](out, masked, x, n, own)
    r, c = np.indices((rows, cols))
    np.testing.assert_array_equal(out, r * 1000 + c)
    np.testing.assert_array_equal(masked, np.where(c < n, x, -np.inf))


@pytest.mark.parametrize("own", [MMA_C, WGMMA_C], ids=["mma_accumulator", "wgmma_accumulator"])
def test_offsets_are_compile_time(own):
    tab = ownership_table(own)
    offsets = tylo.slot_offsets(own)
    for t in range(own.threads):
        for v in range(own.values):
            assert tuple(tab[t, v]) == tuple(int(a + b) for a, b in zip(tab[t, 0], offsets[v]))
    ck = coords_and_mask.compile(signature="*i32, *f32, *f32, i32", constexprs=dict(OWN=own), arch="sm_90a",
                                 block=own.threads)
    assert ".local" not in ck.ptx and ck.resources.spill_bytes == 0


def test_refuses_packed_fragments_and_other_values():
    @tylo.jit
    def bad(out):
        tylo.fragment_coords(3)

    with pytest.raises(tylo.CompileError, match="fragment_coords takes a Fragment or an Ownership"):
        bad.compile(signature="*f32", arch="sm_90a", block=32)
