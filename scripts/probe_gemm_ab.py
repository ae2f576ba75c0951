"""A/B two versions of examples/hopper_gemm.py on the GPU, each with its own heuristic and kernel, in one process.

    python scripts/probe_gemm_ab.py OLD.py [--suites losers,llm] [--shapes 64x1024x8192,...] [--layouts rr,rc]
                                   [--fixup-only] [--json PATH]

``OLD.py`` is the other version (e.g. ``git show HEAD~1:examples/hopper_gemm.py > /tmp/old.py``); the tree's
examples/hopper_gemm.py is "new". For every shape and layout (``--fixup-only``: only those where either version's
pick runs the in-kernel fixup, or the picks differ), each version launches its own ``choose_config`` pick; both
results are checked against a float64 product, then the two and cuBLAS are timed interleaved
(benchmarks/gemm.py's ``time_checked_launches``). Prints new / old time per shape and their geometric mean. Both versions
share ``stream_scratch``'s workspace and counters (launches run one after another; every launch leaves the
counters at zero)."""
import argparse
import dataclasses
import importlib.util
import json
import math
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import hopper_gemm as new  # noqa: E402
from gemm import SUITES, describe_config, parse_shape, time_checked_launches  # noqa: E402


def load_version(path):
    spec = importlib.util.spec_from_file_location("hopper_gemm_other", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", help="the other version of examples/hopper_gemm.py")
    ap.add_argument("--suites", default="")
    ap.add_argument("--shapes", default="")
    ap.add_argument("--layouts", default="rr,rc")
    ap.add_argument("--fixup-only", action="store_true")
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "gemm_ab.jsonl"))
    args = ap.parse_args()
    old = load_version(args.old)
    shapes = [tuple(s) for suite in filter(None, args.suites.split(",")) for s in SUITES[suite]]
    shapes += [tuple(parse_shape(t)) for t in filter(None, args.shapes.split(","))]
    sms = new.driver.sm_count()
    ratios = []
    with open(args.json, "w") as out:
        for M, N, K in dict.fromkeys(shapes):
            for lay in args.layouts.split(","):
                picks = {name: mod.choose_config(M, N, K, mod.tylo.bf16, sms, lay[0] == "r", lay[1] == "c")
                         for name, mod in (("old", old), ("new", new))}
                same = dataclasses.asdict(picks["old"]) == dataclasses.asdict(picks["new"])    # two modules' classes
                if args.fixup_only and same and not picks["new"].fixup:
                    continue
                t = time_checked_launches(
                    {name: lambda c, a, b, mod=mod, cfg=picks[name], mnk=(M, N, K): mod.launch(c, a, b, *mnk, config=cfg)
                     for name, mod in (("old", old), ("new", new))}, M, N, K, lay, torch)
                ratios.append(t["new"] / t["old"])
                print(f"{M}x{N}x{K} {lay}: old {describe_config(picks['old'])} {t['old'] * 1e3:.1f} us "
                      f"({t['cublas'] / t['old']:.3f}x cuBLAS), new {describe_config(picks['new'])} "
                      f"{t['new'] * 1e3:.1f} us ({t['cublas'] / t['new']:.3f}x), new / old {ratios[-1]:.3f}",
                      flush=True)
                out.write(json.dumps(dict(shape=[M, N, K], layout=lay, old=dataclasses.asdict(picks["old"]),
                                          new=dataclasses.asdict(picks["new"]), old_us=t["old"] * 1e3,
                                          new_us=t["new"] * 1e3, cublas_us=t["cublas"] * 1e3)) + "\n")
    if ratios:
        print(f"{len(ratios)} shape/layout pairs; geometric mean of new / old time "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}, worst {max(ratios):.3f}, "
              f"best {min(ratios):.3f}")


if __name__ == "__main__":
    main()
