"""The on-disk cache: round trip, atomic concurrent stores, corruption, fallback."""

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from tylo.cache import CacheEntry, DiskCache, TyloCacheWarning, cache_key, default_cache

REPO = Path(__file__).resolve().parents[2]


def key_of(n) -> str:
    return cache_key({"test": repr(n)})


def artifacts(tag="saxpy"):
    return {
        "kernel.tyir": f"func @{tag}(%0: !ptr<f32, global>) {{\n  nv.return\n}}\n",
        "kernel.ll": f"define ptx_kernel void @{tag}(ptr addrspace(1) %0) {{\n  ret void\n}}\n",
        "kernel.ptx": f".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry {tag}()\n{{\n\tret;\n}}\n",
        "kernel.cubin": b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 8,
    }


def meta(tag="saxpy"):
    return {
        "kernel": tag, "qualname": tag, "arch": "sm_90a",
        "signature": "*f32:16, *f32:16, i32, f32", "constexprs": {"BLOCK": 256},
        "registers": 12, "spill_store_bytes": 0, "spill_load_bytes": 0, "stack_bytes": 0,
        "shared_bytes": 0, "cubin_bytes": 2055, "compile_ms": {"total": 31.5}, "created": time.time(),
    }


def no_warnings():
    return warnings.catch_warnings(record=True)


# -- round trip ---------------------------------------------------------------

def test_store_lookup_round_trip(tmp_path):
    cache = DiskCache(tmp_path / "c")
    key = key_of(1)
    arts = artifacts()
    stored = cache.store(key, meta(), arts)
    assert isinstance(stored, CacheEntry)
    folder = tmp_path / "c" / key
    assert stored.path == folder
    assert sorted(p.name for p in folder.iterdir()) == [
        "kernel.cubin", "kernel.ll", "kernel.ptx", "kernel.tyir", "meta.json"]
    on_disk = json.loads((folder / "meta.json").read_text())
    assert on_disk["key"] == key
    assert on_disk["kernel"] == "saxpy" and on_disk["registers"] == 12
    assert on_disk["files"]["kernel.cubin"] == hashlib.sha256(arts["kernel.cubin"]).hexdigest()
    assert set(on_disk["files"]) == {"kernel.tyir", "kernel.ll", "kernel.ptx", "kernel.cubin"}

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = DiskCache(tmp_path / "c").lookup(key)  # a fresh instance: really from disk
    assert got is not None
    assert got.key == key and got.path == folder
    assert got.cubin == arts["kernel.cubin"]
    assert got.text("kernel.ptx") == arts["kernel.ptx"]
    assert got.read("ptx") == arts["kernel.ptx"].encode()
    assert got.text("ir") == arts["kernel.tyir"]
    assert got.text("llvm") == arts["kernel.ll"]
    assert got.meta["signature"] == "*f32:16, *f32:16, i32, f32"
    assert got.meta["compile_ms"] == {"total": 31.5}
    assert not [p for p in (tmp_path / "c").iterdir() if p.name.startswith(".")]


def test_miss_returns_none_without_warning(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert DiskCache(tmp_path / "nowhere").lookup(key_of(2)) is None


def test_lookup_updates_last_used(tmp_path):
    cache = DiskCache(tmp_path)
    key = key_of(3)
    cache.store(key, meta(), artifacts())
    old = time.time() - 10 * 86400
    os.utime(tmp_path / key / "meta.json", (old, old))
    assert abs(cache.resolve(key).last_used - old) < 1
    cache.lookup(key)
    assert time.time() - cache.resolve(key).last_used < 60


def test_invalid_key_and_artifact_names(tmp_path):
    cache = DiskCache(tmp_path)
    with pytest.raises(ValueError):
        cache.store("../../etc", meta(), artifacts())
    with pytest.raises(ValueError):
        cache.lookup("ABC")
    with pytest.raises(ValueError):
        cache.store(key_of(4), meta(), {"../x": b""})
    with pytest.raises(ValueError):
        cache.store(key_of(4), meta(), {"meta.json": b"{}"})
    with pytest.raises(TypeError):
        cache.store(key_of(4), meta(), {"kernel.cubin": 123})


def test_store_existing_key_keeps_first_entry(tmp_path):
    """What a process that loses the rename race sees: the winner's entry."""
    cache = DiskCache(tmp_path)
    key = key_of(5)
    cache.store(key, meta("first"), artifacts("first"))
    again = cache.store(key, meta("second"), artifacts("second"))
    assert again.meta["kernel"] == "first"
    assert "first" in DiskCache(tmp_path).lookup(key).text("ptx")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_store_replaces_corrupt_existing_entry(tmp_path):
    cache = DiskCache(tmp_path)
    key = key_of(6)
    cache.store(key, meta("first"), artifacts("first"))
    (tmp_path / key / "kernel.cubin").write_bytes(b"junk")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = cache.store(key, meta("second"), artifacts("second"))
    assert again.meta["kernel"] == "second"
    assert DiskCache(tmp_path).lookup(key).meta["kernel"] == "second"


# -- two processes at once ----------------------------------------------------

WRITER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from tylo.cache import DiskCache, cache_key
    root, start, who = sys.argv[2], float(sys.argv[3]), sys.argv[4]
    cache = DiskCache(root, enabled=True)
    while time.time() < start:
        pass
    for i in range(40):
        key = cache_key({"kernel": i})
        arts = {"kernel.ptx": f"// kernel {i}\\n" * 2000, "kernel.cubin": bytes([i % 256]) * 50000,
                "kernel.ll": "; ll\\n", "kernel.tyir": "ir\\n"}
        e = cache.store(key, {"kernel": f"k{i}", "writer": who}, arts)
        assert e.key == key and e.cubin == bytes([i % 256]) * 50000, (i, e)
    print("ok", who)
""")


def test_concurrent_processes_store_same_keys(tmp_path):
    root = tmp_path / "shared-cache"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    start = time.time() + 1.5
    env = {k: v for k, v in os.environ.items() if k != "TYLO_CACHE"}
    procs = [
        subprocess.Popen([sys.executable, str(script), str(REPO), str(root), str(start), f"w{j}"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for j in range(3)
    ]
    for j, p in enumerate(procs):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.strip() == f"ok w{j}"
        assert "TyloCacheWarning" not in err
    names = sorted(p.name for p in root.iterdir())
    assert not [n for n in names if n.startswith(".")], names  # no temporary folders left
    assert len(names) == 40
    cache = DiskCache(root)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(40):
            e = cache.lookup(cache_key({"kernel": i}))
            assert e is not None and e.meta["kernel"] == f"k{i}"
            assert e.cubin == bytes([i % 256]) * 50000
            assert e.meta["writer"] in {"w0", "w1", "w2"}


# -- corruption -----------------------------------------------------------------

def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x01
    path.write_bytes(bytes(data))


CORRUPTIONS = {
    "truncated cubin": ("kernel.cubin", _truncate, "kernel.cubin"),
    "flipped byte in ptx": ("kernel.ptx", _flip, "kernel.ptx"),
    "deleted ll": ("kernel.ll", lambda p: p.unlink(), "kernel.ll"),
    "garbage meta": ("meta.json", lambda p: p.write_bytes(b"\x80{not json"), "meta.json"),
    "meta not an object": ("meta.json", lambda p: p.write_text("[1, 2]"), "meta.json"),
    "deleted meta": ("meta.json", lambda p: p.unlink(), "meta.json"),
    "empty cubin": ("kernel.cubin", lambda p: p.write_bytes(b""), "kernel.cubin"),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corruption_is_detected_warned_once_and_rebuilt(tmp_path, case):
    fname, damage, named = CORRUPTIONS[case]
    key = key_of(("corrupt", case))
    DiskCache(tmp_path).store(key, meta(), artifacts())
    damage(tmp_path / key / fname)

    cache = DiskCache(tmp_path)
    with pytest.warns(TyloCacheWarning) as record:
        assert cache.lookup(key) is None
    msgs = [str(w.message) for w in record if issubclass(w.category, TyloCacheWarning)]
    assert len(msgs) == 1, msgs
    assert key[:12] in msgs[0] and named in msgs[0] and "rebuilding" in msgs[0]
    assert not (tmp_path / key).exists()  # removed

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.lookup(key) is None  # a plain miss now, no second warning
        cache.store(key, meta(), artifacts())
        again = cache.lookup(key)
    assert again is not None and again.cubin == artifacts()["kernel.cubin"]


def test_meta_with_path_traversal_is_corrupt(tmp_path):
    key = key_of(7)
    DiskCache(tmp_path).store(key, meta(), artifacts())
    m = json.loads((tmp_path / key / "meta.json").read_text())
    m["files"]["../../outside"] = "0" * 64
    (tmp_path / key / "meta.json").write_text(json.dumps(m))
    with pytest.warns(TyloCacheWarning, match="invalid file name"):
        assert DiskCache(tmp_path).lookup(key) is None


# -- unwritable folder, TYLO_CACHE=0 ---------------------------------------------

def _assert_memory_fallback(cache, where):
    key1, key2 = key_of(("fb", 1)), key_of(("fb", 2))
    with pytest.warns(TyloCacheWarning) as record:
        e1 = cache.store(key1, meta(), artifacts())
        e2 = cache.store(key2, meta("other"), artifacts("other"))
        assert cache.lookup(key1).cubin == artifacts()["kernel.cubin"]
        assert cache.lookup(key2).text("ptx") == artifacts("other")["kernel.ptx"]
    msgs = [str(w.message) for w in record if issubclass(w.category, TyloCacheWarning)]
    assert len(msgs) == 1, msgs
    assert str(where) in msgs[0] and "memory" in msgs[0]
    assert e1.path is None and e2.path is None
    assert cache.memory_only
    assert {e.key for e in cache.entries()} == {key1, key2}
    assert cache.resolve(key1[:10]).key == key1


def test_file_in_place_of_parent_falls_back_to_memory(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a regular file")
    cache = DiskCache(blocker / "tylo")
    _assert_memory_fallback(cache, blocker / "tylo")
    assert blocker.read_text() == "a regular file"


def test_file_in_place_of_root_falls_back_to_memory(tmp_path):
    root = tmp_path / "root-is-a-file"
    root.write_text("x")
    _assert_memory_fallback(DiskCache(root), root)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root ignores directory permissions")
def test_read_only_folder_falls_back_to_memory(tmp_path):
    root = tmp_path / "ro"
    root.mkdir()
    root.chmod(0o500)
    try:
        _assert_memory_fallback(DiskCache(root), root)
    finally:
        root.chmod(0o700)


def test_default_cache_follows_env(tmp_path, monkeypatch):
    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path / "a"))
    a = default_cache()
    assert a is default_cache()
    assert a.root == tmp_path / "a" and a.enabled
    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path / "b"))
    b = default_cache()
    assert b is not a and b.root == tmp_path / "b"
    monkeypatch.setenv("TYLO_CACHE", "0")
    c = default_cache()
    assert c is not b and not c.enabled and c.memory_only


def test_default_root_is_home_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("TYLO_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert DiskCache().root == tmp_path / ".cache" / "tylo"


def test_tylo_cache_0_keeps_everything_in_memory(tmp_path, monkeypatch):
    monkeypatch.setenv("TYLO_CACHE", "0")
    root = tmp_path / "tylo-cache"
    monkeypatch.setenv("TYLO_CACHE_DIR", str(root))
    cache = default_cache()
    key = key_of(8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e = cache.store(key, meta(), artifacts())
        assert e.path is None
        assert cache.lookup(key).cubin == artifacts()["kernel.cubin"]
    assert not root.exists()
    # an entry already on disk is not consulted
    DiskCache(root, enabled=True).store(key_of(9), meta(), artifacts())
    assert cache.lookup(key_of(9)) is None
    assert [x.key for x in cache.entries()] == [key]
    assert cache.clear(all=True) == 1
    assert cache.lookup(key) is None


# -- listing, prefixes, removal ------------------------------------------------------

def test_entries_and_resolve(tmp_path):
    cache = DiskCache(tmp_path)
    keys = [key_of(("r", i)) for i in range(20)]
    for i, k in enumerate(keys):
        cache.store(k, meta(f"k{i}"), artifacts(f"k{i}"))
    (tmp_path / "README").write_text("not an entry")
    (tmp_path / "abc").mkdir()
    assert sorted(e.key for e in cache.entries()) == sorted(keys)
    k = keys[0]
    assert cache.resolve(k).key == k
    assert cache.resolve(k[:12]).meta["kernel"] == "k0"
    assert cache.resolve(k[:12].upper()).key == k

    probe = next(f"{i:03x}" for i in range(4096) if not any(x.startswith(f"{i:03x}") for x in keys))
    with pytest.raises(KeyError) as info:
        cache.resolve(probe)
    assert str(info.value).startswith(f"no cache entry starts with '{probe}'")

    first_chars = {}
    for x in keys:
        first_chars.setdefault(x[0], []).append(x)
    c, group = max(first_chars.items(), key=lambda kv: len(kv[1]))
    assert len(group) >= 2  # 20 keys over 16 digits
    with pytest.raises(KeyError) as info:
        cache.resolve(c)
    msg = str(info.value)
    assert msg.startswith(f"prefix '{c}' matches {len(group)} entries: ")
    for x in group[:8]:
        assert x[:12] in msg
    with pytest.raises(KeyError, match="empty"):
        cache.resolve("")


def test_remove(tmp_path):
    cache = DiskCache(tmp_path)
    k = key_of(10)
    cache.store(k, meta(), artifacts())
    assert k in cache
    assert cache.remove(k) is True
    assert cache.remove(k) is False
    assert not (tmp_path / k).exists() and k not in cache
    assert cache.lookup(k) is None


def test_clear_older_than_and_all(tmp_path):
    cache = DiskCache(tmp_path)
    now = time.time()
    ages = {key_of(("age", d)): d for d in (0, 1, 5, 10, 40)}
    for k, days in ages.items():
        cache.store(k, meta(), artifacts())
        t = now - days * 86400 - 60
        os.utime(tmp_path / k / "meta.json", (t, t))
    # a stale temporary folder from a crashed writer, and an unrelated file
    stale = tmp_path / ".tmp-deadbeef-1-000000"
    stale.mkdir()
    os.utime(stale, (now - 7200, now - 7200))
    (tmp_path / "notes.txt").write_text("keep me")

    assert cache.clear(older_than_days=7) == 2
    assert {e.key for e in cache.entries()} == {k for k, d in ages.items() if d < 7}
    assert not stale.exists()
    assert cache.clear(older_than_days=2.5) == 1
    assert cache.clear(older_than_days=2.5) == 0
    assert cache.clear(all=True) == 2
    assert cache.entries() == []
    assert (tmp_path / "notes.txt").read_text() == "keep me"
    with pytest.raises(ValueError):
        cache.clear()
    assert cache.clear(all=True) == 0


def test_clear_of_missing_root(tmp_path):
    assert DiskCache(tmp_path / "never-made").clear(all=True) == 0
    assert DiskCache(tmp_path / "never-made").entries() == []


def test_env_dir_under_a_file_falls_back_via_default_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("TYLO_CACHE_DIR", str(blocker / "cache"))
    _assert_memory_fallback(default_cache(), blocker / "cache")
    # the same process-wide instance stays in memory without warning again
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        default_cache().store(key_of("again"), meta(), artifacts())
        assert default_cache().lookup(key_of("again")) is not None
