"""``tylo cache list | show | dump | clear | path``."""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tylo.cache.disk import STAGE_FILES, CacheEntry, DiskCache, default_cache
from tylo.tuning_store import clear_tuned, format_tuned, list_tuned

from . import disasm
from .errors import CLIError, UsageError
from .formatting import (
    block_cell,
    cache_location,
    checked_cache,
    compile_ms_total,
    constexprs_cell,
    fmt_ago,
    fmt_bytes,
    fmt_ms,
    num,
    shared_memory,
    spills,
    table,
    truncate,
)

__all__ = ["cmd_cache_list", "cmd_cache_show", "cmd_cache_dump", "cmd_cache_clear", "cmd_cache_path"]


def _resolve(cache: DiskCache, prefix: str) -> CacheEntry:
    try:
        return cache.resolve(prefix)
    except KeyError as e:
        raise CLIError(str(e)) from None


def _entry_record(e: CacheEntry) -> dict:
    """What ``cache list --json`` says of one entry."""
    m = e.meta
    static, dynamic = shared_memory(m)
    return {
        "key": e.key, "kernel": m.get("kernel"), "qualname": m.get("qualname"), "arch": m.get("arch"),
        "signature": m.get("signature"), "constexprs": m.get("constexprs") or {}, "block": m.get("maxntid"),
        "registers": m.get("registers"), "spill_store_bytes": m.get("spill_store_bytes"),
        "spill_load_bytes": m.get("spill_load_bytes"),
        "shared_bytes": {"static": static, "dynamic": dynamic, "total": static + dynamic},
        "cubin_bytes": m.get("cubin_bytes"), "compile_ms": compile_ms_total(m.get("compile_ms")),
        "last_used": e.last_used, "size_bytes": e.size, "path": str(e.path) if e.path is not None else None,
    }


def _matches(e: CacheEntry, pattern: str | None) -> bool:
    if not pattern:
        return True
    names = [str(e.meta.get("kernel") or ""), str(e.meta.get("qualname") or "")]
    return any(fnmatch.fnmatchcase(n, pattern) for n in names if n)


def cmd_cache_list(args) -> int:
    cache = checked_cache(default_cache())
    entries = [e for e in cache.entries() if _matches(e, args.kernel)]
    entries.sort(key=lambda e: e.last_used, reverse=True)
    tuned = list_tuned(kernel=args.kernel)
    if args.json:
        print(json.dumps({"cache": str(cache.root), "disk": not cache.memory_only,
                          "entries": [_entry_record(e) for e in entries],
                          "tuned": [r.to_json() for r in tuned]}, indent=2, default=str))
        return 0
    if not entries:
        what = f"no entry for kernel {args.kernel!r}" if args.kernel else "cache is empty"
        print(f"{what} ({cache_location(cache)})")
        _print_tuned(tuned)
        return 0
    now = time.time()
    headers = ["KEY", "KERNEL", "ARCH", "SIGNATURE", "CONSTEXPRS", "BLOCK", "REGS", "SPILLS", "SHARED",
               "CUBIN", "COMPILE", "LAST USED"]
    rows = []
    total = 0
    for e in entries:
        m = e.meta
        size = e.size
        total += size
        cubin = m.get("cubin_bytes")
        rows.append([
            e.key[:12],
            str(m.get("kernel") or "?"),
            str(m.get("arch") or "-"),
            truncate(str(m.get("signature") or "-"), 48),
            truncate(constexprs_cell(m), 40),
            block_cell(m),
            num(m.get("registers")),
            spills(m),
            fmt_bytes(sum(shared_memory(m))),   # what a launch uses: static + dynamic
            fmt_bytes(cubin) if cubin is not None else "-",
            fmt_ms(m.get("compile_ms")),
            fmt_ago(e.last_used, now),
        ])
    print(table(headers, rows, right={6, 7, 8, 9, 10}))
    n = len(entries)
    print(f"\n{n} entr{'y' if n == 1 else 'ies'}, {fmt_bytes(total)} in {cache_location(cache)}")
    _print_tuned(tuned)
    return 0


def _print_tuned(tuned) -> None:
    """The autotuner's stored choices (tylo.autotune), with every config's timing."""
    if tuned:
        print("\ntuned kernels:\n" + format_tuned(tuned))


def cmd_cache_show(args) -> int:
    entry = _resolve(checked_cache(default_cache()), args.key)
    meta = dict(entry.meta)
    if not meta:
        raise CLIError(f"cache entry {entry.key[:12]} has no readable meta.json ({entry.path})")
    if args.json:
        print(json.dumps(meta, indent=2, sort_keys=False, default=str))
        return 0
    static, dynamic = shared_memory(meta)
    rows = [
        ("key", entry.key), ("kernel", f"{meta.get('qualname') or meta.get('kernel')}"),
        ("source", f"{meta.get('source_file', '-')}:{meta.get('source_line', '-')}"),
        ("arch", str(meta.get("arch", "-"))), ("signature", str(meta.get("signature", "-"))),
        ("constexprs", constexprs_cell(meta)), ("block", block_cell(meta)),
        ("registers", num(meta.get("registers"))),
        ("spills", f"{num(meta.get('spill_store_bytes'))} bytes stored, {num(meta.get('spill_load_bytes'))} "
                   f"bytes loaded"),
        ("shared memory", f"{static + dynamic} bytes (static {static} + dynamic {dynamic})"),
        ("cubin", f"{num(meta.get('cubin_bytes'))} bytes"), ("compile time", fmt_ms(meta.get("compile_ms"))),
        ("last used", fmt_ago(entry.last_used)), ("path", str(entry.path) if entry.path else "(in memory)"),
        ("files", ", ".join(sorted(meta.get("files") or {})) or "-"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
    return 0


def cmd_cache_dump(args) -> int:
    cache = checked_cache(default_cache())
    entry = _resolve(cache, args.key)
    verified = cache.lookup(entry.key, touch=False)
    if verified is None:
        raise CLIError(f"cache entry {entry.key[:12]} was corrupt and has been removed")
    if args.stage == "sass":
        print(_sass(verified), end="")
        return 0
    fname = STAGE_FILES[args.stage]
    try:
        text = verified.read(fname).decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise CLIError(f"cache entry {entry.key[:12]} has no {fname} (stage {args.stage})") from None
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    return 0


def _sass(entry: CacheEntry) -> str:
    cmd = disasm.find_disassembler()
    if cmd is None:
        raise CLIError(disasm.NVDISASM_MISSING)
    try:
        cubin = entry.cubin
    except FileNotFoundError:
        raise CLIError(f"cache entry {entry.key[:12]} has no kernel.cubin") from None
    with tempfile.TemporaryDirectory(prefix="tylo-sass-") as d:
        path = Path(d) / "kernel.cubin"
        path.write_bytes(cubin)
        proc = subprocess.run(cmd + [str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise CLIError(f"{Path(cmd[0]).name} failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def cmd_cache_clear(args) -> int:
    cache = checked_cache(default_cache())
    chosen = [x for x in (args.key is not None, args.all, args.older_than is not None) if x]
    if len(chosen) != 1:
        raise UsageError("give exactly one of KEY, --all or --older-than DAYS")
    if args.key is not None:
        entry = _resolve(cache, args.key)
        cache.remove(entry.key)
        print(f"removed {entry.key[:12]} ({entry.meta.get('kernel', '?')})")
        return 0
    if args.older_than is not None and args.older_than < 0:
        raise UsageError("--older-than DAYS must be >= 0")
    n = cache.clear(all=args.all, older_than_days=args.older_than)
    t = clear_tuned(older_than_days=None if args.all else args.older_than)
    print(f"removed {n} entr{'y' if n == 1 else 'ies'} and {t} tuning record{'' if t == 1 else 's'} "
          f"from {cache_location(cache)}")
    return 0


def cmd_cache_path(args) -> int:
    cache = default_cache()
    if args.key is not None:
        entry = _resolve(cache, args.key)
        print(entry.path if entry.path is not None else "(in memory)")
        return 0
    print(cache.root)
    if not cache.enabled:
        print("note: the disk cache is disabled (TYLO_CACHE=0)", file=sys.stderr)
    return 0
