"""Compare two ``TYLO_DUMP`` folders: the same kernels must give byte-identical IR, LLVM and PTX.

    TYLO_DUMP=/tmp/before python -m pytest -q tests && python examples/run_examples.py
    ... change the compiler ...
    TYLO_DUMP=/tmp/after  python -m pytest -q tests && python examples/run_examples.py
    python scripts/compare_dumps.py /tmp/before /tmp/after [--stage ptx]

Files are ``<kernel>.<arch>.<digest of the PTX>.<stage>``; for each kernel and arch every PTX
digest of the first dump must be in the second (new variants, from new tests, are counted but
are no difference), and the IR and LLVM text of each digest must match too. Exits 1 and
lists the kernels that differ otherwise.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys


def _index(folder: str) -> dict:
    """``(kernel, arch) -> {digest: {stage: path}}``."""
    out: dict = collections.defaultdict(lambda: collections.defaultdict(dict))
    for name in os.listdir(folder):
        kernel, arch, digest, stage = name.rsplit(".", 3)
        out[(kernel, arch)][digest][stage] = os.path.join(folder, name)
    return out


def compare(before: str, after: str, stages=("tyir", "ll", "ptx")) -> list[str]:
    a, b = _index(before), _index(after)
    problems = []
    for kernel in sorted(set(a) | set(b)):
        da, db = a.get(kernel, {}), b.get(kernel, {})
        if not set(da) <= set(db):   # new variants alone come from new tests: not a difference
            problems.append(f"{kernel[0]} [{kernel[1]}]: PTX differs ({len(set(da) - set(db))} variants only before, "
                            f"{len(set(db) - set(da))} only after)")
            continue
        for digest in da:
            for stage in stages:
                pa, pb = da[digest].get(stage), db[digest].get(stage)
                if pa and pb and open(pa).read() != open(pb).read():
                    problems.append(f"{kernel[0]} [{kernel[1]}] {digest}: {stage} differs ({pa} vs {pb})")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--stage", action="append", choices=["tyir", "ll", "ptx"],
                    help="stages to compare byte for byte (default: all three)")
    args = ap.parse_args(argv)
    problems = compare(args.before, args.after, tuple(args.stage or ("tyir", "ll", "ptx")))
    before, after = _index(args.before), _index(args.after)
    added = sum(len(set(after[k]) - set(before.get(k, {}))) for k in after)
    for p in problems:
        print(p)
    print(f"{len(before)} kernel/arch pairs compared: " + ("identical" if not problems else f"{len(problems)} differ")
          + (f" ({added} variants compiled only after, by new tests)" if added else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
