"""TMA multicast across a thread-block cluster, assembled for sm_90a (not yet run on a GPU).

CTA rank 0 of a 2-CTA cluster loads the tile once for both CTAs; each CTA expects the bytes on its
own barrier at the same shared offset.
"""
import re

import pytest

import tylo
import tylo.lang.mbarrier as mb
import tylo.lang.tma as tma

PLAN = tma.TMATile(tylo.bf16, (64, 64))


@tylo.jit
def multicast_load(out, a_map):
    tile = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    bar = tylo.shared_array(tylo.u64, (1,), align=8)
    rank = mb.cluster_ctarank()
    if tylo.thread_idx.x == 0:
        mb.mbarrier_init(bar.ptr, 1)
        mb.fence_mbarrier_init()
    mb.cluster_sync()
    if tylo.thread_idx.x == 0:
        mb.mbarrier_arrive_expect_tx(bar.ptr, tma.transfer_bytes(PLAN))
        if rank == 0:
            tma.tma_load_tile(PLAN, a_map, tma.shared_tile(PLAN, tile), (0, 0), bar.ptr, multicast=0b11)
    mb.mbarrier_wait(bar.ptr, 0)
    out[rank * 128 + tylo.thread_idx.x] = tile[tylo.thread_idx.x].to(tylo.f32)
    mb.cluster_sync()


def test_multicast_tma_and_cluster_barriers_assemble():
    ck = multicast_load.compile(signature=["*f32", PLAN], arch="sm_90a", block=128)
    ptx = ck.ptx
    assert re.search(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.tile\."
                     r"mbarrier::complete_tx::bytes\.multicast::cluster", ptx)
    assert "barrier.cluster.arrive.release.aligned" in ptx and "barrier.cluster.wait.acquire.aligned" in ptx
    assert "%cluster_ctarank" in ptx
    assert ".local" not in ptx and ck.resources.spill_bytes == 0


def test_multicast_mask_must_be_16_bits():
    @tylo.jit
    def bad(a_map):
        tile = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
        bar = tylo.shared_array(tylo.u64, (1,), align=8)
        tma.tma_load_tile(PLAN, a_map, tma.shared_tile(PLAN, tile), (0, 0), bar.ptr, multicast=1 << 16)

    with pytest.raises(tylo.CompileError, match="16-bit CTA mask"):
        bad.compile(signature=[PLAN], arch="sm_90a")


@pytest.mark.gpu
def test_multicast_delivers_the_tile_to_both_ctas():
    import ml_dtypes
    import numpy as np

    a = np.random.default_rng().standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    da = tylo.to_device(a)
    out = tylo.to_device(np.full(256, np.nan, np.float32))
    multicast_load.launch(out, tylo.prepare_tma(PLAN, da), grid=2, block=128, cluster=(2, 1, 1))
    got = out.to_host()
    assert not np.isnan(got).any()
    np.testing.assert_array_equal(got[:128], got[128:])           # the same bytes landed in both CTAs
    assert set(got[:128].tolist()) <= set(a.astype(np.float32).ravel().tolist())


# -- the shared window in a cluster --------------------------------------------------------------------------

@tylo.jit
def shared_window_bits(out):
    """Each CTA writes bits 18 and up of its shared array's shared-window address (above everything a matrix
    descriptor encodes: ``(addr & 0x3FFFF) >> 4``) and the address's low 4 bits."""
    buf = tylo.shared_array(tylo.f32, (32,), align=16)
    if tylo.thread_idx.x == 0:
        addr = tylo.lang.wgmma.shared_address(buf)
        out[2 * tylo.block_idx.x] = addr >> 18
        out[2 * tylo.block_idx.x + 1] = addr & 15
    buf[tylo.thread_idx.x] = 0.0
    mb.cluster_sync()


def window_bits_expected(grid, cluster):
    """A CTA's shared-window address carries its rank in the cluster from bit 24 up (rank << 6 above bit
    18); a launch without a cluster (cluster of 1) has none."""
    import numpy as np

    return np.array([[(b % cluster) << 6, 0] for b in range(grid)], np.uint32).reshape(-1)


@pytest.mark.parametrize("cluster", [1, 2, 4])
def test_interpreter_shared_window_carries_the_cluster_rank(cluster):
    import numpy as np

    out = np.full(16, 0xFFFF, np.uint32)
    tylo.jit(shared_window_bits.fn, interpret=True).launch(out, grid=8, block=32, cluster=(cluster, 1, 1))
    np.testing.assert_array_equal(out, window_bits_expected(8, cluster))


@pytest.mark.gpu
@pytest.mark.parametrize("cluster", [1, 2, 4])
def test_gpu_shared_window_carries_the_cluster_rank(cluster):
    import numpy as np

    out = tylo.to_device(np.full(16, 0xFFFF, np.uint32))
    shared_window_bits.launch(out, grid=8, block=32, cluster=(cluster, 1, 1))
    np.testing.assert_array_equal(out.to_host(), window_bits_expected(8, cluster))
