"""CPU cost of a cached launch up to the launcher (no GPU: the launcher is a no-op stand-in).

    PYTHONPATH=$PWD python benchmarks/launch_path_cpu.py

Measures ``kernel[grid, block](*args)`` for a hit: argument binding, classification, the
dependency check, the specialisation lookup. Prints the median over repeats, in microseconds.
"""
import statistics
import time

import tylo

SCALE = 2.0


class _NoLaunch:
    def launch(self, *args):
        pass


class _Array:
    def __init__(self, address):
        self.address = address

    @property
    def __cuda_array_interface__(self):
        return {"shape": (1024,), "typestr": "<f4", "data": (self.address, False), "version": 3,
                "strides": None}


@tylo.jit(arch="sm_80")
def saxpy(out, x, n, a):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] * a * SCALE


def main(batch=5000, repeat=60):
    tylo.CompiledKernel.launcher = property(lambda self: _NoLaunch())
    out, x = _Array(0x7F0000000000), _Array(0x7F0000010000)
    launch = saxpy[(8,), (128,)]
    launch(out, x, 1000, 1.5)  # compile once
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for _ in range(batch):
            launch(out, x, 1000, 1.5)
        times.append((time.perf_counter_ns() - t0) / batch / 1e3)
    print(f"cached launch up to the launcher: median {statistics.median(times):.3f} us, "
          f"min {min(times):.3f} us ({batch} x {repeat})")


if __name__ == "__main__":
    main()
