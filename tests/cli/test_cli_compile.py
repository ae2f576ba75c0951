"""`tylo compile FILE.py:KERNEL`: plumbing with a stand-in kernel, then real tylo.jit kernels."""

import json
import re
import sys
import textwrap

import pytest

from tylo.cache import default_cache
from tylo.cli import main

SAXPY = textwrap.dedent("""\
    import tylo

    @tylo.jit
    def saxpy(out, x, y, a: tylo.f32, n: tylo.i32, BLOCK: tylo.constexpr):
        i = tylo.block_idx.x * BLOCK + tylo.thread_idx.x
        if i < n:
            out[i] = a * x[i] + y[i]
""")

UNKNOWN_NAME = textwrap.dedent("""\
    import tylo

    @tylo.jit
    def broken(out, n: tylo.i32, BLOCK: tylo.constexpr):
        i = tylo.block_idx.x * BLOCK + tylo.thread_idx.x
        if i < n:
            out[i] = undefined_thing + 1
""")

SAXPY_ARGS = ["--arch", "sm_90a", "--signature", "*f32, *f32, *f32, f32, i32", "--constexpr", "BLOCK=256"]


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# -- plumbing, with a stand-in for a tylo kernel ---------------------------------------

FAKE = textwrap.dedent("""\
    import types
    import helper_mod  # next to this file: the file's folder is on sys.path during the import

    CALLS = []

    class FakeKernel:
        def __init__(self, fail=None):
            self.fail = fail

        def compile(self, **kwargs):
            CALLS.append(kwargs)
            if self.fail is not None:
                raise self.fail
            res = types.SimpleNamespace(registers=helper_mod.REGS, spill_store_bytes=0, spill_load_bytes=4,
                                        stack_bytes=8, shared_bytes=1024)
            return types.SimpleNamespace(key="ab" * 32, name="fake", arch=kwargs.get("arch", "sm_80"),
                                         signature=kwargs["signature"], resources=res, compile_ms=12.25,
                                         shared_bytes=32768,
                                         ptx="// ptx", cubin=b"\\x7fELF" + bytes(96), ir="func @fake")

    class LocatedError(Exception):
        def __init__(self, msg, filename, lineno):
            super().__init__(msg)
            self.filename, self.lineno = filename, lineno

    fake = FakeKernel()
    located = FakeKernel(LocatedError("fake: cannot do that", "/k/fake.py", 7))
    valueerr = FakeKernel(ValueError("bad signature '*q32'"))
    internal = FakeKernel(ZeroDivisionError("oops"))
    not_a_kernel = 42
""")


@pytest.fixture
def fake_file(tmp_path, monkeypatch):
    (tmp_path / "helper_mod.py").write_text("REGS = 40\n")
    path = tmp_path / "fake_kernels.py"
    path.write_text(FAKE)
    # the CLI registers the file as module "fake_kernels"; forget it (and its helper) afterwards
    monkeypatch.delitem(sys.modules, "fake_kernels", raising=False)
    monkeypatch.delitem(sys.modules, "helper_mod", raising=False)
    yield path
    sys.modules.pop("fake_kernels", None)
    sys.modules.pop("helper_mod", None)


def test_compile_plumbing(capsys, fake_file):
    rc, out, err = run(capsys, "compile", f"{fake_file}:fake", "--arch", "sm_90a", "--signature", "*f32, i32",
                       "--constexpr", "BLOCK=256", "--constexpr", "SHAPE=(128, 64)", "--constexpr", "MODE=rn",
                       "--constexpr", "SCALE=0.5", "--constexpr", "FLAG=True", "--constexpr", "NAME='q'",
                       "--option", "num_warps=4")
    assert rc == 0, err
    mod = sys.modules["fake_kernels"]
    (call,) = mod.CALLS
    assert call == {
        "signature": "*f32, i32", "arch": "sm_90a",
        "constexprs": {"BLOCK": 256, "SHAPE": (128, 64), "MODE": "rn", "SCALE": 0.5, "FLAG": True, "NAME": "q"},
        "options": {"num_warps": 4},
    }
    assert "compiled fake for sm_90a" in out
    assert re.search(r"^\s+registers\s+40$", out, re.M)
    assert re.search(r"^\s+spills\s+0 bytes stored, 4 bytes loaded$", out, re.M)
    # static (nvJitLink's report) + dynamic (set on every launch): what a launch uses
    assert re.search(r"^\s+shared memory\s+33792 bytes \(static 1024 \+ dynamic 32768\)$", out, re.M)
    assert re.search(r"^\s+compile time\s+12.2 ms$", out, re.M)
    assert re.search(r"^\s+cache key\s+" + "ab" * 32 + "$", out, re.M)


def test_compile_without_arch_leaves_it_to_the_kernel(capsys, fake_file):
    rc, out, err = run(capsys, "compile", f"{fake_file}:fake", "--signature", "i32")
    assert rc == 0, err
    assert sys.modules["fake_kernels"].CALLS == [{"signature": "i32", "constexprs": {}}]


def test_compile_errors(capsys, fake_file, tmp_path):
    rc, out, err = run(capsys, "compile", f"{fake_file}:missing", "--signature", "i32")
    assert rc == 1 and "has no attribute 'missing'" in err and "fake" in err
    rc, out, err = run(capsys, "compile", f"{fake_file}:not_a_kernel", "--signature", "i32")
    assert rc == 1 and "not a tylo kernel" in err
    rc, out, err = run(capsys, "compile", f"{tmp_path / 'nope.py'}:k", "--signature", "i32")
    assert rc == 1 and "no such file" in err
    rc, out, err = run(capsys, "compile", f"{fake_file}:located", "--signature", "i32")
    assert rc == 1 and err.strip() == "/k/fake.py:7: error: fake: cannot do that"
    assert "Traceback" not in err
    rc, out, err = run(capsys, "compile", f"{fake_file}:valueerr", "--signature", "i32")
    assert rc == 1 and "bad signature '*q32'" in err and "Traceback" not in err
    rc, out, err = run(capsys, "compile", f"{fake_file}:internal", "--signature", "i32")
    assert rc == 1 and "internal error" in err and "ZeroDivisionError" in err
    rc, out, err = run(capsys, "compile", f"{fake_file}:fake", "--signature", "i32", "--option", "nope=1")
    assert rc == 0, err  # FakeKernel.compile takes **kwargs: options go as options=
    assert sys.modules["fake_kernels"].CALLS[-1]["options"] == {"nope": 1}
    rc, out, err = run(capsys, "compile", f"{fake_file}:fake", "--signature", "i32", "--constexpr", "1X=2")
    assert rc == 2 and "NAME=VALUE" in err
    rc, out, err = run(capsys, "compile", f"{fake_file}:fake", "--signature", "i32",
                       "--constexpr", "B=1", "--constexpr", "B=2")
    assert rc == 2 and "twice" in err


def test_compile_file_that_fails_to_import(capsys, tmp_path):
    bad = tmp_path / "bad_syntax.py"
    bad.write_text("def f(:\n    pass\n")
    rc, out, err = run(capsys, "compile", f"{bad}:f", "--signature", "i32")
    assert rc == 1 and f"{bad}:1" in err and "SyntaxError" in err
    boom = tmp_path / "boom.py"
    boom.write_text("raise RuntimeError('module-level failure')\n")
    rc, out, err = run(capsys, "compile", f"{boom}:f", "--signature", "i32")
    assert rc == 1 and "module-level failure" in err and "importing" in err


# -- real kernels (need tylo.jit) --------------------------------------------------------------

def test_compile_saxpy_then_list_and_dump(capsys, tmp_path):
    path = tmp_path / "saxpy_kernels.py"
    path.write_text(SAXPY)
    rc, out, err = run(capsys, "compile", f"{path}:saxpy", *SAXPY_ARGS)
    assert rc == 0, err
    m = re.search(r"^\s+registers\s+(\d+)$", out, re.M)
    assert m and 0 < int(m.group(1)) <= 255, out
    assert re.search(r"^\s+spills\s+0 bytes stored, 0 bytes loaded$", out, re.M), out
    km = re.search(r"^\s+cache key\s+([0-9a-f]{64})$", out, re.M)
    assert km, out
    key = km.group(1)

    entry = default_cache().lookup(key)
    assert entry is not None
    assert entry.meta["kernel"] == "saxpy" and entry.meta["arch"] == "sm_90a"
    assert entry.meta["registers"] == int(m.group(1))

    rc, out, err = run(capsys, "cache", "list")
    assert rc == 0, err
    rows = [line.split() for line in out.splitlines()[1:] if line.startswith(key[:12])]
    assert len(rows) == 1 and rows[0][1:3] == ["saxpy", "sm_90a"], out

    rc, out, err = run(capsys, "cache", "dump", key[:12], "--stage", "ptx")
    assert rc == 0, err
    assert ".entry saxpy" in out and ".target sm_90a" in out

    rc, out, err = run(capsys, "cache", "dump", key[:12], "--stage", "ir")
    assert rc == 0 and "saxpy" in out

    rc, out, err = run(capsys, "cache", "show", key[:12], "--json")
    meta = json.loads(out)
    assert meta["kernel"] == "saxpy" and meta["signature"].startswith("*f32")
    assert meta["constexprs"]["BLOCK"] in (256, "256")

    # compiling again is a cache hit with the same key
    rc, out2, err = run(capsys, "compile", f"{path}:saxpy", *SAXPY_ARGS)
    assert rc == 0 and key in out2


def test_compile_error_names_file_and_line(capsys, tmp_path):
    path = tmp_path / "broken_kernels.py"
    path.write_text(UNKNOWN_NAME)
    rc, out, err = run(capsys, "compile", f"{path}:broken", "--arch", "sm_90a",
                       "--signature", "*f32, i32", "--constexpr", "BLOCK=128")
    assert rc == 1, (out, err)
    assert f"{path}:7" in err, err
    assert "undefined_thing" in err
    assert "Traceback" not in err
