"""Which negative TMA origins the GPU accepts: each case runs in its own process (a kernel fault is
sticky for the context) and prints ok / mismatch / the CUDA error. Diagnostic, not a test.

    PYTHONPATH=$PWD python scripts/probe_tma_negative.py [load] [store]

The first two origins of each line are in-bounds controls.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CASE = r'''
import sys, numpy as np
sys.path.insert(0, "tests/hopper")
import test_tma_gpu as t
import tylo.lang.tma as tma, tylo.runtime as rt
plan = t.FEW_PLANS[{p}]
kind, a, b = "{kind}", {a}, {b}
O, W, w16 = plan.outer, plan.inner, 16 // plan.elem_bytes
env = dict(O=O, W=W, w16=w16)
a, b = eval(str(a), env), eval(str(b), env)
rng = np.random.default_rng(1)
R, C = t.ragged_shape(plan)
origin = [t._logical(plan, a, b)]
if kind == "load":
    host = t._fresh(rng, plan, (R, C))
    binding = tylo.prepare_tma(plan, rt.to_device(host))
    t.check_loads(binding, host, origin, t.run_loads(binding, origin, per_cta=1))
else:
    poisoned = t._poisoned(plan, (R, C))
    y = rt.to_device(poisoned)
    out = tylo.prepare_tma(plan, y)
    logical, shared = t.store_values(rng, plan, 1)
    keep = t.run_stores(out, shared, origin, per_cta=1)
    want, _ = t.expected_after_stores(out, poisoned, logical, origin)
    t.check_array(y.to_host(), want, "store")
print("ok")
'''

ORIGINS = [("0", "0"), ("O", "W"), ("-3", "0"), ("0", "-w16"), ("-5", "-w16"), ("-O", "0"), ("0", "-W"), ("O", "-w16"), ("-O", "W")]


def main():
    kinds = sys.argv[1:] or ["load", "store"]
    for p in range(3):
        for kind in kinds:
            for a, b in ORIGINS:
                code = CASE.format(p=p, kind=kind, a=repr(a), b=repr(b))
                r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
                last = (r.stdout.strip().splitlines() or [""])[-1]
                if r.returncode:
                    err = [ln for ln in r.stderr.splitlines() if "Error" in ln or "error" in ln]
                    last = (err[-1] if err else r.stderr.strip()[-200:])[:200]
                print(f"plan {p} {kind:5} outer={a:>4} inner={b:>5}: {last}", flush=True)


if __name__ == "__main__":
    main()
