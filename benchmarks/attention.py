"""FlashAttention forward throughput: tylo's Hopper kernel next to PyTorch SDPA (cuDNN and flash backends)
and a Triton FlashAttention, in the same run (issue 11; the Blackwell line of issue 13).

    python benchmarks/attention.py [--head-dims 64,128,256] [--shapes 32x512,16x1k,8x2k,4x4k,2x8k,1x16k]
                                   [--causal both|yes|no] [--rounds 3] [--quick] [--json FILE] [--plot-dir DIR]
                                   [--warmup-ms 25] [--rep-ms 100] [--libraries tylo,cudnn,...]
                                   [--tylo-variant NAME=schedule:dynamic,tile:128x2x2p,l2mb:16,oinq:yes ...]

The matrix (issue 11): bf16, head_dim 64/128/256 with heads = 2048 / head_dim, (batch, seqlen) in
(32, 512), (16, 1k), (8, 2k), (4, 4k), (2, 8k), (1, 16k) (seqlen_q = seqlen_k), causal and not.
``--quick`` takes four points of it (``QUICK``; still narrowed by the other options). FLOPs =
4 * batch * heads * seqlen_q * seqlen_k * head_dim, halved for causal.

The libraries (columns):
* ``tylo``: examples/hopper_attention.py, imported by path, on an sm_90 GPU only (a note says why
  when it is missing, fails to import, or the GPU is another one);
* ``cudnn`` and ``flash``: ``torch.nn.functional.scaled_dot_product_attention`` under
  ``sdpa_kernel(SDPBackend.CUDNN_ATTENTION)`` / ``FLASH_ATTENTION``; SDPA takes BHSD, so it gets
  ``.transpose(1, 2)`` views of the same BSHD tensors;
* ``triton``: benchmarks/triton_attention.py (the tutorial algorithm, written for this benchmark);
* examples/blackwell_attention.py only on an sm_100-class GPU and only when it offers a GPU path
  (a module-level ``GPU_PATH = True``); the run says plainly which of these is missing.

For each shape every library runs once and its O is compared with cuDNN's (SDPA flash's, then
SDPA math's in float32 when cuDNN cannot run the shape): the max abs error is printed, and a library
outside bf16 tolerance (|o - ref| <= ATOL + RTOL * |ref| everywhere, all finite) is marked WRONG and
not timed. Then the libraries that agree are timed in turns: ``--rounds`` rounds, each taking every
library once through ``tylo.testing.do_bench`` (CUDA events, L2 flushed before each call, the flush
followed by a short GPU sleep so the host has queued the call before its start event fires), and
each library's figure is the median of its per-round medians; taking turns shares clock and power
drift instead of charging it to whoever runs last (as benchmarks/gemm.py does).

Tuning (``--tylo-variant``, repeatable): extra columns ``tylo:NAME`` run the same Hopper kernel with
other settings for the point's (head_dim, causal): ``schedule`` (hopper_attention.SCHEDULE: static,
dynamic or per_unit), ``tile`` (a TileConfig: BNxSTAGESxCONSUMERS, ``p`` for pingpong, e.g. 128x2x2p),
``l2mb`` (L2_GROUP_BYTES in MiB), ``epilogue`` (EPILOGUE: tma or registers), ``under`` and ``interleave``
(SOFTMAX_UNDER_PV, INTERLEAVE_S_PV: yes or no), ``oinq`` (yes or no: the
point's tile, or ``tile``'s, with TileConfig.o_in_q: the TMA-store epilogue stages O in the Q buffer) and ``oinv``
(yes or no: TileConfig.o_in_v, O staged in the V ring; either flag clears the other); a
table of their ratios to cuDNN follows the main one.
``--libraries`` keeps only the named columns (cuDNN stays the reference when it runs).

Output: a table (TFLOP/s per library, ratios tylo/cuDNN, tylo/flash, tylo/Triton), the geometric
means and the issue-11 targets, a PNG plot per head_dim in ``--plot-dir`` (when matplotlib imports),
and with ``--json`` every figure (per-round medians included). Without torch or without a GPU it
says so and measures nothing (exit status 1 without torch, 0 without a GPU).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import warnings
from dataclasses import dataclass, field, replace

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)              # triton_attention, gemm (for its geomean)

from gemm import geomean  # noqa: E402

from tylo.runtime.memo import BoundedMemo  # noqa: E402

MODEL_WIDTH = 2048                        # heads * head_dim
HEAD_DIMS = (64, 128, 256)
BATCH_SEQLENS = ((32, 512), (16, 1024), (8, 2048), (4, 4096), (2, 8192), (1, 16384))
QUICK = (  # (head_dim, batch, seqlen, causal): the reference point both ways, a short and a D=256 one
    (128, 2, 8192, False), (128, 2, 8192, True), (64, 16, 1024, False), (256, 4, 4096, True))
LIBRARIES = ("tylo", "cudnn", "flash", "triton")
TITLES = {"tylo": "tylo", "cudnn": "cuDNN", "flash": "flash", "triton": "Triton", "blackwell": "tylo-sm100"}
RATIO_PEERS = ("cudnn", "flash", "triton")
ATOL, RTOL = 1e-2, 2.0 ** -6              # bf16: about two units in the last place, plus a little absolute slack
TARGET_D128_RATIO, TARGET_FLOOR_RATIO = 1.10, 0.90   # issue 11: >= 1.10x cuDNN at D=128, seqlen >= 2k; none < 0.9x
SLEEP_CYCLES = 100_000                    # ~50 us of GPU sleep after each L2 flush (covers SDPA's host path)


# ---------------------------------------------------------------- the matrix (pure)

def attention_flops(batch: int, heads: int, seqlen_q: int, seqlen_k: int, head_dim: int, causal: bool) -> int:
    """Two GEMMs of 2 * seqlen_q * seqlen_k * head_dim each per (batch, head); causal does half."""
    flops = 4 * batch * heads * seqlen_q * seqlen_k * head_dim
    return flops // 2 if causal else flops


def heads_for(head_dim: int) -> int:
    """heads = 2048 / head_dim, as issue 11 fixes the model width."""
    if head_dim <= 0 or MODEL_WIDTH % head_dim:
        raise ValueError(f"head_dim {head_dim} does not divide the model width {MODEL_WIDTH}")
    return MODEL_WIDTH // head_dim


def seqlen_text(n: int) -> str:
    """1024 -> '1k', 16384 -> '16k', 512 -> '512'."""
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)


@dataclass(frozen=True)
class Case:
    """One point of the matrix (seqlen_q = seqlen_k = seqlen)."""

    head_dim: int
    batch: int
    seqlen: int
    causal: bool

    @property
    def heads(self) -> int:
        return heads_for(self.head_dim)

    @property
    def flops(self) -> int:
        return attention_flops(self.batch, self.heads, self.seqlen, self.seqlen, self.head_dim, self.causal)

    @property
    def shape_label(self) -> str:
        return f"{self.batch}x{seqlen_text(self.seqlen)}"

    def describe(self) -> str:
        return f"D{self.head_dim} {self.shape_label} h{self.heads} {'causal' if self.causal else 'full'}"


def parse_seqlen(text: str) -> int:
    """'512' -> 512, '1k' -> 1024, '16K' -> 16384."""
    t = text.strip().lower()
    try:
        n = int(t[:-1]) * 1024 if t.endswith("k") else int(t)
    except ValueError:
        raise ValueError(f"a sequence length is an integer, optionally with a k suffix (1k = 1024), got {text!r}") \
            from None
    if n <= 0:
        raise ValueError(f"a sequence length must be positive, got {text!r}")
    return n


def parse_shapes(text: str) -> tuple:
    """'32x512,16x1k' -> ((32, 512), (16, 1024))."""
    shapes = []
    for part in text.split(","):
        pieces = part.strip().lower().split("x")
        if len(pieces) != 2:
            raise argparse.ArgumentTypeError(f"a shape is BATCHxSEQLEN (e.g. 2x8k), got {part!r}")
        try:
            batch = int(pieces[0])
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r}: the batch must be a positive integer") from None
        try:
            seqlen = parse_seqlen(pieces[1])
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{part!r}: {exc}") from None
        if batch <= 0:
            raise argparse.ArgumentTypeError(f"{part!r}: the batch must be a positive integer")
        shapes.append((batch, seqlen))
    return tuple(shapes)


def parse_head_dims(text: str) -> tuple:
    """'64,128' -> (64, 128); only the matrix's head dimensions."""
    try:
        dims = tuple(int(p) for p in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"head dims are integers separated by commas, got {text!r}") from None
    bad = [d for d in dims if d not in HEAD_DIMS]
    if bad:
        raise argparse.ArgumentTypeError(f"head_dim {bad[0]} is not one of {', '.join(map(str, HEAD_DIMS))}")
    return dims


CAUSAL_MODES = {"both": (False, True), "yes": (True,), "no": (False,)}


def build_cases(head_dims=HEAD_DIMS, shapes=BATCH_SEQLENS, causal="both", quick=False) -> list:
    """The matrix in table order (head_dim, then shape, non-causal before causal); ``quick`` keeps
    only the points of ``QUICK``."""
    cases = [Case(d, b, s, c) for d in head_dims for b, s in shapes for c in CAUSAL_MODES[causal]]
    if quick:
        cases = [c for c in cases if (c.head_dim, c.batch, c.seqlen, c.causal) in QUICK]
    return cases


VARIANT_KEYS = ("schedule", "tile", "l2mb", "epilogue", "oinq", "oinv", "under", "interleave")


def parse_variant(text: str) -> tuple:
    """'dyn=schedule:dynamic,tile:128x2x2p' -> ('dyn', {'schedule': 'dynamic', 'tile': (128, 2, 2, True)})."""
    name, sep, body = text.partition("=")
    if not sep or not name.strip() or not body.strip():
        raise argparse.ArgumentTypeError(f"a variant is NAME=KEY:VALUE[,KEY:VALUE...], got {text!r}")
    settings = {}
    for part in body.split(","):
        key, sep, value = part.strip().partition(":")
        if not sep or key not in VARIANT_KEYS:
            raise argparse.ArgumentTypeError(f"{text!r}: a setting is one of {', '.join(VARIANT_KEYS)} as KEY:VALUE, "
                                             f"got {part!r}")
        if key == "schedule":
            if value not in ("static", "dynamic", "per_unit"):
                raise argparse.ArgumentTypeError(f"{text!r}: schedule is static, dynamic or per_unit, got {value!r}")
            settings[key] = value
        elif key == "epilogue":
            if value not in ("tma", "registers"):
                raise argparse.ArgumentTypeError(f"{text!r}: epilogue is tma or registers, got {value!r}")
            settings[key] = value
        elif key in ("oinq", "oinv", "under", "interleave"):
            if value not in ("yes", "no"):
                raise argparse.ArgumentTypeError(f"{text!r}: {key} is yes or no, got {value!r}")
            settings[key] = value == "yes"
        elif key == "tile":
            pingpong = value.endswith("p")
            try:
                bn, stages, consumers = (int(x) for x in value.rstrip("p").split("x"))
            except ValueError:
                raise argparse.ArgumentTypeError(f"{text!r}: tile is BNxSTAGESxCONSUMERS[p], got {value!r}") from None
            settings[key] = (bn, stages, consumers, pingpong)
        else:
            try:
                settings[key] = float(value)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{text!r}: l2mb is a number of MiB, got {value!r}") from None
    return name.strip(), settings


def parse_libraries(text: str) -> tuple:
    names = tuple(p.strip() for p in text.split(",") if p.strip())
    bad = [n for n in names if n not in LIBRARIES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"libraries are some of {', '.join(LIBRARIES)}, got {text!r}")
    return names


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="benchmarks/attention.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--head-dims", type=parse_head_dims, default=HEAD_DIMS, help="e.g. 64,128 (default: 64,128,256)")
    ap.add_argument("--shapes", type=parse_shapes, default=BATCH_SEQLENS,
                    help="BATCHxSEQLEN list, e.g. 16x1k,2x8k (default: the six of issue 11)")
    ap.add_argument("--causal", choices=sorted(CAUSAL_MODES), default="both")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of turns over the libraries (median taken)")
    ap.add_argument("--quick", action="store_true", help=f"only the {len(QUICK)} points of QUICK")
    ap.add_argument("--json", metavar="FILE", default=None, help="write every figure to FILE")
    ap.add_argument("--plot-dir", default=".", help="where attention_d<head_dim>.png go (default: .)")
    ap.add_argument("--warmup-ms", type=float, default=25.0, help="do_bench warm-up budget per timing")
    ap.add_argument("--rep-ms", type=float, default=100.0, help="do_bench timed budget per timing")
    ap.add_argument("--libraries", type=parse_libraries, default=LIBRARIES,
                    help="columns to run, e.g. tylo,cudnn (default: all)")
    ap.add_argument("--tylo-variant", type=parse_variant, action="append", default=[],
                    help="NAME=KEY:VALUE[,...]: the Hopper kernel with other settings (schedule, tile, l2mb, "
                         "epilogue, oinq, oinv, under, interleave)")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.warmup_ms < 0 or args.rep_ms <= 0:
        ap.error("--warmup-ms must be >= 0 and --rep-ms > 0")
    args.cases = build_cases(args.head_dims, args.shapes, args.causal, args.quick)
    if not args.cases:
        ap.error("no point of the matrix is left (--quick keeps only "
                 + ", ".join(Case(*p).describe() for p in QUICK) + ")")
    return args


# ---------------------------------------------------------------- results (pure)

@dataclass(frozen=True)
class Cell:
    """One library on one case. ``status``: 'ok' (agreed and timed), 'wrong' (outside bf16
    tolerance: not timed), 'n/a' (the library cannot run it), 'error' (it raised)."""

    status: str
    median_ms: float | None = None
    round_ms: tuple = ()
    max_abs_err: float | None = None
    note: str = ""

    def tflops(self, flops: int) -> float | None:
        return tflops(flops, self.median_ms) if self.status == "ok" and self.median_ms else None


@dataclass(frozen=True)
class Row:
    case: Case
    cells: dict = field(default_factory=dict)   # library -> Cell
    reference: str = "cudnn"

    def tflops(self, library: str) -> float | None:
        cell = self.cells.get(library)
        return cell.tflops(self.case.flops) if cell else None

    def ratio(self, library: str, peer: str) -> float | None:
        """library's TFLOP/s over peer's (None unless both were timed)."""
        a, b = self.tflops(library), self.tflops(peer)
        return a / b if a and b else None


def tflops(flops: int, ms: float) -> float:
    return flops / (ms * 1e-3) / 1e12


def agrees(max_excess: float, all_finite: bool) -> bool:
    """Within bf16 tolerance: ``max_excess`` is max(|o - ref| - RTOL * |ref|) over all elements."""
    return bool(all_finite) and max_excess <= ATOL


def cell_text(cell: Cell | None, flops: int) -> str:
    if cell is None:
        return "n/a"
    if cell.status == "ok":
        return f"{cell.tflops(flops):.1f}"
    return {"wrong": "WRONG", "error": "error"}.get(cell.status, "n/a")


def ratio_text(r: float | None) -> str:
    return f"{r:.3f}" if r is not None else "-"


def format_table(rows, libraries=LIBRARIES) -> str:
    """The table: one line per case; TFLOP/s per library, tylo's ratios, the check errors; then notes."""
    heads = [TITLES.get(lib, lib) for lib in libraries]
    ratio_heads = [f"tylo/{TITLES[p]}" for p in RATIO_PEERS]
    line = f"{'D':>4} {'batch x seq':>11} {'heads':>5} {'causal':>6} |"
    line += "".join(f" {h:>10}" for h in heads) + " |" + "".join(f" {h:>12}" for h in ratio_heads)
    line += " | max |err| vs reference"
    out = [line, "-" * len(line)]
    notes = []
    for row in rows:
        c = row.case
        text = f"{c.head_dim:>4} {c.shape_label:>11} {c.heads:>5} {'yes' if c.causal else 'no':>6} |"
        text += "".join(f" {cell_text(row.cells.get(lib), c.flops):>10}" for lib in libraries) + " |"
        text += "".join(f" {ratio_text(row.ratio('tylo', p)):>12}" for p in RATIO_PEERS) + " | "
        errs = [f"{TITLES.get(lib, lib)} {row.cells[lib].max_abs_err:.1e}" for lib in libraries
                if lib in row.cells and lib != row.reference and row.cells[lib].max_abs_err is not None]
        text += ", ".join(errs) + (f" (vs {TITLES.get(row.reference, row.reference)})" if errs else "")
        out.append(text.rstrip())
        for lib in libraries:
            cell = row.cells.get(lib)
            if cell is not None and cell.status != "ok" and cell.note:
                notes.append(f"  {c.describe()} {TITLES.get(lib, lib)}: {cell.status}: {cell.note}")
    if notes:
        out += ["notes:"] + list(dict.fromkeys(notes))
    return "\n".join(out)


def summary_lines(rows) -> list:
    """Geometric mean and minimum of tylo's ratio to each peer, then the issue-11 targets."""
    lines = []
    for peer in RATIO_PEERS:
        ratios = [r for r in (row.ratio("tylo", peer) for row in rows) if r is not None]
        if ratios:
            lines.append(f"tylo/{TITLES[peer]}: geometric mean {geomean(ratios):.3f}, minimum {min(ratios):.3f} "
                         f"over {len(ratios)} points")
        else:
            lines.append(f"tylo/{TITLES[peer]}: no point with both timed")
    d128 = [row.ratio("tylo", "cudnn") for row in rows if row.case.head_dim == 128 and row.case.seqlen >= 2048]
    d128 = [r for r in d128 if r is not None]
    if d128:
        verdict = "met" if min(d128) >= TARGET_D128_RATIO else "NOT met"
        lines.append(f"target tylo/cuDNN >= {TARGET_D128_RATIO:.2f} at D=128, seqlen >= 2k: {verdict} "
                     f"(minimum {min(d128):.3f} over {len(d128)} points)")
    every = [r for r in (row.ratio("tylo", "cudnn") for row in rows) if r is not None]
    if every:
        verdict = "met" if min(every) >= TARGET_FLOOR_RATIO else "NOT met"
        lines.append(f"target no point below {TARGET_FLOOR_RATIO:.2f}x cuDNN: {verdict} (minimum {min(every):.3f})")
    return lines


def plot_series(rows, head_dim: int, libraries=LIBRARIES) -> dict:
    """{causal: (shape labels, {library: [TFLOP/s or nan]})} for one head_dim's plot."""
    series = {}
    for causal in (False, True):
        chosen = [row for row in rows if row.case.head_dim == head_dim and row.case.causal == causal]
        if chosen:
            labels = [row.case.shape_label for row in chosen]
            series[causal] = (labels, {lib: [row.tflops(lib) or float("nan") for row in chosen] for lib in libraries})
    return series


def write_plots(rows, plot_dir: str, libraries=LIBRARIES, gpu_name: str = "") -> list:
    """One PNG per head_dim (attention_d<D>.png); returns the messages to print."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        return ["(matplotlib not importable: plots skipped)"]
    os.makedirs(plot_dir, exist_ok=True)
    messages = []
    for d in dict.fromkeys(row.case.head_dim for row in rows):
        series = plot_series(rows, d, libraries)
        fig, axes = plt.subplots(1, len(series), figsize=(5.5 * len(series), 4.2), squeeze=False)
        for ax, (causal, (labels, per_lib)) in zip(axes[0], sorted(series.items())):
            for lib, values in per_lib.items():
                if any(not math.isnan(v) for v in values):
                    ax.plot(range(len(labels)), values, "o-", label=TITLES.get(lib, lib))
            ax.set_xticks(list(range(len(labels))))
            ax.set_xticklabels(labels)
            ax.set_xlabel("batch x seqlen")
            ax.set_ylabel("TFLOP/s")
            ax.set_ylim(bottom=0)
            ax.set_title(f"D={d}, {heads_for(d)} heads, {'causal' if causal else 'non-causal'}")
            ax.grid(alpha=0.3)
            ax.legend()
        fig.suptitle(f"bf16 attention forward{' on ' + gpu_name if gpu_name else ''}")
        fig.tight_layout()
        path = os.path.join(plot_dir, f"attention_d{d}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        messages.append(f"plot written to {path}")
    return messages


def to_json(rows, meta: dict, libraries=LIBRARIES) -> dict:
    """Every figure: per case the FLOPs, each library's status, per-round and median ms, TFLOP/s and
    error, and tylo's ratios."""
    cases = []
    for row in rows:
        c = row.case
        cases.append({
            "head_dim": c.head_dim, "heads": c.heads, "batch": c.batch, "seqlen_q": c.seqlen, "seqlen_k": c.seqlen,
            "causal": c.causal, "flops": c.flops, "reference": row.reference,
            "libraries": {lib: {"status": cell.status, "median_ms": cell.median_ms, "round_ms": list(cell.round_ms),
                                "tflops": cell.tflops(c.flops), "max_abs_err": cell.max_abs_err, "note": cell.note}
                          for lib, cell in row.cells.items()},
            "ratios": {f"tylo/{p}": row.ratio("tylo", p) for p in RATIO_PEERS},
        })
    return {"meta": meta, "libraries": list(libraries), "tolerance": {"atol": ATOL, "rtol": RTOL}, "cases": cases}


def blackwell_message(capability: tuple, has_gpu_path: bool | None) -> str:
    """The Blackwell line (issue 13). ``has_gpu_path``: None when the module was not looked at."""
    if capability[0] != 10:
        return (f"Blackwell: no sm_100-class GPU present (this GPU is sm_{capability[0]}{capability[1]}): "
                "examples/blackwell_attention.py not run (it is validated in tylo's interpreter, not on hardware)")
    if has_gpu_path:
        return "Blackwell: sm_100-class GPU present: examples/blackwell_attention.py timed (column tylo-sm100)"
    return ("Blackwell: sm_100-class GPU present, but examples/blackwell_attention.py offers no GPU path yet "
            "(its attention() runs in tylo's interpreter on numpy arrays): not timed")


# ---------------------------------------------------------------- the GPU side

def load_example(name: str):
    """Import examples/<name>.py by path; returns (module or None, why not)."""
    import importlib.util

    path = os.path.join(ROOT, "examples", f"{name}.py")
    if not os.path.exists(path):
        return None, f"examples/{name}.py is not in this tree"
    examples = os.path.join(ROOT, "examples")
    if examples not in sys.path:
        sys.path.insert(0, examples)          # the examples import attention_host as a sibling
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        return None, f"examples/{name}.py does not import: {type(exc).__name__}: {str(exc)[:200]}"
    if not callable(getattr(module, "attention", None)):
        return None, f"examples/{name}.py has no attention()"
    return module, ""


def load_libraries(torch, capability):
    """{library: run(q, k, v, causal) -> O (BSHD)} for what is available, and the notes on the rest."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    runners, missing = {}, {}
    if capability == (9, 0):
        hopper, why = load_example("hopper_attention")
        if hopper is not None:
            runners["tylo"] = lambda q, k, v, causal: hopper.attention(q, k, v, causal=causal)[0]
        else:
            missing["tylo"] = why
    else:
        missing["tylo"] = (f"the tylo Hopper kernel needs an sm_90 GPU (this one is "
                           f"sm_{capability[0]}{capability[1]})")

    def sdpa(backend):
        def run(q, k, v, causal):
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                   is_causal=causal)
            return o.transpose(1, 2)
        return run

    runners["cudnn"] = sdpa(SDPBackend.CUDNN_ATTENTION)
    runners["flash"] = sdpa(SDPBackend.FLASH_ATTENTION)
    runners["math"] = sdpa(SDPBackend.MATH)          # the last-resort reference only (never timed)
    try:
        import triton_attention
    except Exception as exc:
        missing["triton"] = f"benchmarks/triton_attention.py does not import: {type(exc).__name__}: {exc}"
    else:
        runners["triton"] = lambda q, k, v, causal: triton_attention.attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal)[0].transpose(1, 2)
    has_path = None
    if capability[0] == 10:
        blackwell, why = load_example("blackwell_attention")
        has_path = bool(blackwell is not None and getattr(blackwell, "GPU_PATH", False))
        if has_path:
            runners["blackwell"] = lambda q, k, v, causal: blackwell.attention(q, k, v, causal=causal)[0]
        elif blackwell is None:
            print(f"Blackwell: {why}")
    return runners, missing, blackwell_message(capability, has_path)


def variant_runner(hopper, settings: dict):
    """hopper.attention with ``settings`` (see ``parse_variant``) in force for the call's (head_dim, causal),
    with its own launch cache; the module's settings are restored after each call."""
    launches = BoundedMemo(64)

    def run(q, k, v, causal):
        key = (q.shape[-1], causal)
        saved = (hopper.SCHEDULE, hopper.TILE_OVERRIDES, hopper.L2_GROUP_BYTES, hopper._LAUNCHES, hopper.EPILOGUE,
                 hopper.SOFTMAX_UNDER_PV, hopper.INTERLEAVE_S_PV)
        try:
            hopper.SCHEDULE = {**hopper.SCHEDULE, causal: settings.get("schedule", hopper.SCHEDULE[causal])}
            tile = hopper.TileConfig(*settings["tile"]) if "tile" in settings else None
            for flag, field_name in (("oinq", "o_in_q"), ("oinv", "o_in_v")):
                if flag in settings:    # the point's own tile (or ``tile``) with O staged in Q / in the V ring or not
                    tile = replace(tile or hopper.tile_config(q.shape[-1], causal, k.shape[-3]),
                                   **{"o_in_q": False, "o_in_v": False, field_name: settings[flag]})
            if tile is not None:
                hopper.TILE_OVERRIDES = {**hopper.TILE_OVERRIDES, key: tile}
            if "l2mb" in settings:
                hopper.L2_GROUP_BYTES = int(settings["l2mb"] * (1 << 20))
            hopper.EPILOGUE = settings.get("epilogue", hopper.EPILOGUE)
            hopper.SOFTMAX_UNDER_PV = settings.get("under", hopper.SOFTMAX_UNDER_PV)
            hopper.INTERLEAVE_S_PV = settings.get("interleave", hopper.INTERLEAVE_S_PV)
            hopper._LAUNCHES = launches
            return hopper.attention(q, k, v, causal=causal)[0]
        finally:
            (hopper.SCHEDULE, hopper.TILE_OVERRIDES, hopper.L2_GROUP_BYTES, hopper._LAUNCHES, hopper.EPILOGUE,
             hopper.SOFTMAX_UNDER_PV, hopper.INTERLEAVE_S_PV) = saved
    return run


def compare(out, ref, torch):
    """(max abs error, agrees) of a BSHD output against the reference."""
    if out.shape != ref.shape:
        return float("nan"), False
    o, r = out.float(), ref.float()
    diff = (o - r).abs()
    finite = bool(torch.isfinite(o).all())
    max_abs = float(diff.max()) if finite else float("nan")
    excess = float((diff - RTOL * r.abs()).max()) if finite else float("inf")
    return max_abs, agrees(excess, finite)


def make_timer(torch, stream):
    """do_bench's CUDA-event timer with a GPU sleep queued after each L2 flush."""
    from tylo.testing import CudaEventTimer

    sleep = getattr(torch.cuda, "_sleep", None)

    class QueuedTimer(CudaEventTimer):
        def flush_l2(self):
            super().flush_l2()
            if sleep is not None:
                sleep(SLEEP_CYCLES)

    return QueuedTimer(stream)


def short(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def failure_cell(exc: BaseException, warnings_seen=()) -> Cell:
    """A library that raised on a shape: 'n/a' when it declines the shape (no Triton block size fits,
    no SDPA kernel for it), else 'error'; the note carries the reason (and SDPA's warnings)."""
    declined = type(exc).__name__ == "NoTritonConfig" or "No available kernel" in str(exc)
    note = short(f"{type(exc).__name__}: {exc}")
    reasons = [short(w, 200) for w in warnings_seen if w]
    if reasons:
        note += " [" + "; ".join(dict.fromkeys(reasons)) + "]"
    return Cell("n/a" if declined else "error", note=note)


def measure(case: Case, runners: dict, timed_libraries, torch, args, device: str = "cuda") -> Row:
    """Check every library once against the reference, then time those that agree in turns."""
    from tylo.testing import do_bench

    shape = (case.batch, case.seqlen, case.heads, case.head_dim)
    gen = torch.Generator(device=device).manual_seed(case.head_dim * 1000 + case.seqlen + case.causal)
    q, k, v = (torch.randn(shape, device=device, dtype=torch.bfloat16, generator=gen) for _ in range(3))
    outputs, cells = {}, {}
    for lib in timed_libraries:
        if lib not in runners:
            continue
        with warnings.catch_warnings(record=True) as caught:   # SDPA gives its reasons as warnings
            warnings.simplefilter("always")
            try:
                outputs[lib] = runners[lib](q, k, v, case.causal)
                torch.cuda.synchronize()
            except Exception as exc:
                torch.cuda.synchronize()
                cells[lib] = failure_cell(exc, [str(w.message) for w in caught])
    reference = next((lib for lib in ("cudnn", "flash") if lib in outputs), None)
    if reference is None:                         # neither SDPA backend runs this shape: float32 math
        reference = "math"
        try:
            outputs["math"] = runners["math"](q.float(), k.float(), v.float(), case.causal)
        except Exception as exc:                  # nothing to check against: nothing is timed
            why = f"no reference could run this shape (cuDNN, flash and float32 math failed; math: {short(str(exc))})"
            for lib in outputs:
                cells[lib] = Cell("n/a", note=why)
            return Row(case, cells, reference)
    ref = outputs[reference]
    for lib, out in outputs.items():
        if lib == "math":
            continue
        err, ok = compare(out, ref, torch)
        cells[lib] = Cell("ok" if ok else "wrong", max_abs_err=err if lib != reference else 0.0,
                          note="" if ok else f"outside bf16 tolerance (atol {ATOL}, rtol {RTOL:.4f}) of "
                          f"{TITLES.get(reference, reference)}: max abs error {err:.3e}")
    del outputs, ref
    agreed = [lib for lib in timed_libraries if lib in cells and cells[lib].status == "ok"]
    stream = torch.cuda.current_stream()
    rounds = {lib: [] for lib in agreed}
    for _ in range(args.rounds):
        for lib in agreed:
            fn = lambda: runners[lib](q, k, v, case.causal)
            timer = make_timer(torch, stream)
            try:
                rounds[lib].append(do_bench(fn, warmup=args.warmup_ms, rep=args.rep_ms, stream=stream,
                                            timer=timer).median_ms)
            finally:
                timer.close()
    for lib in agreed:
        cell = cells[lib]
        cells[lib] = Cell("ok", statistics.median(rounds[lib]), tuple(rounds[lib]), cell.max_abs_err)
    return Row(case, cells, reference)


def git_commit() -> str:
    import subprocess

    def git(*words):
        return subprocess.run(["git", *words], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()

    try:   # only this tree's own repository (a copy inside another checkout would name that one's commit)
        if os.path.realpath(git("rev-parse", "--show-toplevel") or "/nonexistent") != os.path.realpath(ROOT):
            return "unknown"
        return git("rev-parse", "--short", "HEAD") + (" (modified)" if git("status", "--porcelain") else "")
    except Exception:
        return "unknown"


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("benchmarks/attention.py: torch is not installed (pip install torch): nothing measured")
        return 1
    if not torch.cuda.is_available():
        print("benchmarks/attention.py: no CUDA GPU is visible to torch: nothing measured")
        return 0
    import datetime

    capability = tuple(torch.cuda.get_device_capability())
    gpu = torch.cuda.get_device_name()
    runners, missing, blackwell_line = load_libraries(torch, capability)
    for lib in LIBRARIES:
        if lib not in args.libraries:
            runners.pop(lib, None)
            missing.pop(lib, None)
    variants = []
    if "tylo" in runners or args.tylo_variant:
        hopper = sys.modules.get("hopper_attention")
        for name, settings in args.tylo_variant:
            if hopper is None:
                break
            runners[f"tylo:{name}"] = variant_runner(hopper, settings)
            variants.append(f"tylo:{name}")
    libraries = tuple(lib for lib in LIBRARIES if lib in args.libraries) + (("blackwell",) if "blackwell" in runners
                                                                           else ()) + tuple(variants)
    versions = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version()}
    try:
        import triton
        versions["triton"] = triton.__version__
    except Exception:
        versions["triton"] = None
    meta = {"gpu": gpu, "capability": f"sm_{capability[0]}{capability[1]}", "versions": versions,
            "tylo_commit": git_commit(),
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "rounds": args.rounds, "warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms,
            "timing": "tylo.testing.do_bench (CUDA events, L2 flush + GPU sleep before each call), "
                      "median of per-round medians, libraries in turns", "missing": missing}
    print(f"{gpu} ({meta['capability']}); torch {versions['torch']}, cuDNN {versions['cudnn']}, "
          f"triton {versions['triton']}; tylo {meta['tylo_commit']}; {meta['date_utc']}")
    for lib, why in missing.items():
        print(f"{TITLES[lib]}: not timed: {why}")
    print(blackwell_line)
    print(f"{len(args.cases)} points, {args.rounds} rounds each; bf16, heads = {MODEL_WIDTH} / head_dim", flush=True)
    rows = []
    for case in args.cases:
        row = measure(case, runners, libraries, torch, args)
        rows.append(row)
        figures = ", ".join(f"{TITLES.get(lib, lib)} {cell_text(row.cells.get(lib), case.flops)}" for lib in libraries
                            if lib in row.cells)
        print(f"  {case.describe()}: {figures} TFLOP/s", flush=True)
        torch.cuda.empty_cache()
    print()
    print(format_table(rows, libraries))
    for line in summary_lines(rows):
        print(line)
    if variants:
        print()
        print(f"{'point':>24} | " + " ".join(f"{lib + '/cuDNN':>18}" for lib in ("tylo",) + tuple(variants)))
        for row in rows:
            print(f"{row.case.describe():>24} | "
                  + " ".join(f"{ratio_text(row.ratio(lib, 'cudnn')):>18}" for lib in ("tylo",) + tuple(variants)))
    for message in write_plots(rows, args.plot_dir, libraries, gpu):
        print(message)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(to_json(rows, meta, libraries), f, indent=1)
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
