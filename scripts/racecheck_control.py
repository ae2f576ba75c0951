"""A positive control for ``scripts/sanitize_shards.sh``'s kernel filter (``KERNELS=...``): one tylo kernel
with a deliberate shared-memory race (each thread reads its neighbour's slot with no barrier between the
write and the read), launched once.

    compute-sanitizer --tool racecheck --kernel-name kns=racecheck_control python scripts/racecheck_control.py
        -> hazards reported (the filter instruments a kernel by a substring of its name)
    compute-sanitizer --tool racecheck --kernel-name kns=attention_fwd python scripts/racecheck_control.py
        -> no hazard (the filter leaves other kernels uninstrumented)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tylo  # noqa: E402


@tylo.jit
def racecheck_control(out):
    buf = tylo.shared_array(tylo.f32, (128,))
    t = tylo.thread_idx.x
    buf[t] = t * 1.0
    out[t] = buf[(t + 1) % 128]       # racy on purpose: no sync_threads between the write and the read


def main():
    import torch

    out = torch.full((128,), float("nan"), device="cuda")
    racecheck_control[1, 128](out)
    torch.cuda.synchronize()
    print("racecheck_control ran:", int(torch.isfinite(out).sum()), "of 128 outputs written")


if __name__ == "__main__":
    main()
