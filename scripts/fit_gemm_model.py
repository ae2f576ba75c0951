"""Fit the constants of hopper_gemm's cost model (``estimate_seconds``) to measured sweeps.

    python benchmarks/gemm.py --kernel hopper --suite llm --sweep 10 --sweep-json llm.jsonl ...   (on the GPU)
    python scripts/fit_gemm_model.py llm.jsonl ragged.jsonl [--test more.jsonl] [--rounds 600] [--seed 0]
    python scripts/fit_gemm_model.py docs/data/gemm_sweep_s12_*.jsonl.gz --rounds 0     (the current model's regret)

Each sweep record is one configuration timed on one shape (``--sweep-json``). For every shape the model's
pick is taken the way ``choose_config`` takes it (least estimate, each candidate but the default charged
``NEAR_TIE`` / ``NEAR_TIE_FIXUP``) among the configurations timed there without clusters or stream-K
(``choose_config`` adds clusters by its own rules, ``finish_config``, and never picks stream-K), and its
*regret* is the measured time of what ``choose_config`` would run for it over the best such time. The fit is a seeded random local search over the constants that
minimises the sum of log regrets plus the mean absolute log error of the estimates (which keeps the model a
model of time, not only of order). It prints the constants to paste into examples/hopper_gemm.py, and the
regret per shape on the fitting data and on ``--test`` data (sweeps not fitted: whether the fit carries).
docs/data/gemm_sweep_s12_*.jsonl.gz are session 12's sweeps on the H200 (140 shapes and layouts; validation.md);
docs/data/gemm_sweep_s16_{llm,ragged,issue,more}.jsonl.gz session 16's, of one kernel version (144 shapes and layouts).
docs/data/gemm_sweep_s22_mid.jsonl.gz session 22's: 20 mid shapes (M 64-2048), rr and rc, the model's 10 best and
64- and 128-wide one-consumer tiles at split 1-4 forced in (the model's ranking had left them out of earlier sweeps).
``--only W1,MEM_LATENCY_S`` fits a subset of the constants.
"""
import argparse
import collections
import gzip
import json
import math
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import hopper_gemm as hg  # noqa: E402
from gemm import describe_config  # noqa: E402

SMS = 132
# the constants fitted: module globals of hopper_gemm (WGMMA_FIXED_CLOCKS[1] and [2] as W1, W2)
FITTED = ("W1", "W2", "SM_BYTES_S", "MEM_LATENCY_S", "UNIT_OVERHEAD_S", "FIXUP_S", "PARTIAL_S", "L2_LATENCY_S",
          "SMEM_READ_BYTES_S", "LAUNCH_S", "HBM_BYTES_S", "REDUCTION_BYTES_S", "TMA_EPILOGUE_S")


def load(paths):
    """[((M, N, K), layout, {GemmConfig: us})] over the shapes of the sweep files: the configurations the cost
    model can pick (no clusters, stream-K or split_cluster), each timed as what ``choose_config`` runs for
    that pick (``finish_config``: clusters where rows are misaligned, split-K as a cluster where it pays),
    where the sweep timed that, else as itself."""
    by = collections.defaultdict(dict)
    for path in paths:
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            for line in f:
                r = json.loads(line)
                by[(tuple(r["shape"]), r["layout"])][hg.GemmConfig(**r["config"])] = r["us"]
    data = []
    for ((M, N, K), layout), timed in sorted(by.items()):
        picks = {}
        for cfg, us in timed.items():
            if cfg.cluster_size == 1 and not cfg.stream_k:
                runs = hg.finish_config(cfg, M, N, K, hg.tylo.bf16, SMS, layout[0] == "r", layout[1] == "c")
                picks[cfg] = timed.get(runs, us)
        if len(picks) >= 2:
            data.append(((M, N, K), layout, picks))
    return data


def constants():
    return {"W1": hg.WGMMA_FIXED_CLOCKS[1], "W2": hg.WGMMA_FIXED_CLOCKS[2],
            **{name: getattr(hg, name) for name in FITTED[2:]}}


def set_constants(values):
    hg.WGMMA_FIXED_CLOCKS[1], hg.WGMMA_FIXED_CLOCKS[2] = values["W1"], values["W2"]
    for name in FITTED[2:]:
        setattr(hg, name, values[name])


def evaluate(data):
    """(sum of log regrets, mean |log(estimate / measured)|, [(shape, layout, pick, best, regret)])."""
    total, err, n, rows = 0.0, 0.0, 0, []
    for (M, N, K), layout, timed in data:
        pick = min(timed, key=lambda c: hg.charged_estimate(c, M, N, K, 2, SMS))
        best = min(timed, key=timed.get)
        regret = timed[pick] / timed[best]
        total += math.log(regret)
        rows.append(((M, N, K), layout, pick, best, regret))
        for cfg, us in timed.items():
            err += abs(math.log(hg.estimate_seconds(cfg, M, N, K, 2, SMS) * 1e6 / us))
            n += 1
    return total, err / max(n, 1), rows


def fit(data, rounds, seed, names=FITTED):
    """A seeded random local search over the constants ``names`` (the others stay as they are)."""
    rng = random.Random(seed)
    best = constants()
    set_constants(best)
    regret, err, _ = evaluate(data)
    best_obj = regret + err
    for _ in range(rounds):
        trial = dict(best)
        for name in rng.sample(names, min(len(names), rng.choice((1, 2, 3)))):
            trial[name] = trial[name] * math.exp(rng.gauss(0, 0.25))
        set_constants(trial)
        regret, err, _ = evaluate(data)
        if regret + err < best_obj - 1e-4:
            best, best_obj = trial, regret + err
    set_constants(best)
    return best


def report(name, data):
    regret, err, rows = evaluate(data)
    print(f"{name}: {len(rows)} shapes, geometric-mean regret {math.exp(regret / max(len(rows), 1)):.4f}, "
          f"worst {max((r[4] for r in rows), default=1):.3f}, mean |log error| {err:.3f}")
    for shape, layout, pick, best, r in rows:
        if r > 1.03:
            print(f"    {'x'.join(map(str, shape))} {layout}: pick {describe_config(pick)}, best {describe_config(best)}, "
                  f"regret {r:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweeps", nargs="+", help="JSON-lines files of benchmarks/gemm.py --sweep-json")
    ap.add_argument("--test", nargs="*", default=[], help="sweeps to report on without fitting to them")
    ap.add_argument("--rounds", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default=",".join(FITTED), help="comma-separated constants to fit (default: all of "
                    "them); the others keep the values of examples/hopper_gemm.py")
    args = ap.parse_args()
    train, test = load(args.sweeps), load(args.test)
    report("before, fitting data", train)
    if test:
        report("before, test data", test)
    names = tuple(name.strip() for name in args.only.split(","))
    unknown = set(names) - set(FITTED)
    if unknown:
        raise SystemExit(f"fit_gemm_model.py: --only names constants it does not fit: {sorted(unknown)}")
    fitted = fit(train, args.rounds, args.seed, names)
    report("after, fitting data", train)
    if test:
        report("after, test data", test)
    print("fitted constants:")
    for name, value in fitted.items():
        print(f"    {name} = {value:.3g}")


if __name__ == "__main__":
    main()
