"""CPU tests of hopper_gemm's experimental ALIGN_ROWS switch (copies of operands whose rows are not
128-byte aligned; scripts/probe_gemm_alignment.py times it on the H200)."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import hopper_gemm as hg  # noqa: E402


@pytest.mark.parametrize("cols,itemsize,pitch", [(2008, 2, 2048), (2000, 2, 2048), (1000, 2, 1024), (4104, 2, 4160),
                                                 (2048, 2, 2048), (64, 2, 64), (8, 2, 64), (2008, 1, 2048),
                                                 (4104, 1, 4224)])
def test_aligned_pitch_is_the_least_128_byte_multiple(cols, itemsize, pitch):
    assert hg.aligned_pitch(cols, itemsize) == pitch
    assert pitch * itemsize % 128 == 0 and pitch >= cols and (pitch - cols) * itemsize < 128


def test_aligned_rows_leaves_aligned_and_non_torch_operands_alone():
    x = np.zeros((30, 2008), dtype=np.uint16)
    where = (x.ctypes.data, x.shape, (2008, 1))
    assert hg.aligned_rows(x, where, 2) == (x, where, None)            # not a torch tensor: no copy
    y = np.zeros((30, 2048), dtype=np.uint16)
    where = (y.ctypes.data, y.shape, (2048, 1))
    assert hg.aligned_rows(y, where, 2) == (y, where, None)            # 4096-byte rows already


def test_align_rows_is_off_by_default():
    if os.environ.get("TYLO_GEMM_ALIGN_ROWS", "0") in ("", "0"):
        assert hg.ALIGN_ROWS is False
