"""examples/hopper_attention.py on an sm_90 GPU against float64 with FlashAttention-3's criterion (error at
most twice that of a reference in the input precision, plus a small atol), LSE against float64
logsumexp: the (seqlen_q, seqlen_k) pairs of issue 11, head_dim 64/128/256, causal and not, GQA/MQA,
varlen with NaN-poisoned outputs and guard rows, inputs x10, BSHD and BHSD strides, bitwise-equal
repeated runs, more tiles than SMs and fewer."""
import math

import hopper_attention as ha
import pytest

from tylo.runtime.memo import BoundedMemo

pytestmark = pytest.mark.gpu


def _torch():
    from tylo.runtime import compute_capability
    if compute_capability() < (9, 0):
        pytest.skip("needs sm_90")
    return pytest.importorskip("torch")


def _reference(torch, q, k, v, causal, scale, low=None):
    """One sequence (seq, heads, d) in float64 -> (o (seq, heads, d), lse (heads, seq)); with ``low``, P
    and O rounded to that dtype (the low-precision reference of the criterion)."""
    sq, sk = q.shape[0], k.shape[0]
    group = q.shape[1] // k.shape[1]
    kk = k.double().repeat_interleave(group, dim=1)
    vv = v.double().repeat_interleave(group, dim=1)
    s = torch.einsum("qhd,khd->hqk", q.double(), kk) * scale
    if causal:
        allowed = (torch.arange(sk, device=q.device)[None, :]
                   <= torch.arange(sq, device=q.device)[:, None] + sk - sq)
        s = s.masked_fill(~allowed[None], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isfinite(lse), lse, 0.0)[..., None])
    if low is not None:
        p = p.to(low).double()
    o = torch.einsum("hqk,khd->qhd", p, vv)
    if low is not None:
        o = o.to(low).double()
    return o, lse


def _check_sequence(torch, o, lse, q, k, v, causal, scale):
    ref, ref_lse = _reference(torch, q, k, v, causal, scale)
    low, _ = _reference(torch, q, k, v, causal, scale, q.dtype)
    err = (o.double() - ref).abs().max().item() if o.numel() else 0.0
    low_err = (low - ref).abs().max().item() if o.numel() else 0.0
    assert err <= 2 * low_err + 1e-3, (err, low_err)
    fin = torch.isfinite(ref_lse)
    assert torch.equal(torch.isneginf(lse), ~fin)
    if fin.any():
        assert (lse.double()[fin] - ref_lse[fin]).abs().max().item() < 1e-3 * max(1.0, ref_lse[fin].abs().max().item())
    assert (o.transpose(0, 1)[~fin] == 0).all()          # rows that see no key give O = 0


def _inputs(torch, b, sq, sk, h, hk, d, dtype=None, bhsd=False, mult=1.0, seed=0):
    dtype = dtype or torch.bfloat16
    g = torch.Generator(device="cuda").manual_seed(seed)

    def make(s, heads, m):
        if bhsd:
            return (torch.randn(b, heads, s, d, device="cuda", generator=g) * m).to(dtype).transpose(1, 2)
        return (torch.randn(b, s, heads, d, device="cuda", generator=g) * m).to(dtype)
    return make(sq, h, mult), make(sk, hk, mult), make(sk, hk, 1.0)


PAIRS = [(1, 1), (239, 1), (799, 3), (113, 203), (128, 217), (1023, 1024), (1024, 1023), (4224, 4224)]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", ha.HEAD_DIMS)
@pytest.mark.parametrize("sq,sk", PAIRS)
def test_seqlen_pairs(sq, sk, d, causal):
    torch = _torch()
    q, k, v = _inputs(torch, 2 if sq * sk < 10 ** 6 else 1, sq, sk, 2, 1, d, seed=sq + sk + d)
    o, lse = ha.attention(q, k, v, causal=causal)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (q.shape[0], 2, sq)
    for i in range(q.shape[0]):
        _check_sequence(torch, o[i], lse[i], q[i], k[i], v[i], causal, 1 / math.sqrt(d))


@pytest.mark.parametrize("sq,sk,bn", [(2048, 2048, 160), (1500, 4000, 160), (1100, 1232, 176)])
def test_d128_key_block_by_length(sq, sk, bn):
    # D = 128 non-causal takes the key block that pads the keys least (160 or 176): both against float64
    torch = _torch()
    assert ha.tile_config(128, False, sk).bn == bn
    q, k, v = _inputs(torch, 1, sq, sk, 2, 1, 128, seed=sq + sk)
    o, lse = ha.attention(q, k, v)
    _check_sequence(torch, o[0], lse[0], q[0], k[0], v[0], False, 1 / math.sqrt(128))


@pytest.mark.parametrize("kv_heads", [6, 2, 1])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_gqa_and_mqa(kv_heads, causal):
    torch = _torch()
    q, k, v = _inputs(torch, 2, 300, 517, 6, kv_heads, 128, seed=kv_heads)
    o, lse = ha.attention(q, k, v, causal=causal)
    for i in range(2):
        _check_sequence(torch, o[i], lse[i], q[i], k[i], v[i], causal, 1 / math.sqrt(128))


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_layouts_dtypes_and_large_inputs(layout, dtype):
    torch = _torch()
    dt = getattr(torch, dtype)
    q, k, v = _inputs(torch, 2, 333, 640, 4, 2, 64, dtype=dt, bhsd=layout == "bhsd", mult=10.0, seed=7)
    o, lse = ha.attention(q, k, v, causal=True, scale=0.1)
    for i in range(2):
        _check_sequence(torch, o[i], lse[i], q[i], k[i], v[i], True, 0.1)


def _poisoned_launch(torch, q, k, v, causal, guard, **varlen):
    """Launch into NaN-poisoned outputs with ``guard`` extra rows after the last one (o) and after each
    head's row of LSE; returns (o, lse, o_guard, lse_guard)."""
    grid, block, args, cx, o, lse, _ = ha.prepare(q, k, v, causal, None, **varlen)
    rows = o.reshape(-1, *o.shape[-2:]).shape[0]
    o_big = torch.full((rows + guard, *o.shape[-2:]), float("nan"), dtype=o.dtype, device=o.device)
    if lse.dim() == 2:                     # varlen (heads, total): each head's row gets guard columns
        lse_big = torch.full((lse.shape[0], lse.shape[1] + guard), float("nan"), device=o.device)
        args[ha.ARG_NAMES.index("lse_h")] = lse.shape[1] + guard
        lse_view = lse_big[:, :lse.shape[1]]
        lse_guard = lse_big[:, lse.shape[1]:]
    else:
        lse_big = torch.full((lse.numel() + guard,), float("nan"), device=o.device)
        lse_view = lse_big[:lse.numel()].view(lse.shape)
        lse_guard = lse_big[lse.numel():]
    args[0], args[1] = o_big, lse_big
    # the TMA-store epilogue writes through a map of o: the same rows of o_big (the guards lie past its end)
    args[ha.O_MAP] = ha.output_map(o_big[:rows].view(o.shape), lse.dim() == 2, "torch")
    ha.attention_fwd[grid, block](*args, *cx.values())
    torch.cuda.synchronize()
    return o_big[:rows].view(o.shape), lse_view, o_big[rows:], lse_guard


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_varlen_poisoned_outputs_and_guards(d, causal):
    torch = _torch()
    g = torch.Generator().manual_seed(d + causal)
    lens_q = [1, 2000, 17, 0, 1000, 129, 64, 777]
    lens_k = [int(x) for x in torch.randint(1, 2001, (len(lens_q),), generator=g)]
    lens_k[3] = 5
    cu_q = torch.tensor([0] + lens_q, dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
    cu_k = torch.tensor([0] + lens_k, dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
    q = torch.randn(int(cu_q[-1]), 4, d, device="cuda").to(torch.bfloat16)
    k = torch.randn(int(cu_k[-1]), 2, d, device="cuda").to(torch.bfloat16)
    v = torch.randn(int(cu_k[-1]), 2, d, device="cuda").to(torch.bfloat16)
    o, lse, o_guard, lse_guard = _poisoned_launch(torch, q, k, v, causal, 192, cu_seqlens_q=cu_q,
                                                  cu_seqlens_k=cu_k)
    assert torch.isnan(o_guard).all() and torch.isnan(lse_guard).all()        # nothing past the last row
    assert not torch.isnan(o).any() and not torch.isnan(lse).any()             # every row written once
    for i in range(len(lens_q)):
        a, b, c, e = int(cu_q[i]), int(cu_q[i + 1]), int(cu_k[i]), int(cu_k[i + 1])
        _check_sequence(torch, o[a:b], lse[:, a:b], q[a:b], k[c:e], v[c:e], causal, 1 / math.sqrt(d))
    o2, lse2 = ha.attention(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert torch.equal(o2, o) and torch.equal(lse2, lse)


def test_batched_poisoned_outputs_and_guards():
    torch = _torch()
    q, k, v = _inputs(torch, 3, 201, 333, 2, 2, 128, seed=11)
    o, lse, o_guard, lse_guard = _poisoned_launch(torch, q, k, v, True, 130)
    assert torch.isnan(o_guard).all() and torch.isnan(lse_guard).all()
    assert not torch.isnan(o).any() and not torch.isnan(lse).any()


@pytest.mark.parametrize("shape", [(1, 1, 128, 128), (4, 16, 4224, 128)], ids=["fewer_tiles_than_sms", "more"])
def test_tiles_against_sms_and_bitwise_repeats(shape):
    torch = _torch()
    b, h, s, d = shape
    q, k, v = _inputs(torch, b, s, s, h, h, d, seed=5)
    for causal in (False, True):
        o, lse = ha.attention(q, k, v, causal=causal)
        o2, lse2 = ha.attention(q, k, v, causal=causal)        # the cached launch: fresh outputs, same bits
        assert o2.data_ptr() != o.data_ptr() and torch.equal(o, o2) and torch.equal(lse, lse2)
        for i in {0, b - 1}:
            hs = slice(0, 2)                  # two heads of the first and last sequence (the reference is O(s^2))
            _check_sequence(torch, o[i][:, hs], lse[i][hs], q[i][:, hs], k[i][:, hs], v[i][:, hs], causal,
                            1 / math.sqrt(d))


def test_dynamic_schedule_counters_reset_and_concurrent_streams():
    # causal calls take units from a per-stream counter that the last CTA resets: after any number of
    # calls it reads zero, and two streams running the same causal problem at once agree bitwise
    torch = _torch()
    q, k, v = _inputs(torch, 8, 1000, 1000, 16, 4, 128, seed=21)
    ref, ref_lse = ha.attention(q, k, v, causal=True)
    torch.cuda.synchronize()
    assert not ha.scheduler_counter(q, "torch").to_host()[:2].any()
    streams = [torch.cuda.Stream() for _ in range(2)]
    outs = []
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())
    for _ in range(4):
        for s in streams:
            with torch.cuda.stream(s):
                outs.append(ha.attention(q, k, v, causal=True))
    torch.cuda.synchronize()
    for o, lse in outs:
        assert torch.equal(o, ref) and torch.equal(lse, ref_lse)
    for s in streams:
        with torch.cuda.stream(s):
            assert not ha.scheduler_counter(q, "torch").to_host()[:2].any()
    _check_sequence(torch, ref[0][:, :2], ref_lse[0][:2], q[0][:, :2], k[0][:, :1], v[0][:, :1], True,
                    1 / math.sqrt(128))


def test_runs_on_the_callers_stream():
    torch = _torch()
    q, k, v = _inputs(torch, 1, 4224, 4224, 8, 8, 128, seed=9)
    ref, _ = ha.attention(q, k, v)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        o, _ = ha.attention(q, k, v)
        done = torch.cuda.Event()
        done.record(side)
    done.synchronize()
    assert torch.equal(o, ref)


def test_cached_launch_reads_new_data_in_the_same_arrays():
    torch = _torch()
    q, k, v = _inputs(torch, 2, 300, 400, 4, 2, 128, seed=13)
    ha.attention(q, k, v, causal=True)
    q.mul_(-0.5)
    v.add_(1.0)
    o, lse = ha.attention(q, k, v, causal=True)
    for i in range(2):
        _check_sequence(torch, o[i], lse[i], q[i], k[i], v[i], True, 1 / math.sqrt(128))


@pytest.fixture
def stage_o(monkeypatch):
    """Stage O in a buffer the loads reuse, ``flag`` "o_in_q" (the Q buffer) or "o_in_v" (the V ring), for the
    (d, causal) specialisations a test names, whether or not it is the default; a launch cache of its own, so no
    launch of another tiling is reused."""
    import dataclasses

    def use(d, causal, flag):
        cfg = dataclasses.replace(ha.tile_config(d, causal), **{"o_in_q": False, "o_in_v": False, flag: True})
        monkeypatch.setitem(ha.TILE_OVERRIDES, (d, causal), cfg)
        return cfg
    monkeypatch.setattr(ha, "_LAUNCHES", BoundedMemo(64))
    monkeypatch.setattr(ha, "TILE_OVERRIDES", dict(ha.TILE_OVERRIDES))
    return use


@pytest.mark.parametrize("flag", ["o_in_q", "o_in_v"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [128, 256])
@pytest.mark.parametrize("sq,sk", [(201, 333), (330, 70), (40, 333)], ids=["ragged", "keyless_tiles", "rowless_consumer"])
def test_o_staged_in_a_load_buffer_poisoned_outputs_and_guards(stage_o, flag, d, causal, sq, sk):
    # the TMA-store epilogue with O staged in the Q buffer or the V ring: ragged sequences (the map clips each
    # tile at its sequence's end; causal 330 x 70: the first tiles see no key (in Q they still stage their zeros,
    # in V they store them from registers); 40 queries: the second consumer has no row to store but still
    # releases the buffer), outputs poisoned with NaN and guard rows after the last row; every row written, the
    # guards untouched, two launches bitwise equal, against float64
    torch = _torch()
    stage_o(d, causal, flag)
    q, k, v = _inputs(torch, 3, sq, sk, 4, 2, d, seed=d + sq + causal)
    assert ha.prepare(q, k, v, causal)[3][flag.upper()]
    o, lse, o_guard, lse_guard = _poisoned_launch(torch, q, k, v, causal, 130)
    assert torch.isnan(o_guard).all() and torch.isnan(lse_guard).all()
    assert not torch.isnan(o).any() and not torch.isnan(lse).any()
    for i in range(3):
        _check_sequence(torch, o[i], lse[i], q[i], k[i], v[i], causal, 1 / math.sqrt(d))
    o2, lse2 = ha.attention(q, k, v, causal=causal)
    assert torch.equal(o2, o) and torch.equal(lse2, lse)


@pytest.mark.parametrize("flag", ["o_in_q", "o_in_v"])
@pytest.mark.parametrize("d,causal", [(128, False), (256, False), (256, True)], ids=["d128", "d256", "d256-causal"])
def test_o_staged_in_a_load_buffer_more_units_than_sms(stage_o, flag, d, causal):
    # many units per persistent CTA (static, or the dynamic schedule): each next Q load (o_in_q) or first V load
    # (o_in_v) waits for the previous unit's O stores to have read the staging; cached launches repeat the bits
    torch = _torch()
    stage_o(d, causal, flag)
    q, k, v = _inputs(torch, 4, 2112, 2112, 2048 // d, 2048 // d, d, seed=d + 31)
    o, lse = ha.attention(q, k, v, causal=causal)
    o2, lse2 = ha.attention(q, k, v, causal=causal)
    assert torch.equal(o, o2) and torch.equal(lse, lse2)
    for i in (0, 3):
        hs = slice(0, 2)
        _check_sequence(torch, o[i][:, hs], lse[i][hs], q[i][:, hs], k[i][:, hs], v[i][:, hs], causal,
                        1 / math.sqrt(d))
