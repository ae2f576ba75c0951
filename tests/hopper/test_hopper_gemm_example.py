"""examples/hopper_gemm.py assembled for sm_90a (no GPU): the warp-specialised TMA + WGMMA
pipeline is all there, with no spills and no local memory. Prints registers and compile time."""
import os
import re
import sys
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import hopper_gemm as hg  # noqa: E402

import tylo  # noqa: E402


@pytest.mark.parametrize("stages, c_bufs, a_mn, b_mn, dtype", [(4, 2, False, False, "bf16"),
                                                                (3, 4, False, False, "bf16"),
                                                                (4, 2, True, True, "bf16"),
                                                                (4, 2, False, False, "f8e4m3")])
def test_hopper_gemm_assembles_for_sm90a(stages, c_bufs, a_mn, b_mn, dtype, capsys):
    t0 = time.perf_counter()
    dt = getattr(tylo, dtype)
    ck = hg.hopper_gemm._compile(hg.spec(stages=stages, c_bufs=c_bufs, a_mn=a_mn, b_mn=b_mn, dtype=dt), "sm_90a",
                                 (hg.THREADS, 1, 1))
    seconds = time.perf_counter() - t0
    ptx = ck.ptx
    assert ".local" not in ptx and "call.uni" not in ptx
    assert ck.resources.spill_bytes == 0 and ck.resources.stack_bytes == 0
    # four instructions per K step (k16 for bf16, k32 for fp8: a 128-byte row either way); the first
    # step of a tile is peeled, the rest loop at runtime
    shape = "m64n256k16.f32.bf16.bf16" if dtype == "bf16" else "m64n256k32.f32.e4m3.e4m3"
    wgmmas = re.findall(r"wgmma\.mma_async\.sync\.aligned\." + re.escape(shape) + r" [^;]*;", ptx)
    assert len(wgmmas) == 8
    # the transpose immediates follow the operand majors (MN-major: 1)
    if dtype == "bf16":     # fp8 WGMMA has no transpose immediates (K-major only)
        assert all(w.rstrip(";").endswith(f"1, 1, {int(a_mn)}, {int(b_mn)}") for w in wgmmas)
    groups = 1 if dtype == "bf16" else 2          # fp8 plans stop at K = 64: two groups per K step
    assert f"wgmma.wait_group.sync.aligned {groups}" in ptx and "wgmma.wait_group.sync.aligned 0" in ptx
    loads = ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes")
    per_stage = (hg.BM // 64 if a_mn else 1) + (hg.BN // 64 if b_mn else 1)    # one copy per TMA box
    assert loads >= per_stage and loads % per_stage == 0   # (LLVM may unroll the producer loop)
    assert "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in ptx
    assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 40" in ptx and "setmaxnreg.inc.sync.aligned.u32 232" in ptx
    assert re.search(r"\.maxntid 384, 1, 1", ptx)
    # 384 threads must fit the register file at launch: <= 168 registers per thread
    assert ck.resources.registers <= 168
    smem = ck.shared_bytes
    assert smem == stages * hg.STAGE_BYTES + 2 * c_bufs * 8192 + 2 * stages * 8 and smem <= 232448
    with capsys.disabled():
        print(f"\nhopper_gemm STAGES={stages} C_BUFS={c_bufs}: {ck.resources.registers} registers, "
              f"{ck.resources.spill_bytes} spill bytes, {smem} B dynamic shared, "
              f"compile {seconds:.2f} s{' (cache hit)' if ck.from_cache else ''} {ck.compile_ms}")
    assert seconds < 20 or ck.from_cache


def test_launch_rejects_unaligned_rows():
    with pytest.raises(ValueError, match="N \\(100\\) must be a multiple of 8"):
        hg.launch(None, None, None, 64, 100, 64, config=hg.GemmConfig())
    with pytest.raises(ValueError, match="positive"):
        hg.launch(None, None, None, 0, 64, 64)


def test_grouped_rasterisation_covers_every_tile_once():
    # host replica of tile_coords (the kernel helper is pure integer arithmetic)
    for num_m, num_n, g in [(7, 5, 8), (16, 3, 8), (9, 9, 4), (1, 1, 8)]:
        seen = set()
        for t in range(num_m * num_n):
            per = g * num_n
            first = (t // per) * g
            rows = min(num_m - first, g)
            local = t % per
            seen.add((first + local % rows, local // rows))
        assert seen == {(m, n) for m in range(num_m) for n in range(num_n)}


# -- small and ragged shapes: configurations, heuristic, argument checks -----------------------------

SMALL_CONFIGS = [hg.GemmConfig(consumers=1, stages=5), hg.GemmConfig(consumers=1, tn=128, stages=8),
                 hg.GemmConfig(consumers=1, tn=8, stages=8, swap_ab=True, direct=True),
                 hg.GemmConfig(consumers=2, tn=16, stages=8, swap_ab=True, direct=True),
                 hg.GemmConfig(split_k=2), hg.GemmConfig(split_k=2, direct=True),
                 hg.GemmConfig(consumers=1, tn=128, stages=8, split_k=3),
                 hg.GemmConfig(consumers=1, tn=16, stages=8, swap_ab=True, split_k=4, direct=True),
                 hg.GemmConfig(stream_k=True), hg.GemmConfig(consumers=1, tn=64, stages=8, stream_k=True),
                 hg.GemmConfig(tn=192, stages=4)]


@pytest.mark.parametrize("cfg", SMALL_CONFIGS, ids=repr)
@pytest.mark.parametrize("dtype", ["bf16", "f8e4m3"])
def test_small_configs_assemble_without_spills(cfg, dtype):
    dt = getattr(tylo, dtype)
    ck = hg.hopper_gemm._compile(hg.spec(dtype=dt, config=cfg), "sm_90a", (cfg.threads, 1, 1))
    ptx = ck.ptx
    assert ".local" not in ptx and "call.uni" not in ptx
    assert ck.resources.spill_bytes == 0 and ck.resources.stack_bytes == 0
    k = 16 if dtype == "bf16" else 32
    assert f"wgmma.mma_async.sync.aligned.m64n{cfg.tn}k{k}." in ptx
    assert re.search(rf"\.maxntid {cfg.threads}, 1, 1", ptx)
    assert ck.shared_bytes <= cfg.shared_bytes <= hg.SHARED_LIMIT
    assert ("setmaxnreg" in ptx) == (cfg.consumers == 2)
    # the register epilogue writes C directly, the TMA one never does
    assert ("cp.async.bulk.tensor.2d.global.shared::cta" in ptx) == (not cfg.direct)
    assert bool(re.search(r"st\.global(\.v\d)?\.b16", ptx)) == cfg.direct
    # the fixup: 16-byte f32 partial stores and loads in register order, a release fence before the
    # arrival count and an acquire fence after it; nothing of it without split-K / stream-K
    fixup = ["fence.acq_rel.gpu;", "atom.global.add.u32", "atom.global.exch.b32", "st.global.v4.b32",
             "ld.global.v4.b32"]
    assert [f in ptx for f in fixup] == [cfg.fixup] * len(fixup)
    if cfg.fixup:
        assert ptx.count("fence.acq_rel.gpu;") == 2
        assert ptx.count("st.global.v4.b32") == cfg.tn // 8      # tn / 2 f32 per thread, 4 per store
        # the last arriver loads the partials u at a time and the remainder (u - 1, ..., 1 of them) as one group:
        # the code holds u + (u - 1) + ... + 1 partial loads, each tn / 8 16-byte loads per thread
        u = hg.reduction_unroll(cfg.tn, cfg.consumers)
        assert ptx.count("ld.global.v4.b32") == cfg.tn // 8 * u * (u + 1) // 2


@pytest.mark.parametrize("cfg", [hg.GemmConfig(split_k=3), hg.GemmConfig(consumers=1, tn=64, split_k=16),
                                 hg.GemmConfig(stream_k=True), hg.GemmConfig(consumers=1, tn=128, stream_k=True),
                                 hg.GemmConfig(split_k=3, split_tail=True),
                                 hg.GemmConfig(consumers=1, tn=64, split_k=16, split_tail=True)],
                         ids=repr)
@pytest.mark.parametrize("shape", [(1, 8, 8), (64, 1024, 8192), (257, 776, 4104), (1000, 1000, 1000),
                                   (3000, 5000, 2000), (8192, 8192, 8192), (128, 256, 64 * 7)])
@pytest.mark.parametrize("sms", [4, 132])
def test_schedules_cover_every_k_step_once(cfg, shape, sms):
    # host replica of the kernel's job_range / segment walk and of the fixup's bookkeeping
    M, N, K = shape
    tiles, ktiles = -(-M // cfg.tm) * -(-N // cfg.tn), -(-K // 64)
    cut = tiles % sms if cfg.split_tail else tiles          # split_tail: only the tiles past the last full wave
    if cfg.split_k > 1 and cut * cfg.split_k * cut * ktiles >= 2 ** 31:
        with pytest.raises(ValueError, match="overflow the kernel's 32-bit share arithmetic"):
            hg.schedule(cfg, M, N, K, 2, sms)
        assert hg.estimate_seconds(cfg, M, N, K, 2, sms) == float("inf")        # never chosen
        return
    plan = hg.schedule(cfg, M, N, K, 2, sms)
    assert plan.grid <= sms and plan.dp_tiles % plan.grid == 0 if plan.workers else plan.dp_tiles == plan.tiles
    covered = np.zeros(plan.tiles * plan.ktiles, np.int32)
    pieces = {}
    slots = set()
    for t in range(plan.dp_tiles):
        covered[t * plan.ktiles:(t + 1) * plan.ktiles] += 1
    for w in range(plan.workers):
        start, end = plan.worker_range(w)
        assert end > start                      # no empty worker
        covered[plan.dp_tiles * plan.ktiles + start:plan.dp_tiles * plan.ktiles + end] += 1
        it = start
        while it < end:
            u, kb = divmod(it, plan.ktiles)
            ke = min(plan.ktiles, kb + end - it)
            if (kb, ke) != (0, plan.ktiles):
                slot = 2 * w + (start < u * plan.ktiles)
                assert slot not in slots
                slots.add(slot)
                pieces.setdefault(u, []).append(w)
            it += ke - kb
    assert (covered == 1).all()
    for u, ws in pieces.items():
        base = u * plan.ktiles
        first = ((base + 1) * plan.workers - 1) // plan.sk_iters
        last = ((base + plan.ktiles) * plan.workers - 1) // plan.sk_iters
        assert ws == list(range(first, last + 1))         # the fixup's worker order is the K order
    if cfg.split_k > 1:
        assert all(len(ws) == min(cfg.split_k, plan.ktiles) for ws in pieces.values())
        assert plan.dp_tiles == (tiles - cut if plan.workers else tiles) and len(pieces) == plan.cut_tiles
    elif plan.tiles > sms:
        assert all(len(ws) <= 3 for ws in pieces.values())
    assert plan.cut_tiles >= len(pieces)


@pytest.mark.parametrize("M,N,K", [(1, 4096, 4096), (16, 8192, 8192), (64, 8192, 8192), (128, 8192, 8192),
                                   (256, 4096, 8192), (3000, 5000, 2000), (8192, 8192, 8192), (5, 7, 3)])
def test_heuristic_choices(M, N, K):
    cfg = hg.choose_config(M, N, K, tylo.bf16, 132, True, False)
    est = lambda c: hg.estimate_seconds(c, M, N, K, 2, 132)  # noqa: E731
    # never worse (by the model) than the default, and legal for the operands
    assert est(cfg) <= est(hg.GemmConfig(direct=N % 8 != 0))
    assert cfg.shared_bytes <= hg.SHARED_LIMIT
    if N % 8:
        assert cfg.direct
    if M <= 16 and N >= 64:       # decode: the small M becomes the WGMMA's N (5 x 7: either way one tile)
        assert cfg.swap_ab and cfg.tn == max(8, -(-M // 8) * 8)
    if M >= 2048 and N >= 2048:
        assert (cfg.tm, cfg.tn, cfg.split_k) == (128, 256, 1)     # large shapes keep the 128 x 256 tile
    mk, nk = (N, M) if cfg.swap_ab else (M, N)
    plan = hg.schedule(cfg, mk, nk, K, 2, 132)
    if M <= 256 and N >= 4096:
        assert plan.dp_tiles + plan.workers >= 64, cfg          # small problems are spread over at least half the GPU


def test_heuristic_respects_operand_majors():
    # column-major A (MN-major kernel B after a swap) needs tn % 64 == 0; fp8 choices keep K-major rules
    for M in (1, 16, 64):
        cfg = hg.choose_config(M, 8192, 8192, tylo.bf16, 132, False, False)
        assert not cfg.swap_ab or cfg.tn % 64 == 0
        cfg = hg.choose_config(M, 8192, 8192, tylo.bf16, 132, True, False)
        assert not (not cfg.swap_ab and cfg.tn % 64)


def test_config_validation():
    with pytest.raises(ValueError, match="two schedules"):
        hg.GemmConfig(split_k=2, stream_k=True)
    with pytest.raises(ValueError, match="direct=True"):
        hg.GemmConfig(tn=24, consumers=1, stages=4)
    # any multiple of 16 stores through TMA, in boxes of the widest of 64, 32 and 16 columns dividing it
    assert hg.GemmConfig(tn=16, consumers=1, stages=4).direct is False
    assert [hg.c_tile(tn).shape for tn in (64, 256, 96, 160, 80, 144, 16)] == [(64, 64)] * 2 + [(64, 32)] * 2 + [(64, 16)] * 3
    assert [hg.c_chunk_boxes(144, j) for j in range(3)] == [4, 4, 1] and hg.c_chunk_columns(144, 2) == 16
    # swap-AB stores its C^T through TMA too, for any multiple of 8: boxes of 64 columns of C by the tallest of
    # 64, 32, 16 and 8 rows dividing tn, stacked down each chunk
    assert hg.GemmConfig(tn=8, consumers=1, stages=4, swap_ab=True).c_transposed
    assert not hg.GemmConfig(tn=8, consumers=1, stages=4, swap_ab=True, direct=True).c_transposed
    assert [hg.c_tile(tn, True).shape for tn in (64, 256, 96, 40, 8)] == [(64, 64)] * 2 + [(32, 64), (8, 64), (8, 64)]
    assert [hg.c_chunk_boxes(96, j, True) for j in range(2)] == [2, 1] and hg.c_chunk_boxes(40, 0, True) == 5
    with pytest.raises(ValueError, match="tn is a multiple of 8"):
        hg.GemmConfig(tn=12, direct=True)
    with pytest.raises(ValueError, match="consumers"):
        hg.GemmConfig(consumers=3)
    with pytest.raises(ValueError, match="shared memory"):
        hg.GemmConfig(stages=6)
    with pytest.raises(TypeError, match="GemmConfig"):
        hg.launch(None, None, None, 8, 8, 8, config={"tn": 8})
    for c in hg.candidate_configs(16, 8192, 8192):
        assert c.shared_bytes <= hg.SHARED_LIMIT


def test_autotuner_varies_only_stages_and_rasterisation_within_a_family():
    from tylo.autotuner import Autotuner
    family = hg.choose_config(16, 8192, 8192, tylo.bf16, 132, True, True)
    tuner = hg.autotuner(family)
    assert isinstance(tuner, Autotuner) and hg.autotuner(family) is tuner      # one per family
    assert tuner.key == ["M", "N", "K", "A_MN", "B_MN"]
    assert {frozenset(c.constexprs) for c in tuner.configs} == {frozenset({"STAGES", "GROUP_M"})}
    assert all(c.threads == family.threads for c in tuner.configs)
    stages = {c.constexprs["STAGES"] for c in tuner.configs}
    assert max(stages) == family.stages and min(stages) >= 2
    # every variant of the family fits: the deepest compiles within the shared-memory limit
    deepest = hg.GemmConfig(**{**family.__dict__, "stages": max(stages)})
    ck = hg.hopper_gemm._compile(hg.spec(config=deepest, b_mn=False), "sm_90a", (deepest.threads, 1, 1))
    assert ck.shared_bytes <= hg.SHARED_LIMIT and ck.resources.spill_bytes == 0
    assert hg.autotuner(hg.GemmConfig()) is not tuner
    # families of one tile under other schedules get their own tuners, and their configs other names: the
    # persisted winner's identity hashes the configs, so it is never served across schedules
    plain, split, tail = (hg.autotuner(hg.GemmConfig(**kw)) for kw in ({}, {"split_k": 2},
                                                                        {"split_k": 2, "split_tail": True}))
    assert len({id(plain), id(split), id(tail)}) == 3
    names = [{c.name for c in t.configs} for t in (plain, split, tail)]
    assert not (names[0] & names[1] or names[1] & names[2] or names[0] & names[2])


# -- 2 x 1 clusters sharing B through TMA multicast ------------------------------------------------------

@pytest.mark.parametrize("cfg,b_mn", [(hg.GemmConfig(cluster_m=2), False), (hg.GemmConfig(cluster_m=2), True),
                                      (hg.GemmConfig(consumers=1, tn=64, stages=8, cluster_m=2, direct=True), False)],
                         ids=repr)
def test_cluster_config_assembles_with_multicast_b(cfg, b_mn):
    ck = hg.hopper_gemm._compile(hg.spec(config=cfg, b_mn=b_mn), "sm_90a", (cfg.threads, 1, 1))
    ptx = ck.ptx
    assert ".local" not in ptx and "call.uni" not in ptx
    assert ck.resources.spill_bytes == 0 and ck.resources.stack_bytes == 0
    load = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
    multicast = ptx.count(load + ".multicast::cluster")
    a_loads = ptx.count(load) - multicast
    # every copy of the producer's step (LLVM may duplicate it) loads A for this CTA and B for both:
    # one multicast copy per B box
    b_boxes = cfg.tn // 64 if b_mn else 1
    assert a_loads >= 1 and multicast == a_loads * b_boxes
    # two releases of a stage per consumer (its own CTA's barrier and the peer's), through mapa;
    # one cluster barrier, relaxed, after the barriers' init; none before exit (the producer's load tail:
    # one more wait on the empty barriers, after the loop)
    assert ptx.count("mapa.shared::cluster.u32") == 4
    assert ptx.count("mbarrier.arrive.shared::cluster.b64") == 4
    assert "mbarrier.arrive.shared::cta.b64" not in ptx
    assert ptx.count("barrier.cluster.arrive.relaxed.aligned") == 1
    assert "barrier.cluster.arrive.release" not in ptx
    assert ck.shared_bytes <= cfg.shared_bytes <= hg.SHARED_LIMIT


@pytest.mark.parametrize("cfg", [hg.GemmConfig(cluster_m=2, cluster_n=2),
                                 hg.GemmConfig(consumers=1, tn=128, stages=8, cluster_m=2, cluster_n=4)], ids=repr)
def test_two_dimensional_cluster_assembles_with_both_operands_multicast(cfg):
    ck = hg.hopper_gemm._compile(hg.spec(config=cfg), "sm_90a", (cfg.threads, 1, 1))
    ptx = ck.ptx
    assert ".local" not in ptx and "call.uni" not in ptx
    assert ck.resources.spill_bytes == 0 and ck.resources.stack_bytes == 0
    load = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
    # A and B both shared (rows and columns of the cluster): every load multicasts
    assert ptx.count(load + ".multicast::cluster") >= 2 and ptx.count(load + " ") == 0
    # a stage's release reaches every CTA of the cluster, per consumer
    assert ptx.count("mbarrier.arrive.shared::cluster.b64") == 2 * cfg.cluster_size
    assert ck.shared_bytes <= cfg.shared_bytes <= hg.SHARED_LIMIT


def test_cluster_schedule_pairs_vertically_adjacent_tiles():
    cfg = hg.GemmConfig(cluster_m=2)
    # 4096^3: 32 x 16 tiles = 256 pairs on 66 clusters of 2 CTAs
    plan = hg.schedule(cfg, 4096, 4096, 4096, 2, 132)
    assert (plan.grid, plan.dp_tiles, plan.workers, plan.cluster, plan.job_slots) == (132, 256, 0, 2, 66)
    # an odd number of M tiles (3): the second pair's peer tile lies past M; an odd SM count rounds down
    plan = hg.schedule(cfg, 300, 512, 64, 2, 131)
    assert (plan.grid, plan.dp_tiles) == (8, 4)
    assert hg.schedule(cfg, 100, 256, 64, 2, 1).grid == 2           # one cluster at least
    # host replica of the kernel's walk: every tile of the matrix once, pairs on rows 2i, 2i + 1
    for M, N, sms in [(300, 776, 132), (1000, 5000, 8), (4096, 4096, 132)]:
        plan = hg.schedule(cfg, M, N, 64, 2, sms)
        num_m, num_n = -(-M // 128), -(-N // 256)
        num_g = -(-num_m // 2)
        seen = []
        for block in range(plan.grid):
            rank = block % 2
            for job in range(block // 2, plan.dp_tiles, plan.grid // 2):
                per = cfg.group_m * num_n
                first = (job // per) * cfg.group_m
                rows = min(num_g - first, cfg.group_m)
                pg, pn = first + job % per % rows, job % per // rows
                seen.append((pg * 2 + rank, pn))
        inside = [t for t in seen if t[0] < num_m]
        assert sorted(inside) == [(m, n) for m in range(num_m) for n in range(num_n)]
        assert len(seen) - len(inside) == (num_m % 2) * num_n       # only the odd row's peers fall past M


@pytest.mark.parametrize("cm,cn", [(2, 2), (4, 1), (1, 4), (2, 4), (4, 2)])
def test_cluster_schedule_covers_every_tile_once(cm, cn):
    # host replica of the kernel's walk (group_tile: rank r at row r % CLUSTER_M, column r // CLUSTER_M of a
    # CLUSTER_M x CLUSTER_N group): every tile of the matrix once; the peers past M or N store nothing
    cfg = hg.GemmConfig(consumers=1, tn=64, stages=8, cluster_m=cm, cluster_n=cn)
    cs = cm * cn
    for M, N, sms in [(300, 776, 132), (1000, 5000, 8), (200, 136, 132)]:
        plan = hg.schedule(cfg, M, N, 64, 2, sms)
        num_m, num_n = -(-M // 64), -(-N // 64)
        num_g, num_gn = -(-num_m // cm), -(-num_n // cn)
        assert plan.cluster == cs and plan.grid % cs == 0 and plan.dp_tiles == num_g * num_gn
        seen = []
        for block in range(plan.grid):
            rank = block % cs
            for job in range(block // cs, plan.dp_tiles, plan.grid // cs):
                per = cfg.group_m * num_gn
                first = (job // per) * cfg.group_m
                rows = min(num_g - first, cfg.group_m)
                pg, pgn = first + job % per % rows, job % per // rows
                seen.append((pg * cm + rank % cm, pgn * cn + rank // cm))
        inside = [t for t in seen if t[0] < num_m and t[1] < num_n]
        assert sorted(inside) == [(m, n) for m in range(num_m) for n in range(num_n)]
        assert len(seen) == plan.dp_tiles * cs


def test_cluster_multicast_masks():
    # A is shared by a cluster row (ranks r, r + CLUSTER_M, ...), B by a column (CLUSTER_M consecutive ranks)
    assert hg.row_mask(2, 4) == 0b01010101 and hg.row_mask(4, 2) == 0b00010001 and hg.row_mask(1, 4) == 0b1111
    assert hg.row_mask(2, 1) == 1


def test_cluster_config_validation():
    for bad in (dict(cluster_m=8), dict(cluster_n=3), dict(cluster_m=4, cluster_n=4), dict(cluster_m=0)):
        with pytest.raises(ValueError, match=r"each one of \(1, 2, 4\), at most 8 CTAs together"):
            hg.GemmConfig(**bad)
    assert hg.GemmConfig(cluster_m=2, cluster_n=4).cluster == (8, 1, 1)
    assert hg.GemmConfig(cluster_m=4, cluster_n=2).constexprs(tylo.bf16, False, False)[-4:-1] == (4, 2, 1)
    for along in ("cluster_m", "cluster_n"):
        with pytest.raises(ValueError, match="do not combine with split_k or stream_k"):
            hg.GemmConfig(**{along: 2}, split_k=2)
        with pytest.raises(ValueError, match="do not combine with split_k or stream_k"):
            hg.GemmConfig(**{along: 2}, stream_k=True)
    assert hg.GemmConfig(cluster_m=2).cluster == (2, 1, 1) and hg.GemmConfig().cluster is None
    assert hg.GemmConfig(cluster_n=2).cluster == (2, 1, 1)
    assert hg.GemmConfig(cluster_m=2).constexprs(tylo.bf16, False, False)[-4:-1] == (2, 1, 1)
    assert hg.GemmConfig(cluster_n=2).constexprs(tylo.bf16, False, False)[-4:-1] == (1, 2, 1)


def test_split_tail_config_validation_and_schedule():
    for bad in (dict(split_tail=True), dict(split_k=2, split_cluster=True, split_tail=True, consumers=1, tn=64,
                                            stages=8)):
        with pytest.raises(ValueError, match="split_tail"):
            hg.GemmConfig(**bad)
    cfg = hg.GemmConfig(split_k=2, split_tail=True)
    # 448 tiles of 128 x 256 on 132 SMs: three full waves whole, the 52 tiles past them in two K ranges each
    assert hg.schedule(cfg, 512, 28672, 8192, 2, 132) == hg.Schedule(132, 396, 104, 448, 128)
    # a whole number of waves: nothing to cut; fewer tiles than SMs: every tile cut, as split_k alone
    assert hg.schedule(cfg, 1024, 33 * 256, 8192, 2, 132) == hg.schedule(hg.GemmConfig(), 1024, 33 * 256, 8192, 2, 132)
    assert hg.schedule(cfg, 256, 4096, 8192, 2, 132) == hg.schedule(hg.GemmConfig(split_k=2), 256, 4096, 8192, 2, 132)
    assert cfg.fixup and "split_tail" not in repr(cfg.constexprs(tylo.bf16, False, False))   # host-side only


def test_finishing_a_tail_split_whose_plain_split_cannot_be_indexed():
    # 7168 tiles of 128 x 256 split 12: the plain split's shares overflow the kernel's 32-bit arithmetic
    # (schedule refuses it); the tail split (40 tiles cut) is fine and stays the tail split
    cfg = hg.GemmConfig(split_k=12, split_tail=True)
    with pytest.raises(ValueError, match="overflow"):
        hg.schedule(hg.GemmConfig(split_k=12), 8192, 28672, 8192, 2, 132)
    assert hg.finish_config(cfg, 8192, 28672, 8192) == cfg


def test_split_cluster_config_validation_and_schedule():
    for bad in (dict(split_k=1), dict(split_k=9), dict(split_k=2, cluster_m=2)):
        with pytest.raises(ValueError, match="split_cluster runs the split_k"):
            hg.GemmConfig(split_cluster=True, **bad)
    # rank 0's ring receives split_k - 1 f32 partials: 7 of 64 x 64 fit in 8 stages of 64 x 64 (128 KB), not in 6
    hg.GemmConfig(consumers=1, tn=64, stages=8, split_k=8, split_cluster=True)
    with pytest.raises(ValueError, match="do not fit in the ring"):
        hg.GemmConfig(consumers=1, tn=64, stages=6, split_k=8, split_cluster=True)
    cfg = hg.GemmConfig(consumers=1, tn=64, stages=8, split_k=4, split_cluster=True)
    assert cfg.cluster == (4, 1, 1) and not cfg.fixup and cfg.constexprs(tylo.bf16, False, False)[-5:-1] == (False, 1, 1, 4)
    # one job per CTA, a tile's K ranges consecutive: 3 x 2 tiles of 64 x 64, 4 ranges each
    plan = hg.schedule(cfg, 192, 128, 1024, 2, 132)
    assert (plan.grid, plan.dp_tiles, plan.workers, plan.cut_tiles) == (24, 0, 24, 6)
    assert [plan.worker_range(w) for w in range(5)] == [(0, 4), (4, 8), (8, 12), (12, 16), (16, 20)]
    with pytest.raises(ValueError, match="use fewer splits"):
        hg.schedule(cfg, 192, 128, 128, 2, 132)        # 2 K steps for 4 CTAs
    # launch runs fewer splits than K steps cannot feed: 2 K steps -> split 2, 1 -> no split (no cluster)
    assert hg.fit_split_cluster(cfg, 128, 2) == hg.GemmConfig(consumers=1, tn=64, stages=8, split_k=2, split_cluster=True)
    assert hg.fit_split_cluster(cfg, 64, 2) == hg.GemmConfig(consumers=1, tn=64, stages=8)
    assert hg.fit_split_cluster(cfg, 1024, 2) is cfg


def test_split_cluster_kernel_stores_partials_into_rank_0_and_keeps_no_fixup():
    # a 64 x 64 tile's f32 partial is 32 floats per thread: 8 st.async of 16 bytes (its register order's
    # layout gives each thread 4 consecutive floats); no workspace traffic, fence or atomic of the fixup
    cfg = hg.GemmConfig(consumers=1, tn=64, stages=8, split_k=2, split_cluster=True)
    ck = hg.hopper_gemm._compile(hg.spec(config=cfg), "sm_90a", (cfg.threads, 1, 1))
    stores = [line for line in ck.ptx.splitlines() if "st.async" in line]
    assert len(stores) == 8 and all(".v4.b32" in line for line in stores)
    assert "fence.acq_rel.gpu" not in ck.ptx and "atom." not in ck.ptx
    assert ck.resources.spill_bytes == 0


def test_cluster_n_schedule_pairs_horizontally_adjacent_tiles():
    # 3 x 3 tiles of 64 x 64: pairs along N are 3 x 2 groups (the last column's peer lies past N)
    cfg = hg.GemmConfig(tn=64, consumers=1, stages=8, cluster_n=2)
    plan = hg.schedule(cfg, 192, 192, 64, 2, 132)
    assert (plan.grid, plan.dp_tiles, plan.cluster, plan.job_slots) == (12, 6, 2, 6)
    # the kernel shares A: the multicast loads are A's (one box of 64 rows), B is loaded by each CTA
    ck = hg.hopper_gemm._compile(hg.spec(config=cfg), "sm_90a", (cfg.threads, 1, 1))
    load = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
    assert ck.ptx.count(load + ".multicast::cluster") >= 1
    assert ck.ptx.count("mbarrier.arrive.shared::cluster.b64") == 4 and ck.resources.spill_bytes == 0


@pytest.mark.parametrize("a_mn,b_mn", [(False, False), (True, True), (False, True), (True, False)])
def test_clusters_take_operands_of_either_major(a_mn, b_mn):
    """Clusters of every kind run with MN-major operands too (refused until session 10, when their wrong
    results on the H200 were traced to descriptors built without the address mask; the interpreter's
    tests/interpreter/test_hopper_gemm.py runs them): the only layout rule left is the 64-wide box."""
    for cfg in (hg.GemmConfig(cluster_m=2), hg.GemmConfig(cluster_n=2), hg.GemmConfig(split_k=2, split_cluster=True),
                hg.GemmConfig(consumers=1, tn=64, stages=8, swap_ab=True, direct=True, cluster_m=2)):
        assert hg.refusal(cfg, 256, a_mn, b_mn) is None, cfg
    narrow = hg.GemmConfig(consumers=1, tn=16, stages=8, swap_ab=True, direct=True, split_k=3, split_cluster=True)
    assert (hg.refusal(narrow, 256, a_mn, b_mn) is None) == (not a_mn)      # swap-AB: A is the kernel's B
