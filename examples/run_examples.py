"""The main job: compile every example kernel for sm_90a and print its resources; run them when a GPU is present.

    python examples/run_examples.py [example ...]
"""
import importlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tylo  # noqa: E402
from tylo.runtime import driver  # noqa: E402

EXAMPLES = ["vector_add", "block_reduction", "softmax", "warp_gemm", "hopper_gemm", "blackwell_attention_tile",
            "blackwell_gemm", "blackwell_attention", "hopper_attention"]
ARCH = {"blackwell_attention_tile": "sm_100a", "blackwell_gemm": "sm_100a",  # tcgen05/TMEM exist only there
        "blackwell_attention": "sm_100a"}
# run() executes in tylo's interpreter (no sm_100a GPU here), GPU or not
INTERPRETED = {"blackwell_gemm", "blackwell_attention"}
# run() checks itself on the GPU when there is one, else in the interpreter on small shapes
SELF_CHECKING = {"hopper_attention"}


def _tma_name(x) -> str:
    plan = getattr(x, "plan", x)        # tma.batched(plan) stands for a 3-D binding
    return f"tma<{plan.dtype} {plan.shape[0]}x{plan.shape[1]}{' batched' if plan is not x else ''}>"


def main(argv=None) -> int:
    names = (argv if argv is not None else sys.argv[1:]) or EXAMPLES
    print(f"tylo {tylo.__version__}: compiling example kernels for sm_90a (the Blackwell example for sm_100a)")
    rows = []
    for name in names:
        module = importlib.import_module(name)
        arch = ARCH.get(name, "sm_90a")
        for kernel, signature, constexprs, block in module.AOT:
            t0 = time.perf_counter()
            ck = kernel.compile(signature=signature, arch=arch, constexprs=constexprs, block=block)
            ms = (time.perf_counter() - t0) * 1e3
            r = ck.resources
            sig = signature if isinstance(signature, str) else ", ".join(
                x if isinstance(x, str) else _tma_name(x) for x in signature)
            spec = (sig + "".join(f", {k}={v}" for k, v in constexprs.items())
                    + ("" if arch == "sm_90a" else f" [{arch}]"))
            when = f"{ms:.1f}" + (" (cache hit)" if ck.from_cache else "")
            rows.append((kernel.__name__, spec, r.registers, r.spill_bytes, r.shared_bytes + ck.shared_bytes, when))
    wk = max(len(r[0]) for r in rows)
    ws = max(len(r[1]) for r in rows)
    print(f"{'kernel':<{wk}}  {'specialisation':<{ws}}  {'regs':>5} {'spill B':>8} {'shared B':>9}  compile ms")
    for k, spec, regs, spills, shared, when in rows:
        print(f"{k:<{wk}}  {spec:<{ws}}  {regs:>5} {spills:>8} {shared:>9}  {when}")
    gpu = driver.gpu_available()
    for name in names:
        if name in INTERPRETED or (name in SELF_CHECKING and not gpu):
            importlib.import_module(name).run()
    if not gpu:
        print("\nNo NVIDIA GPU or driver found: the kernels compiled, but running them needs a GPU.")
        return 0
    print(f"\nrunning on {driver.devices()[0]['name']}:")
    for name in names:
        if ARCH.get(name, "sm_90a") != "sm_90a":
            if name not in INTERPRETED:
                print(f"{name}: compiled for {ARCH[name]} only (needs that GPU to run)")
            continue
        importlib.import_module(name).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
