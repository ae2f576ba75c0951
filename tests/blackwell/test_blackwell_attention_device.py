"""examples/blackwell_attention.py's device path. Without a GPU: the shared 3-D TMA views
(attention_host.tma_view) address every element, ``prepare`` builds exactly the arguments, grid and
constexprs the sm_100a launch signature (and AOT list) takes, and the capability check names what is
needed. With a GPU (``gpu``): on an sm_100-class GPU the kernel against float64; on any other GPU the
clear error (so the H200 checks something too). No sm_100 GPU has run it here."""
import math

import attention_host as ah
import blackwell_attention as ba
import ml_dtypes
import numpy as np
import pytest

import tylo
from tylo.lang import tma
from tylo.runtime.tma_binding import TMABinding

BF16 = ml_dtypes.bfloat16


def _bshd(b, s, h, d, rng):
    return rng.standard_normal((b, s, h, d)).astype(BF16)


# -- attention_host.tma_view: sequence b, head h, position i is row row_mul * offset[b] + i of entry bat_mul * b + h

def _layouts():
    base = np.arange(3 * 9 * 4 * 8, dtype=np.float16).reshape(3, 9, 4, 8)
    one_head = np.arange(3 * 9 * 8, dtype=np.float16).reshape(3, 9, 1, 8)
    return {
        "bshd": base,
        "bhsd": np.ascontiguousarray(base.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3),
        "seq_slice": base[:, :5],                           # neither form: copied
        "one_head_seq_slice": one_head[:, :5],              # one head, rows of a longer sequence
        "one_head_bhsd": np.ascontiguousarray(one_head.transpose(0, 2, 1, 3))[:, :, :5].transpose(0, 2, 1, 3),
        "single_batch": base[:1, :5],
    }


@pytest.mark.parametrize("name", list(_layouts()))
def test_tma_view_addresses_every_element(name):
    x = _layouts()[name]
    bsz, seq, nh, _ = x.shape
    view, row_mul, bat_mul = ah.tma_view(x, False, "numpy")
    assert view.ndim == 3 and view.shape[2] == x.shape[3]
    for b in range(bsz):
        for h in range(nh):
            rows = view[bat_mul * b + h, row_mul * b * seq:row_mul * b * seq + seq]
            assert np.array_equal(rows, x[b, :, h]), (name, b, h)


def test_tma_view_packed_rows_run_along_total():
    x = np.arange(11 * 3 * 8, dtype=np.float16).reshape(11, 3, 8)
    view, row_mul, bat_mul = ah.tma_view(x, True, "numpy")
    assert (row_mul, bat_mul) == (1, 0) and view.shape == (3, 11, 8)
    assert all(np.array_equal(view[h], x[:, h]) for h in range(3))


# -- prepare() against the launch signature

def _signature_of(args):
    """The signature entries the device launch classifies ``args`` as (TMA bindings by their plan)."""
    out = []
    for a in args:
        if isinstance(a, TMABinding):
            out.append(tma.batched(a.plan) if a.rank == 3 else a.plan)
        elif isinstance(a, np.ndarray):
            # outputs come from torch.empty / cupy.empty / tylo.empty on the device: 256-byte aligned
            name = {"bfloat16": "bf16", "float32": "f32", "int32": "i32"}[ah.dtype_name(a)]
            out.append(f"*{name}:16" if name == "bf16" else f"*{name}")
        elif type(a) is int:
            assert -2 ** 31 <= a < 2 ** 31
            out.append("i32")
        elif type(a) is float:
            out.append("f32")
        else:
            raise AssertionError(f"unexpected launch argument {a!r}")
    return out


CASES = [(64, False, {}), (128, True, {}), (256, True, {}),
         (64, True, dict(cu_seqlens_q=np.array([0, 3, 70], np.int32), cu_seqlens_k=np.array([0, 9, 9], np.int32)))]


@pytest.mark.parametrize("d, causal, varlen", CASES)
def test_prepare_builds_what_the_launch_signature_takes(d, causal, varlen):
    rng = np.random.default_rng(d)
    if varlen:
        q = rng.standard_normal((70, 4, d)).astype(BF16)
        k = v = rng.standard_normal((9, 2, d)).astype(BF16)
    else:
        q, k, v = _bshd(2, 300, 4, d, rng), _bshd(2, 140, 2, d, rng), _bshd(2, 140, 2, d, rng)
    grid, args, cx, o, lse = ba.prepare(q, k, v, causal=causal, num_sms=132, **varlen)
    assert _signature_of(args) == ba.signature(d)
    assert cx == ba.constexprs_for(d, causal)
    assert (ba.attention_fwd, ba.signature(d), cx, ba.THREADS) in ba.AOT      # the AOT list holds this launch
    # the constexprs follow the runtime arguments in the kernel's parameter order (attention() passes both
    # positionally)
    names = [p.name for p in ba.attention_fwd.params]
    assert names[len(args):len(args) + len(cx)] == list(cx)
    n_tiles = args[10]
    assert grid == (min(n_tiles, 132),) and args[9] * 4 * 2 == n_tiles     # n_mb x heads x batch
    assert o.shape == q.shape and lse.dtype == np.float32


def test_the_sm100a_build_accepts_the_device_arguments():
    # compile (LLVM -> PTX -> cubin, nvJitLink) exactly the signature prepare's arguments classify as
    rng = np.random.default_rng(0)
    q, k, v = _bshd(1, 130, 2, 64, rng), _bshd(1, 70, 1, 64, rng), _bshd(1, 70, 1, 64, rng)
    grid, args, cx, _, _ = ba.prepare(q, k, v, causal=True)
    compiled = ba.attention_fwd.compile(signature=_signature_of(args), arch="sm_100a", constexprs=cx,
                                        block=ba.THREADS)
    assert compiled.arch == "sm_100a" and "tcgen05.mma" in compiled.ptx


def test_default_grid_for_numpy_is_a_b200():
    rng = np.random.default_rng(1)
    q, k, v = _bshd(40, 256, 8, 64, rng), _bshd(40, 1, 8, 64, rng), _bshd(40, 1, 8, 64, rng)
    grid, args, _, _, _ = ba.prepare(q, k, v)
    assert args[10] == 320 and grid == (ba.SM100_SMS,) == (148,)


# -- the capability check

@pytest.mark.parametrize("capability", [(9, 0), (8, 0), (12, 0), (11, 0)])
def test_check_sm100_refuses_other_gpus_clearly(capability):
    with pytest.raises(RuntimeError) as e:
        ba.check_sm100(capability, 1)
    msg = str(e.value)
    major, minor = capability
    assert "sm_100-class GPU" in msg and f"GPU 1 is sm_{major}{minor}" in msg and f"{major}.{minor}" in msg
    assert "numpy arrays" in msg and "interpreter" in msg


@pytest.mark.parametrize("capability", [(10, 0), (10, 3)])
def test_check_sm100_accepts_sm100_class(capability):
    ba.check_sm100(capability)


def test_gpu_path_is_offered():
    assert ba.GPU_PATH is True


# -- on a GPU

@pytest.mark.gpu
def test_device_path_against_float64_or_the_clear_error():
    from tylo.runtime import driver
    rng = np.random.default_rng(7)
    q, k, v = _bshd(2, 300, 4, 64, rng), _bshd(2, 200, 2, 64, rng), _bshd(2, 200, 2, 64, rng)
    dq, dk, dv = (tylo.to_device(x) for x in (q, k, v))
    capability = driver.compute_capability(0)
    if capability[0] != 10:
        with pytest.raises(RuntimeError, match=f"needs an sm_100-class GPU.*GPU 0 is sm_{capability[0]}"):
            ba.attention(dq, dk, dv, causal=True)
        return
    o, lse = ba.attention(dq, dk, dv, causal=True)
    o, lse = o.to_host(), lse.to_host()
    assert o.shape == q.shape and lse.shape == (2, 4, 300)
    for b in range(2):
        ref, ref_lse = ah.reference(q[b], k[b], v[b], True, 1 / math.sqrt(64))
        low = ah.reference(q[b], k[b], v[b], True, 1 / math.sqrt(64), BF16)[0]
        err = np.abs(o[b].astype(np.float64) - ref).max()
        assert err <= 2 * np.abs(low - ref).max() + 1e-3, err
        fin = np.isfinite(ref_lse)
        assert np.abs(lse[b][fin] - ref_lse[fin]).max() < 1e-3
        assert np.array_equal(np.isneginf(lse[b]), ~fin)
