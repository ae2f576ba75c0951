"""A cache entry is verified whole: meta.json is covered by its own digest, every file must be listed
and match, only regular files are read; stale temporary folders are swept by the next store."""
import json
import os
import random
import threading
import time
import traceback
import warnings

import pytest

import tylo
from tylo.cache import DiskCache, TyloCacheWarning, cache_key
from tylo.cache.disk import ARTIFACT_FILES, meta_digest


def key_of(n) -> str:
    return cache_key({"test": repr(n)})


def artifacts():
    return {"kernel.tyir": "func @k() {}\n", "kernel.ll": "define void @k() { ret void }\n",
            "kernel.ptx": ".version 8.0\n.target sm_90a\n", "kernel.cubin": b"\x7fELF" + bytes(range(256))}


def meta():
    return {"kernel": "k", "arch": "sm_90a", "signature": "*f32:16, i32", "constexprs": {"BLOCK": 256},
            "registers": 12, "shared_bytes": 0, "compile_ms": {"total": 31.5}, "created": time.time()}


def _stored(tmp_path, tag="entry"):
    key = key_of(tag)
    m = dict(meta(), dynamic_shared_bytes=32768)
    DiskCache(tmp_path).store(key, m, artifacts())
    return key, tmp_path / key / "meta.json"


def _lookup_quietly(cache, key, **kw):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        entry = cache.lookup(key, **kw)
    return entry, [w for w in record if issubclass(w.category, TyloCacheWarning)]


def test_a_single_bit_flip_in_meta_never_changes_what_a_lookup_returns(tmp_path):
    key, path = _stored(tmp_path)
    original = path.read_bytes()
    good = json.loads(original)
    text = original.decode()
    value_at = text.index('"dynamic_shared_bytes": ') + len('"dynamic_shared_bytes": ')
    positions = list(range(value_at, value_at + 5))                     # every bit of the launch's shared bytes
    positions += random.Random(16).sample(range(len(original)), 120)    # and anywhere else
    for pos in positions:
        for bit in range(8):
            data = bytearray(original)
            data[pos] ^= 1 << bit
            os.makedirs(path.parent, exist_ok=True)
            for name, content in artifacts().items():
                (path.parent / name).write_bytes(content.encode() if isinstance(content, str) else content)
            path.write_bytes(bytes(data))
            entry, warned = _lookup_quietly(DiskCache(tmp_path), key)
            if entry is not None:       # only a flip JSON cannot see (none expected) may survive
                assert entry.meta == good, (pos, bit)
            else:
                assert len(warned) == 1 and "meta.json" in str(warned[0].message), (pos, bit)


def test_a_file_not_listed_or_required_but_missing_is_a_damaged_entry(tmp_path):
    key, path = _stored(tmp_path, "unlisted")
    (path.parent / "kernel.extra").write_bytes(b"x")
    entry, warned = _lookup_quietly(DiskCache(tmp_path), key)
    assert entry is None and "kernel.extra is not listed" in str(warned[0].message)

    key = key_of("no cubin listed")
    files = artifacts()
    del files["kernel.cubin"]
    DiskCache(tmp_path).store(key, meta(), files)
    entry, warned = _lookup_quietly(DiskCache(tmp_path), key, required=ARTIFACT_FILES)
    assert entry is None and len(warned) == 1 and "kernel.cubin is not listed" in str(warned[0].message)


def test_a_fifo_named_meta_json_does_not_hang_the_lookup(tmp_path):
    key, path = _stored(tmp_path, "fifo")
    path.unlink()
    os.mkfifo(path)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", _lookup_quietly(DiskCache(tmp_path), key)),
                         daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "lookup hangs on a FIFO"
    entry, warned = result["r"]
    assert entry is None and "not a regular file" in str(warned[0].message)
    assert not (tmp_path / key).exists()


def test_stale_temporary_folders_are_swept_by_the_next_store(tmp_path):
    cache = DiskCache(tmp_path)
    cache.store(key_of(1), meta(), artifacts())
    stale = tmp_path / ".tmp-0123456789abcdef-999-aaaaaa"
    fresh = tmp_path / ".tmp-fedcba9876543210-998-bbbbbb"
    for folder in (stale, fresh):
        folder.mkdir()
        (folder / "kernel.ptx").write_text("half written")
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    cache.store(key_of(2), meta(), artifacts())
    assert not stale.exists() and fresh.exists()   # a writer may still be filling the fresh one


def test_meta_digest_ignores_only_itself():
    m = {"a": 1, "files": {}}
    assert meta_digest(m) == meta_digest(dict(m, meta_sha256="x"))
    assert meta_digest(m) != meta_digest(dict(m, a=2))


def test_a_damaged_jit_entry_is_rebuilt_with_one_warning(tmp_path, monkeypatch):
    """A meta.json that no longer lists kernel.tyir (and the file gone) made compile() raise
    FileNotFoundError; now it is a damaged entry, rebuilt."""
    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path))

    @tylo.jit
    def k(out):
        out[0] = 2.0

    first = k.compile(signature="*f32", arch="sm_80")
    folder = tmp_path / first.key
    m = json.loads((folder / "meta.json").read_text())
    del m["files"]["kernel.tyir"]
    m["meta_sha256"] = meta_digest(m)       # a consistent meta that simply lacks the file
    (folder / "meta.json").write_text(json.dumps(m))
    (folder / "kernel.tyir").unlink()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        again = k.compile(signature="*f32", arch="sm_80")
    warned = [w for w in record if issubclass(w.category, TyloCacheWarning)]
    assert len(warned) == 1 and not again.from_cache and again.ir == first.ir
    assert (folder / "kernel.tyir").is_file()


def test_the_cached_no_gpu_error_is_raised_fresh_each_time():
    from tylo.runtime import driver
    from tylo.runtime.errors import NoGPUError

    if driver.gpu_available():
        pytest.skip("this machine has a GPU: there is no NoGPUError to cache")
    caught = []
    for _ in range(3):
        try:
            driver.ensure_context()
        except NoGPUError as exc:
            caught.append(exc)
    assert len(caught) == 3 and caught[1] is not caught[2] and str(caught[1]) == str(caught[2])
    depth = [len(traceback.extract_tb(e.__traceback__)) for e in caught]
    assert depth[1] == depth[2], depth
