"""Which cluster form of the heuristic's own candidates pays (session 17, validation.md run 2)?

    python scripts/probe_cluster_forms.py 1000x1000x1000,776x1232x2224 TOP OUT.jsonl

For each shape and layout (rr, rc): the pick and the cost model's TOP ranked configurations (as ``finish_config``
runs them), each without clusters, as 2 x 1 and 1 x 2 clusters (whole tiles) or with ``split_cluster``
(split-K), every one checked against float64 and timed interleaved with cuBLAS (``time_checked_launches``).
Appends JSON lines (shape, layout, GemmConfig fields, us, cuBLAS us, heuristic) to $OUT/OUT.jsonl."""
import dataclasses
import json
import os
import sys
import time
from dataclasses import replace

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import hopper_gemm as hg  # noqa: E402
from gemm import describe_config, parse_shape, time_checked_launches  # noqa: E402


def main():
    sms = hg.driver.sm_count()
    shapes = [tuple(parse_shape(s)) for s in sys.argv[1].split(",")]
    top = int(sys.argv[2])
    t0 = time.time()
    with open(os.path.join(os.environ.get("OUT", "."), sys.argv[3]), "a") as out:
        for M, N, K in shapes:
            for lay in ("rr", "rc"):
                ak, bk = lay[0] == "r", lay[1] == "c"
                pick = hg.choose_config(M, N, K, hg.tylo.bf16, sms, ak, bk)
                ranked = sorted((c for c in hg.candidate_configs(M, N, K, hg.tylo.bf16, ak, bk) if not c.stream_k),
                                key=lambda c: hg.estimate_seconds(c, M, N, K, 2, sms))[:top]
                base = list(dict.fromkeys([pick] + [hg.finish_config(c, M, N, K, hg.tylo.bf16, sms, ak, bk)
                                                    for c in ranked]))
                cands = []
                for c in base:
                    plain = replace(c, cluster_m=1, cluster_n=1, split_cluster=False)
                    vs = [dict()]
                    if not plain.fixup:
                        vs += [dict(cluster_m=2), dict(cluster_n=2)]
                    elif plain.split_k > 1 and not plain.stream_k and not plain.split_tail:
                        vs += [dict(split_cluster=True)]
                    for kw in vs:
                        try:
                            v = replace(plain, **kw)
                        except ValueError:
                            continue
                        if hg.refusal(v, N, not ak, not bk) is None:
                            cands.append(v)
                cands = list(dict.fromkeys([pick] + cands))
                launches = {i: (lambda c, a, b, cfg=cfg, mnk=(M, N, K): hg.launch(c, a, b, *mnk, config=cfg))
                            for i, cfg in enumerate(cands)}
                try:
                    t = time_checked_launches(launches, M, N, K, lay, torch)
                except Exception as e:
                    print(M, N, K, lay, "FAILED", type(e).__name__, str(e)[:200], flush=True)
                    continue
                best = min(range(len(cands)), key=lambda i: t[i])
                print(f"{M}x{N}x{K} {lay}: pick {describe_config(pick)} {t[0] * 1e3:.1f} us ({t['cublas'] / t[0]:.3f}); "
                      f"best {describe_config(cands[best])} {t[best] * 1e3:.1f} ({t['cublas'] / t[best]:.3f}) "
                      f"[{time.time() - t0:.0f}s]", flush=True)
                for i, cfg in enumerate(cands):
                    out.write(json.dumps(dict(shape=[M, N, K], layout=lay, config=dataclasses.asdict(cfg), us=t[i] * 1e3,
                                              cublas_us=t["cublas"] * 1e3, heuristic=i == 0)) + "\n")
                out.flush()


if __name__ == "__main__":
    main()
