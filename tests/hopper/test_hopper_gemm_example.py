"""examples/hopper_gemm.py assembled for sm_90a (no GPU): the warp-specialised TMA + WGMMA
pipeline is all there, with no spills and no local memory. Prints registers and compile time."""
import os
import re
import sys
import time

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
                 hg.GemmConfig(split_k=2, direct=True),
                 hg.GemmConfig(consumers=1, tn=128, stages=8, split_k=3, direct=True)]


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
    # the register epilogue writes global memory directly, the TMA one never does
    assert ("cp.async.bulk.tensor.2d.global.shared::cta" in ptx) == (not cfg.direct)
    assert ("st.global" in ptx) == cfg.direct


def test_splitk_reduce_assembles():
    ck = hg.splitk_reduce.compile(signature="*bf16:16, *f32:16, i32, i32, i32, i32, i32", arch="sm_90a",
                                  constexprs={"BLOCK": 256}, block=256)
    assert ".local" not in ck.ptx and "ld.global" in ck.ptx and "st.global" in ck.ptx


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
    if M <= 16:           # decode: the small M becomes the WGMMA's N
        assert cfg.swap_ab and cfg.tn == max(8, -(-M // 8) * 8)
    if M >= 2048 and N >= 2048:
        assert cfg == hg.GemmConfig()        # large shapes keep the 128 x 256 tile
    units = -(-(N if cfg.swap_ab else M) // cfg.tm) * -(-(M if cfg.swap_ab else N) // cfg.tn) * cfg.split_k
    if M <= 256 and N >= 4096:
        assert units >= 64, cfg          # small problems are spread over at least half the GPU


def test_heuristic_respects_operand_majors():
    # column-major A (MN-major kernel B after a swap) needs tn % 64 == 0; fp8 choices keep K-major rules
    for M in (1, 16, 64):
        cfg = hg.choose_config(M, 8192, 8192, tylo.bf16, 132, False, False)
        assert not cfg.swap_ab or cfg.tn % 64 == 0
        cfg = hg.choose_config(M, 8192, 8192, tylo.bf16, 132, True, False)
        assert not (not cfg.swap_ab and cfg.tn % 64)


def test_config_validation():
    with pytest.raises(ValueError, match="direct=True"):
        hg.GemmConfig(split_k=2)
    with pytest.raises(ValueError, match="direct=True"):
        hg.GemmConfig(tn=16, consumers=1, stages=4)
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
    assert tuner.key == ["M", "N", "K"]
    assert {frozenset(c.constexprs) for c in tuner.configs} == {frozenset({"STAGES", "GROUP_M"})}
    assert all(c.threads == family.threads for c in tuner.configs)
    stages = {c.constexprs["STAGES"] for c in tuner.configs}
    assert max(stages) == family.stages and min(stages) >= 2
    # every variant of the family fits: the deepest compiles within the shared-memory limit
    deepest = hg.GemmConfig(**{**family.__dict__, "stages": max(stages)})
    ck = hg.hopper_gemm._compile(hg.spec(config=deepest, b_mn=False), "sm_90a", (deepest.threads, 1, 1))
    assert ck.shared_bytes <= hg.SHARED_LIMIT and ck.resources.spill_bytes == 0
    assert hg.autotuner(hg.GemmConfig()) is not tuner
