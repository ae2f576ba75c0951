"""An MMA accumulator reused as the next MMA's 16-bit A operand without lane traffic (S = Q K^T, P = softmax(S),
O = P V, as in attention)."""
import re

import pytest

import tylo
from tylo import Layout, Ownership
from tylo.lang.mma import MMAAtom, TiledMMA, mma, zero_accumulator
from tylo.layouts import relayout_plan

ATOM = MMAAtom((16, 8, 16), tylo.bf16, tylo.bf16, tylo.f32)
S_PLAN = TiledMMA(ATOM, warps=(1, 1), repeats=(1, 2))   # S: 16 x 16 (two n8 tiles)
O_PLAN = TiledMMA(ATOM, warps=(1, 1), repeats=(1, 8))   # O: 16 x 64, K = 16 keys


def test_two_adjacent_accumulators_are_an_a_fragment():
    plan = relayout_plan(S_PLAN.c_ownership, ATOM.a_ownership)
    assert sorted(plan.sources) == list(range(8))
    assert plan.sources == (0, 1, 2, 3, 4, 5, 6, 7)  # the registers are already in A's order


@tylo.jit
def attention_step(o, q, k, v):
    sq = tylo.load(tylo.GlobalTile(q, Layout((16, 16), (16, 1))), S_PLAN.a_ownership)
    sk = tylo.load(tylo.GlobalTile(k, Layout((16, 16), (1, 16))), S_PLAN.b_ownership)  # B = K^T
    s = mma(S_PLAN, sq, sk, zero_accumulator(S_PLAN))
    p = tylo.pack(tylo.bf16, tylo.relayout(tylo.row_softmax(s), ATOM.a_ownership))
    vv = tylo.load(tylo.GlobalTile(v, Layout((16, 64), (64, 1))), O_PLAN.b_ownership)
    out = mma(O_PLAN, p, vv, zero_accumulator(O_PLAN))
    tylo.store(tylo.GlobalTile(o, Layout((16, 64), (64, 1))), out)


def test_attention_step_has_no_lane_traffic_beyond_the_softmax():
    ck = attention_step.compile(signature="*f32:16, *bf16:16, *bf16:16, *bf16:16", arch="sm_80")
    ptx = ck.ptx
    # only the row max and row sum: two XOR shuffles each (four-lane groups), for rows g and g+8
    assert len(re.findall(r"shfl\.sync\.bfly", ptx)) == 2 * 2 * 2
    assert len(re.findall(r"mma\.sync\.aligned\.m16n8k16", ptx)) == 2 + 8
    assert len(re.findall(r"cvt\.rn\.bf16x2\.f32", ptx)) == 4
    assert ".local" not in ptx and ck.resources.spill_bytes == 0


@tylo.jit
def bad_relayout(o, x):
    f = tylo.load(tylo.GlobalTile(x, Layout((32, 8), (8, 1))), Ownership.local((32, 8), axis=1))
    g = tylo.relayout(f, Ownership.striped((32, 8), axis=0))


def test_relayout_that_would_move_values_is_an_error():
    with pytest.raises(tylo.CompileError, match="relayout"):
        bad_relayout.compile(signature="*f32, *f32", arch="sm_80")
