"""The on-disk kernel cache.

One folder per cache key under the cache root::

    $TYLO_CACHE_DIR/                    (default ~/.cache/tylo)
        <64-hex sha256 key>/
            meta.json                   JSON; "files" maps file name -> sha256
            kernel.tyir  kernel.ll  kernel.ptx  kernel.cubin

An entry is written into a temporary folder inside the root and renamed into
place, so readers only ever see complete entries; when two processes store the
same key at once, the first rename wins and the loser discards its copy. A
lookup verifies the whole entry: meta.json carries the sha256 of its own
content (``meta_sha256``, over its canonical JSON without that field), every
file in the folder must be listed in it and match its sha256, and the files a
caller requires must be there. An entry that fails (missing, unlisted or
truncated file, flipped byte or bit in meta.json, bad JSON, something other
than a regular file) is reported with one :class:`TyloCacheWarning`, removed,
and reported as a miss so the caller rebuilds it. Only regular files are
opened (a FIFO named meta.json cannot hang a lookup). Temporary folders left by
killed writers are swept, once stale, by the next store. Nothing is ever
unpickled.

``TYLO_CACHE=0`` disables the disk level (entries then live in memory for the
life of the process). A root that cannot be written (permissions, a file where
a folder should be, disk full) makes the cache fall back to memory for the rest
of the process, with exactly one warning.

This module imports nothing else from tylo.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import threading
import time
import warnings
from pathlib import Path
from typing import Mapping

__all__ = [
    "ARTIFACT_FILES",
    "CacheEntry",
    "CacheKeyError",
    "DiskCache",
    "META_FILE",
    "STAGE_FILES",
    "TyloCacheWarning",
    "cache_enabled_from_env",
    "meta_digest",
    "default_cache",
    "default_cache_root",
]

META_FILE = "meta.json"
ARTIFACT_FILES = ("kernel.tyir", "kernel.ll", "kernel.ptx", "kernel.cubin")
# Short names accepted wherever an artifact file name is.
STAGE_FILES = {
    "ir": "kernel.tyir",
    "tyir": "kernel.tyir",
    "llvm": "kernel.ll",
    "ll": "kernel.ll",
    "ptx": "kernel.ptx",
    "cubin": "kernel.cubin",
}

_KEY_RE = re.compile(r"^[0-9a-f]{64}$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_TMP_PREFIX = ".tmp-"
_TRASH_PREFIX = ".del-"
# Temporary / trash folders older than this are leftovers of a crashed process.
_STALE_TMP_SECONDS = 3600.0


class TyloCacheWarning(UserWarning):
    """A cache entry was corrupt, or the cache folder cannot be used."""


class CacheKeyError(KeyError):
    """A key or key prefix names no entry, or more than one.

    ``str()`` gives the plain message (``KeyError`` would quote it).
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def default_cache_root() -> Path:
    """``$TYLO_CACHE_DIR`` if set (and non-empty), else ``~/.cache/tylo``."""
    env = os.environ.get("TYLO_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "tylo"


def cache_enabled_from_env() -> bool:
    """False when ``TYLO_CACHE`` is 0 / false / no / off."""
    value = os.environ.get("TYLO_CACHE", "").strip().lower()
    return value not in ("0", "false", "no", "off")


def _artifact_name(name: str) -> str:
    """Map a stage alias to its file name and check that it is a plain name."""
    name = STAGE_FILES.get(name, name)
    if (
        not isinstance(name, str)
        or not name
        or name == META_FILE
        or name.startswith(".")
        or "/" in name
        or "\\" in name
        or "\0" in name
    ):
        raise ValueError(f"invalid cache artifact name {name!r}")
    return name


class _NotRegular(OSError):
    """A cache path that is not a regular file (a FIFO, a device, a folder)."""


def _read_regular(path: Path) -> bytes:
    """The bytes of ``path`` if it is a regular file; never blocks on a FIFO or a device."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _NotRegular(errno.EINVAL, "not a regular file", str(path))
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def meta_digest(meta: Mapping) -> str:
    """sha256 of meta.json's content without its ``meta_sha256`` field (canonical JSON)."""
    body = {k: v for k, v in meta.items() if k != "meta_sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check_key(key: str) -> str:
    if not isinstance(key, str) or not _KEY_RE.match(key):
        raise ValueError(f"cache key must be 64 lowercase hex digits (a sha256), got {key!r}")
    return key


class CacheEntry:
    """One cache entry: its key, folder (None for in-memory entries) and meta.

    ``read(name)`` returns an artifact's bytes (``name`` is a file name such as
    ``"kernel.ptx"`` or a stage alias: ir, llvm, ptx, cubin); ``text(name)``
    decodes it as UTF-8. Entries returned by :meth:`DiskCache.lookup` carry the
    bytes that were verified, so reading them touches no file.
    """

    __slots__ = ("key", "path", "meta", "_data", "_last_used")

    def __init__(
        self,
        key: str,
        path: Path | None,
        meta: dict,
        data: Mapping[str, bytes] | None = None,
        last_used: float | None = None,
    ):
        self.key = key
        self.path = path
        self.meta = meta
        self._data = dict(data) if data is not None else None
        self._last_used = last_used

    # -- artifacts ---------------------------------------------------------
    @property
    def files(self) -> dict[str, str]:
        """File name -> sha256, as recorded in meta.json."""
        files = self.meta.get("files")
        return dict(files) if isinstance(files, dict) else {}

    def read(self, name: str) -> bytes:
        fname = _artifact_name(name)
        if self._data is not None and fname in self._data:
            return self._data[fname]
        if self.path is None:
            raise FileNotFoundError(f"cache entry {self.key[:12]} has no {fname}")
        try:
            return (self.path / fname).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            raise FileNotFoundError(
                f"cache entry {self.key[:12]} has no {fname} ({self.path})"
            ) from None

    def text(self, name: str) -> str:
        return self.read(name).decode("utf-8")

    def has(self, name: str) -> bool:
        fname = _artifact_name(name)
        if self._data is not None and fname in self._data:
            return True
        if fname in self.files:
            return True
        return self.path is not None and (self.path / fname).is_file()

    @property
    def cubin(self) -> bytes:
        return self.read("kernel.cubin")

    @property
    def ptx(self) -> str:
        return self.text("kernel.ptx")

    # -- bookkeeping -------------------------------------------------------
    @property
    def last_used(self) -> float:
        """Unix time of the last lookup (the mtime of meta.json)."""
        if self.path is not None:
            try:
                return (self.path / META_FILE).stat().st_mtime
            except OSError:
                pass
        if self._last_used is not None:
            return self._last_used
        created = self.meta.get("created")
        return float(created) if isinstance(created, (int, float)) else 0.0

    @property
    def size(self) -> int:
        """Total bytes of the entry's artifacts."""
        if self._data is not None:
            return sum(len(v) for v in self._data.values())
        total = 0
        if self.path is not None:
            for fname in self.files:
                try:
                    total += (self.path / fname).stat().st_size
                except (OSError, ValueError):
                    pass
        return total

    def __repr__(self) -> str:
        where = str(self.path) if self.path is not None else "memory"
        kernel = self.meta.get("kernel", "?")
        return f"CacheEntry({self.key[:12]}, kernel={kernel!r}, {where})"


class DiskCache:
    """Kernel cache rooted at ``root`` (default: :func:`default_cache_root`).

    ``enabled=False`` (default: from ``TYLO_CACHE``) keeps every entry in
    memory and never touches the disk.
    """

    def __init__(self, root: Path | str | None = None, *, enabled: bool | None = None):
        self.root = (Path(root).expanduser() if root is not None else default_cache_root()).absolute()
        self.enabled = cache_enabled_from_env() if enabled is None else bool(enabled)
        self._lock = threading.RLock()
        self._memory: dict[str, CacheEntry] = {}
        # Why the disk level was given up (None while it is in use).
        self.fallback_reason: str | None = None

    # -- state ---------------------------------------------------------------
    @property
    def memory_only(self) -> bool:
        """True when entries live only in this process (disabled, or fallen back)."""
        return not self.enabled or self.fallback_reason is not None

    def root_problem(self) -> str | None:
        """Why the cache folder cannot hold entries (not a directory, unreadable), or None."""
        if not self.enabled:
            return None
        try:
            st = os.stat(self.root)
        except FileNotFoundError:
            return None  # made by the first store
        except OSError as exc:
            return f"{self.root} cannot be read ({exc.strerror})"
        if not stat.S_ISDIR(st.st_mode):
            return f"{self.root} is not a directory"
        if not os.access(self.root, os.R_OK | os.X_OK):
            return f"{self.root} cannot be read (permission denied)"
        return None

    def _entry_dir(self, key: str) -> Path:
        return self.root / key

    def _fall_back(self, where: Path, exc: BaseException) -> None:
        with self._lock:
            if self.fallback_reason is not None:
                return
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self.fallback_reason = f"{where}: {why}"
        warnings.warn(
            f"tylo cache: cannot write to {where} ({why}); "
            f"keeping compiled kernels in memory for the rest of this process "
            f"(set TYLO_CACHE_DIR to a writable folder, or TYLO_CACHE=0 to silence this)",
            TyloCacheWarning,
            stacklevel=3,
        )

    # -- store ---------------------------------------------------------------
    def store(
        self, key: str, meta: Mapping, artifacts: Mapping[str, bytes | bytearray | memoryview | str]
    ) -> CacheEntry:
        """Store ``artifacts`` (file name or stage alias -> bytes or str) under ``key``.

        ``meta`` should be JSON-serializable (other values are stored as their
        ``str``); ``key`` and ``files`` (the sha256 of each artifact) are added. Returns the entry now in the
        cache, which is
        another process's equivalent entry when that one got there first.
        """
        _check_key(key)
        data: dict[str, bytes] = {}
        for name, content in artifacts.items():
            fname = _artifact_name(name)
            if isinstance(content, str):
                content = content.encode("utf-8")
            elif isinstance(content, (bytearray, memoryview)):
                content = bytes(content)
            elif not isinstance(content, bytes):
                raise TypeError(
                    f"cache artifact {fname!r} must be bytes or str, not {type(content).__name__}"
                )
            data[fname] = content
        full_meta = dict(meta)
        full_meta["key"] = key
        full_meta["files"] = {n: hashlib.sha256(b).hexdigest() for n, b in sorted(data.items())}
        full_meta.pop("meta_sha256", None)
        # a value JSON cannot hold (a numpy int, a dtype) is kept as its str.
        full_meta = json.loads(json.dumps(full_meta, sort_keys=True, default=str))
        # meta.json drives the launch (dynamic shared memory): it is covered by a digest too
        full_meta["meta_sha256"] = meta_digest(full_meta)
        meta_bytes = (json.dumps(full_meta, indent=2, sort_keys=True) + "\n").encode()

        if not self.memory_only:
            try:
                entry = self._store_disk(key, full_meta, meta_bytes, data)
            except OSError as exc:
                self._fall_back(self.root, exc)
            else:
                return entry
        return self._store_memory(key, full_meta, data)

    def _store_memory(self, key: str, meta: dict, data: dict[str, bytes]) -> CacheEntry:
        entry = CacheEntry(key, None, meta, data, last_used=time.time())
        with self._lock:
            self._memory[key] = entry
        return entry

    def _store_disk(self, key: str, meta: dict, meta_bytes: bytes, data: dict[str, bytes]) -> CacheEntry:
        self.root.mkdir(parents=True, exist_ok=True)
        self._sweep_tmp()  # leftovers of writers killed mid-write, once older than _STALE_TMP_SECONDS
        tmp = self.root / f"{_TMP_PREFIX}{key[:16]}-{os.getpid()}-{secrets.token_hex(6)}"
        tmp.mkdir()
        try:
            for fname, content in data.items():
                (tmp / fname).write_bytes(content)
            # meta.json last: a folder with a meta.json has all its files.
            (tmp / META_FILE).write_bytes(meta_bytes)
            final = self._entry_dir(key)
            for _attempt in range(5):
                try:
                    os.rename(tmp, final)
                except OSError as exc:
                    if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR):
                        raise
                    # Another process stored this key first: keep theirs if it is good.
                    theirs = self._load(key, verify=True, warn=False, repair=False, touch=False,
                                        required=tuple(data))
                    if theirs is not None:
                        return theirs
                    self._remove_dir(final)
                    continue
                return CacheEntry(key, final, meta, data)
            raise OSError(errno.EEXIST, f"could not replace the cache entry {final}")
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    # -- lookup --------------------------------------------------------------
    def lookup(self, key: str, *, touch: bool = True, required: tuple = ()) -> CacheEntry | None:
        """The verified entry for ``key``, or None (a miss, or a corrupt entry).

        A corrupt entry (including one that lacks a file named in ``required``)
        is reported with one :class:`TyloCacheWarning` and removed, so the caller
        rebuilds it. ``touch`` records the lookup as the entry's last use.
        """
        required = tuple(_artifact_name(n) for n in required)
        _check_key(key)
        with self._lock:
            entry = self._memory.get(key)
        if entry is not None and all(n in entry.files for n in required):
            entry._last_used = time.time()
            return entry
        if not self.enabled:
            return None
        return self._load(key, verify=True, warn=True, repair=True, touch=touch, required=required)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str) or not _KEY_RE.match(key):
            return False
        if key in self._memory:
            return True
        return self.enabled and (self._entry_dir(key) / META_FILE).is_file()

    def _load(self, key: str, *, verify: bool, warn: bool, repair: bool, touch: bool,
              required: tuple = ()) -> CacheEntry | None:
        path = self._entry_dir(key)
        try:
            raw = _read_regular(path / META_FILE)
        except (FileNotFoundError, NotADirectoryError):
            if not path.is_dir():
                return None  # a plain miss
            return self._corrupt(key, path, "meta.json is missing", warn, repair)
        except _NotRegular:
            return self._corrupt(key, path, "meta.json is not a regular file", warn, repair)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return self._corrupt(key, path, "meta.json is a symbolic link", warn, repair)
            return None  # unreadable: treat as a miss; a store will report the folder
        try:
            meta = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return self._corrupt(key, path, "meta.json is not valid JSON", warn, repair)
        problem = _check_meta(meta, key)
        if problem is None and meta.get("meta_sha256") != meta_digest(meta):
            problem = "meta.json does not match its sha256 (modified)"
        if problem is None:
            missing = [n for n in required if n not in meta["files"]]
            if missing:
                problem = f"{', '.join(missing)} is not listed in meta.json"
        if problem is None:
            try:
                present = set(os.listdir(path)) - {META_FILE}
            except OSError:
                present = set()
            unlisted = sorted(present - set(meta["files"]))
            if unlisted:
                problem = f"{', '.join(unlisted)} is not listed in meta.json"
        if problem:
            return self._corrupt(key, path, problem, warn, repair)
        data: dict[str, bytes] | None = None
        if verify:
            data = {}
            for fname, digest in meta["files"].items():
                try:
                    content = _read_regular(path / fname)
                except FileNotFoundError:
                    return self._corrupt(key, path, f"{fname} is missing", warn, repair)
                except OSError as exc:
                    return self._corrupt(key, path, f"{fname} cannot be read ({exc.strerror})", warn, repair)
                if hashlib.sha256(content).hexdigest() != digest:
                    return self._corrupt(
                        key, path,
                        f"{fname} does not match its sha256 (truncated or modified, {len(content)} bytes)",
                        warn, repair,
                    )
                data[fname] = content
        if touch:
            try:
                os.utime(path / META_FILE)
            except OSError:
                pass
        return CacheEntry(key, path, meta, data)

    def _corrupt(self, key: str, path: Path, detail: str, warn: bool, repair: bool) -> None:
        if warn:
            warnings.warn(
                f"tylo cache: entry {key[:12]} is corrupt: {detail}; removing it and rebuilding ({path})",
                TyloCacheWarning,
                stacklevel=4,
            )
        if repair:
            self._remove_dir(path)
        return None

    # -- listing and removal -------------------------------------------------
    def _disk_keys(self) -> list[str]:
        if not self.enabled:
            return []
        try:
            names = os.listdir(self.root)
        except OSError:
            return []
        return sorted(n for n in names if _KEY_RE.match(n) and (self.root / n).is_dir())

    def keys(self) -> list[str]:
        with self._lock:
            mem = set(self._memory)
        return sorted(mem.union(self._disk_keys()))

    def entries(self) -> list[CacheEntry]:
        """Every entry, without verifying artifacts (an unreadable meta.json gives meta {})."""
        with self._lock:
            result = dict(self._memory)
        for key in self._disk_keys():
            if key in result:
                continue
            result[key] = self._entry_lenient(key)
        return [result[k] for k in sorted(result)]

    def _entry_lenient(self, key: str) -> CacheEntry:
        path = self._entry_dir(key)
        try:
            meta = json.loads(_read_regular(path / META_FILE).decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            meta = {}
        if not isinstance(meta, dict):
            meta = {}
        return CacheEntry(key, path, meta)

    def resolve(self, prefix: str) -> CacheEntry:
        """The entry whose key starts with ``prefix``; :class:`CacheKeyError` (a
        ``KeyError``) when none or several do."""
        p = str(prefix).strip().lower()
        if not p:
            raise CacheKeyError("empty cache key prefix")
        matches = [k for k in self.keys() if k.startswith(p)]
        where = "memory" if not self.enabled else str(self.root)
        if not matches:
            raise CacheKeyError(f"no cache entry starts with {p!r} (cache: {where})")
        if len(matches) > 1:
            shown = ", ".join(k[:16] for k in matches[:8])
            more = f", ... ({len(matches) - 8} more)" if len(matches) > 8 else ""
            raise CacheKeyError(
                f"prefix {p!r} matches {len(matches)} entries: {shown}{more}; give more characters"
            )
        key = matches[0]
        with self._lock:
            entry = self._memory.get(key)
        return entry if entry is not None else self._entry_lenient(key)

    def remove(self, key: str) -> bool:
        """Remove the entry for ``key``; True if there was one."""
        _check_key(key)
        removed = False
        with self._lock:
            if self._memory.pop(key, None) is not None:
                removed = True
        if self.enabled:
            removed = self._remove_dir(self._entry_dir(key)) or removed
        return removed

    def _remove_dir(self, path: Path) -> bool:
        """Move ``path`` aside atomically, then delete it. True if it existed."""
        trash = self.root / f"{_TRASH_PREFIX}{path.name[:16]}-{os.getpid()}-{secrets.token_hex(6)}"
        try:
            os.rename(path, trash)
        except FileNotFoundError:
            return False
        except OSError:
            # Not a folder, or the root is read-only: delete in place as well as we can.
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
                return not path.exists()
            try:
                path.unlink()
                return True
            except OSError:
                return False
        shutil.rmtree(trash, ignore_errors=True)
        return True

    def clear(self, all: bool = False, older_than_days: float | None = None) -> int:
        """Remove every entry (``all=True``) or those last used more than
        ``older_than_days`` days ago; returns how many were removed.

        Only entry folders (and stale temporary folders of crashed writes) are
        deleted; nothing else under the root is touched.
        """
        if not all and older_than_days is None:
            raise ValueError("clear: pass all=True or older_than_days=N")
        if older_than_days is not None and older_than_days < 0:
            raise ValueError(f"clear: older_than_days must be >= 0, got {older_than_days}")
        cutoff = None if all else time.time() - float(older_than_days) * 86400.0
        count = 0
        for entry in self.entries():
            if cutoff is not None and entry.last_used >= cutoff:
                continue
            if self.remove(entry.key):
                count += 1
        self._sweep_tmp()
        return count

    def _sweep_tmp(self) -> None:
        if not self.enabled:
            return
        try:
            names = os.listdir(self.root)
        except OSError:
            return
        now = time.time()
        for name in names:
            if not (name.startswith(_TMP_PREFIX) or name.startswith(_TRASH_PREFIX)):
                continue
            path = self.root / name
            try:
                if now - path.stat().st_mtime > _STALE_TMP_SECONDS:
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                pass

    def __repr__(self) -> str:
        state = "disabled" if not self.enabled else (
            f"memory fallback: {self.fallback_reason}" if self.fallback_reason else "on disk")
        return f"DiskCache({str(self.root)!r}, {state})"


def _check_meta(meta: object, key: str) -> str | None:
    """Why ``meta`` is not a valid meta.json for ``key`` (None when it is)."""
    if not isinstance(meta, dict):
        return "meta.json does not hold a JSON object"
    if meta.get("key", key) != key:
        return f"meta.json names another key ({str(meta.get('key'))[:12]})"
    files = meta.get("files")
    if not isinstance(files, dict):
        return "meta.json has no 'files' map"
    for fname, digest in files.items():
        try:
            ok = _artifact_name(fname) == fname
        except ValueError:
            ok = False
        if not ok:
            return f"meta.json lists an invalid file name {fname!r}"
        if not isinstance(digest, str) or not _SHA_RE.match(digest):
            return f"meta.json has an invalid sha256 for {fname}"
    return None


_default_lock = threading.Lock()
_default: tuple[tuple[str | None, str | None], DiskCache] | None = None


def default_cache() -> DiskCache:
    """The process-wide cache; made again when TYLO_CACHE_DIR or TYLO_CACHE change."""
    global _default
    env = (os.environ.get("TYLO_CACHE_DIR"), os.environ.get("TYLO_CACHE"))
    current = _default
    if current is not None and current[0] == env:
        return current[1]
    with _default_lock:
        if _default is None or _default[0] != env:
            _default = (env, DiskCache())
        return _default[1]

