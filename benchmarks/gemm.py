"""GEMM throughput of tylo's kernels next to torch.matmul (cuBLAS) and Triton, in the same run.

    python benchmarks/gemm.py [--kernel warp-mma|hopper] [--shapes 4096,8192,8192x8192x1024]
                              [--suite issue|llm|llm-small|ragged|losers] [--layouts rr,rc] [--plot gemm.png]
                              [--baseline] [--tuned] [--sweep N] [--sweep-json PATH] [--picks SMS]

``--suite``: a named shape list instead of ``--shapes``: ``issue`` (the table of issue 14), ``llm``
(LLM projections: M in 1, 16, 64, 128, 256, 512, 2048, 8192 times N x K in 4096x4096, 14336x4096,
4096x14336, 28672x8192, 8192x28672, 1024x8192; 48 shapes), ``llm-small`` (a representative subset of
it), ``ragged``, ``losers`` (the shapes below 0.9x cuBLAS in session 3, and the large squares).
``--baseline`` (hopper) adds a column for the fixed 128 x 256 configuration (the GEMM before the small-
shape configurations), ``--tuned`` (hopper) one for ``launch(..., autotune=True)`` (the heuristic's pick and
the model's next tiles and split counts timed on the first call per shape, then read from the tylo cache), ``--sweep N`` also times the N configurations the cost model ranks best for each
shape (to check the heuristic); ``--picks 132`` only prints the heuristic's pick and estimate for each
shape and layout on 132 SMs (CPU, no GPU: to compare the heuristic before and after a change). The
geometric mean and minimum of the tylo / cuBLAS ratios end the table.

A shape is ``n`` (n x n x n) or ``MxNxK``. A layout names A's and B's storage: ``r`` row-major,
``c`` column-major (a transposed view; no copy). Each result is first checked against a float64
product (relative error < 1e-2), then timed with CUDA events (median of repeats, after warm-up,
each repeat a few back-to-back calls queued behind a GPU sleep, so host launch costs are not
counted; the libraries take turns over three rounds) and reported as TFLOP/s and ratios to cuBLAS
and Triton.
``--kernel hopper`` runs examples/hopper_gemm.py (sm_90a: TMA + WGMMA, warp-specialised,
persistent), which takes all four layouts; the warp-MMA GEMM takes ``rr`` only.
A Triton column is added when triton imports (a plain tiled ``tl.dot`` kernel written here,
strided loads for any layout, measured in the same run), and a PNG plot is written when
matplotlib imports.
"""
import argparse
import dataclasses
import json
import os
import sys
import time

from tylo.runtime import driver

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))


def bench(fn, torch, warmup=3, reps=15, inner=5):
    """Median GPU milliseconds of one call over ``reps`` timings of ``inner`` back-to-back calls.

    Each timing starts behind a ~1 ms GPU sleep, so the host has queued the calls before the
    start event fires: this measures the kernels, not the host's launch path (which
    benchmarks/jit_overhead.py measures). Every library timed here is treated the same way.
    """
    sleep = getattr(torch.cuda, "_sleep", None)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if sleep is not None:
            sleep(2_000_000)
        s.record()
        for _ in range(inner):
            fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / inner)
    return sorted(times)[len(times) // 2]


def interleaved(fns, torch, rounds=3):
    """Median time of each function over ``rounds`` rounds that take them in turn, so clock and power
    drift (a GPU slows down after heavy work) is shared rather than charged to whoever runs last."""
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(bench(fn, torch, reps=7))
    return {name: sorted(ts)[len(ts) // 2] for name, ts in times.items()}


def time_checked_launches(launches, M, N, K, layout, torch, rounds=3):
    """Median ms of each ``launches[name](c, a, b)`` (a GEMM into its own NaN-filled bf16 C) and of cuBLAS on fresh
    operands of ``layout``, interleaved (``interleaved``), after checking every result against float64 (``check``):
    the A/B primitive of scripts/probe_model_constant.py and scripts/probe_gemm_ab.py."""
    a, b = operand(torch, M, K, layout[0]), operand(torch, K, N, layout[1])
    fns = {"cublas": lambda: torch.matmul(a, b)}
    for name, launch in launches.items():
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        launch(c, a, b)
        torch.cuda.synchronize()
        check(c, a, b, 1.0, torch)
        fns[name] = lambda launch=launch, c=c: launch(c, a, b)
    return interleaved(fns, torch, rounds=rounds)


def host_microseconds(fn, torch, calls=50):
    """Host time per call of the launch path (the GPU runs behind; the queue does not fill)."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return t


LLM_M = (1, 16, 64, 128, 256, 512, 2048, 8192)
LLM_NK = ((4096, 4096), (14336, 4096), (4096, 14336), (28672, 8192), (8192, 28672), (1024, 8192))
SUITES = {
    "issue": [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 4096, 4096), (1024, 8192, 16384),
              (2048, 2048, 2048), (3000, 5000, 2000), (256, 4096, 8192), (16, 8192, 8192), (64, 8192, 8192),
              (128, 8192, 8192)],
    "llm": [(m, n, k) for m in LLM_M for n, k in LLM_NK],
    "llm-small": [(m, n, k) for m in (1, 16, 64, 128, 256, 512, 2048)
                  for n, k in ((4096, 4096), (14336, 4096), (4096, 14336), (1024, 8192))],
    "ragged": [(1, 8, 8), (7, 1000, 3000), (33, 4104, 520), (257, 776, 4104), (1000, 1000, 1000),
               (3001, 5000, 2008)],
    # the shapes below 0.9x cuBLAS in session 3 (docs/validation.md), and the large squares
    "losers": [(64, 1024, 8192), (128, 1024, 8192), (256, 1024, 8192), (512, 1024, 8192), (64, 4096, 4096),
               (1, 4096, 4096), (16, 4096, 4096), (1, 1024, 8192), (16, 1024, 8192), (1, 4096, 14336),
               (16, 4096, 14336), (3000, 5000, 2000), (1000, 1000, 1000), (4096, 4096, 4096), (8192, 8192, 8192)],
}


def geomean(xs):
    import math
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def parse_shape(text):
    parts = [int(p) for p in text.lower().split("x")]
    if len(parts) == 1:
        return parts * 3
    if len(parts) != 3:
        raise SystemExit(f"gemm.py: a shape is n or MxNxK, got {text!r}")
    return parts


def operand(torch, rows, cols, major):
    """A (rows, cols) bf16 operand, row-major ('r') or column-major ('c', the transpose of a row-major one)."""
    if major == "r":
        return torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    return torch.randn(cols, rows, device="cuda", dtype=torch.bfloat16).T


def check(c, a, b, alpha, torch):
    ref = alpha * (a.double() @ b.double())
    rel = (c.double() - ref).norm() / ref.norm()
    assert rel < 1e-2, f"relative error {rel:.2e}"
    return float(rel)


def make_triton():
    """A plain Triton matmul (C = A @ B, bf16, fp32 accumulation), or None without triton."""
    try:
        import triton
        import triton.language as tl
    except Exception:
        return None

    @triton.jit
    def _mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP: tl.constexpr):
        pid = tl.program_id(0)
        grid_m = tl.cdiv(M, BLOCK_M)
        grid_n = tl.cdiv(N, BLOCK_N)
        width = GROUP * grid_n
        first = (pid // width) * GROUP
        rows = tl.minimum(grid_m - first, GROUP)
        pm = first + (pid % width) % rows
        pn = (pid % width) // rows
        rm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pn * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            ka = k0 + rk
            x = tl.load(a + rm[:, None] * sam + ka[None, :] * sak, mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
            y = tl.load(b + ka[:, None] * sbk + rn[None, :] * sbn, mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(x, y, acc)
        tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))

    def run(c, a, b):
        M, K = a.shape
        N = b.shape[1]
        # 128 x 256 tiles for large products; smaller ones when they would leave SMs idle
        bm = 64 if M <= 64 else 128
        bn = 256 if triton.cdiv(M, bm) * triton.cdiv(N, 256) >= 132 else 128
        bk = 64
        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
        _mm[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                  BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP=8, num_warps=8 if bm * bn >= 128 * 256 else 4,
                  num_stages=3 if bm * bn >= 128 * 256 else 4)
    return run


def describe_config(cfg):
    text = f"{cfg.tm}x{cfg.tn} s{cfg.stages}"
    if cfg.swap_ab:
        text += " swapAB"
    if cfg.split_k > 1:
        text += f" splitK{cfg.split_k}{' cluster' if cfg.split_cluster else ''}{' tail' if cfg.split_tail else ''}"
    if cfg.stream_k:
        text += " streamK"
    if cfg.direct:
        text += " direct"
    if cfg.cluster_m * cfg.cluster_n > 1:
        text += f" cluster{cfg.cluster_m}x{cfg.cluster_n}"
    if cfg.group_m != 8:
        text += f" group{cfg.group_m}"
    if cfg.c_bufs != 2:
        text += f" cbufs{cfg.c_bufs}"
    return text


_FLAG_FIELDS = ("stream_k", "swap_ab", "direct", "split_cluster", "split_tail")     # GemmConfig's bool fields


def extra_configs(hg, text):
    """``--extra``: GemmConfig keyword sets separated by ';' (``stream_k=1;consumers=1,tn=128,split_k=4``);
    stages default to the most that fit the tile."""
    out = []
    for item in filter(None, text.split(";")):
        kw = {}
        for pair in item.split(","):
            k, v = (x.strip() for x in pair.split("="))
            kw[k] = v not in ("0", "False", "false") if k in _FLAG_FIELDS else int(v)
        if "stages" not in kw:
            kw["stages"] = hg.max_stages(64 * kw.get("consumers", 2), kw.get("tn", 256), kw.get("direct", False),
                                         kw.get("consumers", 2), kw.get("c_bufs", 2))
        out.append(kw)
    return out


def sweep(hg, launch, c, a, b, M, N, K, lay, fp8, count, torch, extra=()):
    """Time the ``count`` configurations the cost model ranks best, what ``choose_config`` would run for each
    of them (``finish_config``: a cluster where it applies, so a fit scores the configuration that runs), the
    heuristic's pick and the ``extra`` ones (GemmConfig keywords; direct added where the shape needs it) on this
    shape, taking turns over two rounds (``interleaved``). Returns one record per configuration timed (for
    ``--sweep-json``)."""
    dtype = hg.INPUT_TYPES["f8e4m3" if fp8 else "bf16"]
    sms = driver.sm_count()
    ranked = sorted(hg.candidate_configs(M, N, K, dtype, lay[0] == "r", lay[1] == "c"),
                    key=lambda cfg: hg.estimate_seconds(cfg, M, N, K, dtype.itemsize, sms))
    chosen = hg.choose_config(M, N, K, dtype, sms, lay[0] == "r", lay[1] == "c")
    flops = 2.0 * M * N * K
    more = []
    for kw in extra:
        try:
            more.append(hg.GemmConfig(**{**kw, "direct": kw.get("direct", False) or N % 8 != 0}))
        except ValueError as e:
            print(f"    sweep extra {kw}: {e}")
    finished = [hg.finish_config(cfg, M, N, K, dtype, sms, lay[0] == "r", lay[1] == "c") for cfg in ranked[:count]]
    runnable = {}
    for cfg in dict.fromkeys([chosen] + ranked[:count] + finished + more):
        try:
            launch(c, a, b, M, N, K, config=cfg)
            torch.cuda.synchronize()
            check(c, a, b, 1.0, torch)
            runnable[cfg] = lambda cfg=cfg: launch(c, a, b, M, N, K, config=cfg)
        except Exception as e:
            print(f"    sweep {describe_config(cfg)}: {type(e).__name__}: {str(e)[:100]}")
    times = interleaved(runnable, torch, rounds=2)
    records = []
    for cfg, ms in sorted(times.items(), key=lambda r: r[1]):
        model = hg.estimate_seconds(cfg, M, N, K, dtype.itemsize, sms) * 1e3
        print(f"    sweep {M}x{N}x{K} {describe_config(cfg):<32} {flops / ms / 1e9:7.1f} TFLOP/s  "
              f"{ms * 1e3:8.1f} us (model {model * 1e3:7.1f} us){'  <- heuristic' if cfg == chosen else ''}",
              flush=True)
        records.append({"shape": [M, N, K], "layout": lay, "config": dataclasses.asdict(cfg), "us": ms * 1e3,
                        "model_us": model * 1e3, "heuristic": cfg == chosen})
    return records


def print_picks(shapes, layouts, dtype, sms):
    """``--picks``: the heuristic's configuration and estimate per shape and layout (CPU only)."""
    import hopper_gemm as hg
    itype = hg.INPUT_TYPES["f8e4m3" if dtype == "fp8" else "bf16"]
    for M, N, K in shapes:
        for lay in layouts:
            cfg = hg.choose_config(M, N, K, itype, sms, lay[0] == "r", lay[1] == "c")
            us = hg.estimate_seconds(cfg, M, N, K, itype.itemsize, sms) * 1e6
            print(f"{M}x{N}x{K} {lay}: {describe_config(cfg)} ({us:.1f} us)")


def plot(rows, kernel, path, with_triton, dtype="bf16"):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        print("(matplotlib not available: no plot)")
        return
    labels = [r[0] for r in rows]
    xs = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(7, 0.35 * len(rows)), 4.5))
    ax.plot(xs, [r[1] for r in rows], "o-", label=f"tylo {kernel}")
    ax.plot(xs, [r[2] for r in rows], "s-", label="cuBLAS (torch.matmul)")
    if any(r[5] for r in rows):
        ax.plot(xs, [r[5] if r[5] else float("nan") for r in rows], "x--", label="tylo 128x256 (before)")
    if any(r[7] for r in rows):
        ax.plot(xs, [r[7] if r[7] else float("nan") for r in rows], "d-", label=f"tylo {kernel}, autotuned")
    if with_triton:
        ax.plot(xs, [r[3] if r[3] else float("nan") for r in rows], "^-", label="Triton")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=70, fontsize=7)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{'fp8 e4m3' if dtype == 'fp8' else 'bf16'} GEMM, fp32 accumulation, bf16 out")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", default="warp-mma", choices=["warp-mma", "hopper"])
    ap.add_argument("--shapes", "--sizes", default="4096,8192")
    ap.add_argument("--suite", default=None, choices=sorted(SUITES), help="a named shape list (overrides --shapes)")
    ap.add_argument("--baseline", action="store_true", help="hopper: also time the fixed 128 x 256 configuration")
    ap.add_argument("--tuned", action="store_true", help="hopper: also time launch(..., autotune=True) (tuned on "
                    "its first call per shape, or read from the tylo cache)")
    ap.add_argument("--sweep", type=int, default=0, help="hopper: also time the N configurations ranked best "
                    "by the cost model")
    ap.add_argument("--extra", default="", help="hopper with --sweep: also time these GemmConfig keyword sets, "
                    "';'-separated (e.g. 'stream_k=1;consumers=1,tn=128,split_k=4;cluster_m=2;cluster_n=2')")
    ap.add_argument("--sweep-json", default=None, metavar="PATH",
                    help="hopper with --sweep: write every timed configuration (shape, layout, GemmConfig fields, "
                         "us, the model's us, cuBLAS's us) to PATH as JSON lines, to fit the cost model")
    ap.add_argument("--no-triton", action="store_true", help="leave out the Triton column")
    ap.add_argument("--layouts", default="rr", help="comma-separated A/B storage pairs: rr, rc, cr, cc")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp8"],
                    help="fp8: e4m3 inputs (A row-major, B column-major), bf16 out, against torch._scaled_mm")
    ap.add_argument("--plot", default=None, help="PNG path (default: gemm_<kernel>.png when matplotlib imports)")
    ap.add_argument("--picks", type=int, default=0, metavar="SMS",
                    help="hopper: print choose_config's pick and estimate for every shape and layout on a GPU of "
                         "SMS SMs (132: H200) and exit; no GPU needed")
    args = ap.parse_args()
    layouts = args.layouts.split(",")
    if any(len(lay) != 2 or set(lay) - {"r", "c"} for lay in layouts):
        raise SystemExit(f"gemm.py: layouts are pairs of r/c, got {args.layouts!r}")
    if args.picks:
        print_picks(SUITES[args.suite] if args.suite else [parse_shape(t) for t in args.shapes.split(",")], layouts,
                    args.dtype, args.picks)
        return
    import torch

    fp8 = args.dtype == "fp8"
    if fp8 and (args.kernel != "hopper" or layouts != ["rc"]):
        raise SystemExit("gemm.py: --dtype fp8 runs --kernel hopper with --layouts rc (fp8 WGMMA reads K-major operands)")
    if args.kernel == "hopper":
        import hopper_gemm

        def launch(c, a, b, M, N, K, config=None, autotune=False):
            return hopper_gemm.launch(c, a, b, M, N, K, config=config, autotune=autotune)
    else:
        import warp_gemm
        if layouts != ["rr"]:
            raise SystemExit("gemm.py: the warp-MMA GEMM takes row-major operands only (--layouts rr)")

        def launch(c, a, b, M, N, K):
            warp_gemm.launch(c, a, b, M, N, K, 1.0)
    triton_mm = None if args.no_triton else make_triton()
    if fp8:
        one = torch.ones((), device="cuda")

        def reference(a, b):      # cuBLAS's fp8 GEMM, bf16 out
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    else:
        def reference(a, b):
            return torch.matmul(a, b)

    rows = []
    shapes = SUITES[args.suite] if args.suite else [parse_shape(t) for t in args.shapes.split(",")]
    for M, N, K in shapes:
        for lay in layouts:
            a = operand(torch, M, K, lay[0])
            b = operand(torch, K, N, lay[1])
            if fp8:                   # the same values in e4m3, keeping each operand's storage order
                a = a.to(torch.float8_e4m3fn)
                b = b.T.contiguous().to(torch.float8_e4m3fn).T
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            try:
                launch(c, a, b, M, N, K)
            except ValueError as e:         # a layout TMA cannot address (e.g. unaligned rows)
                print(f"  {M}x{N}x{K} {lay}: skipped: {e}", file=sys.stderr)
                continue
            torch.cuda.synchronize()
            rel = check(c, a, b, 1.0, torch)
            check(reference(a, b), a, b, 1.0, torch)
            fns = {"tylo": lambda: launch(c, a, b, M, N, K), "cublas": lambda: reference(a, b)}
            chosen = tuned_text = ""
            tuning_s = 0.0
            swept = []
            if args.kernel == "hopper":
                chosen = describe_config(hopper_gemm.choose_config(
                    M, N, K, hopper_gemm.INPUT_TYPES["f8e4m3" if fp8 else "bf16"], driver.sm_count(),
                    lay[0] == "r", lay[1] == "c"))
                if args.baseline:
                    base = hopper_gemm.GemmConfig(direct=N % 8 != 0)
                    launch(c, a, b, M, N, K, config=base)
                    torch.cuda.synchronize()
                    check(c, a, b, 1.0, torch)
                    fns["base"] = lambda: launch(c, a, b, M, N, K, config=base)
                if args.tuned:
                    ct = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
                    started = time.perf_counter()
                    tuned_cfg = launch(ct, a, b, M, N, K, autotune=True)
                    torch.cuda.synchronize()
                    tuning_s = time.perf_counter() - started
                    check(ct, a, b, 1.0, torch)
                    fns["tuned"] = lambda ct=ct: launch(ct, a, b, M, N, K, autotune=True)
                    tuned_text = describe_config(tuned_cfg)
                if args.sweep:
                    swept = sweep(hopper_gemm, launch, c, a, b, M, N, K, lay, fp8, args.sweep, torch,
                                  extra_configs(hopper_gemm, args.extra))
            if triton_mm is not None:
                ct = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
                try:
                    triton_mm(ct, a, b)
                    torch.cuda.synchronize()
                    check(ct, a, b, 1.0, torch)
                    fns["triton"] = lambda: triton_mm(ct, a, b)
                except Exception as e:             # e.g. a Triton build without this fp8 path
                    print(f"  (Triton skipped for {M}x{N}x{K}: {type(e).__name__}: {str(e)[:80]})", file=sys.stderr)
            t = interleaved(fns, torch)
            t_tylo, t_cublas, t_triton = t["tylo"], t["cublas"], t.get("triton")
            if args.sweep_json and swept:
                with open(args.sweep_json, "a") as f:
                    for rec in swept:
                        f.write(json.dumps({**rec, "cublas_us": t_cublas * 1e3}) + "\n")
            flops = 2.0 * M * N * K
            if not rows:
                print(f"host launch path: tylo {host_microseconds(lambda: launch(c, a, b, M, N, K), torch):.1f} us, "
                      f"cuBLAS through torch {host_microseconds(lambda: reference(a, b), torch):.1f} us per call")
            rows.append((f"{M}x{N}x{K} {lay}", flops / t_tylo / 1e9, flops / t_cublas / 1e9,
                         flops / t_triton / 1e9 if t_triton else None, rel,
                         flops / t["base"] / 1e9 if "base" in t else None, chosen,
                         flops / t["tuned"] / 1e9 if "tuned" in t else None, tuned_text))
            r = rows[-1]
            print(f"  measured {r[0]}: tylo {r[1]:.1f} cuBLAS {r[2]:.1f} TFLOP/s, ratio {r[1] / r[2]:.3f}"
                  + (f", 128x256 {r[5] / r[2]:.3f}" if r[5] else "") + f" ({chosen})"
                  + (f", tuned {r[7] / r[2]:.3f} ({tuned_text}; first call {tuning_s:.1f} s)" if r[7] else ""),
                  file=sys.stderr, flush=True)
    with_base = any(r[5] for r in rows)
    with_tuned = any(r[7] for r in rows)
    head = f"\n{'shape (M x N x K, A/B)':<24} {'tylo ' + args.kernel + ' TFLOP/s':>24} {'cuBLAS TFLOP/s':>15} {'ratio':>7}"
    if with_base:
        head += f" {'128x256 TFLOP/s':>16} {'128x256/cuBLAS':>15}"
    if with_tuned:
        head += f" {'tuned TFLOP/s':>14} {'tuned/cuBLAS':>13}"
    if triton_mm is not None:
        head += f" {'Triton TFLOP/s':>15} {'vs Triton':>10}"
    print(head + f" {'rel err':>9}  config")
    for shape, tt, tc, tr, rel, tb, chosen, tu, tuned_text in rows:
        line = f"{shape:<24} {tt:>24.1f} {tc:>15.1f} {tt / tc:>7.3f}"
        if with_base:
            line += f" {tb:>16.1f} {tb / tc:>15.3f}" if tb else f" {'-':>16} {'-':>15}"
        if with_tuned:
            line += f" {tu:>14.1f} {tu / tc:>13.3f}" if tu else f" {'-':>14} {'-':>13}"
        if triton_mm is not None:
            line += f" {tr:>15.1f} {tt / tr:>10.3f}" if tr else f" {'-':>15} {'-':>10}"
        print(line + f" {rel:>9.1e}  {chosen}" + (f"  (tuned: {tuned_text})" if tuned_text else ""))
    ratios = [r[1] / r[2] for r in rows]
    print(f"geometric mean tylo/cuBLAS {geomean(ratios):.3f} over {len(rows)} shapes, minimum {min(ratios):.3f}")
    if with_base:
        print(f"geometric mean 128x256/cuBLAS {geomean([r[5] / r[2] for r in rows if r[5]]):.3f}")
    if with_tuned:
        tuned = [r[7] / r[2] for r in rows if r[7]]
        print(f"geometric mean tuned/cuBLAS {geomean(tuned):.3f} over {len(tuned)} shapes, minimum {min(tuned):.3f}")
    if triton_mm is not None:
        print(f"geometric mean tylo/Triton {geomean([r[1] / r[3] for r in rows if r[3]]):.3f}")
    if triton_mm is None:
        print("(triton not importable: no Triton column)")
    plot(rows, args.kernel, args.plot or f"gemm_{args.kernel}.png", any(r[3] for r in rows), args.dtype)


if __name__ == "__main__":
    main()
