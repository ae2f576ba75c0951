"""The Hopper GEMM's small-shape mechanisms on an sm_90 GPU: every tile shape, swap-AB, split-K and
stream-K (the in-kernel fixup), clusters of 2 to 8 CTAs with A and B multicast and the register (direct) epilogue
against a float64 product on ragged and tiny shapes (M, N or K = 1), bf16 and fp8; split-K and stream-K
results bitwise equal run to run, with the arrival counters back at zero after each launch; clusters on
large and ragged shapes bitwise equal to the same tile without them; the heuristic's own choices."""
import dataclasses
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import hopper_gemm as hg  # noqa: E402

from tylo.runtime import driver  # noqa: E402

pytestmark = pytest.mark.gpu

C = hg.GemmConfig
CONFIGS = {
    "default": C(),
    "64x256": C(consumers=1, stages=5),
    "64x128": C(consumers=1, tn=128, stages=8),
    "128x64": C(tn=64, stages=8),
    "128x192": C(tn=192, stages=4),
    "64x192": C(consumers=1, tn=192, stages=6),
    # widths not a multiple of 64 through the TMA epilogue (64 x 16 and 64 x 32 boxes)
    "128x80": C(tn=80, stages=6),
    "64x144": C(consumers=1, tn=144, stages=8),
    "128x96": C(tn=96, stages=6),
    "128x240": C(tn=240, stages=4),
    "128x176-split2": C(tn=176, stages=4, split_k=2),
    "128x80-cluster2": C(tn=80, stages=6, cluster_m=2),
    "direct-64x64": C(consumers=1, tn=64, stages=8, direct=True),
    "swap-n8": C(consumers=1, tn=8, stages=8, swap_ab=True, direct=True),
    "swap-n16-2c": C(consumers=2, tn=16, stages=8, swap_ab=True, direct=True),
    "swap-n64": C(consumers=1, tn=64, stages=8, swap_ab=True, direct=True),
    # swap-AB through the TMA epilogue (C^T transposed into boxes of C: 8, 16, 32 or 64 rows by 64 columns)
    "swap-tma-n8": C(consumers=1, tn=8, stages=8, swap_ab=True),
    "swap-tma-n40-2c": C(consumers=2, tn=40, stages=8, swap_ab=True),
    "swap-tma-64x128": C(consumers=1, tn=128, stages=8, swap_ab=True),
    "swap-tma-128x80-cluster2x2": C(tn=80, stages=6, swap_ab=True, cluster_m=2, cluster_n=2),
    "swap-tma-n16-split4": C(consumers=1, tn=16, stages=8, swap_ab=True, split_k=4),
    "swap-tma-n16-split4-cluster": C(consumers=1, tn=16, stages=8, swap_ab=True, split_k=4, split_cluster=True),
    "split2": C(split_k=2),
    "split2-direct": C(split_k=2, direct=True),
    "split3-64x128": C(consumers=1, tn=128, stages=8, split_k=3),
    "split16-64x64": C(consumers=1, tn=64, stages=8, split_k=16),
    "swap-n16-split4": C(consumers=1, tn=16, stages=8, swap_ab=True, split_k=4, direct=True),
    # split-K for the tiles past the last full wave only (with fewer tiles than SMs: every tile)
    "split2-tail": C(split_k=2, split_tail=True),
    "split3-tail-64x128": C(consumers=1, tn=128, stages=8, split_k=3, split_tail=True),
    "streamk": C(stream_k=True),
    "streamk-64x128": C(consumers=1, tn=128, stages=8, stream_k=True),
    "swap-n16-streamk": C(consumers=1, tn=16, stages=8, swap_ab=True, stream_k=True, direct=True),
    # 2 x 1 clusters sharing B by TMA multicast
    "cluster2": C(cluster_m=2),
    "cluster2-64x128": C(consumers=1, tn=128, stages=8, cluster_m=2),
    "cluster2-direct-64x64": C(consumers=1, tn=64, stages=8, direct=True, cluster_m=2),
    "cluster2-swap-n64": C(consumers=1, tn=64, stages=8, swap_ab=True, direct=True, cluster_m=2),
    # 1 x 2 clusters sharing A
    "clustern2": C(cluster_n=2),
    "clustern2-direct-64x64": C(consumers=1, tn=64, stages=8, direct=True, cluster_n=2),
    # larger clusters: a column's CTAs share B, a row's share A
    "cluster2x2": C(cluster_m=2, cluster_n=2),
    "cluster4x1-64x128": C(consumers=1, tn=128, stages=8, cluster_m=4),
    "cluster1x4-direct-64x64": C(consumers=1, tn=64, stages=8, direct=True, cluster_n=4),
    "cluster2x4-64x128": C(consumers=1, tn=128, stages=8, cluster_m=2, cluster_n=4),
    "cluster4x2-128x128": C(tn=128, stages=6, cluster_m=4, cluster_n=2),
    # split-K as clusters, the partials summed in rank 0's shared memory
    "split2-cluster": C(split_k=2, split_cluster=True),
    "split3-cluster-64x128": C(consumers=1, tn=128, stages=8, split_k=3, split_cluster=True),
    "split8-cluster-64x64": C(consumers=1, tn=64, stages=8, split_k=8, split_cluster=True),
    "swap-n16-split4-cluster": C(consumers=1, tn=16, stages=8, swap_ab=True, split_k=4, split_cluster=True,
                                 direct=True),
}
FIXUP = sorted(name for name, cfg in CONFIGS.items() if cfg.fixup)
SPLIT_CLUSTER = sorted(name for name, cfg in CONFIGS.items() if cfg.split_cluster)


def _torch_sm90():
    from tylo.runtime import compute_capability
    if compute_capability() < (9, 0):
        pytest.skip("needs sm_90")
    return pytest.importorskip("torch")


def _operand(torch, gen, rows, cols, major):
    if major == "r":
        return torch.randn(rows, cols, generator=gen, device="cuda").to(torch.bfloat16)
    return torch.randn(cols, rows, generator=gen, device="cuda").to(torch.bfloat16).T


def _check(torch, c, a, b):
    assert bool(torch.isfinite(c).all()), "unwritten outputs"
    ref = a.double() @ b.double()
    rel = float((c.double() - ref).norm() / ref.norm())
    assert rel < 1e-2, rel


def _legal(cfg, N, layout):
    """Whether launch runs ``cfg`` for these operands (``hg.refusal``: A column-major is M-contiguous, B
    row-major N-contiguous)."""
    return hg.refusal(cfg, N, layout[0] == "c", layout[1] == "r") is None


# (M, N, K, layout): ragged everywhere; M = 1, N = 1 and K = 1 with the layouts TMA can address
SHAPES = [(1, 8, 8, "rr"), (1, 264, 136, "rc"), (5, 24, 40, "rc"), (17, 200, 136, "rr"), (64, 520, 1000, "cr"),
          (130, 264, 72, "rc"), (300, 776, 4104, "rr"), (3, 1, 64, "rc"), (8, 16, 1, "cr"), (1, 1, 8, "rc"),
          (1, 200, 264, "cc")]      # a column-major A of one row: its row stride (1 element) is no TMA pitch


# illegal (config, shape, layout) pairs are not cases here: launch refuses them, tested on the CPU
_CASES = [(name, M, N, K, layout) for (M, N, K, layout) in SHAPES for name in sorted(CONFIGS)
          if _legal(CONFIGS[name], N, layout)]


@pytest.mark.parametrize("name,M,N,K,layout", _CASES)
def test_every_config_matches_float64(name, M, N, K, layout):
    torch = _torch_sm90()
    cfg = CONFIGS[name]
    gen = torch.Generator(device="cuda").manual_seed(M * 131 + N * 7 + K)
    a = _operand(torch, gen, M, K, layout[0])
    b = _operand(torch, gen, K, N, layout[1])
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    hg.launch(c, a, b, M, N, K, config=cfg)
    torch.cuda.synchronize()
    _check(torch, c, a, b)


@pytest.mark.parametrize("name", ["default", "swap-n16-2c", "split3-64x128", "swap-n16-split4", "64x128",
                                  "streamk-64x128", "cluster2", "split8-cluster-64x64", "swap-n16-split4-cluster",
                                  "swap-tma-n16-split4-cluster"])
@pytest.mark.parametrize("M,N,K", [(16, 4096, 1024), (77, 520, 4112), (1, 1024, 2048)])
def test_fp8_configs(name, M, N, K):
    torch = _torch_sm90()
    gen = torch.Generator(device="cuda").manual_seed(M + N + K)
    a = torch.randn(M, K, generator=gen, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(N, K, generator=gen, device="cuda").to(torch.float8_e4m3fn).T     # K-major B
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    hg.launch(c, a, b, M, N, K, config=CONFIGS[name])
    torch.cuda.synchronize()
    _check(torch, c, a.to(torch.bfloat16), b.to(torch.bfloat16))


# large shapes (the ones clusters are for) and ragged ones with an odd number of M tiles (the last
# cluster's second CTA computes a tile past M and stores nothing); every layout, K- and MN-major operands
# (an MN-major B spans its 64-wide boxes by the descriptor's leading byte offset, which the cluster rank
# in the shared-window address corrupted until descriptors dropped it)
@pytest.mark.parametrize("name,base", [("cluster2", "default"), ("cluster2-64x128", "64x128"), ("clustern2", "default"),
                                       ("cluster2x2", "default"), ("cluster2x4-64x128", "64x128")])
@pytest.mark.parametrize("M,N,K,layout", [(4096, 4096, 4096, "rc"), (2900, 5000, 2000, "rc"),
                                          (1104, 8192, 16384, "rc"), (8192, 8192, 8192, "rc"), (200, 776, 4104, "rc"),
                                          (4096, 4096, 4096, "rr"), (2904, 5000, 2000, "cr"),
                                          (1104, 8192, 16384, "cc"), (200, 776, 4104, "rr"), (200, 776, 4104, "cc")])
def test_cluster_matches_float64_and_the_same_tile_without_clusters(name, base, M, N, K, layout):
    torch = _torch_sm90()
    gen = torch.Generator(device="cuda").manual_seed(M + 3 * N + 7 * K)
    a = _operand(torch, gen, M, K, layout[0])
    b = _operand(torch, gen, K, N, layout[1])
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    assert CONFIGS[name].tm == CONFIGS[base].tm and CONFIGS[name].tn == CONFIGS[base].tn
    hg.launch(c, a, b, M, N, K, config=CONFIGS[name])
    torch.cuda.synchronize()
    _check(torch, c, a, b)
    # each tile runs the same WGMMAs in the same K order with or without a cluster: the same bits
    ref = torch.full_like(c, float("nan"))
    hg.launch(ref, a, b, M, N, K, config=CONFIGS[base])
    torch.cuda.synchronize()
    assert torch.equal(c, ref)


def _counters_are_zero(torch):
    from tylo.runtime.scratch import scratch_buffers
    for buf in scratch_buffers("hopper_gemm.counters"):
        assert not torch.as_tensor(buf.to_host()).any(), "a fixup counter was left non-zero"


# every fixup configuration on a long-K shape; stream-K and split_tail also where whole tiles and cut tiles mix
# (3000x5000x2000: 480 tiles of 128 x 256, 84 past the last full wave; 1880 of 64 x 128, 32 past it)
_DETERMINISM = ([(name, 200, 1032, 8200) for name in FIXUP + SPLIT_CLUSTER]
                + [(name, 3000, 5000, 2000) for name in FIXUP if CONFIGS[name].stream_k or CONFIGS[name].split_tail])


@pytest.mark.parametrize("name,M,N,K", _DETERMINISM)
def test_fixup_is_bitwise_deterministic(name, M, N, K):
    # whichever CTA of a cut tile arrives last, it adds the partials in worker order: 20 launches give
    # the same bits (the arrival order varies from launch to launch; the sum's order does not)
    torch = _torch_sm90()
    gen = torch.Generator(device="cuda").manual_seed(11)
    a = _operand(torch, gen, M, K, "r")
    b = _operand(torch, gen, K, N, "c")
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    hg.launch(c, a, b, M, N, K, config=CONFIGS[name])
    first = c.clone()
    _check(torch, first, a, b)
    for _ in range(20):
        c.fill_(float("nan"))
        hg.launch(c, a, b, M, N, K, config=CONFIGS[name])
        torch.cuda.synchronize()
        assert torch.equal(c, first)
    _counters_are_zero(torch)


@pytest.mark.parametrize("name", SPLIT_CLUSTER)
@pytest.mark.parametrize("M,N,K", [(64, 4096, 4096), (257, 776, 4104), (7, 1000, 3000)])
def test_split_cluster_is_bitwise_the_global_fixup(name, M, N, K):
    # rank 0 adds the partials in rank order, as the fixup's last arriver adds them in worker order: the same
    # split through either reduction gives the same bits
    torch = _torch_sm90()
    gen = torch.Generator(device="cuda").manual_seed(M + N + K)
    a = _operand(torch, gen, M, K, "r")
    b = _operand(torch, gen, K, N, "c")
    cfg = CONFIGS[name]
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    hg.launch(c, a, b, M, N, K, config=cfg)
    torch.cuda.synchronize()
    _check(torch, c, a, b)
    global_fixup = torch.full_like(c, float("nan"))
    hg.launch(global_fixup, a, b, M, N, K, config=dataclasses.replace(cfg, split_cluster=False))
    torch.cuda.synchronize()
    assert torch.equal(c, global_fixup)


@pytest.mark.parametrize("M,N,K", [(1, 4096, 4096), (16, 8192, 8192), (16, 1024, 8192), (64, 1024, 8192),
                                   (128, 14336, 4096), (256, 4096, 8192), (3000, 5000, 2000), (2047, 1000, 336)])
def test_heuristic_choice_is_correct(M, N, K):
    torch = _torch_sm90()
    gen = torch.Generator(device="cuda").manual_seed(M ^ N ^ K)
    a = _operand(torch, gen, M, K, "r")
    b = _operand(torch, gen, K, N, "c")
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    cfg = hg.launch(c, a, b, M, N, K)
    torch.cuda.synchronize()
    assert cfg == hg.choose_config(M, N, K, hg.INPUT_TYPES["bf16"], driver.sm_count(), True, True)
    _check(torch, c, a, b)


@pytest.mark.parametrize("M,N,K,pitch", [(1000, 1000, 1000, None), (3001, 5000, 2008, None),
                                         (2048, 2048, 2048, 2056)])
def test_misaligned_rows_run_in_clusters(M, N, K, pitch):
    # K-major rows 16- but not 32-byte aligned (a contiguous K = 8 mod 16, or a padded view whose pitch is):
    # launch's pick runs in 2 x 1 clusters, correct and bitwise equal to the same tile without them
    torch = _torch_sm90()
    gen = torch.Generator(device="cuda").manual_seed(M + N + K)
    width = pitch or K
    a = torch.randn(M, width, generator=gen, device="cuda").to(torch.bfloat16)[:, :K]
    b = torch.randn(N, width, generator=gen, device="cuda").to(torch.bfloat16)[:, :K].T
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    cfg = hg.launch(c, a, b, M, N, K)
    torch.cuda.synchronize()
    assert cfg.cluster_m == 2
    _check(torch, c, a, b)
    ref = torch.full_like(c, float("nan"))
    hg.launch(ref, a, b, M, N, K, config=dataclasses.replace(cfg, cluster_m=1))
    torch.cuda.synchronize()
    assert torch.equal(c, ref)


@pytest.mark.parametrize("M,N,K,layout", [(256, 1024, 8192, "rc"), (257, 776, 4104, "rr"), (7, 1000, 3000, "rc")])
def test_autotuned_launch_is_correct_and_stored(M, N, K, layout):
    # launch(autotune=True) times tuning_candidates, runs the fastest (then tunes its STAGES / GROUP_M), and
    # stores the choice: a second launch on other arrays of the shape tunes nothing
    from tylo.tuning_store import list_tuned
    torch = _torch_sm90()
    gen = torch.Generator(device="cuda").manual_seed(M * 7 + N + K)
    a = _operand(torch, gen, M, K, layout[0])
    b = _operand(torch, gen, K, N, layout[1])
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    cfg = hg.launch(c, a, b, M, N, K, autotune=True)
    torch.cuda.synchronize()
    _check(torch, c, a, b)
    cands = hg.tuning_candidates(M, N, K, hg.INPUT_TYPES["bf16"], driver.sm_count(), layout[0] == "r",
                                 layout[1] == "c")
    assert cfg in cands
    records = [r for r in list_tuned() if r.kernel == "hopper_gemm.launch" and f"M={M}," in r.key_text]
    assert len(records) == 1 and records[0].best == repr(cfg)
    assert sum(t.status == "ok" for t in records[0].timings) >= 2
    c2 = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    a2, b2 = a.clone(), b.clone()
    assert hg.launch(c2, a2, b2, M, N, K, autotune=True) == cfg
    torch.cuda.synchronize()
    assert torch.equal(c, c2)
