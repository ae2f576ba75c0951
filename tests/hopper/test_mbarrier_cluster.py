"""``mbarrier_arrive_cluster(bar, rank)``: an arrival on the barrier at the same shared offset in another
CTA of the cluster (``mapa`` + ``mbarrier.arrive.shared::cluster``), in PTX and in the
interpreter (which runs a cluster's CTAs together)."""
import numpy as np
import pytest

import tylo
import tylo.lang.mbarrier as mb
from tylo.interpreter import HazardError, InterpreterError, run


@tylo.jit
def both_ctas_arrive(out, PEERS: tylo.constexpr = 2):
    # each CTA's barrier expects one arrival from thread 0 of every CTA of the cluster (its own included)
    bar = tylo.shared_array(tylo.u64, (1,), align=8)
    rank = mb.cluster_ctarank()
    if tylo.thread_idx.x == 0:
        mb.mbarrier_init(bar.ptr, 2)
        mb.fence_mbarrier_init()
    mb.cluster_sync()               # both barriers are initialised before anyone arrives on them
    if tylo.thread_idx.x == 0:
        for r in tylo.static_range(PEERS):
            mb.mbarrier_arrive_cluster(bar.ptr, r)
    mb.mbarrier_wait(bar.ptr, 0)
    out[rank * 32 + tylo.thread_idx.x] = rank + 1
    mb.cluster_sync()               # nobody exits while a peer may still arrive on its barrier


def _ir(peers=2):
    return both_ctas_arrive.lower(signature=["*i32"], constexprs={"PEERS": peers}, block=(32,))


def test_remote_arrivals_complete_each_ctas_phase():
    out = np.zeros(64, np.int32)
    for seed in range(3):
        run(_ir(), [out], grid=(2,), block=(32,), cluster=(2, 1, 1), seed=seed)
        assert (out[:32] == 1).all() and (out[32:] == 2).all()


def test_a_missing_remote_arrival_deadlocks():
    # both CTAs arrive on CTA 0's barrier only: it completes, CTA 1's waits for a phase that never does
    with pytest.raises(HazardError, match=r"deadlock(.|\n)*CTA 1 warp 0 \(32 threads\): nv.mbarrier.wait"):
        run(_ir(1), [np.zeros(64, np.int32)], grid=(2,), block=(32,), cluster=(2, 1, 1))


def test_rank_outside_the_cluster_is_an_error():
    # a cluster of one CTA: rank 1 does not exist
    with pytest.raises(InterpreterError, match="outside the cluster"):
        run(_ir(), [np.zeros(64, np.int32)], grid=(2,), block=(32,), cluster=(1, 1, 1))


def test_arrive_cluster_ptx():
    ck = both_ctas_arrive.compile(signature=["*i32"], arch="sm_90a", block=32)
    ptx = ck.ptx
    assert ptx.count("mapa.shared::cluster.u32") == 2
    assert ptx.count("mbarrier.arrive.shared::cluster.b64 _,") == 2
    assert ".local" not in ptx and ck.resources.spill_bytes == 0


def test_arrive_cluster_needs_a_shared_barrier_and_sm90():
    @tylo.jit
    def not_a_barrier(out):
        mb.mbarrier_arrive_cluster(out, 0)

    with pytest.raises(tylo.CompileError, match="mbarrier_arrive_cluster: the barrier must be a \\*shared u64"):
        not_a_barrier.compile(signature=["*u64"], arch="sm_90a")

    @tylo.jit
    def old_target(out):
        bar = tylo.shared_array(tylo.u64, (1,), align=8)
        mb.mbarrier_arrive_cluster(bar.ptr, 0)

    with pytest.raises(tylo.CompileError, match="sm_90"):
        old_target.compile(signature=["*u64"], arch="sm_80")
