"""The CLI says what is true: an unusable cache folder, an entry not stored, shared memory as a launch
uses it (static + dynamic, checked against the target); and what users reach for first (--version,
--json, a kernel filter, separate signature and constexpr columns, one-line CompiledKernel repr)."""
import json
import re
import sys
import textwrap

import pytest

import tylo
from tylo.cache import cache_key, default_cache
from tylo.cli import main

SMEM = textwrap.dedent("""\
    import tylo

    @tylo.jit
    def staged(out, x, n, ELEMS: tylo.constexpr):
        buf = tylo.shared_array(tylo.f32, ELEMS)
        i = tylo.thread_idx.x
        if i < n:
            buf[i] = x[i]
        tylo.sync_threads()
        if i < n:
            out[i] = buf[i] * 2.0
""")


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def kernel_file(tmp_path, monkeypatch):
    path = tmp_path / "smem_kernels.py"
    path.write_text(SMEM)
    monkeypatch.delitem(sys.modules, "smem_kernels", raising=False)
    yield path
    sys.modules.pop("smem_kernels", None)


def test_a_cache_dir_that_is_a_file_is_reported(capsys, tmp_path, monkeypatch):
    f = tmp_path / "passwd"
    f.write_text("root:x:0:0::/root:/bin/sh\n")
    monkeypatch.setenv("TYLO_CACHE_DIR", str(f))
    for argv in (["cache", "list"], ["cache", "list", "--json"], ["cache", "clear", "--all"]):
        rc, out, err = run(capsys, *argv)
        assert rc == 1 and f"{f} is not a directory" in err and "TYLO_CACHE_DIR" in err, (argv, out, err)
    rc, out, err = run(capsys, "info")
    assert rc == 0 and "not a directory" in out


def test_compile_with_the_cache_disabled_says_the_key_is_not_stored(capsys, kernel_file, monkeypatch):
    monkeypatch.setenv("TYLO_CACHE", "0")
    rc, out, err = run(capsys, "compile", f"{kernel_file}:staged", "--signature", "*f32, *f32, i32",
                       "--constexpr", "ELEMS=256", "--arch", "sm_80")
    assert rc == 0, err
    assert re.search(r"cache key\s+[0-9a-f]{64} \(not stored: the disk cache is disabled by TYLO_CACHE=0\)", out)
    assert "pass --block for a launch to hit this entry" in out


def test_shared_memory_is_static_plus_dynamic_everywhere(capsys, kernel_file):
    rc, out, err = run(capsys, "compile", f"{kernel_file}:staged", "--signature", "*f32, *f32, i32",
                       "--constexpr", "ELEMS=8192", "--arch", "sm_80", "--block", "256")
    assert rc == 0, err
    assert re.search(r"^\s+block\s+256$", out, re.M)
    m = re.search(r"shared memory\s+(\d+) bytes \(static (\d+) \+ dynamic (\d+)\)", out)
    assert m and int(m.group(3)) == 8192 * 4 and int(m.group(1)) == int(m.group(2)) + int(m.group(3))
    key = re.search(r"cache key\s+([0-9a-f]{64})", out).group(1)
    rc, out, err = run(capsys, "cache", "list", "--json")
    (entry,) = json.loads(out)["entries"]
    assert entry["key"] == key and entry["shared_bytes"]["dynamic"] == 32768
    assert entry["shared_bytes"]["total"] == int(m.group(1)) and entry["block"] == [256, 1, 1]
    # a Hopper GEMM-like entry: 229,440 dynamic bytes, 0 static; the table shows what the launch uses
    cache = default_cache()
    gemm_key = cache_key({"gemm": 1})
    cache.store(gemm_key, {"kernel": "hopper_gemm", "arch": "sm_90a", "signature": "i32", "shared_bytes": 0,
                           "dynamic_shared_bytes": 229440}, {"kernel.ptx": "//"})
    rc, out, err = run(capsys, "cache", "list", "hopper_gemm")
    assert rc == 0 and "224.1 KiB" in out and "staged" not in out


def test_a_shared_array_over_the_targets_limit_is_a_compile_error(tmp_path):
    path = tmp_path / "huge_smem.py"
    path.write_text(textwrap.dedent("""\
        import tylo

        @tylo.jit
        def huge(out):
            buf = tylo.shared_array(tylo.f32, (1024, 1024))
            buf[0, 0] = 1.0
            out[0] = buf[0, 0]
    """))
    sys.path.insert(0, str(tmp_path))
    try:
        import huge_smem
    finally:
        sys.path.remove(str(tmp_path))
    with pytest.raises(tylo.CompileError) as info:
        huge_smem.huge.compile(signature="*f32", arch="sm_80")
    msg = str(info.value)
    assert "huge_smem.py:5" in msg and "4,194,304 bytes" in msg and "sm_80 allows at most 166,912" in msg
    # 160 KiB fits sm_80 (163 KiB) but not sm_86 (99 KiB)
    path.write_text(path.read_text().replace("(1024, 1024)", "(160, 256)"))
    sys.modules.pop("huge_smem")
    sys.path.insert(0, str(tmp_path))
    try:
        import huge_smem as again
    finally:
        sys.path.remove(str(tmp_path))
    assert again.huge.compile(signature="*f32", arch="sm_80").total_shared_bytes == 160 * 1024
    with pytest.raises(tylo.CompileError, match="sm_86 allows at most 101,376"):
        again.huge.compile(signature="*f32", arch="sm_86")


def test_compiled_kernel_repr_is_one_line():
    @tylo.jit
    def k(out, x, n):
        i = tylo.thread_idx.x
        if i < n:
            out[i] = x[i]

    ck = k.compile(signature="*f32:16, *f32:16, i32:16", arch="sm_80")
    text = repr(ck)
    assert "\n" not in text and len(text) < 200
    assert text.startswith("<CompiledKernel k [sm_80] (*f32:16, *f32:16, i32:16) key=" + ck.key[:12])


def test_version_json_filter_and_columns(capsys):
    rc, out, err = run(capsys, "--version")
    assert rc == 0 and out.strip() == f"tylo {tylo.__version__}"
    cache = default_cache()
    for name, ce in (("alpha", {"BLOCK": 128}), ("beta", {})):
        cache.store(cache_key({"k": name}), {"kernel": name, "arch": "sm_90a", "signature": "*f32:16, i32",
                                             "constexprs": ce, "maxntid": [128, 1, 1]}, {"kernel.ptx": "//"})
    rc, out, err = run(capsys, "cache", "list")
    header = out.splitlines()[0].split()
    assert header[3:6] == ["SIGNATURE", "CONSTEXPRS", "BLOCK"]
    row = next(line for line in out.splitlines() if " alpha " in line)
    assert re.search(r"\*f32:16, i32\s+BLOCK=128\s+128\s", row)
    rc, out, err = run(capsys, "cache", "list", "al*", "--json")
    assert [e["kernel"] for e in json.loads(out)["entries"]] == ["alpha"]
    rc, out, err = run(capsys, "cache", "list", "gamma")
    assert rc == 0 and out.startswith("no entry for kernel 'gamma'")
    rc, out, err = run(capsys, "info", "--json")
    facts = json.loads(out)
    assert facts["tylo"] == tylo.__version__ and "cache" in facts and isinstance(facts["devices"], list)
    rc, out, err = run(capsys, "compile", "--help")
    assert "default: the kernel's arch option, else sm_90a" in " ".join(out.split())


def test_a_long_compile_shows_progress(capsys, kernel_file, monkeypatch):
    from tylo.cli import compile as compile_cmd

    monkeypatch.setattr(compile_cmd, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(compile_cmd, "PROGRESS_EVERY_S", 60.0)
    rc, out, err = run(capsys, "compile", f"{kernel_file}:staged", "--signature", "*f32, *f32, i32",
                       "--constexpr", "ELEMS=64", "--arch", "sm_80")
    assert rc == 0 and re.search(r"^compiling staged for sm_80\.\.\. \d+ s$", err, re.M), err
    monkeypatch.setattr(compile_cmd, "PROGRESS_AFTER_S", 60.0)
    rc, out, err = run(capsys, "compile", f"{kernel_file}:staged", "--signature", "*f32, *f32, i32",
                       "--constexpr", "ELEMS=32", "--arch", "sm_80")
    assert rc == 0 and "compiling" not in err                 # quick compiles stay quiet
