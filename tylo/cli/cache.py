"""``tylo cache list | show | dump | clear | path``."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tylo.cache.disk import STAGE_FILES, CacheEntry, DiskCache, default_cache

from . import disasm
from .errors import CLIError, UsageError
from .formatting import cache_location, fmt_ago, fmt_bytes, fmt_ms, num, signature_cell, spills, table, truncate

__all__ = ["cmd_cache_list", "cmd_cache_show", "cmd_cache_dump", "cmd_cache_clear", "cmd_cache_path"]


def _resolve(cache: DiskCache, prefix: str) -> CacheEntry:
    try:
        return cache.resolve(prefix)
    except KeyError as e:
        raise CLIError(str(e)) from None


def cmd_cache_list(args) -> int:
    cache = default_cache()
    entries = cache.entries()
    if not entries:
        print(f"cache is empty ({cache_location(cache)})")
        return 0
    now = time.time()
    entries.sort(key=lambda e: e.last_used, reverse=True)
    headers = ["KEY", "KERNEL", "ARCH", "SIGNATURE | CONSTEXPRS", "REGS", "SPILLS", "SHARED",
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
            truncate(signature_cell(m), 56),
            num(m.get("registers")),
            spills(m),
            fmt_bytes(m.get("shared_bytes")),
            fmt_bytes(cubin) if cubin is not None else "-",
            fmt_ms(m.get("compile_ms")),
            fmt_ago(e.last_used, now),
        ])
    print(table(headers, rows, right={4, 5, 6, 7, 8}))
    n = len(entries)
    print(f"\n{n} entr{'y' if n == 1 else 'ies'}, {fmt_bytes(total)} in {cache_location(cache)}")
    return 0


def cmd_cache_show(args) -> int:
    entry = _resolve(default_cache(), args.key)
    meta = dict(entry.meta)
    if not meta:
        raise CLIError(f"cache entry {entry.key[:12]} has no readable meta.json ({entry.path})")
    print(json.dumps(meta, indent=2, sort_keys=False, default=str))
    return 0


def cmd_cache_dump(args) -> int:
    cache = default_cache()
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
    cache = default_cache()
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
    print(f"removed {n} entr{'y' if n == 1 else 'ies'} from {cache_location(cache)}")
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
