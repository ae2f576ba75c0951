"""Where a GEMM configuration's K step goes: examples/hopper_gemm.py timed whole and with one side of its
K loop left out (session 8, validation.md run 4; docs/hopper.md, "The K loop's instruction cost").

    python scripts/probe_gemm_loop.py [--shapes 64x4096x1024,64x4096x2048,64x4096x4096]
                                      [--configs "consumers=1,tn=64,stages=8;consumers=1,tn=64,split_k=2"]
                                      [--compile-only]

Variants (each a copy of the example's source with one change, written to a temporary directory):

* ``full``: the kernel as it is;
* ``no-mma``: the consumers wait for each stage and release it without issuing its WGMMAs, but for the
  first step of each tile piece (TMA, barriers and the loop remain: what the memory side and the loop cost);
* ``no-tma``: the producer arrives on ``full`` without loading anything (the consumers' WGMMAs read stale
  shared memory: what the tensor side and the loop cost).

The outputs of the two partial variants are meaningless; only their times are read. Each time is the
median of back-to-back calls (``benchmarks/gemm.py``'s ``bench``: the operands stay in the L2 as in the
benchmark), cuBLAS's beside them; shapes that differ only in K are fitted to ``fixed + steps * per_step``
(K steps of 64). ``--compile-only`` (no GPU needed) compiles every variant for sm_90a and prints how many
WGMMAs and TMA loads its PTX keeps, to check the copies still leave out what they claim.
"""
import argparse
import importlib.util
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples"), os.path.join(ROOT, "benchmarks")]

from gemm import bench, extra_configs  # noqa: E402

# (text in examples/hopper_gemm.py, its replacement) per variant
_PRODUCER_LOADS = """                        mb.mbarrier_arrive_expect_tx(full + s, (TM + TN) * 128)
                        # A is shared by a cluster row (its N tiles), B by a cluster column (its M tiles)
                        load_shared_stage(a_map, sa_ptr + s * (TM * BK), pm * TM, kt * BK, full + s, ring, rank,
                                          CLUSTER_M, CLUSTER_N, False, TM, A_MN)
                        load_shared_stage(b_map, sb_ptr + s * (TN * BK), pn * TN, kt * BK, full + s, ring, rank,
                                          CLUSTER_M, CLUSTER_N, True, TN, B_MN)
"""
_CONSUMER_STEP = """                    pending = mma_stage(PLAN, a_map, b_map, sa_ptr + s * (TM * BK), sb_ptr + s * (TN * BK),
                                        cons * 64, pending, A_MN, B_MN, TM, TN)
                    pending = wg.wait_mma(pending, GROUPS)   # step kt-1 is complete: release its stage
"""
EDITS = {
    "full": [],
    "no-mma": [(_CONSUMER_STEP, "")],
    "no-tma": [(_PRODUCER_LOADS, "                        mb.mbarrier_arrive(full + s)\n")],
}


def variant_source(name):
    with open(os.path.join(ROOT, "examples", "hopper_gemm.py")) as f:
        text = f.read()
    for old, new in EDITS[name]:
        if text.count(old) != 1:
            raise SystemExit(f"probe_gemm_loop.py: the {name} variant's edit no longer matches "
                             f"examples/hopper_gemm.py exactly once; update EDITS")
        text = text.replace(old, new)
    return text


def load_variant(name, directory):
    module = "hopper_gemm_" + name.replace("-", "_")
    path = os.path.join(directory, module + ".py")
    with open(path, "w") as f:
        f.write(variant_source(name))
    spec = importlib.util.spec_from_file_location(module, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module] = mod
    spec.loader.exec_module(mod)
    return mod


def ptx_counts(hg, kw):
    """(wgmma.mma_async, TMA loads) in the sm_90a PTX of variant module ``hg`` under GemmConfig(**kw)."""
    cfg = hg.GemmConfig(**kw)
    ptx = hg.hopper_gemm._compile(hg.spec(config=cfg), "sm_90a", (cfg.threads, 1, 1)).ptx
    stores = ptx.count(".global.shared::cta")           # the epilogue's TMA stores
    return ptx.count("wgmma.mma_async"), ptx.count("cp.async.bulk.tensor") - stores


def compile_only(variants, configs):
    for name, hg in variants.items():
        for kw in configs:
            wgmmas, loads = ptx_counts(hg, kw)
            print(f"{name:7s} {kw}: {wgmmas} wgmma.mma_async, {loads} TMA loads in the PTX")


def fit(points):
    """Least squares of time = fixed + steps * per_step over (steps, us) points."""
    n = len(points)
    mx = sum(s for s, _ in points) / n
    my = sum(t for _, t in points) / n
    var = sum((s - mx) ** 2 for s, _ in points)
    slope = sum((s - mx) * (t - my) for s, t in points) / var
    return my - slope * mx, slope


def measure(variants, configs, shapes):
    import torch

    times = {}
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda").bfloat16()
        b = torch.randn(N, K, device="cuda").bfloat16().T            # K-major B, as the suites' rc layout
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        times[("cuBLAS", "", M, N, K)] = bench(lambda a=a, b=b: torch.matmul(a, b), torch) * 1e3
        for kw in configs:
            for name, hg in variants.items():
                run = hg.prepare(c, a, b, M, N, K, config=hg.GemmConfig(**kw))
                times[(name, str(kw), M, N, K)] = bench(run, torch) * 1e3
                print(f"{M}x{N}x{K} {kw} {name}: {times[name, str(kw), M, N, K]:.2f} us", flush=True)
        print(f"{M}x{N}x{K} cuBLAS: {times['cuBLAS', '', M, N, K]:.2f} us", flush=True)
    print("\nfits over K (K steps of 64): fixed us + ns per step")
    keys = sorted({(name, cfg, M, N) for (name, cfg, M, N, _) in times})
    for name, cfg, M, N in keys:
        points = [(K // 64, t) for (n2, c2, m2, n3, K), t in times.items() if (n2, c2, m2, n3) == (name, cfg, M, N)]
        if len(points) >= 2:
            fixed, slope = fit(points)
            print(f"  {M}x{N}xK {name:7s} {cfg}: {fixed:.2f} us + {slope * 1e3:.0f} ns/step")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="64x4096x1024,64x4096x2048,64x4096x4096")
    parser.add_argument("--configs", default="consumers=1,tn=64,stages=8;consumers=1,tn=64,stages=8,split_k=2")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    with tempfile.TemporaryDirectory() as directory:
        variants = {name: load_variant(name, directory) for name in EDITS}
        configs = extra_configs(variants["full"], args.configs)     # benchmarks/gemm.py's --extra form
        if args.compile_only:
            compile_only(variants, configs)
            return
        from tylo.runtime import driver

        if not driver.gpu_available():
            raise SystemExit("probe_gemm_loop.py: no GPU (use --compile-only to check the variants)")
        measure(variants, configs, shapes)


if __name__ == "__main__":
    main()
