"""The example Hopper GEMM (TMA ring, mbarriers, WGMMA, named barriers, TMA stores) in the interpreter."""
import numpy as np
import pytest
from hopper_support import gemm_args, gemm_ir, gemm_operands, relative_error, unused_fixup_arrays

from tylo.interpreter import run


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_gemm_one_persistent_cta_matches_float64(seed):
    # one CTA walks the 2 x 2 output tiles of a ragged shape; K = 136 is 3 K steps, the last partial
    a, b, c = gemm_operands(200, 264, 136, seed)
    run(gemm_ir(), gemm_args(a, b, c), grid=(1,), block=(384,), seed=seed)
    # bf16 output: its rounding (2^-9 relative) dominates; fp32 accumulation is far below it
    assert relative_error(a, b, c) < 4e-3


def test_gemm_two_stage_ring_wraps_around():
    # K = 320: 5 K steps through a 2-stage ring, so the producer waits for the consumers' releases
    a, b, c = gemm_operands(128, 256, 320, 3)
    run(gemm_ir(stages=2), gemm_args(a, b, c), grid=(1,), block=(384,), seed=5)
    assert relative_error(a, b, c) < 4e-3


def test_gemm_is_exact_on_small_integers():
    # products and sums of small integers are exact in fp32 and bf16: the result must be bit-exact
    rng = np.random.default_rng(7)
    a, b, c = gemm_operands(128, 256, 64)
    a[...] = rng.integers(-3, 4, a.shape)
    b[...] = rng.integers(-3, 4, b.shape)
    run(gemm_ir(), gemm_args(a, b, c), grid=(1,), block=(384,))
    assert np.array_equal(c.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_gemm_two_wgmma_groups_per_k_step(dtype):
    # fp8: a 128-byte TMA row holds 128 elements, read by two m64n256k32 groups per K step
    import ml_dtypes
    from hopper_support import hopper_gemm as h

    import tylo

    dt = getattr(ml_dtypes, dtype)
    tdt = tylo.f8e4m3 if dtype == "float8_e4m3fn" else tylo.f8e5m2
    ir = gemm_ir(config=h.GemmConfig(stages=2), dtype=tdt)
    rng = np.random.default_rng(2)
    M, N, K = 128, 256, 256
    a = rng.standard_normal((M, K)).astype(dt)
    b = rng.standard_normal((K, N)).astype(dt)
    c = np.full((M, N), np.nan, ml_dtypes.bfloat16)
    run(ir, [tylo.prepare_tma(h.C_TILE, c), tylo.prepare_tma(h.a_tile(tdt), a),
             tylo.prepare_tma(h.b_tile(tdt), np.ascontiguousarray(b.T)), c, *unused_fixup_arrays(), M, N, K, N, 1,
             1, 0],
        grid=(1,), block=(384,))
    assert relative_error(a, b, c) < 4e-3


# the small-shape configurations (GemmConfig) on the ragged 200 x 264 x 136, one persistent CTA (swap-AB's
# register epilogue in the slow tier: the fixup tests run it on smaller shapes in the main one)
SMALL_CONFIGS = {
    "64-row-tma": dict(tn=64, consumers=1, stages=2),                         # 4 x 5 tiles, TMA epilogue
    "64-row-swap-ab": dict(tn=64, consumers=1, stages=2, swap_ab=True, direct=True),   # C^T = B^T A^T
    # swap-AB through the TMA epilogue: C^T stored transposed (stmatrix.trans) into 64 x 64 boxes of C, and
    # into 8-row boxes (tn 40: five per chunk; C's M = 200 ends inside the last)
    "swap-ab-tma-64x128": dict(tn=128, consumers=1, stages=2, swap_ab=True),
    "swap-ab-tma-128x40": dict(tn=40, consumers=2, stages=2, swap_ab=True),
    "tn40-register-epilogue": dict(tn=40, consumers=2, stages=3, direct=True),     # tn not a multiple of 16
    # TMA epilogues of narrower boxes: 64 x 16 (tn 80: a 64-column chunk of 4 boxes and one of 1) and 64 x 32
    "tn80-tma-16-wide-boxes": dict(tn=80, consumers=2, stages=2),
    "tn96-tma-32-wide-boxes": dict(tn=96, consumers=1, stages=2),
}


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow)
                                  if name in ("tn96-tma-32-wide-boxes", "swap-ab-tma-128x40", "64-row-swap-ab") else name
                                  for name in SMALL_CONFIGS])
def test_small_configs_match_float64(name):
    from hopper_support import hopper_gemm as h

    cfg = h.GemmConfig(**SMALL_CONFIGS[name])
    a, b, c = gemm_operands(200, 264, 136, seed=4)
    run(gemm_ir(config=cfg), gemm_args(a, b, c, cfg), grid=(1,), block=(cfg.threads,), seed=1)
    assert relative_error(a, b, c) < 4e-3


# 2 x 1 clusters sharing B by TMA multicast (cluster_m = 2), or A (cluster_n = 2): the interpreter runs a cluster's CTAs
# together, delivers each multicast box to both and checks every stage's refill is ordered after both
# CTAs' WGMMAs read it (the remote releases)
CLUSTER_SHAPES = {
    # 3 M tiles of 64 (the second pair's peer lies past M), N and K not multiples of the tile; one
    # cluster walks 4 pairs through a 2-stage ring, or two clusters 2 pairs each
    "64x64-one-cluster": (dict(tn=64, consumers=1, stages=2, cluster_m=2), (136, 72, 136), 2),
    "64x64-two-clusters": (dict(tn=64, consumers=1, stages=2, cluster_m=2), (136, 72, 136), 4),
    "64x64-direct": (dict(tn=64, consumers=1, stages=3, cluster_m=2, direct=True), (136, 70, 72), 2),
    # 1 x 2 clusters sharing A (cluster_n = 2): 3 N tiles of 64 (the second pair's peer lies past N)
    "64x64-along-n-one-cluster": (dict(tn=64, consumers=1, stages=2, cluster_n=2), (72, 136, 136), 2),
    "64x64-along-n-two-clusters": (dict(tn=64, consumers=1, stages=2, cluster_n=2), (136, 136, 72), 4),
    "64x64-along-n-direct": (dict(tn=64, consumers=1, stages=3, cluster_n=2, direct=True), (70, 136, 72), 2),
    # 2 x 2, 4 x 1, 1 x 4 and 2 x 4 clusters: a column's CTAs share B, a row's share A (row-varying multicast
    # masks); 3 x 3 tiles leave peers past M and past N, and one cluster walks two groups through the ring
    "64x64-2x2": (dict(tn=64, consumers=1, stages=2, cluster_m=2, cluster_n=2), (136, 136, 136), 4),
    "64x64-2x2-two-clusters": (dict(tn=64, consumers=1, stages=2, cluster_m=2, cluster_n=2), (136, 200, 72), 8),
    "64x64-4x1": (dict(tn=64, consumers=1, stages=2, cluster_m=4), (200, 72, 136), 4),
    "64x64-1x4-direct": (dict(tn=64, consumers=1, stages=3, cluster_n=4, direct=True), (72, 200, 72), 4),
    "64x64-2x4": (dict(tn=64, consumers=1, stages=2, cluster_m=2, cluster_n=4), (136, 200, 72), 8),
}


# the other shapes and epilogues of each cluster form run in the slow tier (seconds each)
SLOW_CLUSTER_SHAPES = {"64x64-direct", "64x64-along-n-direct", "64x64-2x2-two-clusters", "64x64-4x1",
                       "64x64-1x4-direct", "64x64-2x4"}


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_CLUSTER_SHAPES else name
                                  for name in CLUSTER_SHAPES])
def test_cluster_configs_match_float64(name):
    from hopper_support import gemm_cluster_args
    from hopper_support import hopper_gemm as h

    kw, (M, N, K), sms = CLUSTER_SHAPES[name]
    cfg = h.GemmConfig(**kw)
    a, b, c = gemm_operands(M, N, K, seed=6)
    args, grid = gemm_cluster_args(a, b, c, cfg, sms)
    run(gemm_ir(config=cfg), args, grid=(grid,), block=(cfg.threads,), cluster=cfg.cluster, seed=3)
    assert relative_error(a, b, c) < 4e-3


# split-K as clusters (split_cluster): a tile's split_k CTAs are one cluster; ranks 1.. store their f32 partials into
# rank 0's ring (st.async, counted on its barrier) once it frees it, and rank 0 sums them in rank order
SPLIT_CLUSTER_SHAPES = {
    "64x64-split-2": (dict(tn=64, consumers=1, stages=2, split_k=2, split_cluster=True), (136, 72, 136)),
    "128x64-split-3": (dict(tn=64, consumers=2, stages=4, split_k=3, split_cluster=True), (100, 72, 200)),
    "64x40-split-4-direct": (dict(tn=40, consumers=1, stages=3, split_k=4, split_cluster=True, direct=True),
                             (70, 76, 264)),
}


@pytest.mark.parametrize("name", [name if name == "64x64-split-2" else pytest.param(name, marks=pytest.mark.slow)
                                  for name in SPLIT_CLUSTER_SHAPES])
def test_split_cluster_configs_match_float64(name):
    from hopper_support import gemm_cluster_args
    from hopper_support import hopper_gemm as h

    kw, (M, N, K) = SPLIT_CLUSTER_SHAPES[name]
    cfg = h.GemmConfig(**kw)
    a, b, c = gemm_operands(M, N, K, seed=11)
    args, grid = gemm_cluster_args(a, b, c, cfg, 132)
    run(gemm_ir(config=cfg), args, grid=(grid,), block=(cfg.threads,), cluster=(cfg.split_k, 1, 1), seed=7)
    assert relative_error(a, b, c) < 4e-3


# MN-major operands in clusters: a stage's MN-major operand is a row of 64-wide boxes, each multicast, which
# WGMMA spans by the descriptor's leading byte offset. The interpreter gives shared-window addresses the CTA's
# cluster rank from bit 24 up, as the hardware does: a descriptor built without the ISA's address mask
# (addr & 0x3FFFF) moved every box but the first in ranks >= 1 (wrong results on the H200 until session 10).
MN_MAJOR_CLUSTERS = {
    "cluster-m-b-mn": (dict(tn=128, consumers=1, stages=2, cluster_m=2), (136, 128, 136), False, True),
    "cluster-n-a-and-b-mn": (dict(tn=128, consumers=1, stages=2, cluster_n=2), (72, 256, 72), True, True),
    "split-cluster-b-mn": (dict(tn=128, consumers=1, stages=2, split_k=2, split_cluster=True), (72, 128, 136),
                           False, True),
}


@pytest.mark.parametrize("name", MN_MAJOR_CLUSTERS)
def test_cluster_with_mn_major_operands_reads_every_box(name):
    from hopper_support import gemm_cluster_args
    from hopper_support import hopper_gemm as h

    kw, (M, N, K), a_mn, b_mn = MN_MAJOR_CLUSTERS[name]
    cfg = h.GemmConfig(**kw)
    a, b, c = gemm_operands(M, N, K, seed=9)
    args, grid = gemm_cluster_args(a, b, c, cfg, 2, a_mn=a_mn, b_mn=b_mn)
    run(gemm_ir(config=cfg, a_mn=a_mn, b_mn=b_mn), args, grid=(grid,), block=(cfg.threads,),
        cluster=(cfg.cluster_size, 1, 1), seed=5)
    assert relative_error(a, b, c) < 4e-3


@pytest.mark.slow
def test_cluster_default_tile_with_the_peer_past_m():
    # the 128 x 256 tile, one M tile: CTA 1 of the cluster computes a tile wholly past M (zero-filled A),
    # still loads its half of the B stages for CTA 0 and releases, and stores nothing
    from hopper_support import gemm_cluster_args
    from hopper_support import hopper_gemm as h

    cfg = h.GemmConfig(stages=2, cluster_m=2)
    a, b, c = gemm_operands(100, 264, 200, seed=8)
    args, grid = gemm_cluster_args(a, b, c, cfg, 2)
    run(gemm_ir(config=cfg), args, grid=(grid,), block=(cfg.threads,), cluster=(2, 1, 1), seed=4)
    assert relative_error(a, b, c) < 4e-3


def mutated_gemm_ir(tmp_path, name, mutate, cfg_kw):
    """The IR of examples/hopper_gemm.py after ``mutate`` (source -> source), specialised for ``cfg_kw``."""
    import importlib.util

    from hopper_support import EXAMPLES

    from tylo.specialization import ConstexprSpec

    path = tmp_path / f"{name}.py"
    path.write_text(mutate((EXAMPLES / "hopper_gemm.py").read_text()))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = mod.GemmConfig(**cfg_kw)
    records = mod.spec(config=cfg)
    names = [p.name for p in mod.hopper_gemm.params if p.constexpr]
    return cfg, mod.hopper_gemm.lower(
        signature=[r for r in records if not isinstance(r, ConstexprSpec)],
        constexprs=dict(zip(names, [r.value for r in records if isinstance(r, ConstexprSpec)])),
        block=(cfg.threads,))


def test_cluster_without_remote_releases_is_a_hazard(tmp_path):
    # the kernel with each consumer releasing only its own CTA's stage (and the barrier counting only
    # those): a producer then multicasts B into the peer's stage while the peer's WGMMA may still read it
    from hopper_support import gemm_cluster_args

    from tylo.interpreter import HazardError

    def local_release(src):
        mutated = src.replace("mb.mbarrier_init(empty + s, CONSUMERS * SHARERS)",
                              "mb.mbarrier_init(empty + s, CONSUMERS)")
        mutated = mutated.replace("        for r in tylo.static_range(CLUSTER):\n"
                                  "            mb.mbarrier_arrive_cluster(bar, r)", "        mb.mbarrier_arrive(bar)")
        # release_stage's remote arrivals are gone (cluster_reduce keeps its own)
        assert mutated.count("mbarrier_arrive_cluster(") == src.count("mbarrier_arrive_cluster(") - 1
        assert "mbarrier_init(empty + s, CONSUMERS)" in mutated
        return mutated

    cfg, ir = mutated_gemm_ir(tmp_path, "hopper_gemm_local_release", local_release,
                              dict(tn=64, consumers=1, stages=2, cluster_m=2))
    a, b, c = gemm_operands(136, 72, 136, seed=6)
    args, grid = gemm_cluster_args(a, b, c, cfg, 2)
    with pytest.raises(HazardError, match="stage released before its read completed"):
        run(ir, args, grid=(grid,), block=(cfg.threads,), cluster=(2, 1, 1), seed=3)


@pytest.mark.parametrize("cluster", [dict(cluster_m=2), dict(cluster_n=2)])
def test_cluster_without_the_load_tail_is_a_hazard(tmp_path, cluster):
    # clusters end without a cluster barrier: a CTA's producer instead waits until the peers' consumers have
    # released its last stages. Without that wait a CTA may exit while a peer still arrives on its barriers
    # (on the GPU, shared memory that may already be another CTA's); seed 3 schedules that in both forms
    from hopper_support import gemm_cluster_args

    from tylo.interpreter import HazardError

    tail = ("                for tail in range(ring, ring + STAGES):\n"
            "                    mb.mbarrier_wait(empty + tail % STAGES, ((tail // STAGES) & 1) ^ 1)\n")

    def without_tail(src):
        assert src.count(tail) == 1
        return src.replace(tail, "                pass\n")

    cfg, ir = mutated_gemm_ir(tmp_path, "hopper_gemm_no_load_tail", without_tail,
                              dict(tn=64, consumers=1, stages=2, **cluster))
    shape = (136, 72, 136) if "cluster_m" in cluster else (72, 136, 72)
    a, b, c = gemm_operands(*shape, seed=6)
    args, grid = gemm_cluster_args(a, b, c, cfg, 2)
    with pytest.raises(HazardError, match="remote access to an exited CTA"):
        run(ir, args, grid=(grid,), block=(cfg.threads,), cluster=(2, 1, 1), seed=3)
