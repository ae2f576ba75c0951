"""Tuning results on disk: one JSON file per (kernel fingerprint, device, tuning key).

    <cache root>/tuning/<sha256>.json       (cache root: ``tylo.cache.default_cache_root()``)

A record holds the kernel's name and the fingerprint of its sources (an edited kernel has another
fingerprint, so it is tuned again), the device and target, the tuning key, the chosen
configuration and the timing (or the reason it was left out) of every configuration. Files are
written to a temporary name in the same folder and renamed into place, so a reader sees a whole
record or none; a file that does not parse or lacks a field is reported once, removed, and
treated as absent. Nothing is unpickled: configurations are matched by their ``repr``.

``TYLO_CACHE=0`` keeps results in memory only (nothing is read or written here).
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import secrets
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from .cache import TyloCacheWarning, default_cache_root
from .cache.disk import cache_enabled_from_env

__all__ = ["ConfigTiming", "TunedRecord", "tuning_root", "record_path", "load_record", "store_record",
           "list_tuned", "clear_tuned", "format_tuned", "FORMAT"]

FORMAT = "tylo-tuning-1"
_TMP_PREFIX = ".tmp-"
_warned_roots: set = set()


@dataclass(frozen=True)
class ConfigTiming:
    """What tuning found for one configuration: ``status`` is "ok" (timed), "pruned" (cannot fit
    or removed by the prune hook) or "failed" (did not compile or launch); ``reason`` says why."""

    config: str                       # repr(Config)
    status: str
    reason: str = ""
    median_ms: float | None = None
    quantiles: tuple = ()
    mean_ms: float | None = None
    min_ms: float | None = None
    n: int = 0
    registers: int | None = None
    spill_bytes: int | None = None
    shared_bytes: int | None = None

    def to_json(self) -> dict:
        d = asdict(self)
        d["quantiles"] = list(self.quantiles)
        return d

    @staticmethod
    def from_json(d: dict) -> "ConfigTiming":
        fields = {k: d[k] for k in ConfigTiming.__dataclass_fields__ if k in d}
        fields["quantiles"] = tuple(fields.get("quantiles", ()))
        t = ConfigTiming(**fields)
        if not isinstance(t.config, str) or t.status not in ("ok", "pruned", "failed"):
            raise ValueError("bad timing entry")
        return t


@dataclass(frozen=True)
class TunedRecord:
    """One stored tuning result (``list_tuned()``)."""

    kernel: str              # qualified name of the kernel function
    key: tuple               # ((argument name, value text), ...) in the order of the tuning key
    best: str                # repr of the chosen Config
    timings: tuple           # ConfigTiming per configuration, in the order given to autotune
    created: float           # time.time() when it was tuned
    device: str
    arch: str
    fingerprint: str         # sha256 of the kernel's sources and what it reads
    path: str

    @property
    def key_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.key)

    @property
    def best_timing(self) -> ConfigTiming | None:
        return next((t for t in self.timings if t.config == self.best), None)

    def to_json(self) -> dict:
        """What ``tylo cache list --json`` says of this record."""
        return {"kernel": self.kernel, "key": dict(self.key), "best": self.best, "device": self.device,
                "arch": self.arch, "created": self.created, "fingerprint": self.fingerprint, "path": self.path,
                "timings": [t.to_json() for t in self.timings]}


def tuning_root() -> Path:
    """The folder of tuning records: ``<tylo cache root>/tuning``."""
    return default_cache_root() / "tuning"


def record_path(identity: dict) -> Path:
    """The file of the record described by ``identity`` (fingerprint, device, arch, key, configs)."""
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return tuning_root() / f"{digest}.json"


def _warn_once(where: Path, what: str) -> None:
    if str(where) not in _warned_roots:
        _warned_roots.add(str(where))
        warnings.warn(f"tylo autotune: {what}", TyloCacheWarning, stacklevel=3)


def _parse(path: Path, data: dict) -> TunedRecord:
    if data.get("format") != FORMAT:
        raise ValueError(f"format is {data.get('format')!r}, expected {FORMAT!r}")
    key = tuple((str(k), str(v)) for k, v in data["key"])
    timings = tuple(ConfigTiming.from_json(t) for t in data["timings"])
    return TunedRecord(kernel=str(data["kernel"]), key=key, best=str(data["best"]), timings=timings,
                       created=float(data["created"]), device=str(data["device"]), arch=str(data["arch"]),
                       fingerprint=str(data["fingerprint"]), path=str(path))


def _read(path: Path, *, repair: bool) -> TunedRecord | None:
    try:
        data = json.loads(path.read_bytes())
        return _parse(path, data)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        warnings.warn(f"tylo autotune: the tuning record {path} is damaged ({exc}); "
                      f"it is removed and the kernel will be tuned again", TyloCacheWarning, stacklevel=3)
        if repair:
            try:
                path.unlink()
            except OSError:
                pass
        return None


def load_record(identity: dict) -> TunedRecord | None:
    """The stored record for ``identity``, or None (absent, damaged, or the disk level is off)."""
    if not cache_enabled_from_env():
        return None
    return _read(record_path(identity), repair=True)


def store_record(identity: dict, *, kernel: str, key: tuple, best: str, timings, device: str,
                 arch: str, fingerprint: str) -> Path | None:
    """Write a record atomically; None (after one warning) when the folder cannot be written."""
    if not cache_enabled_from_env():
        return None
    path = record_path(identity)
    data = {"format": FORMAT, "kernel": kernel, "key": [list(kv) for kv in key], "best": best,
            "timings": [t.to_json() for t in timings], "created": time.time(), "device": device,
            "arch": arch, "fingerprint": fingerprint, "identity": identity}
    tmp = path.with_name(f"{_TMP_PREFIX}{path.stem[:16]}-{os.getpid()}-{secrets.token_hex(6)}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)
    except OSError as exc:
        _warn_once(path.parent, f"cannot write tuning results to {path.parent} ({exc}); "
                                "they are kept in memory for this process")
        try:
            tmp.unlink()
        except OSError:
            pass
        return None
    return path


def list_tuned(kernel: str | None = None) -> list[TunedRecord]:
    """Every stored tuning record, oldest first, or those whose kernel name (qualified or not)
    matches the shell pattern ``kernel``. Damaged files are reported and removed."""
    root = tuning_root()
    if not root.is_dir():
        return []
    records = [_read(p, repair=True) for p in sorted(root.glob("*.json"))]
    records = [r for r in records if r is not None and (kernel is None or fnmatch.fnmatchcase(r.kernel, kernel)
                                                           or fnmatch.fnmatchcase(r.kernel.rpartition(".")[2], kernel))]
    return sorted(records, key=lambda r: r.created)


def clear_tuned(older_than_days: float | None = None) -> int:
    """Remove every stored tuning record, or those tuned more than ``older_than_days`` days ago
    (``tylo cache clear --older-than``), and leftover temporary files; return how many records."""
    if older_than_days is not None and not older_than_days >= 0:
        raise ValueError(f"clear_tuned: older_than_days must be >= 0, got {older_than_days}")
    root = tuning_root()
    if not root.is_dir():
        return 0
    cutoff = None if older_than_days is None else time.time() - float(older_than_days) * 86400.0
    n = 0
    for p in root.iterdir():
        temporary = p.name.startswith(_TMP_PREFIX)
        if not temporary and p.suffix != ".json":
            continue
        if cutoff is not None and not temporary:
            record = _read(p, repair=True)
            if record is None or record.created >= cutoff:
                continue
        try:
            p.unlink()
        except OSError:
            continue
        n += not temporary
    return n


def format_tuned(records=None) -> str:
    """Human-readable listing of tuning records (``tylo cache list``): one block per record with
    every configuration's median time or the reason it was left out."""
    records = list_tuned() if records is None else records
    if not records:
        return "no tuned kernels"
    lines = []
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created))
        lines.append(f"{r.kernel} [{r.key_text}] on {r.device} ({r.arch}), source {r.fingerprint[:8]}, tuned {when}")
        for t in r.timings:
            mark = "*" if t.config == r.best else " "
            if t.status == "ok":
                what = f"{t.median_ms:.4f} ms (median of {t.n})"
            else:
                what = f"{t.status}: {t.reason}"
            lines.append(f"  {mark} {t.config}: {what}")
    return "\n".join(lines)

