"""TYLO_INTERPRET=1 and tylo.jit(interpret=True): launches run in the interpreter on numpy arrays."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tylo

ROOT = pathlib.Path(__file__).resolve().parents[2]


@tylo.jit(interpret=True)
def axpy(out, x, a, n, BLOCK: tylo.constexpr):
    i = tylo.block_idx.x * BLOCK + tylo.thread_idx.x
    if i < n:
        out[i] = a * x[i] + out[i]


def test_jit_interpret_runs_on_numpy_arrays_in_place():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(100).astype(np.float32)
    out = rng.standard_normal(100).astype(np.float32)
    want = np.float32(2.5) * x + out
    axpy[(4,), (32,)](out, x, 2.5, 100, 32)
    assert np.array_equal(out, want)


@tylo.jit(interpret=True)
def hello(n):
    if tylo.thread_idx.x == 1:
        tylo.printf("thread %d of %d\n", tylo.thread_idx.x, n)


def test_device_print_works_in_the_interpreter(capsys):
    hello[1, 4](7)
    assert capsys.readouterr().out == "thread 1 of 7\n"


def test_interpret_refuses_what_it_cannot_take():
    with pytest.raises(TypeError, match="numpy arrays"):
        axpy[1, 32](object(), np.zeros(4, np.float32), 1.0, 4, 32)


SCRIPT = """
import sys
sys.path.insert(0, {examples!r})
import ml_dtypes, numpy as np
import tylo
import hopper_gemm
M, N, K = {shape}
config = {config}
rng = np.random.default_rng(0)
a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
for bb in {operands}:      # B MN-major (row-major) and/or K-major (column-major)
    c = np.full((M, N), np.nan, ml_dtypes.bfloat16)
    ran = hopper_gemm.launch(c, a, bb, M, N, K, config=config)  # unchanged: numpy in, numpy out
    # the interpreter's pseudo-device has 4 SMs: without a config, launch runs choose_config's pick
    assert ran == (config or hopper_gemm.choose_config(M, N, K, tylo.bf16, 4, True, bb is not b)), ran
    ref = a.astype(np.float64) @ b.astype(np.float64)
    got = c.astype(np.float64)
    assert np.isfinite(got).all()
    print(np.linalg.norm(got - ref) / np.linalg.norm(ref))
"""


def _launch_in_subprocess(shape, config="None", operands="(b, np.asfortranarray(b))"):
    env = dict(os.environ, TYLO_INTERPRET="1", PYTHONPATH=str(ROOT))
    script = SCRIPT.format(examples=str(ROOT / "examples"), shape=shape, config=config, operands=operands)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return [float(x) for x in out.stdout.split()]


@pytest.mark.slow
def test_hopper_gemm_launch_runs_unchanged_under_tylo_interpret():
    # the configuration launch chooses for the ragged 200 x 264 x 136 (the default 128 x 256 tile on 4 SMs)
    errors = _launch_in_subprocess((200, 264, 136))
    assert len(errors) == 2 and all(e < 4e-3 for e in errors), errors


def test_hopper_gemm_split_k_launch_sums_the_partials_in_kernel():
    # K = 392 is 7 K steps cut into 3 ranges (2, 2, 3) per tile: each worker writes its f32 partial
    # tile, the last to arrive adds them in order into bf16 C (ragged M and N: the register epilogue
    # bound-checks them)
    config = "hopper_gemm.GemmConfig(tn=64, consumers=1, stages=2, split_k=3, direct=True)"
    errors = _launch_in_subprocess((72, 136, 392), config, "(np.asfortranarray(b),)")
    assert len(errors) == 1 and errors[0] < 4e-3, errors


def test_hopper_gemm_split_tail_launch_runs_full_waves_whole_and_cuts_the_tail():
    # 2 x 3 tiles of 64 x 64 on the interpreter's 4 SMs: one full wave of whole tiles, then the 2 tail tiles
    # cut into 2 K ranges each (3 and 4 of the 7 K steps) summed by the fixup
    config = "hopper_gemm.GemmConfig(tn=64, consumers=1, stages=2, split_k=2, split_tail=True, direct=True)"
    errors = _launch_in_subprocess((72, 136, 392), config, "(np.asfortranarray(b),)")
    assert len(errors) == 1 and errors[0] < 4e-3, errors
