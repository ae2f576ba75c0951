"""A FlashAttention forward in Triton, written for benchmarks/attention.py (its Triton column).

    o, lse = attention(q, k, v, causal=False, scale=None)

q (batch, heads, seqlen_q, head_dim), k and v (batch, kv_heads, seqlen_k, head_dim): BHSD torch
tensors with any strides and a contiguous last dimension (``x.transpose(1, 2)`` views of BSHD
tensors are the usual input), bf16 or f16, ``heads % kv_heads == 0``. ``o`` is a BHSD view of a
BSHD-contiguous tensor in q's dtype; ``lse`` is (batch, heads, seqlen_q) float32 in natural-log
units. ``causal`` is bottom-right aligned (query i sees keys j <= i + seqlen_k - seqlen_q); a row
that sees no key gives O = 0 and LSE = -inf.

The algorithm is the one Triton's fused-attention tutorial teaches (FlashAttention-2): one program
per (block of BLOCK_M query rows, batch x head), Q kept in registers, K and V streamed in blocks of
BLOCK_N keys, an online softmax in the exp2 domain (the scale times log2(e) folded into one
multiply), O rescaled by exp2(m_old - m_new) as the running maximum grows, and 1/l applied once at
the end. Key blocks every row of the program may see completely run without masks; only the blocks
that cross the causal diagonal or the end of the keys are masked. Causal programs take the query
blocks last-first (the longest rows start first).

The block sizes per head_dim are a short list of candidates (``CONFIGS``), tried in order: a
candidate whose shared memory does not fit the GPU (Triton's ``OutOfResources``) gives way to the
next, smaller one; when none fits, ``NoTritonConfig`` says why.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453

__all__ = ["attention", "TritonConfig", "CONFIGS", "NoTritonConfig", "chosen_config"]


@dataclass(frozen=True)
class TritonConfig:
    """Tile sizes and launch shape of one specialisation."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int

    def describe(self) -> str:
        return f"{self.block_m}x{self.block_n} w{self.num_warps} s{self.num_stages}"


# Largest first. Shared memory of a candidate is about (block_m + 2 * stages * block_n) * head_dim * 2
# bytes; D=256 needs the small blocks (128x64 with 2 stages is ~192 KiB, 64x64 ~96 KiB).
CONFIGS = {
    64: (TritonConfig(128, 128, 8, 3), TritonConfig(128, 64, 4, 3), TritonConfig(64, 64, 4, 2)),
    128: (TritonConfig(128, 64, 8, 3), TritonConfig(128, 64, 4, 2), TritonConfig(64, 64, 4, 2)),
    256: (TritonConfig(128, 64, 8, 2), TritonConfig(64, 64, 4, 2), TritonConfig(64, 32, 4, 2)),
}


class NoTritonConfig(RuntimeError):
    """No candidate block size of ``CONFIGS`` fits this GPU for this head_dim."""


@triton.jit
def _attend(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, lo, hi, n_k, shift, qk_scale,
            BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    """Fold key blocks [lo, hi) into the running (acc, l, m); m is in scaled log2 units."""
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kt_ptrs = k_base + offs_n[None, :] * stride_kn + offs_d[:, None]     # K^T block: (D, BLOCK_N)
        v_ptrs = v_base + offs_n[:, None] * stride_vn + offs_d[None, :]      # (BLOCK_N, D)
        if MASKED:
            kt = tl.load(kt_ptrs, mask=offs_n[None, :] < n_k, other=0.0)
        else:
            kt = tl.load(kt_ptrs)
        s = tl.dot(q, kt)
        if MASKED:
            keep = offs_n[None, :] < n_k
            if CAUSAL:
                keep = keep & (offs_n[None, :] <= offs_m[:, None] + shift)
            s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
        if MASKED:   # a row that has seen no key yet keeps m = -inf; subtract 0 so p = exp2(-inf) = 0, not NaN
            m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)
        else:
            m_sub = m_new
        p = tl.math.exp2(s * qk_scale - m_sub[:, None])
        alpha = tl.math.exp2(m_i - m_sub)
        l_i = l_i * alpha + tl.sum(p, 1)
        if MASKED:
            v = tl.load(v_ptrs, mask=offs_n[:, None] < n_k, other=0.0)
        else:
            v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attention_fwd(Q, K, V, O, LSE, qk_scale,
                   stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn,
                   stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_om,
                   heads, group, n_q, n_k,
                   D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    if CAUSAL:   # longest rows first: the last query block sees the most keys
        pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // heads
    h = bh % heads
    kv_h = h // group
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :]
    q = tl.load(q_ptrs, mask=offs_m[:, None] < n_q, other=0.0)
    k_base = K + b * stride_kb + kv_h * stride_kh
    v_base = V + b * stride_vb + kv_h * stride_vh

    shift = n_k - n_q                       # bottom-right alignment: row i sees keys j <= i + shift
    full_hi = (n_k // BLOCK_N) * BLOCK_N    # blocks below this need no key-bound mask
    hi = n_k
    if CAUSAL:
        first_row = pid_m * BLOCK_M
        # every row of this program sees key j when j <= first_row + shift
        full_hi = tl.minimum(full_hi, (tl.maximum(first_row + shift + 1, 0) // BLOCK_N) * BLOCK_N)
        hi = tl.minimum(n_k, tl.maximum(first_row + BLOCK_M + shift, 0))

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, 0, full_hi,
                            n_k, shift, qk_scale, BLOCK_N, False, CAUSAL)
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, full_hi, hi,
                            n_k, shift, qk_scale, BLOCK_N, True, CAUSAL)

    seen = l_i > 0.0
    l_safe = tl.where(seen, l_i, 1.0)
    o = acc / l_safe[:, None]
    lse = tl.where(seen, (m_i + tl.math.log2(l_safe)) * 0.6931471805599453, float("-inf"))
    row_ok = offs_m < n_q
    o_ptrs = O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :]
    tl.store(o_ptrs, o.to(O.dtype.element_ty), mask=row_ok[:, None])
    tl.store(LSE + bh * n_q + offs_m, lse, mask=row_ok)


_chosen: dict[tuple, TritonConfig] = {}     # (head_dim, causal, dtype, device) -> the candidate that fitted


def chosen_config(head_dim: int, causal: bool, dtype, device) -> TritonConfig | None:
    """The candidate an earlier call settled on for this specialisation (None before the first call)."""
    return _chosen.get((head_dim, bool(causal), dtype, str(device)))


def _check(q, k, v):
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor) or x.dim() != 4:
            raise ValueError(f"triton attention: {name} must be a 4-D (batch, heads, seqlen, head_dim) torch tensor")
        if x.stride(-1) != 1:
            raise ValueError(f"triton attention: {name}'s last dimension must be contiguous (stride {x.stride(-1)})")
        if x.dtype not in (torch.bfloat16, torch.float16) or x.dtype != q.dtype:
            raise TypeError(f"triton attention: {name} must be bf16 or f16 like q, got {x.dtype}")
    b, h, _, d = q.shape
    if k.shape != v.shape or k.shape[0] != b or k.shape[3] != d:
        raise ValueError(f"triton attention: k {tuple(k.shape)} and v {tuple(v.shape)} do not fit q {tuple(q.shape)}")
    if h % k.shape[1]:
        raise ValueError(f"triton attention: heads ({h}) must be a multiple of kv_heads ({k.shape[1]})")
    if d not in CONFIGS:
        raise ValueError(f"triton attention: head_dim {d} is not one of {sorted(CONFIGS)}")


def attention(q, k, v, causal=False, scale=None, config: TritonConfig | None = None):
    """FlashAttention forward (see the module docstring). ``config`` forces one block size."""
    _check(q, k, v)
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    o = torch.empty((b, n_q, h, d), device=q.device, dtype=q.dtype).transpose(1, 2)
    lse = torch.empty((b, h, n_q), device=q.device, dtype=torch.float32)
    if o.numel() == 0:
        return o, lse
    key = (d, bool(causal), q.dtype, str(q.device))
    candidates = (config,) if config is not None else ((_chosen[key],) if key in _chosen else CONFIGS[d])
    reasons = []
    for cfg in candidates:
        grid = (triton.cdiv(n_q, cfg.block_m), b * h)
        try:
            _attention_fwd[grid](q, k, v, o, lse, scale * LOG2E,
                                 q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                                 v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
                                 h, h // k.shape[1], n_q, n_k,
                                 D=d, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, CAUSAL=bool(causal),
                                 num_warps=cfg.num_warps, num_stages=cfg.num_stages)
        except triton.runtime.errors.OutOfResources as exc:
            reasons.append(f"{cfg.describe()}: {exc}")
            continue
        _chosen[key] = cfg
        return o, lse
    raise NoTritonConfig(f"triton attention: no block size fits head_dim {d} on this GPU: " + "; ".join(reasons))
