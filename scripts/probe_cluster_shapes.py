"""Do clusters larger than a pair pay on the mid-size shapes where cuBLAS runs 2 x 4 clusters?

For each shape (bf16, A row-major, B column-major unless --layouts says otherwise) times cuBLAS, the heuristic's
pick and tiles of 64 x 64 .. 128 x 256 in clusters of 2 x 1 .. 4 x 2 CTAs (``GemmConfig.cluster_m`` x
``cluster_n``), interleaved, each checked against torch first. A cluster of 4 or 8 CTAs that each fill an SM
may not fit 132 / cs times at once (GPCs): those are also timed with the persistent grid sized for 128 SMs, and
the driver's count of resident clusters (``hopper_gemm.cluster_slots``) is printed. Writes JSON lines to --json."""
import argparse
import dataclasses
import json
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import hopper_gemm as hg  # noqa: E402
from gemm import describe_config, interleaved, operand  # noqa: E402

TILES = [dict(consumers=1, tn=64, stages=8), dict(consumers=1, tn=128, stages=8), dict(consumers=2, tn=64, stages=8),
         dict(consumers=2, tn=128, stages=6), dict(consumers=2, tn=256, stages=4)]
CLUSTERS = [(2, 1), (1, 2), (2, 2), (4, 1), (1, 4), (2, 4), (4, 2)]
real_sms = hg.driver.sm_count


def launcher(c, a, b, M, N, K, cfg, sms):
    hg.driver.sm_count = lambda device=0: sms
    hg._PREPARED.clear()
    run = hg.prepare(c, a, b, M, N, K, config=cfg)
    hg.driver.sm_count = real_sms
    return run


def probe(M, N, K, layout, out):
    a, b = operand(torch, M, K, layout[0]), operand(torch, K, N, layout[1])
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    ref = a.double() @ b.double()
    pick = hg.choose_config(M, N, K, hg.tylo.bf16, real_sms(), layout[0] == "r", layout[1] == "c")
    fns = {"cublas": lambda: torch.matmul(a, b)}
    names = {}
    configs = [(pick, 132)]
    for tile in TILES:
        for cm, cn in CLUSTERS:
            try:
                cfg = hg.GemmConfig(**tile, cluster_m=cm, cluster_n=cn, direct=N % 8 != 0)
            except ValueError:
                continue
            if hg.refusal(cfg, N, layout[0] == "c", layout[1] == "r") is None:
                configs += [(cfg, 132)] + ([(cfg, 128)] if cm * cn >= 4 else [])
    for cfg, sms in configs:
        name = f"{describe_config(cfg)} cl {cfg.cluster_m}x{cfg.cluster_n} grid{sms}" + (" PICK" if cfg == pick else "")
        try:
            run = launcher(c, a, b, M, N, K, cfg, sms)
            c.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            err = float((c.double() - ref).norm() / ref.norm())
            if not err < 1e-2:
                print(f"  {name}: WRONG rel err {err:.2e}", flush=True)
                continue
            occ = (hg.cluster_slots(cfg, hg.tylo.bf16, layout[0] == "c", layout[1] == "r")
                   if cfg.cluster_size > 1 else None)
        except Exception as e:  # the probe reports and goes on
            print(f"  {name}: {type(e).__name__}: {str(e)[:160]}", flush=True)
            continue
        fns[name] = run
        names[name] = (cfg, sms, occ)
    times = interleaved(fns, torch, rounds=2)
    t_cublas = times["cublas"]
    print(f"{M}x{N}x{K} {layout}: cuBLAS {t_cublas * 1e3:.1f} us", flush=True)
    for name, t in sorted(times.items(), key=lambda kv: kv[1]):
        if name == "cublas":
            continue
        cfg, sms, occ = names[name]
        print(f"  {t * 1e3:7.1f} us  {t_cublas / t:.3f}x  {name}  (resident clusters {occ})", flush=True)
        out.write(json.dumps(dict(shape=[M, N, K], layout=layout, config=dataclasses.asdict(cfg), sms=sms,
                                  us=t * 1e3, cublas_us=t_cublas * 1e3, occupancy=occ, pick=cfg == pick)) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shapes", default="776x1232x2224,1000x1000x1000,257x776x4104,384x6144x1024,512x512x5120,"
                                        "1536x704x3072,3000x5000x2000,2048x2048x2048,4096x4096x4096")
    ap.add_argument("--layouts", default="rc")
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "cluster_shapes.jsonl"))
    args = ap.parse_args()
    with open(args.json, "w") as out:
        for text in args.shapes.split(","):
            M, N, K = (int(x) for x in text.split("x"))
            for layout in args.layouts.split(","):
                probe(M, N, K, layout, out)


if __name__ == "__main__":
    main()
