"""How much the same GEMM configuration's time moves with where its buffers sit, in one process.

    python scripts/probe_gemm_variance.py [--shapes 256x1024x8192,64x1024x8192] [--layouts rr,rc] [--trials 8]
                                          [--config "consumers=1,tn=128,split_k=4"] [--json PATH]

Session 19 measured the heuristic's pick at 256x1024x8192 at 1.08 of cuBLAS in one process and 0.92 in the next
(rr; rc the other way round), while cuBLAS moved under 1%. This probe separates the candidate causes: every
trial allocates a pad of random size first (so A, B and C land elsewhere) and runs on a fresh torch stream (so
``stream_scratch`` gives the split-K fixup new partial tiles and arrival counters), checks the result against
float64, then times the pick (or ``--config``, GemmConfig keywords) and cuBLAS interleaved (benchmarks/gemm.py's
``time_checked_launches``). It prints each trial's times and the buffers' addresses modulo 2 MiB (a large page)
and the spread of tylo / cuBLAS over the trials; ``--json`` keeps the rows.
"""
import argparse
import json
import os
import random
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import hopper_gemm as hg  # noqa: E402
from gemm import describe_config, extra_configs, operand, parse_shape  # noqa: E402

from tylo.runtime.arrays import describe_array  # noqa: E402
from tylo.runtime.scratch import scratch_buffers  # noqa: E402

PAGE = 2 << 20


def trial(M, N, K, lay, config, rng):
    """One trial on fresh buffers and a fresh stream: (tylo ms, cuBLAS ms, addresses by name)."""
    from gemm import check, interleaved
    pad = torch.empty(rng.randrange(1, 64) << 20, dtype=torch.uint8, device="cuda")    # noqa: F841 (kept alive)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        a, b = operand(torch, M, K, lay[0]), operand(torch, K, N, lay[1])
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        hg.launch(c, a, b, M, N, K, config=config)
        torch.cuda.synchronize()
        check(c, a, b, 1.0, torch)
        t = interleaved({"tylo": lambda: hg.launch(c, a, b, M, N, K, config=config),
                         "cublas": lambda: torch.matmul(a, b)}, torch)
        ws = scratch_buffers("hopper_gemm.ws")
        where = {"A": a.data_ptr(), "B": b.data_ptr(), "C": c.data_ptr(),
                 "ws": describe_array(ws[-1]).ptr if ws else 0}
    return t["tylo"], t["cublas"], where


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="256x1024x8192,64x1024x8192")
    ap.add_argument("--layouts", default="rr,rc")
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--config", default="", help="GemmConfig keywords (benchmarks/gemm.py --extra syntax); "
                                                 "default: the heuristic's pick")
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "gemm_variance.jsonl"))
    args = ap.parse_args()
    rng = random.Random(19)
    with open(args.json, "w") as out:
        for M, N, K in (parse_shape(s) for s in args.shapes.split(",")):
            for lay in args.layouts.split(","):
                config = (hg.GemmConfig(**extra_configs(hg, args.config)[0]) if args.config else
                          hg.choose_config(M, N, K, hg.tylo.bf16, hg.driver.sm_count(), lay[0] == "r", lay[1] == "c"))
                ratios = []
                for i in range(args.trials):
                    ms, cublas_ms, where = trial(M, N, K, lay, config, rng)
                    ratios.append(cublas_ms / ms)
                    print(f"{M}x{N}x{K} {lay} {describe_config(config)} trial {i}: {ms * 1e3:.1f} us, cuBLAS "
                          f"{cublas_ms * 1e3:.1f} us, ratio {ratios[-1]:.3f}; mod 2 MiB "
                          + " ".join(f"{k} {v % PAGE:#x}" for k, v in where.items()), flush=True)
                    out.write(json.dumps(dict(shape=[M, N, K], layout=lay, config=describe_config(config), trial=i,
                                              us=ms * 1e3, cublas_us=cublas_ms * 1e3, where=where)) + "\n")
                ratios.sort()
                print(f"{M}x{N}x{K} {lay}: tylo / cuBLAS over {len(ratios)} trials: min {ratios[0]:.3f}, median "
                      f"{ratios[len(ratios) // 2]:.3f}, max {ratios[-1]:.3f}", flush=True)


if __name__ == "__main__":
    main()
