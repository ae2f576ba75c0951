"""Small kernels that together emit every hardware (``nv.*``) op, for the golden printed IR."""
import tylo
import tylo.lang.mbarrier as mb
import tylo.lang.tcgen05 as tc
import tylo.lang.tma as tma
import tylo.lang.wgmma as wg
from tylo import Layout, Ownership
from tylo.ir.types import bf16, f32
from tylo.lang.copy import commit_copies, cp_async, ldmatrix, stmatrix, wait_copies
from tylo.lang.mma import MMAAtom, mma_sync
from tylo.lang.sync import grid_dependency_wait, launch_dependents, wait_at_least
from tylo.lang.tcgen05 import Tcgen05MMA
from tylo.lang.tmem import TmemTile, TmemTransfer, partition
from tylo.layouts import window

ATOM = MMAAtom((16, 8, 16), bf16, bf16, f32)
WG_PLAN = wg.WGMMA64(bf16, n=16, k=64)
B_PLAN = tma.TMATile(bf16, (16, 64), axis=1)
TMA_PLAN = tma.TMATile(bf16, (64, 64), axis=1)
TC_PLAN = Tcgen05MMA((128, 64), bf16, bf16, f32)
TMEM = TmemTile(f32, 0, Layout((128, 512), (1, 128)))
TMEM_ACCESS = partition(TmemTransfer((32, 4), axis=1), window(TMEM, (32, 0), (32, 4)))


@tylo.jit
def copies(out, src):
    s = tylo.shared_array(tylo.bf16, (512,), align=16)
    tid = tylo.thread_idx.x
    cp_async(s.ptr + tid * 8, src + tid * 8, 16)
    cp_async(s.ptr + 256 + tid * 2, src + tid * 2, 4, src_bytes=2)
    commit_copies()
    wait_copies(0)
    tylo.sync_threads()
    r = ldmatrix(s.ptr + (tid % 16) * 8, 4)
    t = ldmatrix(s.ptr + (tid % 8) * 8, 1, trans=True)
    stmatrix(s.ptr + (tid % 16) * 8, (r[0], t[0]))
    out[tid] = r[0] + r[3] + t[0]


@tylo.jit
def warp_mma(a, b, c):
    lane = tylo.lane_id()
    av = [a[lane * 4 + i] for i in tylo.static_range(4)]
    bv = [b[lane * 2 + i] for i in tylo.static_range(2)]
    cv = [c[lane * 4 + i] for i in tylo.static_range(4)]
    d = mma_sync(ATOM, av, bv, cv)
    for i in tylo.static_range(4):
        c[lane * 4 + i] = d[i]


@tylo.jit
def barriers(out, n):
    bars = tylo.shared_array(tylo.u64, (2,))
    if mb.elect_one():
        mb.mbarrier_init(bars.ptr, 1)
    mb.fence_mbarrier_init()
    mb.fence_view_async_shared()
    mb.fence_proxy_async()
    st = mb.mbarrier_arrive(bars.ptr + 1)
    st2 = mb.mbarrier_arrive_expect_tx(bars.ptr, 1024)
    mb.mbarrier_expect_tx(bars.ptr, 16)
    ok = mb.mbarrier_try_wait(bars.ptr + 1, 0)
    mb.mbarrier_wait(bars.ptr, n & 1)
    mb.named_barrier_sync(1, 128)
    mb.named_barrier_arrive(2, 256)
    if mb.warpgroup_idx() == 0:
        mb.setmaxnreg_dec(40)
    else:
        mb.setmaxnreg_inc(232)
    mb.cluster_arrive()
    mb.cluster_wait()
    if ok:
        out[tylo.thread_idx.x] = st + st2


@tylo.jit
def cluster_barriers(rank):
    # a remote arrival: the barrier at this offset in CTA `rank` of the cluster
    bars = tylo.shared_array(tylo.u64, (1,))
    mb.mbarrier_arrive_cluster(bars.ptr, rank)
    # a remote store: each thread's four floats to the same offsets in CTA `rank`, counted off its barrier
    buf = tylo.shared_array(tylo.f32, (128,), align=16)
    tile = tylo.SharedTile(buf.ptr, Layout((32, 4), (4, 1)))
    tylo.store_remote(tile, tylo.load(tile, Ownership.local((32, 4), 1)), bars.ptr, rank)


@tylo.jit
def tma_copies(out, tmap, row):
    tile = tylo.shared_array(tylo.bf16, (64 * 64,), align=1024)
    bars = tylo.shared_array(tylo.u64, (1,))
    if tylo.thread_idx.x == 0:
        tma.prefetch_tma_descriptor(tmap)
        tma.tma_load_tile(TMA_PLAN, tmap, tile, (row, 0), bars.ptr)
        tma.tma_load_tile(TMA_PLAN, tmap, tile, (row, 0), bars.ptr, multicast=3)
        tma.tma_store_tile(TMA_PLAN, tmap, tile, (row, 64))
        tma.commit_tma_stores()
        tma.wait_tma_reads(0)
        tma.wait_tma_stores(1)


@tylo.jit
def wgmma(out, out_bf, a):
    sa = tylo.shared_array(tylo.bf16, (16 * 64,), align=1024)
    desc = wg.shared_address(sa).to(tylo.u64) >> 4
    acc = wg.zero_accumulators(8)
    acc = wg.wgmma_fence(acc)
    acc = wg.wgmma_mma_async(WG_PLAN, desc, desc + 64, acc)
    wg.wgmma_commit_group()
    acc = wg.wgmma_wait_group(0, acc, after=(desc.to(tylo.u32),))      # nv.wgmma.order_before_wait
    opa = tylo.load(tylo.GlobalTile(a, Layout((64, 64), (64, 1))), wg.a_register_ownership(WG_PLAN))
    opb = wg.wgmma_operand(WG_PLAN, wg.OperandB, tma.shared_tile(B_PLAN, sa))
    acc2 = wg.wait_mma(wg.mma_async(WG_PLAN, opa, opb, tylo.zero_accumulator(WG_PLAN)))
    for i in tylo.static_range(8):
        out[tylo.thread_idx.x * 8 + i] = acc[i]
    f = wg.finish_mma(acc2)
    tylo.store(tylo.GlobalTile(out, Layout((64, 16), (16, 1))), f)
    tylo.store(tylo.GlobalTile(out_bf, Layout((64, 16), (16, 1))), tylo.unpack(tylo.pack(tylo.bf16, f)))
    tylo.printf("thread %d done\n", tylo.thread_idx.x)


@tylo.jit
def tcgen05(out, descs):
    slot = tylo.shared_array(tylo.u32, 1)
    bar = tylo.shared_array(tylo.u64, 1)
    tc.tmem_alloc(256, slot)
    tc.tmem_relinquish_alloc_permit()
    tylo.sync_threads()
    tc.fence_after_thread_sync()
    d = slot[0]
    if tylo.thread_idx.x == 0:
        tc.tcgen05_mma(TC_PLAN, d, descs[0], descs[1], False)
        tc.tcgen05_commit(bar)
        tc.commit_mma(bar, 1, 3)
    done = tc.wait_load(tc.load_async(TMEM_ACCESS, d))
    tc.store_async(TMEM_ACCESS, done.values, d)
    tc.wait_stores()
    tc.fence_before_thread_sync()
    tylo.sync_threads()
    tc.tmem_dealloc(d, 256)
    out[tylo.thread_idx.x] = done.values[0]


@tylo.jit
def counter_wait(counter, n):
    # one thread counts its CTA in and waits for n arrivals (a flag between CTAs)
    if tylo.thread_idx.x == 0:
        tylo.atomic_add(counter, 1)
        wait_at_least(counter, n)
        if not wait_at_least(counter, n + 1, 16):      # a bounded wait: false after 16 loads
            tylo.atomic_add(counter, -1)


@tylo.jit
def grid_dependency(x, y):
    # programmatic dependent launch: let the next grid start, wait for the previous one before touching memory
    launch_dependents()
    grid_dependency_wait()
    i = tylo.thread_idx.x
    y[i] = x[i] + 1.0


@tylo.jit(debug=True)
def assertions(x, n):
    i = tylo.thread_idx.x
    tylo.device_assert(i < n, "i < n")
    assert x[i] > 0, "x must be positive"


def assume_ir():
    """``nv.assume`` has a lowering and semantics but no builtin emits it yet: its printed form
    comes from IR built directly."""
    from tylo.ir import Builder, Kernel
    from tylo.ir import types as T

    k = Kernel("assume", [("n", T.i32)])
    b = Builder(k.body)
    n = k.params[0].value
    positive = b.value("arith.cmp", [n, b.constant(0, T.i32)], T.bool_, pred="gt")
    b.create("nv.assume", [positive], [])
    return k


# IR built without the frontend: name -> function returning a tylo.ir.Kernel
NV_IR = {"assume": assume_ir}

# name -> (kernel, signature, arch)
NV_KERNELS = {
    "copies": (copies, "*bf16, *bf16", "sm_90a"),
    "warp_mma": (warp_mma, "*u32, *u32, *f32", "sm_80"),
    "barriers": (barriers, "*u64, i32", "sm_90a"),
    "cluster_barriers": (cluster_barriers, "i32", "sm_90a"),
    "tma_copies": (tma_copies, "*f32, u64, i32", "sm_90a"),
    "wgmma": (wgmma, "*f32, *bf16, *bf16", "sm_90a"),
    "tcgen05": (tcgen05, "*f32, *u64", "sm_100a"),
    "assertions": (assertions, "*f32, i32", "sm_80"),
    "counter_wait": (counter_wait, "*i32, i32", "sm_80"),
    "grid_dependency": (grid_dependency, "*f32, *f32", "sm_90"),
}
