"""The hazard checker orders tcgen05.st against tcgen05.mma across threads (tylo/interpreter/tmem.py):
a store into columns an MMA in flight reads or writes, and an MMA on cells another thread stored with
no barrier or observed mbarrier arrive in between, are reported."""
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import tylo
from tylo.interpreter import HazardError, run

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

import blackwell_attention_tile as at  # noqa: E402

SIG = "*f32:16, u64, u64, u64, f32"


def _without_op(ir, name, occurrence):
    seen = 0
    stack = [ir.body]
    while stack:
        block = stack.pop(0)
        for i, op in enumerate(block.ops):
            if op.name == name:
                if seen == occurrence:
                    del block.ops[i]
                    return ir
                seen += 1
            stack.extend(op.blocks)
    raise LookupError((name, occurrence))


def _run(ir, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((128, 64)).astype(ml_dtypes.bfloat16) for _ in range(3))
    o = np.zeros((128, 64), np.float32)
    run(ir, [o, tylo.prepare_tma(at.Q_PLAN, q), tylo.prepare_tma(at.KV_PLAN, k), tylo.prepare_tma(at.KV_PLAN, v),
             0.125], block=(at.THREADS,), seed=seed)


def _ir():
    return at.attention_tile.lower(signature=SIG, arch="sm_100a", block=(at.THREADS,))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_p_stored_by_other_warps_without_a_barrier_is_reported(seed):
    # the CTA barrier between the softmax warps' tcgen05.st of P and thread 0's P V MMA, removed:
    # thread 0 may issue while warps 1-3 have not stored P (or store it while the MMA reads it)
    with pytest.raises(HazardError, match="TMEM store"):
        _run(_without_op(_ir(), "nv.barrier", 1), seed)


def test_the_tile_with_its_barrier_is_quiet():
    _run(_ir(), 0)
