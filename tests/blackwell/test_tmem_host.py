"""TMEM tiles, storage units, transfers and partitions on the host (no GPU, no assembler)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.ir.types import bf16, f16, f32, i32
from tylo.lang.tmem import ATOMS, TmemTile, TmemTransfer, partition, reinterpret_tile, tmem_location
from tylo.layouts import (
    ComposedLayout,
    Layout,
    Swizzle,
    is_complete,
    is_injective,
    ownership_table,
    permutedims,
    window,
)

# -- the storage rule, written out independently ------------------------------------------

def model_location(dtype, address, offset):
    """Brute-force seed rule: lane = i % 128, position = i // 128; f32 one per word,
    16-bit two per word (low half first); address lane in bits 31:16, column 15:0."""
    lane, pos = offset % 128, offset // 128
    per = 1 if dtype.bits == 32 else 2
    return address + lane * (1 << 16) + pos // per, 16 * (pos % per)


def test_seed_examples():
    tile = TmemTile(f32, 0, Layout((128, 128), (1, 128)))
    view = window(tile, (64, 32), (32, 64))
    transfer = TmemTransfer((32, 64), axis=1)
    access = partition(transfer, view)
    assert access.address == (64 << 16) + 32
    assert access.instruction == ".32x32b.x64" and access.registers == 64 and access.warp == 2
    swapped = partition(permutedims(transfer), permutedims(view))
    assert swapped.shape == (64, 32) and swapped.address == access.address
    assert swapped.instruction == access.instruction
    t2 = TmemTile(f32, 0, Layout((32, 64), (1, 128)))
    assert reinterpret_tile(bf16, t2, axis=1).shape == (32, 128)
    assert reinterpret_tile(bf16, permutedims(t2), axis=0).shape == (128, 32)


layouts = st.sampled_from([
    Layout((128, 128), (1, 128)),
    Layout((128, 128), (128, 1)).__class__((128, 128), (128, 1)),
    Layout((128, 64), (1, 256)),
    Layout(((32, 4), 64), ((1, 32), 128)),        # hierarchical lanes
    Layout((128, (8, 8)), (1, (128, 1024))),      # hierarchical positions
    Layout((64, 128), (2, 128)),
])


@settings(max_examples=150, deadline=None)
@given(lay=layouts, dtype=st.sampled_from([f32, bf16, f16, i32]), addr=st.integers(0, 127),
       data=st.data())
def test_location_matches_brute_force(lay, dtype, addr, data):
    tile = TmemTile(dtype, addr, lay)
    e0, e1 = tile.shape
    h0 = data.draw(st.integers(1, e0)); h1 = data.draw(st.integers(1, e1))
    o0 = data.draw(st.integers(0, e0 - h0)); o1 = data.draw(st.integers(0, e1 - h1))
    view = window(tile, (o0, o1), (h0, h1))
    for _ in range(8):
        c = (data.draw(st.integers(0, h0 - 1)), data.draw(st.integers(0, h1 - 1)))
        assert tmem_location(view, c) == model_location(dtype, addr, lay((o0 + c[0], o1 + c[1])))
        # both orientations name the same storage
        assert tmem_location(permutedims(view), c[::-1]) == tmem_location(view, c)


class Sym:
    """A fake runtime integer: records every operator applied to it."""

    def __init__(self, expr, log):
        self.expr, self.log = expr, log

    def _op(self, op, other, rev=False):
        self.log.append(op)
        o = other.expr if isinstance(other, Sym) else repr(other)
        return Sym(f"({o} {op} {self.expr})" if rev else f"({self.expr} {op} {o})", self.log)

    __add__ = lambda s, o: s._op("+", o)
    __radd__ = lambda s, o: s._op("+", o, True)
    __mul__ = lambda s, o: s._op("*", o)
    __rmul__ = lambda s, o: s._op("*", o, True)
    __floordiv__ = lambda s, o: s._op("//", o)
    __mod__ = lambda s, o: s._op("%", o)

    def eval(self, **env):
        return eval(self.expr, {}, env)


def test_runtime_address_only_operators():
    log = []
    base = Sym("b", log)
    tile = TmemTile(f32, base, Layout((128, 128), (1, 128)))
    access = partition(TmemTransfer((32, 64), axis=1), window(tile, (64, 32), (32, 64)))
    assert set(log) <= {"+", "*", "//", "%"}
    assert access.address.eval(b=7) == 7 + (64 << 16) + 32
    loc, bit = tmem_location(window(tile, (3, 5), (8, 8)), (1, 2))
    assert loc.eval(b=11) == 11 + (4 << 16) + 7 and bit == 0


def test_runtime_window_origin_along_positions():
    log = []
    j = Sym("j", log)
    tile = TmemTile(f32, 0, Layout((128, 256), (1, 128)))
    access = partition(TmemTransfer((32, 16), axis=1), window(tile, (32, j), (32, 16), check=False))
    assert access.address.eval(j=48) == (32 << 16) + 48
    assert access.instruction == ".32x32b.x16"
    # origin of the lane axis must be static
    with pytest.raises(ValueError, match="lane band must be static"):
        partition(TmemTransfer((32, 16), axis=1), window(tile, (j, 0), (32, 16), check=False))


def test_nested_layouts_accepted():
    tile = TmemTile(f32, 0, Layout(((16, 8), (4, 32)), ((1, 16), (128, 512))))
    a = partition(TmemTransfer((32, 128), axis=1), window(tile, (32, 0), (32, 128)))
    assert a.instruction == ".32x32b.x128" and a.address == 32 << 16


def test_bf16_transfer_is_packed():
    tile = TmemTile(bf16, 0, Layout((128, 128), (1, 128)))
    a = partition(TmemTransfer((32, 64), axis=1), window(tile, (96, 64), (32, 64)))
    assert a.instruction == ".32x32b.x32" and a.registers == 32 and a.packed
    assert a.address == (96 << 16) + 32
    own = ownership_table(a.ownership)
    assert own[5, 0].tolist() == [5, 0] and own[5, 1].tolist() == [5, 1]  # low, high half of register 0


@pytest.mark.parametrize("num", [1, 2, 4, 8, 16, 32, 64, 128])
def test_all_widths(num):
    tile = TmemTile(f32, 0, Layout((128, 512), (1, 128)))
    a = partition(TmemTransfer((32, num), axis=1), window(tile, (0, 0), (32, num)))
    assert a.instruction == f".32x32b.x{num}" and a.registers == num


# -- rejections: each rule says which one failed -------------------------------------------

T = TmemTile(f32, 0, Layout((128, 512), (1, 128)))


@pytest.mark.parametrize("view, transfer, message", [
    (window(T, (48, 0), (32, 64)), TmemTransfer((32, 64)), "needs a 32-lane aligned band; the view starts at lane 48"),
    (window(T, (0, 0), (32, 48)), TmemTransfer((32, 48)), r"1, 2, 4, \.\.\., 128 words per thread"),
    (window(T, (0, 0), (32, 64)), TmemTransfer((32, 32)), "the view has shape"),
    (TmemTile(f32, 0, Layout((32, 64), (1, 256))), TmemTransfer((32, 64)), "steps by 2 position"),
    (TmemTile(f32, 0, Layout((32, 64), (2, 128))), TmemTransfer((32, 64)), "consecutive lanes"),
    (TmemTile(f32, 0, Layout((32, 64), (1, 129))), TmemTransfer((32, 64)), "consecutive lanes"),
    (TmemTile(f32, 0, Layout((32, (8, 8)), (1, (128, 2048)))), TmemTransfer((32, 64)), "not affine"),
    (TmemTile(f32, 0, ComposedLayout(Swizzle(2, 0, 7), Layout((32, 64), (1, 128)))), TmemTransfer((32, 64)),
     "nonlinear swizzle"),
    (window(TmemTile(bf16, 0, Layout((128, 128), (1, 128))), (0, 1), (32, 64)), TmemTransfer((32, 64)),
     "high half of a word"),
    (window(T, (16, 0), (16, 12)), TmemTransfer((16, 12), atom="16x256b"), "moves 8 words per lane per repetition"),
])
def test_partition_rejections(view, transfer, message):
    with pytest.raises(ValueError, match=message):
        partition(transfer, view)


def test_rejections_name_the_instruction_and_never_fall_back():
    with pytest.raises(ValueError, match=r"\.32x32b\.x64 needs a 32-lane aligned band; the view starts at lane 48"):
        partition(TmemTransfer((32, 64)), window(T, (48, 0), (32, 64)))
    with pytest.raises(ValueError, match="16-lane aligned band; the view starts at lane 8"):
        partition(TmemTransfer((16, 16), atom="16x256b"), window(T, (8, 0), (16, 16)))
    with pytest.raises(ValueError, match="moves 32 lanes"):
        TmemTransfer((16, 64))
    with pytest.raises(ValueError, match="1, 2, 4"):
        partition(TmemTransfer((32, 256)), window(T, (0, 0), (32, 256)))


# -- the 16-lane shapes: ownership against the ISA data-path model ------------------------

def isa_where(atom, t, k, num, split):
    """(lane, word) of register k of thread t, written from the PTX ISA figures / CuTe traits."""
    if atom == "32x32b":
        return t, k
    if atom == "16x64b":
        return 8 * (t % 2) + t // 4, 2 * k + (t // 2) % 2
    if atom == "16x128b":
        return t // 4 + 8 * (k % 2), 4 * (k // 2) + t % 4
    if atom == "16x256b":
        return t // 4 + 8 * ((k % 4) // 2), 8 * (k // 4) + 2 * (t % 4) + k % 2
    if atom == "16x32bx2":
        return t % 16, k + (split if t >= 16 else 0)


@pytest.mark.parametrize("atom", ["32x32b", "16x64b", "16x128b", "16x256b", "16x32bx2"])
@pytest.mark.parametrize("num", [1, 4, 32])
@pytest.mark.parametrize("dtype", [f32, bf16])
def test_atom_ownership_matches_isa(atom, num, dtype):
    A = ATOMS[atom]
    per = 1 if dtype is f32 else 2
    lanes = A.lanes
    words = A.words * num if atom != "16x32bx2" else 2 * num
    tile = TmemTile(dtype, 0, Layout((128, 512 * per), (1, 128)))
    for orient in (0, 1):
        shape = (lanes, words * per)
        view = window(tile, (32, 16 * per), shape)
        tr = TmemTransfer(shape, axis=1, atom=atom)
        if orient:
            view, tr = permutedims(view), permutedims(tr)
        a = partition(tr, view)
        assert a.registers == A.regs * num and a.instruction == f".{atom}.x{num}"
        assert is_complete(a.ownership) and is_injective(a.ownership)
        own = ownership_table(a.ownership)
        for t in range(32):
            for k in range(a.registers):
                lane, word = isa_where(atom, t, k, num, a.split or 0)
                for h in range(per):
                    c = tuple(own[t, k * per + h].tolist())
                    # the logical coordinate's storage is the register's word
                    loc = tmem_location(view, c)
                    assert loc == ((32 + lane) * 65536 + 16 + word, 16 * h), (t, k, h)


def test_16x32bx2_split_is_read_from_the_view():
    tile = TmemTile(f32, 0, Layout((128, 512), (1, 128)))
    v = TmemTile(f32, 0, Layout((16, (8, 2)), (1, (128, 128 * 40))))
    a = partition(TmemTransfer((16, 16), atom="16x32bx2"), v)
    assert a.split == 40 and a.num == 8 and a.instruction == ".16x32bx2.x8"
    with pytest.raises(ValueError):
        partition(TmemTransfer((16, 16), atom="16x32bx2"), TmemTile(f32, 0, Layout((16, (8, 2)), (1, (128, 128 * 4)))))


# -- reinterpretation ----------------------------------------------------------------------

@pytest.mark.parametrize("lay, axis", [
    (Layout((32, 64), (1, 128)), 1),
    (Layout((64, 32), (128, 1)), 0),
    (Layout((128, 16), (1, 128)), 1),
])
def test_reinterpret_round_trip(lay, axis):
    t = TmemTile(f32, 5, lay)
    b = reinterpret_tile(bf16, t, axis=axis)
    assert b.shape[axis] == 2 * t.shape[axis]
    back = reinterpret_tile(f32, b, axis=axis)
    assert back.shape == t.shape
    for c in np.ndindex(*t.shape):
        assert tmem_location(back, c) == tmem_location(t, c)
        # f32 element c covers bf16 elements 2c, 2c+1 of the same word
        cc = list(c); cc[axis] *= 2
        assert tmem_location(b, tuple(cc)) == (tmem_location(t, c)[0], 0)
        cc[axis] += 1
        assert tmem_location(b, tuple(cc)) == (tmem_location(t, c)[0], 16)


def test_reinterpret_window_and_partition():
    t = TmemTile(f32, 0, Layout((128, 128), (1, 128)))
    b = reinterpret_tile(bf16, window(t, (32, 8), (32, 32)), axis=1)
    a = partition(TmemTransfer((32, 64)), b)
    assert a.address == (32 << 16) + 8 and a.instruction == ".32x32b.x32"


def test_reinterpret_rules():
    t = TmemTile(f32, 0, Layout((32, 64), (1, 128)))
    with pytest.raises(ValueError, match="explicitly"):
        reinterpret_tile(bf16, t)
    with pytest.raises(ValueError, match="consecutive positions"):
        reinterpret_tile(bf16, t, axis=0)
    b = TmemTile(bf16, 0, Layout((128, 128), (1, 128)))
    with pytest.raises(ValueError, match="aligned pairs"):
        reinterpret_tile(f32, window(b, (0, 1), (32, 64)), axis=1)
    with pytest.raises(ValueError, match="aligned pairs"):
        reinterpret_tile(f32, window(b, (0, 0), (32, 63)), axis=1)
    with pytest.raises(ValueError, match="flat affine"):
        reinterpret_tile(bf16, TmemTile(f32, 0, Layout((32, (8, 8)), (1, (128, 2048)))), axis=1)


def test_tile_bounds():
    with pytest.raises(ValueError, match="512 columns"):
        TmemTile(f32, 0, Layout((128, 513), (1, 128)))
    TmemTile(bf16, 0, Layout((128, 1024), (1, 128)))
    with pytest.raises(ValueError, match="32-bit or 16-bit"):
        TmemTile(tylo_f64 := __import__("tylo.ir.types", fromlist=["f64"]).f64, 0, Layout(4))
