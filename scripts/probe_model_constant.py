"""A/B a change of the GEMM cost model's constants on the GPU, where it changes the heuristic's picks.

    python scripts/probe_model_constant.py --set MEM_LATENCY_S=1.05e-6 [--set FITTED_WIDTHS="()"] [--suites ...]
                                           [--layouts rr,rc] [--json PATH]

(``--suites`` defaults to issue,llm,ragged,losers.) For every shape of the suites (benchmarks/gemm.py's) and layout whose ``choose_config`` pick changes under the
new constants, times the old pick, the new one and cuBLAS interleaved (each result checked against torch first)
and prints the ratio; the geometric mean of new / old time ends the table."""
import argparse
import ast
import dataclasses
import json
import math
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import hopper_gemm as hg  # noqa: E402
from gemm import SUITES, describe_config, time_checked_launches  # noqa: E402


def picks(shapes, layouts, constants, sms):
    saved = {name: getattr(hg, name) for name in constants}
    for name, value in constants.items():
        setattr(hg, name, value)
    hg.choose_config.cache_clear()
    try:
        return {(s, lay): hg.choose_config(*s, hg.tylo.bf16, sms, lay[0] == "r", lay[1] == "c")
                for s in shapes for lay in layouts}
    finally:
        for name, value in saved.items():
            setattr(hg, name, value)
        hg.choose_config.cache_clear()


def time_pair(key, old, new, out):
    """Time the old and new picks of one (shape, layout) next to cuBLAS; returns new / old time."""
    (M, N, K), lay = key
    t = time_checked_launches({name: lambda c, a, b, cfg=cfg: hg.launch(c, a, b, M, N, K, config=cfg)
                               for name, cfg in (("old", old), ("new", new))}, M, N, K, lay, torch)
    print(f"{M}x{N}x{K} {lay}: old {describe_config(old)} {t['old'] * 1e3:.1f} us ({t['cublas'] / t['old']:.3f}x "
          f"cuBLAS), new {describe_config(new)} {t['new'] * 1e3:.1f} us ({t['cublas'] / t['new']:.3f}x)", flush=True)
    out.write(json.dumps(dict(shape=[M, N, K], layout=lay, old=dataclasses.asdict(old), new=dataclasses.asdict(new),
                              old_us=t["old"] * 1e3, new_us=t["new"] * 1e3, cublas_us=t["cublas"] * 1e3)) + "\n")
    return t["new"] / t["old"]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--set", action="append", required=True, help="NAME=VALUE of a hopper_gemm constant")
    ap.add_argument("--suites", default="issue,llm,ragged,losers")
    ap.add_argument("--layouts", default="rr,rc")
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "model_constant.jsonl"))
    args = ap.parse_args()
    constants = {k: ast.literal_eval(v) for k, v in (item.split("=", 1) for item in args.set)}
    shapes = sorted({s for suite in args.suites.split(",") for s in SUITES[suite]})
    layouts = args.layouts.split(",")
    sms = hg.driver.sm_count()
    old, new = picks(shapes, layouts, {}, sms), picks(shapes, layouts, constants, sms)
    ratios = []
    with open(args.json, "w") as out:
        for key in old:
            if old[key] == new[key]:
                continue
            try:
                ratios.append(time_pair(key, old[key], new[key], out))
            except ValueError as e:     # operands launch refuses (e.g. a column-major A whose M is not 16-byte aligned)
                print(f"{key}: skipped: {e}", flush=True)
    if ratios:
        print(f"{len(ratios)} changed picks; geometric mean of new / old time "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}, worst {max(ratios):.3f}, best {min(ratios):.3f}")
    else:
        print("no pick changes")


if __name__ == "__main__":
    main()
