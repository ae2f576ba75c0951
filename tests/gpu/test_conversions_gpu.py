"""Every conversion between two scalar types on the GPU (issue 16, items 5-8 and the sweep):
tricky values (ties, just past a tie, overflow, subnormals, signed zeros, NaN, saturation)
converted by the sm_90a cubin and by the sm_80 code (its PTX, JIT-compiled by the driver), each
compared bit for bit with the independent model of docs/language.md and with the interpreter.
Outputs are poisoned first."""
import dataclasses
import importlib.util

import conversion_reference as ref
import numpy as np
import pytest

import tylo
from tylo.interpreter import run

pytestmark = pytest.mark.gpu


def _kernel(tmp_path, src, dsts):
    params = ", ".join(f"o_{d}" for d in dsts)
    body = "\n".join(f"    o_{d}[i] = v.to(tylo.{d if d != 'bool' else 'bool_'})" for d in dsts)
    text = (f"import tylo\n\n@tylo.jit\ndef gpu_cast_{src}(x, {params}):\n"
            f"    i = tylo.thread_idx.x\n    v = x[i]\n{body}\n")
    path = tmp_path / f"gpu_cast_{src}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, f"gpu_cast_{src}"), ", ".join(f"*{t}" for t in [src] + list(dsts))


def _py(x, t):
    if t == "bool":
        return bool(x)
    return int(x) if ref.is_int(t) else float(x)


def _dtype(t):
    return np.uint8 if t == "bool" else ref.NP[t]


# fp8 types exist from sm_89: on sm_80 an fp8 source is a CompileError (tested on the CPU), not a case here
_CASES = [(arch, src) for arch in ("sm_80", "sm_90a") for src in ref.SCALARS
          if not (arch == "sm_80" and src in ref.FP8_MAX)]


@pytest.mark.parametrize("arch,src", _CASES)
def test_conversions_on_the_gpu_match_the_model(tmp_path, arch, src):
    fp8 = arch != "sm_80"
    dsts = [d for d in ref.SCALARS if d != src and (fp8 or d not in ref.FP8_MAX)]
    kernel, sig = _kernel(tmp_path, src, dsts)
    ck = kernel.compile(signature=sig, arch=arch)
    if arch == "sm_80":  # run the sm_80 instructions on this GPU: load the PTX through the driver JIT
        ck = dataclasses.replace(ck, cubin=ck.ptx.encode(), _launcher=None)
    xs = ref.values_of(src)
    n = xs.size
    host_in = (xs.astype(np.uint8) if src == "bool" else xs)
    d_in = tylo.to_device(host_in.view(np.uint8))
    outs = {d: tylo.to_device(np.full(n * np.dtype(_dtype(d)).itemsize, 0xA5, np.uint8)) for d in dsts}
    ck.launcher.launch(1, 1, 1, n, 1, 1, 0, [d_in.ptr] + [outs[d].ptr for d in dsts])
    interp = {d: np.zeros(n, _dtype(d)) for d in dsts}
    run(kernel.lower(signature=sig, arch=arch), [host_in] + [interp[d] for d in dsts], block=(n,))
    bad = []
    for d in dsts:
        got = outs[d].to_host().view(_dtype(d))
        for j, x in enumerate(xs):
            want = ref.convert(_py(x, src), src, d)
            g, i = _py(got[j], d), _py(interp[d][j], d)
            if not (ref.same(g, want) and ref.same(i, want)):
                bad.append(f"{src}({_py(x, src)!r}) -> {d}: gpu {g!r}, interpreter {i!r}, documented {want!r}")
    assert not bad, f"{arch}: {len(bad)} mismatches:\n" + "\n".join(bad[:40])


@tylo.jit
def gpu_fmod(o32, o64, x32, y32, x64, y64):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    o32[i] = x32[i] % y32[i]
    o64[i] = x64[i] % y64[i]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_float_remainder_is_cs_fmod_on_the_gpu(arch):
    """``%`` on floats is C's fmod exactly (NVPTX's own frem expansion gave 1e10 % 3 == 256)."""
    rng = np.random.default_rng()
    n = 1 << 16
    bits32 = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    bits64 = rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64)
    x32, y32 = bits32.view(np.float32).copy(), np.roll(bits32, 1).view(np.float32).copy()
    x64, y64 = bits64.view(np.float64).copy(), np.roll(bits64, 1).view(np.float64).copy()
    x32[:4], y32[:4] = [1e10, -1e10, 3e38, 7.0], [3.0, 3.0, 1e-38, 0.0]
    x64[:4], y64[:4] = [1e10, -1e300, 3e38, 7.0], [3.0, 3.0, 1e-300, 0.0]
    ck = gpu_fmod.compile(signature="*f32, *f64, *f32, *f32, *f64, *f64", arch=arch)
    if arch == "sm_80":
        ck = dataclasses.replace(ck, cubin=ck.ptx.encode(), _launcher=None)
    dev = [tylo.to_device(np.full(n, np.nan, np.float32)), tylo.to_device(np.full(n, np.nan, np.float64))]
    ins = [tylo.to_device(a) for a in (x32, y32, x64, y64)]
    ck.launcher.launch(n // 256, 1, 1, 256, 1, 1, 0, [a.ptr for a in dev + ins])
    with np.errstate(invalid="ignore"):
        want32, want64 = np.fmod(x32, y32), np.fmod(x64, y64)
    for got, want in ((dev[0].to_host(), want32), (dev[1].to_host(), want64)):
        same = (got.view(f"u{got.itemsize}") == want.view(f"u{got.itemsize}")) | (np.isnan(got) & np.isnan(want))
        xs = x32 if got.itemsize == 4 else x64
        assert same.all(), f"{(~same).sum()} of {n} differ, e.g. x={xs[~same][:3]}"
