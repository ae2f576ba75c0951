"""Kernels whose structured values change their static part across a join (tests/frontend/test_structured_joins.py)."""
import tylo
from tylo import Layout


@tylo.jit
def tile_layout_differs(out, n):
    t = tylo.GlobalTile(out, Layout((4, 8), (1, 4)))
    if n > 0:  # error: tile_layout_differs
        t = tylo.GlobalTile(out, Layout((4, 8), (8, 1)))
    t[0, 0] = 1.0


@tylo.jit
def runtime_stride_tile_differs(out, n, ld):
    t = tylo.GlobalTile(out, Layout((4, 8), (1, ld)))
    if n > 0:  # error: runtime_stride_tile_differs
        t = tylo.GlobalTile(out, Layout((4, 8), (ld, 1)))
    t[0, 0] = 1.0


@tylo.jit
def fragment_ownership_differs(out, n):
    a = tylo.full(tylo.f32, tylo.Ownership.local((32, 8), axis=1), 0.0)
    if n > 0:  # error: fragment_ownership_differs
        a = tylo.full(tylo.f32, tylo.Ownership.local((32, 8), axis=0), 0.0)
    tylo.store(tylo.GlobalTile(out, Layout((32, 8), (8, 1))), a)


@tylo.jit
def tile_layout_changes_in_loop(out, n):
    t = tylo.GlobalTile(out, Layout((4, 8), (1, 4)))
    for i in range(n):  # error: tile_layout_changes_in_loop
        t = tylo.permutedims(t)
    t[0, 0] = 1.0
