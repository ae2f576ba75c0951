"""One signature grammar: what a launch specialises on, `kernel.compile(signature=...)`, `tylo compile`
and `tylo cache list` all say it the same way, it round-trips exactly, and an ahead-of-time entry is
hit by the launch it describes."""
import json
import os
import subprocess
import sys

import pytest

import tylo
from tylo.specialization import BlobSpec, IntSpec, PointerSpec, ScalarSpec, format_signature, parse_signature

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@tylo.jit
def four(out, x, n, a):
    i = tylo.thread_idx.x
    if i < n:
        out[i] = x[i] * a


@tylo.jit
def annotated(out: tylo.Ptr[tylo.f32], n: tylo.i32, m):
    out[0] = 1.0 * n + m


ROUND_TRIP = ["*f32, *f32, i32, f32", "*f32:16, *f32:16, i32:16, f32", "*f16:16, *bf16, i32=1, f64",
              "*i8, *u8:16, i64:16, f32", "*f32, *f32, u64, bool"]


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_texts_round_trip_through_the_records(text):
    spec = four._spec_from_signature(text, None)
    assert format_signature(spec) == text
    assert parse_signature(format_signature(spec)) == parse_signature(text)


def test_records_of_each_kind():
    assert parse_signature("*f32:16, i32=1, i32:16, i64, f16") == [
        PointerSpec("f32", True), IntSpec("i32", one=True), IntSpec("i32", div16=True), IntSpec("i64"),
        ScalarSpec("f16")]
    plan = tylo.TMATile(tylo.bf16, (64, 64))
    blob = parse_signature([plan])[0]
    assert blob == BlobSpec("tma", (plan, 2), 128)
    assert parse_signature(blob.text) == [blob]          # a TMA plan written as text comes back equal


def test_compile_reports_the_text_it_was_given_and_meta_holds_it():
    ck = four.compile(signature="*f32:16, *f32, i32:16, f32", arch="sm_80")
    assert ck.signature == "*f32:16, *f32, i32:16, f32"
    meta = json.loads((tylo.cache.default_cache().root / ck.key / "meta.json").read_text())
    assert meta["signature"] == ck.signature
    assert four.compile(signature=ck.signature, arch="sm_80").key == ck.key


@pytest.mark.parametrize("text, words", [
    ("*f32:xyz, *f32, i32, f32", "not ':xyz'"), ("*f32:8, *f32, i32, f32", "not ':8'"),
    ("*f32,, i32, f32", "entry 2 is empty"), ("*f32, *f32, i32, f32,", "entry 5 is empty"),
    ("*f32, *f32, i32, f32:16", "only integers"), ("*f32, *f32, i32=2, f32", "'=1'"),
    ("*float, *f32, i32, f32", "unknown dtype 'float'"), ("*f32, *f32, i32:16:16, f32", "i32:16:16"),
    ("* f32, *f32, i32, f32", "'* f32'"), ("*f32, *f32, tma(__import__('os'), 2)[128B], f32", "not a tylo name"),
])
def test_anything_outside_the_grammar_is_rejected(text, words):
    with pytest.raises(ValueError, match="bad signature") as info:
        four.compile(signature=text, arch="sm_80")
    assert words in str(info.value)


def test_annotated_parameters_take_no_specialisation():
    assert annotated.compile(signature="*f32:16, i32, i32:16", arch="sm_80").signature == "*f32:16, i32, i32:16"
    with pytest.raises(TypeError, match="'n' is annotated i32: launches do not specialise it"):
        annotated.compile(signature="*f32, i32:16, i32", arch="sm_80")
    with pytest.raises(TypeError, match="'out' is annotated"):
        annotated.compile(signature="*f16, i32, i32", arch="sm_80")


# -- an ahead-of-time entry is hit by the launch ------------------------------------------------------

class _Array:
    def __init__(self, address):
        self.address = address

    @property
    def __cuda_array_interface__(self):
        return {"shape": (1024,), "typestr": "<f4", "data": (self.address, False), "version": 3, "strides": None}


class _Launcher:
    def __init__(self):
        self.launches = []

    def launch(self, *args):
        self.launches.append(args)


KERNEL = '''
import tylo


@tylo.jit
def scale(out, x, n, a, OUT: tylo.constexpr):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = (x[i] * a).to(OUT).to(tylo.f32)
'''


def test_tylo_compile_ahead_of_time_then_launch_hits_the_entry(tmp_path, monkeypatch):
    """`tylo compile` in another process stores an entry; the launch that classifies to the same
    signature, block and constexprs loads it: no compile, the cubin from the cache."""
    cache = tmp_path / "cache"
    (tmp_path / "aot_kernels.py").write_text(KERNEL)
    env = dict(os.environ, TYLO_CACHE_DIR=str(cache), PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-m", "tylo", "compile", f"{tmp_path / 'aot_kernels.py'}:scale",
                           "--signature", "*f32:16, *f32:16, i32:16, f32", "--arch", "sm_80", "--block", "128",
                           "--constexpr", "OUT=f16"], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "*f32:16, *f32:16, i32:16, f32" in proc.stdout

    monkeypatch.setenv("TYLO_CACHE_DIR", str(cache))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("aot_kernels", None)
    import aot_kernels

    kernel = aot_kernels.scale
    kernel.options["arch"] = "sm_80"           # the fake device: an sm_80
    built = []
    monkeypatch.setattr(tylo.JITFunction, "_build", lambda self, *a, **k: built.append(a) or pytest.fail("compiled"))
    launcher = _Launcher()
    monkeypatch.setattr(tylo.CompiledKernel, "launcher", property(lambda self: launcher))
    kernel[8, 128](_Array(0x7F0000000000), _Array(0x7F0000100000), 1024, 1.5, tylo.f16)
    assert not built and len(launcher.launches) == 1
    (compiled,) = kernel._kernels.values()
    assert compiled.from_cache and compiled.signature == "*f32:16, *f32:16, i32:16, f32"
