"""Golden IR: the printed IR of each test kernel matches its checked-in text.

Regenerate after an intended change with TYLO_UPDATE_GOLDEN=1 and review the diff.
"""
import os
import pathlib

import pytest
from simt_kernels import GOLDEN

GOLDEN_DIR = pathlib.Path(__file__).parent / "golden"


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_ir(name):
    kernel, signature, constexprs = GOLDEN[name]
    ir = kernel.compile(signature=signature, arch="sm_90a", constexprs=constexprs).ir
    path = GOLDEN_DIR / f"{name}.tyir"
    if os.environ.get("TYLO_UPDATE_GOLDEN") == "1" or not path.exists():
        path.write_text(ir)
        if os.environ.get("TYLO_UPDATE_GOLDEN") != "1":
            pytest.fail(f"golden file {path.name} was missing and has been written; review and commit it")
    assert ir == path.read_text()


def test_printer_is_stable():
    kernel, signature, constexprs = GOLDEN["loops"]
    a = kernel.compile(signature=signature, arch="sm_90a", constexprs=constexprs).ir
    kernel._deps = None
    b = kernel.compile(signature=signature, arch="sm_80", constexprs=constexprs).ir
    assert a == b  # the IR does not depend on the target for the scalar subset
