"""examples/attention_host.py: the attention examples' shared argument checks (CPU only). Every error
names the argument."""
import math
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

import attention_host as ah  # noqa: E402

BF16 = ml_dtypes.bfloat16


def _qkv(b=2, sq=5, sk=7, h=4, hk=2, d=64, dtype=BF16):
    return (np.zeros((b, sq, h, d), dtype), np.zeros((b, sk, hk, d), dtype), np.zeros((b, sk, hk, d), dtype))


def _packed(tq=9, tk=11, h=4, hk=2, d=64):
    return np.zeros((tq, h, d), BF16), np.zeros((tk, hk, d), BF16), np.zeros((tk, hk, d), BF16)


def test_batched_defaults():
    p = ah.check_attention_args(*_qkv())
    assert (p.batch, p.heads, p.kv_heads, p.group, p.head_dim) == (2, 4, 2, 2, 64)
    assert p.scale == 1 / math.sqrt(64) and not p.causal and not p.varlen
    assert p.seqlens_q == (5, 5) and p.offsets_k == (0, 7, 14) and (p.max_seqlen_q, p.max_seqlen_k) == (5, 7)


def test_bhsd_view_is_accepted_without_a_copy():
    q = np.zeros((2, 4, 5, 128), BF16).transpose(0, 2, 1, 3)
    _, k, v = _qkv(d=128)
    assert ah.check_attention_args(q, k, v, causal=True, scale=0.5).scale == 0.5


def test_varlen():
    q, k, v = _packed()
    cu_q, cu_k = np.array([0, 4, 9], np.int32), np.array([0, 0, 11], np.int32)
    p = ah.check_attention_args(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert p.varlen and p.batch == 2 and p.seqlens_q == (4, 5) and p.seqlens_k == (0, 11)
    assert p.max_seqlen_q == 5
    assert ah.check_attention_args(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=64).max_seqlen_q == 64


CU_Q, CU_K = np.array([0, 4, 9], np.int32), np.array([0, 3, 11], np.int32)


@pytest.mark.parametrize("make, kwargs, exc, name", [
    (lambda: (np.zeros((2, 5, 4, 64), np.float32),) + _qkv()[1:], {}, TypeError, "q must be bfloat16"),
    (lambda: (_qkv()[0], _qkv(dtype=np.float16)[1], _qkv()[2]), {}, TypeError, "k is float16"),
    (lambda: _qkv()[:2] + (_qkv(dtype=np.float16)[2],), {}, TypeError, "v is float16"),
    (lambda: ([[1.0]],) + _qkv()[1:], {}, TypeError, "q must be an array"),
    (lambda: (np.zeros((5, 4, 64), BF16),) + _qkv()[1:], {}, ValueError, "q must be 4-D"),
    (lambda: _qkv(d=96), {}, ValueError, r"head_dim \(q.shape\[-1\]\) must be one of"),
    (lambda: (_qkv()[0], np.zeros((2, 7, 2, 128), BF16), _qkv()[2]), {}, ValueError, "k and v must have q's head_dim"),
    (lambda: _qkv()[:2] + (np.zeros((2, 8, 2, 64), BF16),), {}, ValueError, "v must have k's shape"),
    (lambda: _qkv(h=3, hk=2), {}, ValueError, r"heads \(3, q.shape\[-2\]\) must be a multiple of kv_heads"),
    (lambda: (_qkv()[0],) + _qkv(b=3)[1:], {}, ValueError, "k has batch 3"),
    (lambda: (np.zeros((2, 5, 4, 128), BF16)[..., ::2],) + _qkv()[1:], {}, ValueError,
     "q must have a contiguous last dimension"),
    (lambda: _qkv(), {"causal": 1}, TypeError, "causal must be a bool"),
    (lambda: _qkv(), {"scale": "x"}, TypeError, "scale must be a finite float"),
    (lambda: _qkv(), {"scale": float("nan")}, TypeError, "scale must be a finite float"),
    (lambda: _qkv(), {"max_seqlen_q": 5}, ValueError, "max_seqlen_q is only for varlen"),
    (lambda: _packed(), {"cu_seqlens_q": CU_Q}, ValueError, "cu_seqlens_k is missing"),
    (lambda: _qkv(), {"cu_seqlens_q": CU_Q, "cu_seqlens_k": CU_K}, ValueError, "q must be 3-D"),
    (lambda: _packed(), {"cu_seqlens_q": CU_Q.astype(np.int64), "cu_seqlens_k": CU_K}, TypeError,
     "cu_seqlens_q must be int32"),
    (lambda: _packed(), {"cu_seqlens_q": CU_Q, "cu_seqlens_k": CU_K.astype(np.uint32)}, TypeError,
     "cu_seqlens_k must be int32"),
    (lambda: _packed(), {"cu_seqlens_q": np.array([0, 5, 4, 9], np.int32), "cu_seqlens_k": np.array([0, 3, 5, 11],
     np.int32)}, ValueError, "cu_seqlens_q must be ascending"),
    (lambda: _packed(), {"cu_seqlens_q": np.array([1, 9], np.int32), "cu_seqlens_k": CU_K[[0, 2]]}, ValueError,
     "cu_seqlens_q must start at 0"),
    (lambda: _packed(), {"cu_seqlens_q": CU_Q, "cu_seqlens_k": np.array([0, 11], np.int32)}, ValueError,
     "cu_seqlens_k has 2 entries"),
    (lambda: _packed(), {"cu_seqlens_q": np.array([0, 4, 8], np.int32), "cu_seqlens_k": CU_K}, ValueError,
     "cu_seqlens_q ends at 8"),
    (lambda: _packed(), {"cu_seqlens_q": np.zeros((2, 2), np.int32), "cu_seqlens_k": CU_K}, ValueError,
     "cu_seqlens_q must be 1-D"),
    (lambda: _packed(), {"cu_seqlens_q": CU_Q, "cu_seqlens_k": CU_K, "max_seqlen_k": 3}, ValueError,
     "max_seqlen_k must be an int at least the longest sequence"),
])
def test_errors_name_the_argument(make, kwargs, exc, name):
    with pytest.raises(exc, match=f"^attention: .*{name}" if not name.startswith("q") else f"^attention: {name}"):
        ah.check_attention_args(*make(), **kwargs)


def test_head_dims_can_be_narrowed_by_a_kernel():
    with pytest.raises(ValueError, match=r"must be one of \(64, 128\), got 256"):
        ah.check_attention_args(*_qkv(d=256), head_dims=(64, 128))


def test_blackwell_attention_rejects_before_launch():
    import blackwell_attention as ba
    with pytest.raises(TypeError, match="this kernel takes bfloat16"):
        ba.attention(*_qkv(dtype=np.float16))
    with pytest.raises(ValueError, match="head_dim"):
        ba.attention(*_qkv(d=96))
