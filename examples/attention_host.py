"""Host-side argument handling shared by the attention examples (Hopper and Blackwell), and the
float64 ``reference`` both check against.

``check_attention_args(q, k, v, ...)`` validates the arguments of

    o, lse = attention(q, k, v, causal=False, scale=None, cu_seqlens_q=None, cu_seqlens_k=None,
                       max_seqlen_q=None, max_seqlen_k=None)

before anything reaches a GPU, and returns an ``AttentionProblem`` (a frozen record of the shapes
and defaults) that a kernel's launcher turns into its own arguments. It is written against the
array protocol the examples accept (torch and cupy tensors, tylo device arrays, numpy arrays for the
interpreter): ``.shape``, ``.dtype`` and element strides (``.stride()`` or ``.strides`` in bytes).

The rules (issue 11):
* batched: q (batch, seqlen_q, heads, head_dim), k and v (batch, seqlen_k, kv_heads, head_dim);
* varlen: q (total_q, heads, head_dim), k and v (total_k, kv_heads, head_dim) with int32
  ``cu_seqlens_q`` / ``cu_seqlens_k`` of batch + 1 ascending offsets starting at 0 and ending at the
  total; ``max_seqlen_*`` default to the largest length (and must not be smaller);
* bf16 or f16, all three of one dtype; any strides with a contiguous last dimension;
* head_dim in ``SUPPORTED_HEAD_DIMS`` (64, 128, 256) unless the caller narrows it;
* ``heads % kv_heads == 0`` (GQA, MQA);
* ``scale`` defaults to 1 / sqrt(head_dim) and must be positive.

Every error is a ValueError or TypeError whose message starts with ``attention:`` and names the
argument.

The launch helpers below turn checked arrays of any of those libraries into kernel arguments:
``array_library`` (which library an array is from; numpy means the interpreter), ``strided`` /
``DeviceView`` (a strided view of the same memory), ``contiguous``, ``pointer``, ``tma_view`` (the 3-D
view a batched TMA map of q, k or v reads, for BSHD, BHSD and packed varlen layouts), ``tma_binding``
(cached TMA maps of device views), ``device_offsets`` (cached int32 offsets on the device) and
``empty`` (outputs of the inputs' library).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import tylo
from tylo.runtime.memo import BoundedMemo

SUPPORTED_HEAD_DIMS = (64, 128, 256)
SUPPORTED_DTYPES = ("bfloat16", "float16")

__all__ = ["AttentionProblem", "check_attention_args", "check_examples", "dtype_name", "element_strides", "reference",
           "SUPPORTED_HEAD_DIMS", "SUPPORTED_DTYPES", "array_library", "one_library", "DeviceView", "numpy_dtype",
           "strided", "contiguous", "pointer", "tma_view", "tma_binding", "device_offsets", "empty", "KernelOperands",
           "kernel_operands"]


@dataclass(frozen=True)
class AttentionProblem:
    """The validated shapes of one attention call.

    ``seqlens_q`` / ``seqlens_k``: the per-sequence lengths (a tuple, batch entries);
    ``offsets_q`` / ``offsets_k``: the packed row offsets (batch + 1 entries; for the batched form
    ``b * seqlen``); ``varlen``: whether q, k, v are packed (3-D).
    """

    batch: int
    heads: int
    kv_heads: int
    head_dim: int
    dtype: str
    causal: bool
    scale: float
    varlen: bool
    seqlens_q: tuple
    seqlens_k: tuple
    offsets_q: tuple
    offsets_k: tuple
    max_seqlen_q: int
    max_seqlen_k: int

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.heads // self.kv_heads


def dtype_name(x) -> str:
    """'bfloat16', 'float16', 'int32', ... for numpy, ml_dtypes, torch and cupy dtypes."""
    name = str(getattr(x, "dtype", x))
    return name.rsplit(".", 1)[-1]


def element_strides(x) -> tuple:
    """Strides in elements: torch's ``.stride()``, or numpy/cupy byte ``.strides`` divided by the item size."""
    stride = getattr(x, "stride", None)
    if callable(stride):
        return tuple(int(s) for s in stride())
    item = x.itemsize if hasattr(x, "itemsize") else x.dtype.itemsize
    return tuple(int(s) // item for s in x.strides)


def _shape(x, name: str) -> tuple:
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        raise TypeError(f"attention: {name} must be an array (torch/cupy tensor, tylo device array or numpy "
                        f"array), got {type(x).__name__}")
    return tuple(int(s) for s in x.shape)


def _host_ints(x, name: str) -> tuple:
    """The values of a small int32 offsets array (copied to the host: torch, cupy or numpy)."""
    if dtype_name(x) != "int32":
        raise TypeError(f"attention: {name} must be int32, got {dtype_name(x)}")
    shape = _shape(x, name)
    if len(shape) != 1 or shape[0] < 2:
        raise ValueError(f"attention: {name} must be 1-D with batch + 1 >= 2 entries, got shape {shape}")
    if hasattr(x, "cpu"):      # torch
        x = x.cpu()
    if hasattr(x, "get"):      # cupy
        x = x.get()
    return tuple(int(v) for v in x.tolist())


def _offsets(x, name: str, total: int, batch: int | None) -> tuple:
    vals = _host_ints(x, name)
    if batch is not None and len(vals) != batch + 1:
        raise ValueError(f"attention: {name} has {len(vals)} entries; cu_seqlens_q has {batch + 1} "
                         f"(both are batch + 1 long)")
    if vals[0] != 0:
        raise ValueError(f"attention: {name} must start at 0, got {vals[0]}")
    if any(b < a for a, b in zip(vals, vals[1:])):
        raise ValueError(f"attention: {name} must be ascending (non-decreasing), got {list(vals)}")
    if vals[-1] != total:
        raise ValueError(f"attention: {name} ends at {vals[-1]}, but the packed tensor has {total} rows")
    return vals


def _max_seqlen(given, lengths, name: str) -> int:
    longest = max(lengths) if lengths else 0
    if given is None:
        return longest
    if not isinstance(given, int) or isinstance(given, bool) or given < longest:
        raise ValueError(f"attention: {name} must be an int at least the longest sequence ({longest}), got {given!r}")
    return given


def check_attention_args(q, k, v, causal=False, scale=None, cu_seqlens_q=None, cu_seqlens_k=None,
                         max_seqlen_q=None, max_seqlen_k=None, head_dims=SUPPORTED_HEAD_DIMS) -> AttentionProblem:
    """Validate the arguments of ``attention`` (see the module docstring); returns an AttentionProblem.

    ``head_dims``: the head dimensions this kernel supports (a subset of SUPPORTED_HEAD_DIMS).
    """
    shapes = {name: _shape(x, name) for name, x in (("q", q), ("k", k), ("v", v))}
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen and (cu_seqlens_q is None or cu_seqlens_k is None):
        missing = "cu_seqlens_k" if cu_seqlens_k is None else "cu_seqlens_q"
        raise ValueError(f"attention: {missing} is missing: varlen needs both cu_seqlens_q and cu_seqlens_k")
    rank = 3 if varlen else 4
    for name, shape in shapes.items():
        if len(shape) != rank:
            form = ("packed (total, heads, head_dim) because cu_seqlens are given" if varlen
                    else "(batch, seqlen, heads, head_dim)")
            raise ValueError(f"attention: {name} must be {rank}-D, {form}; got shape {shape}")
    dtypes = {name: dtype_name(x) for name, x in (("q", q), ("k", k), ("v", v))}
    if dtypes["q"] not in SUPPORTED_DTYPES:
        raise TypeError(f"attention: q must be bfloat16 or float16, got {dtypes['q']}")
    for name in ("k", "v"):
        if dtypes[name] != dtypes["q"]:
            raise TypeError(f"attention: {name} is {dtypes[name]} but q is {dtypes['q']} (one dtype for all three)")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if element_strides(x)[-1] != 1:
            raise ValueError(f"attention: {name} must have a contiguous last dimension (stride 1), got strides "
                             f"{element_strides(x)}")
    sq, sk, sv = shapes["q"], shapes["k"], shapes["v"]
    head_dim, heads, kv_heads = sq[-1], sq[-2], sk[-2]
    if head_dim not in head_dims:
        raise ValueError(f"attention: head_dim (q.shape[-1]) must be one of {tuple(head_dims)}, got {head_dim}")
    if sk[-1] != head_dim or sv[-1] != head_dim:
        raise ValueError(f"attention: k and v must have q's head_dim {head_dim}; got k {sk}, v {sv}")
    if sv != sk:
        raise ValueError(f"attention: v must have k's shape {sk}, got {sv}")
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"attention: heads ({heads}, q.shape[-2]) must be a multiple of kv_heads ({kv_heads}, "
                         f"k.shape[-2])")
    if not isinstance(causal, bool):
        raise TypeError(f"attention: causal must be a bool, got {causal!r}")
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim)
    elif isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise TypeError(f"attention: scale must be a finite float, got {scale!r}")
    elif scale <= 0:     # the kernels keep the running max of raw scores: a negative scale would invert it
        raise ValueError(f"attention: scale must be positive, got {scale!r}")
    if varlen:
        off_q = _offsets(cu_seqlens_q, "cu_seqlens_q", sq[0], None)
        batch = len(off_q) - 1
        off_k = _offsets(cu_seqlens_k, "cu_seqlens_k", sk[0], batch)
        lens_q = tuple(b - a for a, b in zip(off_q, off_q[1:]))
        lens_k = tuple(b - a for a, b in zip(off_k, off_k[1:]))
    else:
        for name, given in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
            if given is not None:
                raise ValueError(f"attention: {name} is only for varlen calls (with cu_seqlens_q/cu_seqlens_k)")
        batch = sq[0]
        if sk[0] != batch:
            raise ValueError(f"attention: k has batch {sk[0]} but q has batch {batch}")
        lens_q, lens_k = (sq[1],) * batch, (sk[1],) * batch
        off_q = tuple(b * sq[1] for b in range(batch + 1))
        off_k = tuple(b * sk[1] for b in range(batch + 1))
    return AttentionProblem(
        batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim, dtype=dtypes["q"], causal=causal,
        scale=float(scale), varlen=varlen, seqlens_q=lens_q, seqlens_k=lens_k, offsets_q=off_q, offsets_k=off_k,
        max_seqlen_q=_max_seqlen(max_seqlen_q, lens_q, "max_seqlen_q"),
        max_seqlen_k=_max_seqlen(max_seqlen_k, lens_k, "max_seqlen_k"))


def reference(q, k, v, causal, scale, dtype=np.float64):
    """Attention of one sequence (seq, heads, d) in float64, or with P and O rounded to ``dtype`` (the
    FlashAttention-3 test's low-precision reference). Returns ``(o, lse)``."""
    sq, sk = q.shape[0], k.shape[0]
    group = q.shape[1] // k.shape[1]
    kk = np.repeat(k.astype(np.float64), group, axis=1)
    vv = np.repeat(v.astype(np.float64), group, axis=1)
    s = np.einsum("qhd,khd->hqk", q.astype(np.float64), kk) * scale
    if causal:
        allowed = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + sk - sq
        s = np.where(allowed[None], s, -np.inf)
    mx = s.max(-1, keepdims=True) if sk else np.full(s.shape[:-1] + (1,), -np.inf)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    p = np.exp(s - mx)
    ls = p.sum(-1, keepdims=True)
    lse = np.where(ls[..., 0] > 0, np.log(np.where(ls > 0, ls, 1.0))[..., 0] + mx[..., 0], -np.inf)
    p = p / np.where(ls > 0, ls, 1.0)
    if dtype is not np.float64:
        p = p.astype(dtype).astype(np.float64)
    o = np.einsum("hqk,khd->qhd", p, vv)
    if dtype is not np.float64:
        o = o.astype(dtype).astype(np.float64)
    return o, lse


# ---------------------------------------------------------------------------------------------- launch helpers

def array_library(x) -> str:
    """'numpy' (the interpreter), 'torch', 'cupy' or 'tylo' (a tylo DeviceArray or another device array)."""
    mod = type(x).__module__.split(".")[0]
    if isinstance(x, np.ndarray):
        return "numpy"
    return mod if mod in ("torch", "cupy") else "tylo"


def one_library(*arrays) -> str:
    """The one array library of ``arrays`` (q, k, v); TypeError when they mix libraries."""
    libs = {array_library(x) for x in arrays}
    if len(libs) != 1:
        raise TypeError(f"attention: q, k and v must come from one array library, got {sorted(libs)}")
    return libs.pop()


class DeviceView:
    """A strided view of device memory (``__cuda_array_interface__``), for TMA maps over torch, cupy and
    tylo arrays alike; it keeps ``base`` alive."""

    def __init__(self, base, ptr, dtype, shape, strides):
        self.base, self.dtype, self.shape = base, dtype, tuple(shape)
        item = dtype.itemsize
        self.__cuda_array_interface__ = {"shape": self.shape, "strides": tuple(s * item for s in strides),
                                         "typestr": dtype.str, "data": (ptr, False), "version": 3}


def numpy_dtype(name):
    """The numpy dtype of 'bfloat16' (ml_dtypes) or 'float16'."""
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(np.float16)


def strided(x, lib, ptr, shape, strides):
    """x's memory as ``shape`` / element ``strides`` (numpy: ``as_strided``; device: a DeviceView)."""
    if lib == "numpy":
        item = x.itemsize
        return np.lib.stride_tricks.as_strided(x, shape, tuple(s * item for s in strides))
    return DeviceView(x, ptr, numpy_dtype(dtype_name(x)), shape, strides)


def contiguous(x, lib):
    """A contiguous copy of x in its own library (x itself when it already is one, for torch)."""
    if lib == "numpy":
        return np.ascontiguousarray(x)
    if lib == "torch":
        return x.contiguous()
    if lib == "cupy":
        import cupy
        return cupy.ascontiguousarray(x)
    raise ValueError("attention: a tylo DeviceArray is always contiguous")    # unreachable: no views exist


def pointer(x, lib):
    """The address of x's first element (host memory for numpy, device memory otherwise)."""
    if lib == "numpy":
        return x.ctypes.data
    from tylo.runtime import describe_array
    return describe_array(x).ptr


def tma_view(x, packed: bool, lib: str):
    """A 3-D (batch, rows, head_dim) view of q, k or v for a batched TMA map, and how to address it.

    Returns ``(view, row_mul, bat_mul)``: sequence b, head h, position i is row
    ``row_mul * offset[b] + i`` of batch entry ``bat_mul * b + h``. Rows of all sequences share one
    axis (stride = the sequence stride) when the layout allows it (BSHD, packed varlen); otherwise
    batch and heads share the batch axis (BHSD views). Anything else is copied (rare)."""
    st = element_strides(x)
    ptr = pointer(x, lib)
    if packed:                                   # (total, heads, d): rows along total
        total, nh, d = x.shape
        return strided(x, lib, ptr, (nh, total, d), (st[1], st[0], 1)), 1, 0
    bsz, seq, nh, d = x.shape
    if bsz == 1 or st[0] == seq * st[1]:         # BSHD-like: batch and sequence merge into rows
        return strided(x, lib, ptr, (nh, bsz * seq, d), (st[2], st[1], 1)), 1, 0
    if nh == 1 or st[0] == nh * st[2]:           # BHSD-like: batch and heads merge into the batch axis
        # one head: entry b is batch b, so the axis steps by the batch stride (a lone head's stride can be anything)
        return strided(x, lib, ptr, (bsz * nh, seq, d), (st[0] if nh == 1 else st[2], st[1], 1)), 0, nh
    return tma_view(contiguous(x, lib), packed, lib)


_BINDINGS = BoundedMemo(48)       # bindings keep their arrays alive


def tma_binding(plan, view, lib):
    """``tylo.prepare_tma(plan, view)``, cached per (plan, address, shape, strides) for device arrays
    (encoding one costs tens of us); numpy views are bound afresh."""
    if lib == "numpy":
        return tylo.prepare_tma(plan, view)
    cai = view.__cuda_array_interface__
    key = (plan, cai["data"][0], cai["shape"], cai["strides"])
    return _BINDINGS.get_or_make(key, lambda: tylo.prepare_tma(plan, view))


_OFFSETS = BoundedMemo(64)


def device_offsets(values, like, lib):
    """An int32 device array of ``values`` in ``like``'s library and device (cached: batched calls reuse
    their offsets)."""
    return _OFFSETS.get_or_make((lib, values, str(getattr(like, "device", ""))),
                                lambda: _offsets_array(values, like, lib))


def _offsets_array(values, like, lib):
    host_vals = np.asarray(values, np.int32)
    if lib == "torch":
        import torch
        return torch.from_numpy(host_vals).to(like.device)
    if lib == "cupy":
        import cupy
        return cupy.asarray(host_vals)
    return tylo.to_device(host_vals)


def empty(shape, dtype_name, like, lib):
    """An output array of ``dtype_name`` ('bfloat16', 'float16' or 'float32') in ``like``'s library (and
    device); numpy outputs are filled with NaN, so that what a launch leaves unwritten shows."""
    if lib == "numpy":
        return np.full(shape, np.nan, numpy_dtype(dtype_name) if dtype_name != "float32" else np.float32)
    if lib == "torch":
        import torch
        dt = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[dtype_name]
        return torch.empty(shape, dtype=dt, device=like.device)
    if lib == "cupy":
        import cupy
        return cupy.empty(shape, like.dtype if dtype_name != "float32" else np.float32)
    return tylo.empty(shape, numpy_dtype(dtype_name) if dtype_name != "float32" else np.float32)


@dataclass(frozen=True, eq=False)
class KernelOperands:
    """The array operands both attention kernels take from one call: 3-D TMA views of q, k and v and how
    rows address them (``tma_view``: sequence b, head h, position i is row ``row_mul * offset[b] + i`` of
    batch entry ``bat_mul * b + h``; k and v share theirs), the outputs ``o`` and ``lse`` (NaN-poisoned for
    numpy) with lse's strides (entry ``b * lse_b + h * lse_h + lse_row_mul * offset[b] + row``), and the
    int32 sequence offsets ``cu_q`` / ``cu_k`` in the arrays' library."""

    q_view: object
    k_view: object
    v_view: object
    q_row_mul: int
    q_bat_mul: int
    kv_row_mul: int
    kv_bat_mul: int
    o: object
    lse: object
    lse_b: int
    lse_h: int
    lse_row_mul: int
    cu_q: object
    cu_k: object


def kernel_operands(q, k, v, pb: AttentionProblem, lib: str) -> KernelOperands:
    """Views, outputs and offsets of one checked call (``pb`` from ``check_attention_args``)."""
    q_view, q_row_mul, q_bat_mul = tma_view(q, pb.varlen, lib)
    k_view, kv_row_mul, kv_bat_mul = tma_view(k, pb.varlen, lib)
    v_view, v_row_mul, v_bat_mul = tma_view(v, pb.varlen, lib)
    if (v_row_mul, v_bat_mul) != (kv_row_mul, kv_bat_mul):      # k and v must be addressed alike
        k_view, kv_row_mul, kv_bat_mul = tma_view(contiguous(k, lib), pb.varlen, lib)
        v_view, _, _ = tma_view(contiguous(v, lib), pb.varlen, lib)
    total_q = pb.offsets_q[-1]
    o = empty(tuple(q.shape), pb.dtype, q, lib)
    if pb.varlen:
        lse = empty((pb.heads, total_q), "float32", q, lib)
        lse_b, lse_h, lse_row_mul = 0, total_q, 1
    else:
        lse = empty((pb.batch, pb.heads, pb.max_seqlen_q), "float32", q, lib)
        lse_b, lse_h, lse_row_mul = pb.heads * pb.max_seqlen_q, pb.max_seqlen_q, 0
    if lib == "numpy":
        cu_q, cu_k = np.asarray(pb.offsets_q, np.int32), np.asarray(pb.offsets_k, np.int32)
    else:
        cu_q, cu_k = device_offsets(pb.offsets_q, q, lib), device_offsets(pb.offsets_k, q, lib)
    return KernelOperands(q_view, k_view, v_view, q_row_mul, q_bat_mul, kv_row_mul, kv_bat_mul, o, lse, lse_b, lse_h,
                          lse_row_mul, cu_q, cu_k)


def check_examples(name, attention, cases, gpu, lse_tol):
    """An example's self-check: for each (batch, seqlen_q, seqlen_k, heads, kv_heads, head_dim, causal) case,
    ``attention`` on fresh random bf16 inputs (tylo device arrays when ``gpu``, else numpy: the interpreter)
    against float64 with FlashAttention-3's criterion (error at most twice that of a bf16 reference of the
    same math, plus 1e-3), LSE within ``lse_tol`` where finite and -inf exactly where no key is seen."""
    import ml_dtypes

    rng = np.random.default_rng()
    for b, sq, sk, h, hk, d, causal in cases:
        q, k, v = (rng.standard_normal((b, s, n, d)).astype(ml_dtypes.bfloat16)
                   for s, n in ((sq, h), (sk, hk), (sk, hk)))
        if gpu:
            o, lse = attention(tylo.to_device(q), tylo.to_device(k), tylo.to_device(v), causal=causal)
            o, lse = o.to_host(), lse.to_host()
        else:
            o, lse = attention(q, k, v, causal=causal)
        for i in range(b):
            ref, ref_lse = reference(q[i], k[i], v[i], causal, 1 / np.sqrt(d))
            low = reference(q[i], k[i], v[i], causal, 1 / np.sqrt(d), ml_dtypes.bfloat16)[0]
            err = np.abs(o[i].astype(np.float64) - ref).max()
            bf_err = np.abs(low - ref).max()
            fin = np.isfinite(ref_lse)
            lse_err = np.abs(lse[i][fin] - ref_lse[fin]).max() if fin.any() else 0.0
            assert err <= 2 * bf_err + 1e-3 and lse_err < lse_tol, (err, bf_err, lse_err)
            assert np.array_equal(np.isneginf(lse[i]), ~fin)
        where = "GPU" if gpu else "interpreter"
        print(f"{name} b={b} sq={sq} sk={sk} heads={h}/{hk} d={d} causal={causal} ({where}): "
              f"max |O - ref| {err:.1e}, max |LSE - ref| {lse_err:.1e}")
