"""scripts/probe_gemm_loop.py (no GPU): its variants still edit examples/hopper_gemm.py where they claim, and
their sm_90a PTX leaves out what they say (the consumers' per-step WGMMAs, the producer's TMA loads)."""
import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def probe():
    spec = importlib.util.spec_from_file_location("probe_gemm_loop", ROOT / "scripts" / "probe_gemm_loop.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_variants_leave_out_one_side_each(probe, tmp_path):
    kw = probe.extra_configs(None, "consumers=1,tn=64,stages=8,split_k=2")[0]
    full, no_mma, no_tma = (probe.ptx_counts(probe.load_variant(name, str(tmp_path)), kw)
                            for name in ("full", "no-mma", "no-tma"))
    assert full[0] == no_tma[0] > no_mma[0] > 0          # no-mma keeps only the tile's first step
    assert full[1] == no_mma[1] > 0 and no_tma[1] == 0    # no-tma loads nothing


def test_fit_recovers_fixed_and_per_step_cost(probe):
    fixed, per_step = probe.fit([(16, 3.2 + 16 * 0.14), (32, 3.2 + 32 * 0.14), (64, 3.2 + 64 * 0.14)])
    assert fixed == pytest.approx(3.2) and per_step == pytest.approx(0.14)
