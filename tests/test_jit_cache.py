"""The JIT's use of the cache: what must hit, what must miss, across processes and under concurrency."""
import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KERNEL_FILE = '''
import tylo
import helpers_mod

SCALE = {scale}

@tylo.jit
def scaled(out, x, n):
    i = tylo.thread_idx.x
    if i < n:
        out[i] = helpers_mod.twice(x[i]) * SCALE
'''

HELPER_FILE = '''
import tylo

@tylo.func
def twice(v):
    return v {op} v
'''

DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import kern
ck = kern.scaled.compile(signature="*f32, *f32, i32", arch=sys.argv[2])
print(json.dumps({"key": ck.key, "from_cache": ck.from_cache}))
'''


def _project(tmp_path, scale=2, op="+"):
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "kern.py").write_text(KERNEL_FILE.format(scale=scale))
    (src / "helpers_mod.py").write_text(HELPER_FILE.format(op=op))
    return src


def _compile(src, cache, arch="sm_90a"):
    env = dict(os.environ, TYLO_CACHE_DIR=str(cache), PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", DRIVER, str(src), arch], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_same_source_hits_across_processes_and_edits_miss(tmp_path):
    cache = tmp_path / "cache"
    src = _project(tmp_path)
    first = _compile(src, cache)
    assert not first["from_cache"]
    again = _compile(src, cache)
    assert again == {"key": first["key"], "from_cache": True}
    # editing a helper's source misses
    _project(tmp_path, op="*")
    helper_edit = _compile(src, cache)
    assert not helper_edit["from_cache"] and helper_edit["key"] != first["key"]
    # editing a global constexpr misses
    _project(tmp_path, scale=3, op="*")
    global_edit = _compile(src, cache)
    assert not global_edit["from_cache"] and global_edit["key"] not in (first["key"], helper_edit["key"])
    # another target misses
    other = _compile(src, cache, arch="sm_80")
    assert not other["from_cache"] and other["key"] != global_edit["key"]
    # and the first version is still there
    _project(tmp_path)
    assert _compile(src, cache) == {"key": first["key"], "from_cache": True}


def test_two_processes_compiling_at_once_leave_one_good_entry(tmp_path):
    cache = tmp_path / "cache"
    src = _project(tmp_path)
    env = dict(os.environ, TYLO_CACHE_DIR=str(cache), PYTHONPATH=ROOT)
    procs = [subprocess.Popen([sys.executable, "-c", DRIVER, str(src), "sm_90a"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    keys = {json.loads(o.strip().splitlines()[-1])["key"] for o, _ in outs}
    assert len(keys) == 1
    from tylo.cache import DiskCache
    entries = DiskCache(cache).entries()
    assert len(entries) == 1 and entries[0].key in keys
    assert DiskCache(cache).lookup(entries[0].key) is not None  # hashes verify


def test_corrupted_cubin_is_rebuilt_with_a_warning(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    src = _project(tmp_path)
    key = _compile(src, cache)["key"]
    from tylo.cache import DiskCache
    entry = DiskCache(cache).lookup(key)
    cubin = entry.path / "kernel.cubin"
    data = cubin.read_bytes()
    cubin.write_bytes(data[: len(data) // 2])  # truncated
    env = dict(os.environ, TYLO_CACHE_DIR=str(cache), PYTHONPATH=ROOT, PYTHONWARNINGS="always")
    out = subprocess.run([sys.executable, "-c", DRIVER, str(src), "sm_90a"], env=env, capture_output=True, text=True,
                         check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"key": key, "from_cache": False}
    assert "kernel.cubin" in out.stderr and key[:8] in out.stderr
    assert (DiskCache(cache).lookup(key).path / "kernel.cubin").read_bytes() == data


def test_cache_disabled_compiles_every_process(tmp_path):
    src = _project(tmp_path)
    env = dict(os.environ, TYLO_CACHE_DIR=str(tmp_path / "c"), TYLO_CACHE="0", PYTHONPATH=ROOT)
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", DRIVER, str(src), "sm_90a"], env=env, capture_output=True,
                             text=True, check=True)
        assert json.loads(out.stdout.strip().splitlines()[-1])["from_cache"] is False
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").rglob("kernel.cubin"))


def test_meta_json_records_resources(tmp_path):
    cache = tmp_path / "cache"
    src = _project(tmp_path)
    key = _compile(src, cache)["key"]
    from tylo.cache import DiskCache
    meta = DiskCache(cache).lookup(key).meta
    for field in ("kernel", "arch", "signature", "registers", "spill_store_bytes", "spill_load_bytes",
                  "stack_bytes", "shared_bytes", "cubin_bytes", "compile_ms", "source_file"):
        assert field in meta, field
    assert meta["kernel"] == "scaled" and meta["arch"] == "sm_90a" and meta["registers"] > 0
    assert meta["signature"] == "*f32, *f32, i32"


def test_dependency_fingerprint_ignores_shadowed_globals_and_tracks_dtype_globals():
    import tylo
    from tylo.frontend.source import dependency_sources

    class Expensive:
        def __repr__(self):
            raise AssertionError("repr of a shadowed global must not be taken")

    ns = {"tylo": tylo, "x": Expensive(), "DT": tylo.bf16}
    code = textwrap.dedent('''
        def kern(out, x):
            y = x[0]
            out[0] = y.to(DT)
    ''')
    path = os.path.join(os.path.dirname(__file__), "_generated_dep_kernel.py")
    with open(path, "w") as f:
        f.write(code)
    try:
        exec(compile(code, path, "exec"), ns)
        deps = dependency_sources(ns["kern"])
        assert any("DT=" in d and "bf16" in d for d in deps)
        assert not any(d.startswith("x=") for d in deps)
    finally:
        os.unlink(path)


def test_dependency_fingerprint_sees_through_decorated_python_helpers():
    import tylo
    from tylo.frontend.source import dependency_sources

    code = textwrap.dedent('''
        import functools

        @functools.lru_cache(maxsize=None)
        def plan(n):
            return n * BODY

        def kern(out, N: tylo.constexpr):
            out[0] = plan(N)
    ''')
    path = os.path.join(os.path.dirname(__file__), "_generated_dep_lru.py")
    texts = []
    try:
        for body in ("2", "3"):          # an edit inside the cached helper changes the fingerprint
            with open(path, "w") as f:
                f.write(code.replace("BODY", body))
            ns = {"tylo": tylo}
            exec(compile(code.replace("BODY", body), path, "exec"), ns)
            import linecache
            linecache.checkcache(path)
            deps = dependency_sources(ns["kern"])
            assert any(d.startswith("def plan:") and f"n * {body}" in d for d in deps), deps
            texts.append(deps)
        assert texts[0] != texts[1]
    finally:
        os.unlink(path)
