"""TMA loads and stores through TMA bindings (``prepare_tma``) passed as grid-constant kernel parameters.

On an sm_90 GPU (tests marked ``gpu``), for every element width (1, 2, 4 bytes), every swizzle row
(32, 64, 128 bytes) and both inner axes:

* loads land where ``shared_layout(plan)`` says, and the part of a box past the array's edge (or past
  ``bounds``, or before coordinate 0) is zero-filled;
* stores write exactly the in-bounds part of the box and drop the rest (the output is poisoned first and
  everything outside the boxes must still hold the poison);
* 3-D arrays are batches (origins with a third, batch coordinate; a batch past the end loads zeros and
  stores nothing);
* ``prepare_tma(plan, array, bounds=...)`` clips at the bounds even where the array has data;
* kernels are launched repeatedly (several CTAs, several boxes per CTA through one mbarrier whose parity
  flips, back-to-back launches with different bindings), and a binding made once sees new data after the
  source array's contents change.

Without a GPU the CPU tests assemble every kernel variant for sm_90a.

The CPU tests at the end also pin the rules these kernels rely on: the compile cache tells TMA plans
and ranks apart, and an origin must have as many coordinates as its binding's rank.
"""
import re
import zlib

import numpy as np
import pytest

import tylo
import tylo.lang.mbarrier as mb
import tylo.lang.tma as tma
from tylo.ir import types as T

BLOCK = 128
SPIN_LIMIT = 1 << 20     # mbarrier try_wait attempts before a CTA gives up (flags err) instead of hanging


def _sm90():
    from tylo.runtime import compute_capability
    if compute_capability() < (9, 0):
        pytest.skip("needs sm_90")


# -- kernels ------------------------------------------------------------------------------------------

@tylo.func
def _wait_or_flag(bar, parity, err):
    """mbarrier_wait with a bound: a TMA load that never completes sets err[0] instead of hanging."""
    done = False
    spins = 0
    while not done and spins < SPIN_LIMIT:
        done = mb.mbarrier_try_wait(bar, parity)
        spins += 1
    if not done:
        err[0] = 1


@tylo.jit
def tma_load_tiles(out, err, src, origins, count: tylo.i32):
    """CTA g loads ``count`` boxes of ``src`` (a TMA binding, 2-D or 3-D) at the logical origins
    ``origins[3k:3k+3]`` (c0, c1, batch), k = g * count + t, one after another through one mbarrier
    (phase parity t & 1), and copies each shared tile out linearly to ``out[k*N:(k+1)*N]``."""
    plan = src.plan
    N = plan.shape[0] * plan.shape[1]
    buf = tylo.shared_array(plan.dtype, (N,), align=1024)
    bar = tylo.shared_array(tylo.u64, (1,), align=8)
    tile = tma.shared_tile(src, buf.ptr)
    tid = tylo.thread_idx.x
    g = tylo.block_idx.x
    if tid == 0:
        mb.mbarrier_init(bar.ptr, 1)
        mb.fence_mbarrier_init()
    mb.named_barrier_sync(0, BLOCK)
    for t in range(count):
        k = g * count + t
        if tid == 0:
            mb.mbarrier_arrive_expect_tx(bar.ptr, tma.transfer_bytes(plan))
            o = 3 * k
            if src.rank == 3:
                tma.tma_load(tile, src, (origins[o], origins[o + 1], origins[o + 2]), bar.ptr)
            else:
                tma.tma_load(tile, src, (origins[o], origins[o + 1]), bar.ptr)
        _wait_or_flag(bar.ptr, t & 1, err)
        for i in range(tid, N, BLOCK):
            out[k * N + i] = buf[i]
        mb.named_barrier_sync(0, BLOCK)      # every thread has read the tile before the next load


@tylo.jit
def tma_store_tiles(dst, vals, origins, count: tylo.i32):
    """CTA g stores ``count`` boxes: box k = g * count + t is filled (generic stores, then a proxy
    fence) from ``vals[k*N:(k+1)*N]`` in shared-memory order and TMA-stored to ``dst`` (a binding) at
    the logical origin ``origins[3k:3k+3]``; the staging tile is reused after ``wait_tma_reads(0)``."""
    plan = dst.plan
    N = plan.shape[0] * plan.shape[1]
    buf = tylo.shared_array(plan.dtype, (N,), align=1024)
    tile = tma.shared_tile(dst, buf.ptr)
    tid = tylo.thread_idx.x
    g = tylo.block_idx.x
    for t in range(count):
        k = g * count + t
        if tid == 0:
            tma.wait_tma_reads(0)            # the previous store has read the staging tile
        mb.named_barrier_sync(0, BLOCK)
        for i in range(tid, N, BLOCK):
            buf[i] = vals[k * N + i]
        mb.fence_view_async_shared()         # this thread's generic writes -> the async proxy
        mb.named_barrier_sync(0, BLOCK)
        if tid == 0:
            o = 3 * k
            if dst.rank == 3:
                tma.tma_store(dst, tile, (origins[o], origins[o + 1], origins[o + 2]))
            else:
                tma.tma_store(dst, tile, (origins[o], origins[o + 1]))
            tma.commit_tma_stores()
    if tid == 0:
        tma.wait_tma_stores(0)


# -- plans ---------------------------------------------------------------------------------------------

#: element width -> (dtype for axis=1 plans, dtype for axis=0 plans)
WIDTH_DTYPES = {1: (T.u8, T.i8), 2: (T.bf16, T.f16), 4: (T.f32, T.f32)}
SWIZZLES = (32, 64, 128)
_OUTERS = (8, 24, 40, 256, 16, 64, 128)  # outer box extents, cycled over the 18 combinations


def make_plan(width, swizzle, axis, outer=None):
    dt = WIDTH_DTYPES[width][0 if axis == 1 else 1]
    if outer is None:
        i = (list(WIDTH_DTYPES).index(width) * 3 + SWIZZLES.index(swizzle)) * 2 + axis
        outer = _OUTERS[i % len(_OUTERS)]
    row = swizzle // dt.itemsize
    return tma.TMATile(dt, (outer, row) if axis == 1 else (row, outer), axis=axis, swizzle=swizzle)


COMBOS = [(w, s, a) for w in WIDTH_DTYPES for s in SWIZZLES for a in (0, 1)]
COMBO_IDS = [f"{w}B-sw{s}-axis{a}" for w, s, a in COMBOS]
ALL_PLANS = [make_plan(*c) for c in COMBOS]

#: a few plans for the 3-D, bounds, negative-origin and reuse tests (all widths, swizzles and axes appear)
FEW_PLANS = [make_plan(1, 64, 1, 24), make_plan(2, 128, 0, 16), make_plan(4, 32, 1, 40)]


# -- host helpers --------------------------------------------------------------------------------------

def _np_dtype(plan):
    import tylo.runtime as rt
    return rt.numpy_dtype(plan.dtype.name)


def _poison_value(plan):
    """NaN for floats; an integer outside the range fresh_values draws from."""
    return {"u8": 255, "i8": -128}.get(plan.dtype.name, np.nan)


def fresh_values(rng, plan, shape):
    """Random nonzero values (never the poison)."""
    name = plan.dtype.name
    if name == "u8":
        return rng.integers(1, 201, size=shape).astype(np.uint8)
    if name == "i8":
        return (rng.integers(1, 101, size=shape) * rng.choice([-1, 1], size=shape)).astype(np.int8)
    v = rng.uniform(0.25, 4.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    return v.astype(_np_dtype(plan))


def poisoned_array(plan, shape):
    return np.full(shape, _poison_value(plan), dtype=_np_dtype(plan))


def _bits(a):
    """Exact, NaN-safe comparison: the raw bit patterns."""
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def box_offsets(plan):
    """Logical coordinates (2, N) of every box element and its shared-memory offset (N,)."""
    c = np.indices(plan.shape).reshape(2, -1)
    off = np.asarray(tma.shared_layout(plan)((c[0], c[1])), dtype=np.int64)
    assert sorted(off.tolist()) == list(range(c.shape[1]))
    return c, off


def logical_origin(plan, outer, inner, *batch):
    """A logical origin (c0, c1[, batch]) from its outer and inner (array-column) coordinates."""
    return ((inner, outer) if plan.axis == 0 else (outer, inner)) + tuple(batch)


def _footprint(plan, origin, bounds):
    """The box at ``origin`` against ``bounds`` (logical extents): (in-bounds mask over the box in
    logical order, index tuple into the row-major array for the in-bounds elements)."""
    c, _ = box_offsets(plan)
    g0, g1 = origin[0] + c[0], origin[1] + c[1]
    inb = (g0 >= 0) & (g0 < bounds[0]) & (g1 >= 0) & (g1 < bounds[1])
    if len(origin) == 3:
        inb &= 0 <= origin[2] < bounds[2]
    inner, outer = (g0, g1) if plan.axis == 0 else (g1, g0)
    idx = (outer[inb], inner[inb])
    if len(origin) == 3:
        idx = (np.full(int(inb.sum()), origin[2]),) + idx
    return inb, idx


def origins_array(origins):
    a = np.zeros((len(origins), 3), np.int32)
    for i, o in enumerate(origins):
        a[i, :len(o)] = o
    return a


def _seed(plan, salt):
    return zlib.crc32(repr(plan).encode()) + salt


def run_loads(binding, origins, per_cta):
    """Launch tma_load_tiles over ``origins`` (len(origins) // per_cta CTAs); the (k, N) shared tiles."""
    import tylo.runtime as rt
    plan = binding.plan
    n = int(np.prod(plan.shape))
    assert len(origins) % per_cta == 0
    org = rt.to_device(origins_array(origins))
    out = rt.to_device(poisoned_array(plan, len(origins) * n))
    err = rt.to_device(np.zeros(1, np.int32))
    tma_load_tiles[len(origins) // per_cta, BLOCK](out, err, binding, org, per_cta)
    got = out.to_host().reshape(len(origins), n)
    assert err.to_host()[0] == 0, f"{plan}: an mbarrier wait timed out (a TMA load never completed)"
    return got


def check_loads(binding, host, origins, got):
    """Box element at logical c lands at shared offset shared_layout(plan)(c): the array element, or 0
    where the element is outside binding.bounds."""
    plan = binding.plan
    _, off = box_offsets(plan)
    for j, o in enumerate(origins):
        inb, idx = _footprint(plan, o, binding.bounds)
        want = np.zeros(off.size, dtype=host.dtype)
        want[off[inb]] = host[idx]
        np.testing.assert_array_equal(_bits(got[j]), _bits(want), err_msg=f"{plan} load at origin {o}")


def store_values(rng, plan, count):
    """(count, N) values in logical box order and the same in shared-memory order (what the kernel copies)."""
    _, off = box_offsets(plan)
    logical = fresh_values(rng, plan, (count, off.size))
    shared = np.empty_like(logical)
    shared[:, off] = logical
    return logical, shared


def run_stores(binding, shared_vals, origins, per_cta):
    import tylo.runtime as rt
    assert len(origins) % per_cta == 0
    org = rt.to_device(origins_array(origins))
    vals = rt.to_device(shared_vals.reshape(-1))
    tma_store_tiles[len(origins) // per_cta, BLOCK](binding, vals, org, per_cta)
    return org, vals


def store_bounds(binding):
    """Where TMA stores stop: the bounds, except that along the inner axis the hardware writes whole
    16-byte chunks, so an inner bound inside a chunk is rounded up to the chunk's end (seen on the
    H200; docs/hopper.md). The tests keep that end inside the array."""
    plan, b = binding.plan, list(binding.bounds)
    chunk = 16 // plan.elem_bytes
    b[plan.axis] = -(-b[plan.axis] // chunk) * chunk
    return tuple(b)


def expected_after_stores(binding, poisoned, logical_vals, origins):
    """The poisoned array with each box's in-bounds elements replaced; asserts boxes do not overlap."""
    want = poisoned.copy()
    written = np.zeros(poisoned.shape, dtype=bool)
    for j, o in enumerate(origins):
        inb, idx = _footprint(binding.plan, o, store_bounds(binding))
        assert not written[idx].any(), f"test bug: the stores at {o} overlap an earlier one"
        written[idx] = True
        want[idx] = logical_vals[j][inb]
    return want, written


def check_array(got, want, what):
    bad = _bits(got) != _bits(want)
    if bad.any():
        where = np.argwhere(bad)
        raise AssertionError(f"{what}: {int(bad.sum())} elements differ, first at {where[:5].tolist()}; "
                             f"got {got[tuple(where[0])]!r}, want {want[tuple(where[0])]!r}")


def load_origins(plan, R, C):
    """(outer, inner) origins -> logical: in bounds, unaligned outer, past the outer edge, past the inner
    edge, both (corner), starting exactly at either edge (all zeros)."""
    O, W, w16 = plan.outer, plan.inner, 16 // plan.elem_bytes
    oi = [(0, 0), (5, w16), (O, W), (2 * O + 8, 0), (O, 2 * W), (3 * O, W + w16), (3 * O, 2 * W), (R, 0), (0, C)]
    return [logical_origin(plan, a, b) for a, b in oi]


def store_origins(plan, R, C):
    """Non-overlapping boxes: in bounds (aligned and unaligned), past the outer edge, past the inner edge,
    the corner, and two wholly outside (dropped)."""
    O, W, w16 = plan.outer, plan.inner, 16 // plan.elem_bytes
    oi = [(0, 0), (0, W + w16), (O + 3, 0), (O, 2 * W), (2 * O + 3, W), (3 * O + 3, 0), (3 * O, 2 * W),
          (R, W), (O, C)]
    return [logical_origin(plan, a, b) for a, b in oi]


def ragged_shape(plan):
    """(rows, columns) of a 2-D array for ``plan``: neither a multiple of the box; rows 16-byte aligned."""
    return 3 * plan.outer + 5, 2 * plan.inner + 16 // plan.elem_bytes


# -- CPU: every kernel variant assembles for sm_90a -------------------------------------------------------

LOAD_PTX = "cp.async.bulk.tensor.{}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
STORE_PTX = "cp.async.bulk.tensor.{}d.global.shared::cta.tile.bulk_group"


def _compile_variants(plan, rank):
    entry = plan if rank == 2 else tma.batched(plan)
    ptr = "*" + plan.dtype.name
    load = tma_load_tiles.compile(signature=[ptr, "*i32", entry, "*i32", "i32"],
                                  arch="sm_90a", block=BLOCK)
    store = tma_store_tiles.compile(signature=[entry, ptr, "*i32", "i32"],
                                    arch="sm_90a", block=BLOCK)
    return load, store


def _check_assembled(plan, rank, load, store):
    nbytes = tma.transfer_bytes(plan)
    lp, sp = load.ptx, store.ptx
    # exactly one bulk tensor copy of the binding's rank in each kernel, and no other
    assert lp.count(LOAD_PTX.format(rank)) == 1 == lp.count("cp.async.bulk.tensor")
    assert sp.count(STORE_PTX.format(rank)) == 1 == sp.count("cp.async.bulk.tensor")
    assert "mbarrier.arrive.expect_tx.shared::cta.b64" in lp and "mbarrier.try_wait.parity.shared::cta.b64" in lp
    assert "cp.async.bulk.commit_group" in sp
    assert re.search(r"cp\.async\.bulk\.wait_group\.read\s+0", sp)
    assert re.search(r"cp\.async\.bulk\.wait_group\s+0", sp)
    assert "fence.proxy.async.shared::cta" in sp
    for ck in (load, store):
        assert ".local" not in ck.ptx, plan
        assert ck.resources.spill_bytes == 0 and ck.resources.stack_bytes == 0, plan
        assert re.search(r"\.param \.align 64 \.b8 \w+\[128\]", ck.ptx), "the binding is a 128-byte by-value param"
    assert load.shared_bytes == nbytes + 8, (plan, load.shared_bytes)       # tile + mbarrier
    assert store.shared_bytes == nbytes, (plan, store.shared_bytes)


@pytest.mark.parametrize("plan", ALL_PLANS, ids=COMBO_IDS)
def test_kernels_assemble_for_sm90a(plan):
    load, store = _compile_variants(plan, 2)
    _check_assembled(plan, 2, load, store)


@pytest.mark.parametrize("plan", FEW_PLANS, ids=repr)
def test_batched_kernels_assemble_for_sm90a(plan):
    load, store = _compile_variants(plan, 3)
    _check_assembled(plan, 3, load, store)


# -- CPU: cache keys and origin ranks of TMA parameters --------------------------------------

def test_cache_key_tells_tma_plans_apart():
    a_plan, b_plan = make_plan(1, 32, 1, 24), make_plan(1, 128, 1, 24)
    sig = lambda p: ["*u8", "*i32", p, "*i32", "i32"]  # noqa: E731
    a = tma_load_tiles.compile(signature=sig(a_plan), arch="sm_90a", block=BLOCK)
    b = tma_load_tiles.compile(signature=sig(b_plan), arch="sm_90a", block=BLOCK)
    assert a.shared_bytes == tma.transfer_bytes(a_plan) + 8
    assert b.shared_bytes == tma.transfer_bytes(b_plan) + 8, "b_plan was served a_plan's cached kernel"
    assert a.key != b.key


def test_cache_key_tells_tma_ranks_apart():
    plan = make_plan(2, 128, 1, 16)
    sig = lambda p: [p, "*bf16", "*i32", "i32"]  # noqa: E731
    two = tma_store_tiles.compile(signature=sig(plan), arch="sm_90a", block=BLOCK)
    three = tma_store_tiles.compile(signature=sig(tma.batched(plan)), arch="sm_90a", block=BLOCK)
    assert STORE_PTX.format(2) in two.ptx
    assert STORE_PTX.format(3) in three.ptx, "the 3-D binding was served the 2-D kernel"


def test_origin_length_must_match_the_binding_rank():
    plan = make_plan(2, 128, 1, 16)

    @tylo.jit
    def two_coords_on_a_batch(src):
        buf = tylo.shared_array(tylo.bf16, (1024,), align=1024)
        bar = tylo.shared_array(tylo.u64, (1,), align=8)
        if tylo.thread_idx.x == 0:
            tma.tma_load(tma.shared_tile(src, buf.ptr), src, (0, 0), bar.ptr)

    with pytest.raises(tylo.CompileError, match="binding is 3-D"):
        two_coords_on_a_batch.compile(signature=[tma.batched(plan)], arch="sm_90a")


# -- GPU: loads and stores for every width, swizzle and axis ------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("plan", ALL_PLANS, ids=COMBO_IDS)
def test_tma_load(plan):
    """9 boxes (3 CTAs x 3 boxes, mbarrier parity 0/1/0) at in-bounds and out-of-bounds origins land in
    shared_layout order with zeros past the edges; then new data in the same array through the same
    binding (a second launch) gives the new values."""
    _sm90()
    import tylo.runtime as rt
    rng = np.random.default_rng(_seed(plan, 100))
    R, C = ragged_shape(plan)
    host = fresh_values(rng, plan, (R, C))
    x = rt.to_device(host)
    binding = tylo.prepare_tma(plan, x)
    assert binding.rank == 2 and binding.bounds == logical_origin(plan, R, C)
    origins = load_origins(plan, R, C)
    check_loads(binding, host, origins, run_loads(binding, origins, per_cta=3))
    host2 = fresh_values(rng, plan, (R, C))
    x.copy_from_host(host2)                       # same allocation, same descriptor, new contents
    check_loads(binding, host2, origins, run_loads(binding, origins, per_cta=3))


@pytest.mark.gpu
@pytest.mark.parametrize("plan", ALL_PLANS, ids=COMBO_IDS)
def test_tma_store(plan):
    """9 non-overlapping boxes (3 CTAs x 3, the staging tile reused after wait_tma_reads) written into a
    poisoned array: exactly the in-bounds part of each box changes; boxes wholly outside change nothing.
    A second launch through the same binding after re-poisoning writes the new values."""
    _sm90()
    import tylo.runtime as rt
    rng = np.random.default_rng(_seed(plan, 200))
    R, C = ragged_shape(plan)
    poisoned = poisoned_array(plan, (R, C))
    y = rt.to_device(poisoned)
    binding = tylo.prepare_tma(plan, y)
    origins = store_origins(plan, R, C)
    for _ in range(2):
        logical, shared = store_values(rng, plan, len(origins))
        keep = run_stores(binding, shared, origins, per_cta=3)
        want, written = expected_after_stores(binding, poisoned, logical, origins)
        assert written.any() and not written.all()
        check_array(y.to_host(), want, f"{plan} stores")
        del keep
        y.copy_from_host(poisoned)




# -- GPU: 3-D batches -----------------------------------------------------------------------------------------

BATCH = 3


@pytest.mark.gpu
@pytest.mark.parametrize("plan", FEW_PLANS, ids=repr)
def test_tma_load_3d_batches(plan):
    """A 3-D array is a batch of matrices: the third origin coordinate picks the matrix; a batch index
    past the end loads zeros; edges clip per matrix."""
    _sm90()
    import tylo.runtime as rt
    rng = np.random.default_rng(300 + FEW_PLANS.index(plan))
    R, C = ragged_shape(plan)
    host = fresh_values(rng, plan, (BATCH, R, C))
    x = rt.to_device(host)
    binding = tylo.prepare_tma(plan, x)
    assert binding.rank == 3 and binding.bounds == logical_origin(plan, R, C, BATCH)
    O, W = plan.outer, plan.inner
    origins = [logical_origin(plan, 0, 0, 0), logical_origin(plan, O, W, 1), logical_origin(plan, 2 * O + 8, 0, 2),
               logical_origin(plan, 3 * O, 2 * W, 1), logical_origin(plan, 0, 0, BATCH), logical_origin(plan, O, W, 2)]
    check_loads(binding, host, origins, run_loads(binding, origins, per_cta=2))


@pytest.mark.gpu
@pytest.mark.parametrize("plan", FEW_PLANS, ids=repr)
def test_tma_store_3d_batches(plan):
    """Stores into a batch of matrices touch only the addressed matrix; a batch past the end is dropped."""
    _sm90()
    import tylo.runtime as rt
    rng = np.random.default_rng(400 + FEW_PLANS.index(plan))
    R, C = ragged_shape(plan)
    poisoned = poisoned_array(plan, (BATCH, R, C))
    y = rt.to_device(poisoned)
    binding = tylo.prepare_tma(plan, y)
    O, W = plan.outer, plan.inner
    origins = [logical_origin(plan, 0, 0, 0), logical_origin(plan, 0, 0, 1), logical_origin(plan, O, W, 1),
               logical_origin(plan, 3 * O, 2 * W, 2), logical_origin(plan, O + 3, 0, 2), logical_origin(plan, 0, 0, BATCH)]
    logical, shared = store_values(rng, plan, len(origins))
    keep = run_stores(binding, shared, origins, per_cta=2)
    want, written = expected_after_stores(binding, poisoned, logical, origins)
    assert written[0].any() and written[1].any() and written[2].any()
    check_array(y.to_host(), want, f"{plan} batched stores")
    del keep


# -- GPU: bounds smaller than the array (padded data) --------------------------------------------------------

def short_bounds(plan, R, C, batch=None):
    """Logical bounds: 7 rows short, 3 columns short (not a 16-byte multiple), one matrix short."""
    return logical_origin(plan, R - 7, C - 3, *(() if batch is None else (batch - 1,)))


@pytest.mark.gpu
@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("plan", FEW_PLANS, ids=repr)
def test_tma_load_clips_at_bounds(plan, rank):
    """The array has data everywhere; loads past ``bounds`` are zeros all the same."""
    _sm90()
    import tylo.runtime as rt
    rng = np.random.default_rng(500 + FEW_PLANS.index(plan) + 10 * rank)
    R, C = ragged_shape(plan)
    shape = (R, C) if rank == 2 else (BATCH, R, C)
    host = fresh_values(rng, plan, shape)
    x = rt.to_device(host)
    bounds = short_bounds(plan, R, C, None if rank == 2 else BATCH)
    binding = tylo.prepare_tma(plan, x, bounds=bounds)
    assert binding.bounds == bounds and binding.rank == rank
    O, W, w16 = plan.outer, plan.inner, 16 // plan.elem_bytes
    rb = R - 7                              # the row bound; the column bound is C - 3 = 2W + w16 - 3
    # straddling the row bound (2 rows padded), the column bound (3 columns padded), both; wholly past
    # the row bound (7 of its rows exist in the array); last: past the batch bound (3-D) / the column bound
    oi = [(0, 0), (rb - O + 2, 0), (0, W + w16), (rb - 4, 2 * W), (rb, 0), (2 * O, W + w16)]
    bs = [()] * 6 if rank == 2 else [(0,), (1,), (0,), (1,), (0,), (BATCH - 1,)]
    origins = [logical_origin(plan, a, b, *z) for (a, b), z in zip(oi, bs)]
    got = run_loads(binding, origins, per_cta=3)
    check_loads(binding, host, origins, got)
    # the elements between the bounds and the array's edge exist and are nonzero, yet load as zeros
    _, off = box_offsets(plan)
    inb_array, _ = _footprint(plan, origins[1], logical_origin(plan, R, C, BATCH))
    inb_bounds, _ = _footprint(plan, origins[1], bounds)
    padded = inb_array & ~inb_bounds
    assert padded.any() and not _bits(got[1][off[padded]]).any()


@pytest.mark.gpu
@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("plan", FEW_PLANS, ids=repr)
def test_tma_store_clips_at_bounds(plan, rank):
    """Stores past ``bounds`` are dropped: the padding between the bounds and the array's edge keeps its
    poison."""
    _sm90()
    import tylo.runtime as rt
    rng = np.random.default_rng(600 + FEW_PLANS.index(plan) + 10 * rank)
    R, C = ragged_shape(plan)
    shape = (R, C) if rank == 2 else (BATCH, R, C)
    poisoned = poisoned_array(plan, shape)
    y = rt.to_device(poisoned)
    bounds = short_bounds(plan, R, C, None if rank == 2 else BATCH)
    binding = tylo.prepare_tma(plan, y, bounds=bounds)
    O, W, w16 = plan.outer, plan.inner, 16 // plan.elem_bytes
    rb, cb = R - 7, C - 3                   # the bounds in (outer, inner) terms
    # straddling the row bound, the column bound, both (the corner); wholly past the row bound
    oi = [(rb - O + 2, 0), (0, W + w16), (rb - 4, 2 * W), (rb, W)]
    bs = [()] * 4 if rank == 2 else [(0,), (1,), (1,), (0,)]
    origins = [logical_origin(plan, a, b, *z) for (a, b), z in zip(oi, bs)]
    if rank == 3:
        origins += [logical_origin(plan, 0, 0, BATCH - 1), logical_origin(plan, O, 0, 2)]   # past the batch bound
    else:
        origins += [logical_origin(plan, O, 0), logical_origin(plan, rb, 0)]
    logical, shared = store_values(rng, plan, len(origins))
    keep = run_stores(binding, shared, origins, per_cta=len(origins) // 2)
    want, written = expected_after_stores(binding, poisoned, logical, origins)
    got = y.to_host()
    check_array(got, want, f"{plan} stores with bounds {bounds}")
    # the padding is untouched even where the boxes covered it, past the 16-byte chunk holding the
    # column bound (the hardware writes whole chunks: store_bounds)
    padded = np.ones(shape, dtype=bool)
    padded[..., :rb, :-(-cb // w16) * w16] = False
    if rank == 3:
        padded[BATCH - 1] = True
    assert not written[padded].any()
    assert (_bits(got[padded]) == _bits(poisoned[padded])).all()
    del keep


# -- GPU: negative origins ---------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("plan", FEW_PLANS, ids=repr)
def test_tma_negative_origins(plan):
    """Loads of boxes that start before coordinate 0 (TMA coordinates are signed) zero-fill the part
    before the array. (Stores at negative coordinates fault with an illegal instruction on the H200:
    scripts/probe_tma_negative.py; docs/hopper.md.)"""
    _sm90()
    import tylo.runtime as rt
    rng = np.random.default_rng(700 + FEW_PLANS.index(plan))
    R, C = ragged_shape(plan)
    O, W, w16 = plan.outer, plan.inner, 16 // plan.elem_bytes
    host = fresh_values(rng, plan, (R, C))
    binding = tylo.prepare_tma(plan, rt.to_device(host))
    origins = [logical_origin(plan, a, b) for a, b in [(-3, 0), (0, -w16), (-5, -w16), (-O, 0), (0, -W), (O, W)]]
    check_loads(binding, host, origins, run_loads(binding, origins, per_cta=2))


# -- GPU: repeated launches and descriptor reuse --------------------------------------------------------------

@pytest.mark.gpu
def test_repeated_launches_capture_each_binding():
    """12 launches back to back, no synchronisation between them, alternating three bindings (two arrays
    and plans, and a third binding of the first plan over the second array with bounds), each into its
    own output: every launch sees the descriptor it was given."""
    _sm90()
    import tylo.runtime as rt
    rng = np.random.default_rng(800)
    p1, p2 = make_plan(2, 128, 1, 32), make_plan(4, 64, 0, 16)
    R, C = ragged_shape(p1)
    a_host, b_host = fresh_values(rng, p1, (R, C)), fresh_values(rng, p1, (R, C))
    a, b = rt.to_device(a_host), rt.to_device(b_host)
    R2, C2 = ragged_shape(p2)
    c_host = fresh_values(rng, p2, (R2, C2))
    c = rt.to_device(c_host)
    bindings = [(tylo.prepare_tma(p1, a), a_host), (tylo.prepare_tma(p2, c), c_host),
                (tylo.prepare_tma(p1, b, bounds=logical_origin(p1, R - 9, C - 5)), b_host)]
    pending = []                  # every argument is allocated and filled before the first launch
    for i in range(12):
        binding, host = bindings[i % 3]
        plan = binding.plan
        Rb, Cb = ragged_shape(plan)
        origins = load_origins(plan, Rb, Cb)[i % 5: i % 5 + 4]
        n = int(np.prod(plan.shape))
        org = rt.to_device(origins_array(origins))
        out = rt.to_device(poisoned_array(plan, len(origins) * n))
        err = rt.to_device(np.zeros(1, np.int32))
        pending.append((binding, host, origins, out, err, org))
    for binding, _, _, out, err, org in pending:     # queued back to back on the default stream
        tma_load_tiles[2, BLOCK](out, err, binding, org, 2)
    for binding, host, origins, out, err, _ in pending:
        got = out.to_host().reshape(len(origins), -1)
        assert err.to_host()[0] == 0
        check_loads(binding, host, origins, got)


@pytest.mark.gpu
@pytest.mark.parametrize("rank", [2, 3])
def test_descriptor_reuse_after_the_data_changes(rank):
    """One binding per array, made once; three rounds of new contents (copy_from_host into the same
    allocations): each load returns the round's data and each store lands the round's values."""
    _sm90()
    import tylo.runtime as rt
    rng = np.random.default_rng(900 + rank)
    plan = make_plan(1, 128, 0, 32) if rank == 2 else make_plan(2, 64, 1, 24)
    R, C = ragged_shape(plan)
    shape = (R, C) if rank == 2 else (BATCH, R, C)
    batch = () if rank == 2 else (1,)
    x = rt.to_device(fresh_values(rng, plan, shape))
    src = tylo.prepare_tma(plan, x)
    poisoned = poisoned_array(plan, shape)
    y = rt.to_device(poisoned)
    dst = tylo.prepare_tma(plan, y)
    descriptors = (src.descriptor, dst.descriptor)
    load_at = [logical_origin(plan, a, b, *batch) for a, b in [(0, 0), (3 * plan.outer, 2 * plan.inner)]]
    store_at = [logical_origin(plan, a, b, *batch) for a, b in [(plan.outer, 0), (3 * plan.outer, 2 * plan.inner)]]
    previous = None
    for _ in range(3):
        host = fresh_values(rng, plan, shape)
        x.copy_from_host(host)
        got = run_loads(src, load_at, per_cta=1)
        check_loads(src, host, load_at, got)
        if previous is not None:
            assert (_bits(got) != _bits(previous)).any()
        previous = got
        y.copy_from_host(poisoned)
        logical, shared = store_values(rng, plan, len(store_at))
        keep = run_stores(dst, shared, store_at, per_cta=1)
        want, _ = expected_after_stores(dst, poisoned, logical, store_at)
        check_array(y.to_host(), want, f"{plan} stores, reused binding")
        del keep
    assert (src.descriptor, dst.descriptor) == descriptors
