"""``store_remote``: a fragment stored into the shared memory of another CTA of the cluster
(``st.async`` with ``complete_tx`` on that CTA's barrier), in the interpreter and in the PTX."""
import numpy as np
import pytest

import tylo
import tylo.lang.mbarrier as mb
from tylo.interpreter import HazardError
from tylo.layouts import Layout, Ownership

ROWS, COLS = 64, 16
OWN = Ownership.wgmma_accumulator(COLS)          # 128 threads, 8 f32 each
TILE = Layout((ROWS, COLS), (COLS, 1))


@tylo.jit(interpret=True)
def gather_sum(out, x, CLUSTER: tylo.constexpr, WAIT: tylo.constexpr = True):
    """Ranks 1.. store their tile of x into slot rank - 1 of rank 0's buffer; rank 0 sums them after its
    own, in rank order, and writes the sum (one tile per cluster)."""
    buf = tylo.shared_array(tylo.f32, ((CLUSTER - 1) * ROWS * COLS,), align=16)
    bar = tylo.shared_array(tylo.u64, (1,), align=8)
    tid = tylo.thread_idx.x
    rank = mb.cluster_ctarank()
    if tid == 0:
        mb.mbarrier_init(bar.ptr, 1)
        mb.fence_mbarrier_init()
    mb.cluster_sync()                       # rank 0's barrier is initialised before a peer stores
    first = tylo.block_idx.x * ROWS * COLS
    mine = tylo.load(tylo.GlobalTile(x + first, TILE), OWN)
    if rank != 0:
        tylo.store_remote(tylo.SharedTile(buf.ptr + (rank - 1) * ROWS * COLS, TILE), mine, bar.ptr, 0)
    if tid == 0:
        if rank == 0:
            mb.mbarrier_arrive_expect_tx(bar.ptr, (CLUSTER - 1) * ROWS * COLS * 4)
    mb.cluster_sync()                       # the stores are issued (a cluster barrier does not complete them)
    if rank == 0:
        if WAIT:
            mb.mbarrier_wait(bar.ptr, 0)    # they have landed
        for r in tylo.static_range(1, CLUSTER):
            mine = mine + tylo.load(tylo.SharedTile(buf.ptr + (r - 1) * ROWS * COLS, TILE), OWN)
        tylo.store(tylo.GlobalTile(out + tylo.block_idx.x // CLUSTER * ROWS * COLS, TILE), mine)
    mb.cluster_sync()                       # no CTA exits before rank 0 has its data


@pytest.mark.parametrize("cluster", [2, 4])
def test_peers_tiles_land_in_rank_0_and_sum_in_rank_order(cluster):
    rng = np.random.default_rng(cluster)
    x = rng.standard_normal((2 * cluster, ROWS, COLS)).astype(np.float32)
    out = np.full((2, ROWS, COLS), np.nan, np.float32)
    gather_sum.launch(out, x, cluster, grid=2 * cluster, block=128, cluster=cluster)
    for c in range(2):
        want = x[c * cluster].copy()
        for r in range(1, cluster):
            want = want + x[c * cluster + r]          # float32, in rank order: bitwise
        assert np.array_equal(out[c], want), c


def test_reading_before_the_barrier_completes_is_a_hazard():
    x = np.ones((2, ROWS, COLS), np.float32)
    out = np.zeros((1, ROWS, COLS), np.float32)
    with pytest.raises(HazardError, match="(in flight|not waited for)"):
        gather_sum.launch(out, x, 2, False, grid=2, block=128, cluster=2)


def test_ptx_maps_both_addresses_and_stores_each_vector_access_once():
    ptx = gather_sum.compile("*f32:16, *f32:16", arch="sm_90a", constexprs={"CLUSTER": 2}, block=(128, 1, 1)).ptx
    stores = [line for line in ptx.splitlines() if "st.async" in line]
    # 8 f32 per thread in 4 pairs of row neighbours (the accumulator's ownership on a row-major tile)
    assert len(stores) == (ROWS * COLS // 128) // 2
    assert all(".shared::cluster.mbarrier::complete_tx::bytes.v2.b32" in line for line in stores)
    assert ptx.count("mapa.shared::cluster.u32") == 2 * len(stores)


def test_store_remote_refuses_16_bit_tiles():
    @tylo.jit
    def bad(x):
        buf = tylo.shared_array(tylo.bf16, (ROWS * COLS,), align=16)
        bar = tylo.shared_array(tylo.u64, (1,), align=8)
        frag = tylo.load(tylo.GlobalTile(x, TILE), OWN)
        tylo.store_remote(tylo.SharedTile(buf.ptr, TILE), frag.astype(tylo.bf16), bar.ptr, 0)

    with pytest.raises(tylo.CompileError, match="32-bit elements"):
        bad.compile("*f32:16", arch="sm_90a", block=(128, 1, 1))
