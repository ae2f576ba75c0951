"""benchmarks/triton_attention.py (the benchmark's Triton column) against float64 on the GPU.

The criterion of the FlashAttention-3 tests: O's error at most twice that of a bf16 reference of the
same math plus a small atol; LSE against a float64 logsumexp; rows that see no key give O = 0 and
LSE = -inf. BSHD storage passed as BHSD views (as the benchmark does), ragged lengths, GQA.
"""
import math
import os
import sys

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))
import triton_attention  # noqa: E402


def reference(q, k, v, causal, scale, bf16_steps=False):
    """O (BHSD) and LSE in float64; ``bf16_steps`` rounds P and O to bf16 like a bf16 kernel would."""
    group = q.shape[1] // k.shape[1]
    kk = k.double().repeat_interleave(group, 1)
    vv = v.double().repeat_interleave(group, 1)
    s = q.double() @ kk.transpose(-1, -2) * scale
    sq, sk = q.shape[2], k.shape[2]
    if causal:
        allowed = torch.arange(sk, device=q.device)[None, :] <= torch.arange(sq, device=q.device)[:, None] + sk - sq
        s = s.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    if bf16_steps:
        p = p.bfloat16().double()
    o = p @ vv
    if bf16_steps:
        o = o.bfloat16().double()
    return o, lse


@pytest.mark.parametrize("sq,sk,d,causal,heads,kv_heads", [
    (1, 1, 64, False, 2, 2), (239, 1, 64, True, 2, 2), (799, 3, 128, False, 6, 2), (113, 203, 128, True, 6, 1),
    (1023, 1024, 128, True, 2, 2), (1024, 1023, 64, False, 2, 1), (300, 517, 256, True, 2, 2),
    (517, 300, 256, False, 2, 2)])
def test_against_float64(sq, sk, d, causal, heads, kv_heads):
    torch.manual_seed(sq * 7 + sk)
    b = 2
    q = torch.randn(b, sq, heads, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    k = torch.randn(b, sk, kv_heads, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    v = torch.randn(b, sk, kv_heads, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    o, lse = triton_attention.attention(q, k, v, causal=causal)
    torch.cuda.synchronize()
    scale = 1 / math.sqrt(d)
    ref_o, ref_lse = reference(q, k, v, causal, scale)
    bf_o, _ = reference(q, k, v, causal, scale, bf16_steps=True)
    err = (o.double() - ref_o).abs().max().item()
    bf_err = (bf_o - ref_o).abs().max().item()
    assert err <= 2 * bf_err + 1e-3, (err, bf_err)
    seen = torch.isfinite(ref_lse)
    assert torch.equal(torch.isneginf(lse), ~seen)
    if seen.any():
        assert (lse.double()[seen] - ref_lse[seen]).abs().max().item() < 1e-3
    if (~seen).any():
        assert o.double()[~seen].abs().max().item() == 0.0
    print(f"triton attention sq={sq} sk={sk} d={d} causal={causal} {heads}/{kv_heads} heads: max err {err:.2e} "
          f"(bf16 reference {bf_err:.2e}), config {triton_attention.chosen_config(d, causal, q.dtype, q.device)}")


def test_scaled_inputs_and_two_runs_equal():
    """Inputs scaled by 10 (the running max must be subtracted) and bitwise-equal repeat runs."""
    torch.manual_seed(1)
    q = (10 * torch.randn(1, 700, 4, 128, device="cuda")).bfloat16().transpose(1, 2)
    k = (10 * torch.randn(1, 700, 4, 128, device="cuda")).bfloat16().transpose(1, 2)
    v = torch.randn(1, 700, 4, 128, device="cuda").bfloat16().transpose(1, 2)
    o1, lse1 = triton_attention.attention(q, k, v, causal=False)
    o2, lse2 = triton_attention.attention(q, k, v, causal=False)
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)
    ref_o, ref_lse = reference(q, k, v, False, 1 / math.sqrt(128))
    bf_o, _ = reference(q, k, v, False, 1 / math.sqrt(128), bf16_steps=True)
    assert (o1.double() - ref_o).abs().max().item() <= 2 * (bf_o - ref_o).abs().max().item() + 1e-3
    assert torch.isfinite(lse1).all() and (lse1.double() - ref_lse).abs().max().item() < 1e-2
