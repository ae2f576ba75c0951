"""Compile-time cost of the layout package (run: python benchmarks/layouts.py).

Prints the median of repeated runs for
* deriving the reduction plan of a 64x256 WGMMA accumulator ownership
  (from scratch: the ownership-table caches are cleared every run),
* evaluating a 128x128 swizzled layout at every coordinate, vectorised
  (numpy through the same operator-only evaluation) and one call per
  coordinate.
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tylo.layouts import (  # noqa: E402
    ComposedLayout,
    Layout,
    Ownership,
    Swizzle,
    offsets_table,
    reduction_plan,
    swizzled_structure,
    vector_access_plan,
)
from tylo.layouts import ownership as _own  # noqa: E402


def _clear():
    _own._index_table_cached.cache_clear()
    _own._table_cached.cache_clear()


def bench(fn, repeats=21, setup=None):
    times = []
    for _ in range(repeats):
        if setup:
            setup()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main():
    rows = []

    def plan():
        return reduction_plan(Ownership.wgmma_accumulator(256), axis=1)

    rows.append(("reduction plan, WGMMA 64x256 accumulator", bench(plan, setup=_clear)))

    def swz():
        return ComposedLayout(Swizzle(3, 3, 3), Layout((128, 128), (128, 1)))

    rows.append(("128x128 swizzled layout, all coordinates (numpy)", bench(lambda: offsets_table(swz()))))
    coords = [(i, j) for i in range(128) for j in range(128)]

    def loop():
        L = swz()
        return [L(c) for c in coords]

    rows.append(("128x128 swizzled layout, all coordinates (per call)", bench(loop, repeats=7)))
    tma = ComposedLayout(Swizzle(3, 3, 3), Layout((128, 64), (64, 1)))
    rows.append(("swizzled_structure, 128x64 bf16 TMA tile", bench(lambda: swizzled_structure(tma, 2))))
    w = Ownership.wgmma_accumulator(256)
    rows.append(
        (
            "vector access plan, WGMMA 64x256 to row-major f32",
            bench(lambda: vector_access_plan(w, Layout((64, 256), (256, 1)), 4), setup=_clear),
        )
    )
    width = max(len(r[0]) for r in rows)
    print(f"{'operation':<{width}}  median ms")
    print("-" * (width + 11))
    for name, ms in rows:
        print(f"{name:<{width}}  {ms:9.3f}")


if __name__ == "__main__":
    main()
