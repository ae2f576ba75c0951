"""TMA copies, mbarriers, named barriers and clusters in the interpreter, on small kernels."""
import math

import ml_dtypes
import numpy as np
import pytest

import tylo
import tylo.lang.mbarrier as mb
import tylo.lang.tma as tma
from tylo.interpreter import HazardError, InterpreterError, run
from tylo.ir import Builder, Kernel
from tylo.ir.nv.tma import shared_layout

PLAN = tma.TMATile(tylo.bf16, (16, 64))          # 16 rows of one 128-byte swizzle row
PLAN64 = tma.TMATile(tylo.f32, (8, 16), swizzle=64)
ELEMS = math.prod(PLAN.shape)


@tylo.func
def copy_out(raw, smem, tid, n):
    for i in range(tid, n, 32):
        raw[i] = smem.ptr[i]


@tylo.jit(interpret=True)
def load_then_store(raw, src_map, dst_map, r0, c0, P: tylo.constexpr, WAIT: tylo.constexpr = True,
                    STORE: tylo.constexpr = True):
    n = P.shape[0] * P.shape[1]
    smem = tylo.shared_array(P.dtype, (n,), align=1024)
    bar = tylo.shared_array(tylo.u64, (1,), align=8)
    tid = tylo.thread_idx.x
    if tid == 0:
        mb.mbarrier_init(bar.ptr, 1)
        mb.fence_mbarrier_init()
    tylo.sync_threads()
    if tid == 0:
        mb.mbarrier_arrive_expect_tx(bar.ptr, tma.transfer_bytes(P))
        tma.tma_load(tma.shared_tile(src_map, smem.ptr), src_map, (r0, c0), bar.ptr)
    if WAIT:
        mb.mbarrier_wait(bar.ptr, 0)
    copy_out(raw, smem, tid, n)    # a helper: hazards inside it name this line too
    mb.fence_view_async_shared()
    tylo.sync_threads()
    if tid == 0 and STORE:
        tma.tma_store(dst_map, tma.shared_tile(dst_map, smem.ptr), (r0, c0))
        tma.commit_tma_stores()
        tma.wait_tma_stores(0)


def _swizzled(plan, box):
    """Where the plan's shared layout (the layout algebra, not the interpreter) puts each element."""
    lay = shared_layout(plan)
    out = np.zeros(math.prod(plan.shape), box.dtype)
    for r in range(plan.shape[0]):
        for c in range(plan.shape[1]):
            out[lay((r, c))] = box[r, c]
    return out


@pytest.mark.parametrize("plan", [PLAN, PLAN64], ids=["bf16-128B", "f32-64B"])
@pytest.mark.parametrize("origin", [(0, 0), (8, 64), (-5, 3), (40, 100)])
def test_load_swizzles_and_zero_fills_and_store_clips(plan, origin):
    rng = np.random.default_rng(0)
    dt = ml_dtypes.bfloat16 if plan.dtype == tylo.bf16 else np.float32
    src = (rng.integers(1, 100, (50, 120))).astype(dt)
    dst = np.full((50, 120), -1, dt)
    raw = np.zeros(math.prod(plan.shape), dt)
    load_then_store[1, 32](raw, tylo.prepare_tma(plan, src), tylo.prepare_tma(plan, dst), *origin, plan,
                           STORE=origin[0] >= 0)
    r0, c0 = origin
    box = np.zeros(plan.shape, dt)
    for r in range(plan.shape[0]):
        for c in range(plan.shape[1]):
            if 0 <= r0 + r < 50 and 0 <= c0 + c < 120:
                box[r, c] = src[r0 + r, c0 + c]
    assert np.array_equal(raw, _swizzled(plan, box))
    if r0 < 0:
        return      # a store at a negative coordinate faults on the GPU: not run here
    want = np.full((50, 120), -1, dt)
    rows, cols = slice(r0, min(50, r0 + plan.shape[0])), slice(c0, min(120, c0 + plan.shape[1]))
    want[rows, cols] = box[:rows.stop - r0, :cols.stop - c0]
    assert np.array_equal(dst, want)


def test_store_writes_whole_16_byte_chunks_past_an_inner_bound():
    # bounds (rows 16, columns 60) inside a 64-column array: columns 60..63 share a 16-byte chunk with 56..59,
    # so the store writes them too (what the H200 does, docs/hopper.md); loads zero-fill them
    src = np.arange(16 * 64, dtype=np.float32).reshape(16, 64).astype(ml_dtypes.bfloat16)
    dst = np.full((16, 64), -1, ml_dtypes.bfloat16)
    raw = np.zeros(ELEMS, ml_dtypes.bfloat16)
    load_then_store[1, 32](raw, tylo.prepare_tma(PLAN, src), tylo.prepare_tma(PLAN, dst, bounds=(16, 60)), 0, 0, PLAN)
    assert np.array_equal(dst[:, :56], src[:, :56])
    assert np.array_equal(dst[:, 56:], src[:, 56:])       # 60..63 written with the chunk (src's data: not masked)


def test_reading_before_the_wait_is_a_hazard():
    src = np.ones((16, 64), ml_dtypes.bfloat16)
    with pytest.raises(HazardError, match="TMA load") as e:
        load_then_store[1, 32](np.zeros(ELEMS, ml_dtypes.bfloat16), tylo.prepare_tma(PLAN, src),
                               tylo.prepare_tma(PLAN, np.zeros_like(src)), 0, 0, PLAN, False)
    lines = open(__file__).read().splitlines()
    load = 1 + next(i for i, t in enumerate(lines) if "tma.tma_load(tma.shared_tile(src_map" in t)
    read = 1 + next(i for i, t in enumerate(lines) if "raw[i] = smem.ptr[i]" in t)
    call = 1 + next(i for i, t in enumerate(lines) if "copy_out(raw, smem, tid, n)    #" in t)
    assert f"test_tma_mbarrier.py:{load}:" in str(e.value) and f"test_tma_mbarrier.py:{read}:" in str(e.value)
    # the read is in the helper copy_out: the report adds the kernel line that inlined it
    assert f"test_tma_mbarrier.py:{read}:18 (inlined at {__file__}:{call}:5)" in str(e.value)



@tylo.jit(interpret=True)
def barrier_misuse(KIND: tylo.constexpr):
    bar = tylo.shared_array(tylo.u64, (1,), align=8)
    tid = tylo.thread_idx.x
    if tid == 0:
        mb.mbarrier_init(bar.ptr, 2)
    tylo.sync_threads()
    if KIND == "over":
        if tid == 0:
            mb.mbarrier_arrive(bar.ptr)
            mb.mbarrier_arrive(bar.ptr)
    if KIND == "reinit":
        if tid == 0:
            mb.mbarrier_arrive(bar.ptr)
            mb.mbarrier_init(bar.ptr, 2)
    if KIND == "stale":
        if tid < 2:
            mb.mbarrier_arrive(bar.ptr)
        mb.mbarrier_wait(bar.ptr, 0)
        mb.mbarrier_wait(bar.ptr, 0)     # the same phase again: no wait for the next one
    if KIND == "deadlock":
        mb.mbarrier_wait(bar.ptr, 0)     # nobody arrives


@pytest.mark.parametrize("kind, message", [("over", "over-arrival"), ("reinit", "re-initialised in use"),
                                           ("stale", "wrong parity"), ("deadlock", "deadlock")])
def test_mbarrier_misuse_is_reported(kind, message):
    with pytest.raises(HazardError, match=message) as e:
        barrier_misuse[1, 64](kind)
    if kind == "deadlock":
        assert "warp 0 (32 threads): nv.mbarrier.wait at" in str(e.value)
        assert "warp 1 (32 threads): nv.mbarrier.wait at" in str(e.value)


@tylo.jit(interpret=True)
def named(out, MISMATCH: tylo.constexpr):
    tid = tylo.thread_idx.x
    s = tylo.shared_array(tylo.i32, (64,))
    s.ptr[tid] = tid
    if tid < 32 or not MISMATCH:
        mb.named_barrier_sync(1, 64)
    else:
        mb.named_barrier_sync(1, 96)
    out[tid] = s.ptr[63 - tid]


def test_named_barrier_orders_and_a_count_mismatch_is_reported():
    out = np.zeros(64, np.int32)
    named[1, 64](out, False)
    assert np.array_equal(out, np.arange(63, -1, -1))
    with pytest.raises(HazardError, match="named barrier count mismatch"):
        named[1, 64](out, True)


@tylo.jit(interpret=True)
def elect(out):
    if mb.elect_one():
        tylo.atomic_add(out, tylo.thread_idx.x + 1)


def test_elect_picks_one_lane_per_warp():
    out = np.zeros(1, np.int32)
    elect[1, 96](out)
    assert out[0] == 1 + 33 + 65


@tylo.jit(interpret=True)
def maxnreg(N: tylo.constexpr):
    mb.setmaxnreg_inc(N)


def test_setmaxnreg_is_checked():
    maxnreg[1, 128](232)
    # the frontend refuses a bad count; IR made otherwise is checked when it runs
    k = Kernel("k", [])
    Builder(k.body).create("nv.setmaxnreg", [], [], {"action": "inc", "count": 230})
    with pytest.raises(InterpreterError, match="multiple of 8"):
        run(k, [], block=(128,))


@tylo.jit(interpret=True)
def multicast(raw, src_map, P: tylo.constexpr):
    n = P.shape[0] * P.shape[1]
    smem = tylo.shared_array(P.dtype, (n,), align=1024)
    bar = tylo.shared_array(tylo.u64, (1,), align=8)
    tid = tylo.thread_idx.x
    rank = mb.cluster_ctarank()
    if tid == 0:
        mb.mbarrier_init(bar.ptr, 1)
        mb.fence_mbarrier_init()
        mb.mbarrier_arrive_expect_tx(bar.ptr, tma.transfer_bytes(P))   # each CTA expects the bytes
    mb.cluster_sync()                       # every CTA's barrier is ready before the multicast
    if rank == 0 and tid == 0:
        tma.tma_load_tile(P, src_map, tma.shared_tile(P, smem.ptr), (8, 64), bar.ptr, multicast=3)
    mb.mbarrier_wait(bar.ptr, 0)
    for i in range(tid, n, 32):
        raw[tylo.block_idx.x * n + i] = smem.ptr[i]
    mb.cluster_sync()


def test_multicast_load_lands_in_every_cta_of_the_cluster():
    src = np.arange(50 * 200, dtype=np.float32).reshape(50, 200).astype(ml_dtypes.bfloat16)
    raw = np.zeros(4 * ELEMS, ml_dtypes.bfloat16)
    multicast.launch(raw, tylo.prepare_tma(PLAN, src), PLAN, grid=4, block=32, cluster=2)
    want = _swizzled(PLAN, src[8:24, 64:128])
    for cta in range(4):
        assert np.array_equal(raw[cta * ELEMS:(cta + 1) * ELEMS], want), cta


@tylo.jit(interpret=True)
def batched(raw, src_map, r0, c0, b0, P: tylo.constexpr):
    n = P.shape[0] * P.shape[1]
    smem = tylo.shared_array(P.dtype, (n,), align=1024)
    bar = tylo.shared_array(tylo.u64, (1,), align=8)
    tid = tylo.thread_idx.x
    if tid == 0:
        mb.mbarrier_init(bar.ptr, 1)
        mb.fence_mbarrier_init()
        mb.mbarrier_arrive_expect_tx(bar.ptr, tma.transfer_bytes(P))
        tma.tma_load(tma.shared_tile(src_map, smem.ptr), src_map, (r0, c0, b0), bar.ptr)
    tylo.sync_threads()                     # the other threads wait on the barrier only after its init
    mb.mbarrier_wait(bar.ptr, 0)
    for i in range(tid, n, 32):
        raw[i] = smem.ptr[i]


def test_3d_box_loads_one_matrix_of_the_batch_and_zero_fills_past_the_batch():
    src = np.arange(3 * 20 * 64, dtype=np.float32).reshape(3, 20, 64).astype(ml_dtypes.bfloat16)
    raw = np.zeros(ELEMS, ml_dtypes.bfloat16)
    batched[1, 32](raw, tylo.prepare_tma(PLAN, src), 10, 0, 2, PLAN)
    box = np.zeros(PLAN.shape, ml_dtypes.bfloat16)
    box[:10] = src[2, 10:20]
    assert np.array_equal(raw, _swizzled(PLAN, box))
    batched[1, 32](raw, tylo.prepare_tma(PLAN, src), 0, 0, 3, PLAN)     # past the batch: all zero
    assert not raw.astype(np.float32).any()


@tylo.jit(interpret=True)
def spin(out, ARRIVE: tylo.constexpr):
    bar = tylo.shared_array(tylo.u64, (1,), align=8)
    tid = tylo.thread_idx.x
    if tid == 0:
        mb.mbarrier_init(bar.ptr, 1)
    tylo.sync_threads()
    if tid == 32 and ARRIVE:
        out[0] = 7
        mb.mbarrier_arrive(bar.ptr)
    if tid == 0:
        while not mb.mbarrier_try_wait(bar.ptr, 0):
            pass
        out[1] = out[0] + 1


def test_a_try_wait_spin_loop_lets_the_other_warps_run_and_a_hung_one_is_reported(monkeypatch):
    out = np.zeros(2, np.int32)
    spin[1, 64](out, True)
    assert list(out) == [7, 8]
    import tylo.interpreter.mbarrier as imb
    monkeypatch.setattr(imb, "SPIN_LIMIT", 200)
    with pytest.raises(HazardError, match="spun on mbarrier.try_wait"):
        spin[1, 64](out, False)


@tylo.jit(interpret=True)
def cluster_handoff(out, RELAXED: tylo.constexpr):
    box = tylo.shared_array(tylo.i32, (1,), align=8)
    tid = tylo.thread_idx.x
    if tid == 0:
        box.ptr[0] = 5 + tylo.block_idx.x
    mb.cluster_sync(relaxed=RELAXED)          # warp 1 reads what warp 0 wrote
    if tid == 32:
        out[tylo.block_idx.x] = box.ptr[0]


def test_cluster_barrier_publishes_writes_unless_relaxed():
    # barrier.cluster.arrive (release) + wait (acquire) orders warp 0's shared write before warp 1's read
    out = np.zeros(2, np.int32)
    cluster_handoff.launch(out, False, grid=2, block=64, cluster=2)
    assert out.tolist() == [5, 6]
    # .relaxed orders nothing (PTX ISA barrier.cluster): the same handoff is a race
    with pytest.raises(HazardError, match="shared read racing with another warp.s write"):
        cluster_handoff.launch(np.zeros(2, np.int32), True, grid=2, block=64, cluster=2)



@pytest.mark.parametrize("relaxed,arrive", [(False, "barrier.cluster.arrive.release.aligned;"),
                                            (True, "barrier.cluster.arrive.relaxed.aligned;")])
def test_cluster_arrive_ptx(relaxed, arrive):
    ck = cluster_handoff.compile(signature=["*i32"], constexprs={"RELAXED": relaxed}, arch="sm_90a", block=64)
    assert ck.ptx.count(arrive) == 1
    assert ck.ptx.count("barrier.cluster.wait.acquire.aligned;") == 1


def test_relaxed_must_be_a_compile_time_bool():
    @tylo.jit
    def runtime_relaxed(n):
        mb.cluster_sync(relaxed=n > 0)

    with pytest.raises(tylo.CompileError, match="relaxed must be a compile-time bool") as err:
        runtime_relaxed.compile(signature=["i32"], arch="sm_90a")
    assert "test_tma_mbarrier.py" in str(err.value)


@tylo.jit(interpret=True)
def relaxed_init(out, FENCE: tylo.constexpr):
    bar = tylo.shared_array(tylo.u64, (1,), align=8)
    tid = tylo.thread_idx.x
    if tid == 0:
        mb.mbarrier_init(bar.ptr, 1)
        if FENCE:
            mb.fence_mbarrier_init()
    mb.cluster_sync(relaxed=True)            # warp 1 arrives on the barrier warp 0 initialised
    if tid == 32:
        mb.mbarrier_arrive(bar.ptr)
    mb.mbarrier_wait(bar.ptr, 0)
    if tid == 0:
        out[tylo.block_idx.x] = 1


def test_fence_mbarrier_init_with_a_relaxed_cluster_arrival_orders_the_init():
    # CUTLASS's and Gluon's start: mbarrier.init; fence.mbarrier_init.release.cluster; barrier.cluster.arrive.relaxed
    out = np.zeros(2, np.int32)
    relaxed_init.launch(out, True, grid=2, block=64, cluster=2)
    assert out.tolist() == [1, 1]
    # without the fence the relaxed arrival publishes nothing: the init is not ordered before warp 1's arrival
    with pytest.raises(HazardError, match="mbarrier not initialised"):
        relaxed_init.launch(np.zeros(2, np.int32), False, grid=2, block=64, cluster=2)


@tylo.jit(interpret=True)
def remote_signal(out, WAIT: tylo.constexpr):
    # rank 1 arrives on rank 0's barrier; rank 0 waits for it (WAIT) or exits at once
    bar = tylo.shared_array(tylo.u64, (1,), align=8)
    tid = tylo.thread_idx.x
    rank = mb.cluster_ctarank()
    if tid == 0:
        mb.mbarrier_init(bar.ptr, 1)
        mb.fence_mbarrier_init()
    mb.cluster_sync(relaxed=True)
    if rank == 1:
        if tid == 0:
            mb.mbarrier_arrive_cluster(bar.ptr, 0)
    elif WAIT:
        mb.mbarrier_wait(bar.ptr, 0)
    if tid == 0:
        out[rank] = 1


def test_a_remote_access_to_an_exited_cta_is_a_hazard(monkeypatch):
    # a CTA's shared memory is gone once all its threads return (on the GPU another CTA may own it): a
    # peer's arrival must be one the CTA waits for, unless a cluster barrier keeps every CTA alive
    for seed in range(4):
        monkeypatch.setenv("TYLO_INTERPRET_SEED", str(seed))
        out = np.zeros(2, np.int32)
        remote_signal.launch(out, True, grid=2, block=32, cluster=2)
        assert out.tolist() == [1, 1]
    with pytest.raises(HazardError, match="remote access to an exited CTA"):
        for seed in range(8):       # some interleaving runs rank 0 to its end before rank 1 arrives
            monkeypatch.setenv("TYLO_INTERPRET_SEED", str(seed))
            remote_signal.launch(np.zeros(2, np.int32), False, grid=2, block=32, cluster=2)
