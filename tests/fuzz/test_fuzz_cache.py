"""Default-run slice of the cache fault injector: every fault once (scripts/fuzz.py --long --kind
cache repeats them with other files, bits, kill times and writer counts).

A served entry must equal a fresh compile (cubin, PTX, dynamic shared memory); nothing may hang
(subprocesses with timeouts); edits that change a kernel must change its key. Faults that fail
today would carry their finding (FINDINGS.md); none does.
"""

import pytest
from cache_faults import FAULT_NAMES, KEY_CASES, check_fault, same_kernel
from findings import FINDINGS

# fault -> the finding it fails with on main today (empty: F30-F38 are fixed, findings.FIXED)
KNOWN = {}
# Seed 7 picks the variant (file, bit, delay) of each fault; artifact faults also run on every file.
ARTIFACT_SEEDS = {"artifact_flip_bit": range(7, 12), "artifact_truncate_half": range(7, 12)}


def _params():
    for name in FAULT_NAMES:
        for seed in ARTIFACT_SEEDS.get(name, (7,)):
            marks = [pytest.mark.xfail(strict=True, reason=KNOWN[name])] if name in KNOWN else []
            yield pytest.param(name, seed, marks=marks, id=f"{name}-{seed}")


@pytest.mark.parametrize("name,seed", list(_params()))
def test_fault_never_serves_a_wrong_cubin(name, seed, tmp_path):
    if name == "nogpu":
        from tylo.runtime import driver
        if driver.gpu_available():
            pytest.skip("the no-GPU launch error needs a machine without a GPU")
    r = check_fault(seed, str(tmp_path), name)
    assert r["status"] == "ok", f"{name} (seed {seed}): {r['status']}: {r['detail']}"


def test_known_findings_are_listed():
    assert set(KNOWN.values()) <= set(FINDINGS) and set(KNOWN) <= set(FAULT_NAMES)
    assert {f"key_{k}" for k in KEY_CASES} <= set(FAULT_NAMES)


def test_the_injector_sees_a_damaged_cubin(tmp_path):
    """The comparison itself must catch a wrong cubin: give it two different kernels."""
    from cache_faults import _compile
    a = _compile(str(tmp_path), str(tmp_path / "c1"), k=1)
    b = _compile(str(tmp_path), str(tmp_path / "c2"), k=2)
    assert same_kernel(a, b) is not None
    assert same_kernel(a, _compile(str(tmp_path), str(tmp_path / "c3"), k=1)) is None
