"""Golden printed IR of the hardware ops: small kernels (nv_kernels.py) that together emit every
``nv.*`` op; their printed IR matches the checked-in text, and every nv op in ``OPS`` appears in it.

Regenerate after an intended change with TYLO_UPDATE_GOLDEN=1 and review the diff.
"""
import os
import pathlib
import re

import pytest
from nv_kernels import NV_IR, NV_KERNELS

from tylo.ir import OPS, print_kernel, verify

GOLDEN_DIR = pathlib.Path(__file__).parent / "golden"


def _printed(name):
    if name in NV_IR:
        ir = NV_IR[name]()
        verify(ir)
        return print_kernel(ir)
    kernel, signature, arch = NV_KERNELS[name]
    return print_kernel(kernel.lower(signature=signature, arch=arch))


@pytest.mark.parametrize("name", sorted(NV_KERNELS) + sorted(NV_IR))
def test_nv_golden_ir(name):
    text = _printed(name)
    path = GOLDEN_DIR / f"{name}.tyir"
    if os.environ.get("TYLO_UPDATE_GOLDEN") == "1" or not path.exists():
        GOLDEN_DIR.mkdir(exist_ok=True)
        path.write_text(text)
        if os.environ.get("TYLO_UPDATE_GOLDEN") != "1":
            pytest.fail(f"golden file {path.name} was missing and has been written; review and commit it")
    assert text == path.read_text()


def test_every_nv_op_has_a_golden_form():
    printed = set()
    for path in sorted(GOLDEN_DIR.glob("*.tyir")) + sorted((GOLDEN_DIR.parent.parent / "frontend" / "golden").glob("*.tyir")):
        printed |= set(re.findall(r"\b(nv\.[\w.]+)\b", path.read_text()))
    missing = sorted(n for n in OPS if n.startswith("nv.") and n not in printed)
    assert not missing, f"nv ops with no golden printed form: {missing} (add them to tests/golden_nv/nv_kernels.py)"
