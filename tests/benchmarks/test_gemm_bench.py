"""benchmarks/gemm.py's ``--extra`` parsing (no GPU): the keyword sets become the GemmConfigs the sweep
times, with the most stages that fit the tile unless given."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
for sub in ("benchmarks", "examples"):
    if str(ROOT / sub) not in sys.path:
        sys.path.insert(0, str(ROOT / sub))

import gemm  # noqa: E402
import hopper_gemm as hg  # noqa: E402


def test_extra_cluster_configs_parse_into_gemm_configs():
    kws = gemm.extra_configs(hg, "cluster_m=2;cluster_m=2,group_m=4;consumers=1,tn=128,cluster_m=2;stream_k=1")
    cfgs = [hg.GemmConfig(**kw) for kw in kws]
    assert cfgs[0] == hg.GemmConfig(cluster_m=2, stages=hg.max_stages(128, 256, False, 2))
    assert cfgs[0].cluster == (2, 1, 1) and cfgs[1].group_m == 4
    assert (cfgs[2].tm, cfgs[2].tn, cfgs[2].cluster_m) == (64, 128, 2)
    assert cfgs[3].stream_k and cfgs[3].cluster_m == 1
    assert gemm.describe_config(cfgs[0]) == "128x256 s4 cluster2x1"
    assert "cluster" not in gemm.describe_config(cfgs[3])
    assert gemm.describe_config(cfgs[1]) == "128x256 s4 cluster2x1 group4"


def test_extra_staging_buffers_take_the_stages_that_fit():
    # a whole 64 x 256 staging band per consumer (c_bufs=4) leaves room for 3 stages of the 128 x 256 tile, not 4
    (kw,) = gemm.extra_configs(hg, "c_bufs=4")
    cfg = hg.GemmConfig(**kw)
    assert cfg.stages == 3 == hg.max_stages(128, 256, False, 2, 4) and cfg.shared_bytes <= hg.SHARED_LIMIT
    assert gemm.describe_config(cfg) == "128x256 s3 cbufs4"
