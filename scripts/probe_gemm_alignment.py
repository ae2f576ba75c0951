"""Why the Hopper GEMM is slow when K * 2 bytes is 16- but not 32-byte aligned (issue 14; docs/hopper.md
"Operand rows not 32-byte aligned"). Run on the H200 from the repository root (about a minute):

    PYTHONPATH=$PWD python scripts/probe_gemm_alignment.py

Every case times one configuration (the 128 x 256 default unless named) next to torch.matmul on the same
operands (same strides), interleaved, after a float64 check. A case separates one cause:

* ``pitch``: the operands' row pitch (bytes between rows) apart from the logical K: the same K stored in
  a wider buffer (a view ``buf[:, :K]``), and the same pitch with another K. Column ``align`` is the
  largest power of two (up to 128) dividing each pitch: A/B/C.
* ``A only`` / ``B only``: one operand's pitch padded, the other's not.
* ``C pitch``: the epilogue's TMA stores into rows of 10000 bytes (N = 5000) or 10112.
* ``M``: 3000 against 3001 and 3008 (same tile count).
* ``l2promo``: the tensor maps' L2 promotion (tylo encodes 128 B; 0 none, 1 64 B, 3 256 B), patched for the case.

Answer (session 6, /work/notes/data/s6_align_probe.log; docs/hopper.md): the slowdown comes from row
pitches that are 16- but not 32-byte aligned, for the kernel's A operand (a misaligned B alone costs
nothing measurable); 32-, 64- and 128-byte pitches run alike; the L2 promotion does not help. A host switch
that copied misaligned operands into 128-byte pitches on every launch (ALIGN_ROWS) measured slower
everywhere (the copy costs more than the misalignment) and was removed; its cases are gone from this probe.
"""
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import hopper_gemm as hg  # noqa: E402
from gemm import describe_config, interleaved  # noqa: E402

import tylo.runtime.tma as rt_tma  # noqa: E402

DEFAULT = hg.GemmConfig()
PICK = "pick"         # choose_config's pick for the logical shape and layout


def stored(rows, cols, pitch, gen):
    """A (rows, cols) row-major bf16 view of a (rows, pitch) buffer."""
    return torch.randn(rows, pitch or cols, generator=gen, device="cuda").bfloat16()[:, :cols]


def reset(promo=2):
    rt_tma.L2_PROMOTION_128B = promo
    hg._BINDINGS.clear()
    hg._PREPARED.clear()


def case(label, *args, **kwargs):
    """One timed case (``timed_case``); a failure is printed and the probe goes on."""
    try:
        timed_case(label, *args, **kwargs)
    except Exception as e:  # noqa: BLE001 (one run on a lent GPU: report and continue)
        print(f"{label:<26} FAILED: {type(e).__name__}: {str(e)[:200]}", flush=True)


def timed_case(label, M, N, K, lay="rc", a_pitch=None, b_pitch=None, c_pitch=None, config=DEFAULT, promo=2):
    gen = torch.Generator(device="cuda").manual_seed(M * 7 + N * 3 + K)
    a = stored(M, K, a_pitch, gen)
    b = stored(N, K, b_pitch, gen).T if lay[1] == "c" else stored(K, N, b_pitch, gen)
    c = torch.full((M, c_pitch or N), float("nan"), device="cuda", dtype=torch.bfloat16)[:, :N]
    if config == PICK:
        config = hg.choose_config(M, N, K, hg.INPUT_TYPES["bf16"], 132, True, lay[1] == "c")
    reset(promo)
    try:
        hg.launch(c, a, b, M, N, K, config=config)
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        rel = float((c.double() - ref).norm() / ref.norm())
        assert rel < 1e-2, f"relative error {rel:.2e}"
        t = interleaved({"tylo": lambda: hg.launch(c, a, b, M, N, K, config=config),
                         "cublas": lambda: torch.matmul(a, b)}, torch, rounds=2)
    finally:
        reset()
    pitches = (a.stride(0) * 2, b.stride(1 if lay[1] == "c" else 0) * 2, c.stride(0) * 2)
    flops = 2.0 * M * N * K
    print(f"{label:<26} {M}x{N}x{K} {lay} {describe_config(config):<22} pitch {'/'.join(map(str, pitches)):<17} "
          f"align {'/'.join(str(hg.byte_alignment(p)) for p in pitches):<10} tylo {t['tylo'] * 1e3:7.1f} us "
          f"{flops / t['tylo'] / 1e9:6.1f} TF  cuBLAS {t['cublas'] * 1e3:7.1f} us {flops / t['cublas'] / 1e9:6.1f} TF  "
          f"ratio {t['cublas'] / t['tylo']:.3f}", flush=True)


def main():
    t0 = time.time()
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}")
    # pitch against logical K, 3000x5000 (the 128 x 256 tile: 24 x 20 tiles whatever the K below)
    case("pitch 4000 (K 2000)", 3000, 5000, 2000)
    case("pitch 4016 (K 2008)", 3000, 5000, 2008)
    case("pitch 4096 (K 2048)", 3000, 5000, 2048)
    # one logical K (2008) at pitches aligned to 16 (above), 32, 64 and 128 bytes
    case("K 2008, pitch 4064 (32)", 3000, 5000, 2008, a_pitch=2032, b_pitch=2032)
    case("K 2008, pitch 4032 (64)", 3000, 5000, 2008, a_pitch=2016, b_pitch=2016)
    case("K 2008, pitch 4096", 3000, 5000, 2008, a_pitch=2048, b_pitch=2048)
    case("K 2000, pitch 4096", 3000, 5000, 2000, a_pitch=2048, b_pitch=2048)
    case("K 2008, A only 4096", 3000, 5000, 2008, a_pitch=2048)
    case("K 2008, B only 4096", 3000, 5000, 2008, b_pitch=2048)
    # M
    case("M 3001 (K 2000)", 3001, 5000, 2000)
    case("M 3001 (K 2008), issue", 3001, 5000, 2008)
    case("M 3008 (K 2008)", 3008, 5000, 2008)
    # the epilogue's C rows
    case("C pitch 10112", 3000, 5000, 2048, c_pitch=5056)
    # squares: 16-, 32-, 64-, 128-byte pitches
    case("square aligned", 2048, 2048, 2048)
    case("square pitch 4112 (16)", 2048, 2048, 2056)
    case("square pitch 4128 (32)", 2048, 2048, 2064)
    case("square pitch 4160 (64)", 2048, 2048, 2080)
    case("square K 2056 pitch 4224", 2048, 2048, 2056, a_pitch=2112, b_pitch=2112)
    # the other slow ragged shapes, with the heuristic's pick, padded or not
    case("1000^3", 1000, 1000, 1000, config=PICK)
    case("1000^3 A/B/C pitch 2048", 1000, 1000, 1000, a_pitch=1024, b_pitch=1024, c_pitch=1024, config=PICK)
    case("1024^3", 1024, 1024, 1024, config=PICK)
    case("257x776x4104", 257, 776, 4104, config=PICK)
    case("257x776x4104 pitch 8320", 257, 776, 4104, a_pitch=4160, b_pitch=4160, c_pitch=832, config=PICK)
    # B row-major (MN-major): its rows are N = 5000 elements, 10000 bytes
    case("rr, B pitch 10000", 3000, 5000, 2000, lay="rr")
    case("rr, B pitch 10112", 3000, 5000, 2000, lay="rr", b_pitch=5056)
    # the tensor maps' L2 promotion
    for promo, name in ((0, "none"), (1, "64B"), (3, "256B")):
        case(f"l2promo {name}, K 2008", 3001, 5000, 2008, promo=promo)
        case(f"l2promo {name}, K 2048", 3000, 5000, 2048, promo=promo)
    print(f"probe done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
