"""Text formatting shared by the ``tylo`` commands: sizes, ages, times, tables."""

from __future__ import annotations

import time

from tylo.cache.disk import DiskCache

__all__ = ["fmt_bytes", "fmt_ago", "num", "compile_ms_total", "fmt_ms", "spills", "signature_cell", "truncate",
           "table", "cache_location", "shared_memory", "constexprs_cell", "block_cell", "checked_cache"]


def fmt_bytes(n) -> str:
    if not isinstance(n, (int, float)) or isinstance(n, bool):
        return "-"
    if n < 1024:
        return f"{int(n)} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024.0
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"
    return f"{n:.1f} GiB"


def fmt_ago(t: float, now: float | None = None) -> str:
    if not t:
        return "-"
    d = (time.time() if now is None else now) - t
    if d < 0:
        d = 0
    if d < 60:
        return "just now"
    if d < 3600:
        return f"{int(d // 60)} min ago"
    if d < 86400:
        return f"{int(d // 3600)} h ago"
    if d < 86400 * 60:
        return f"{int(d // 86400)} d ago"
    return time.strftime("%Y-%m-%d", time.localtime(t))


def num(v) -> str:
    if isinstance(v, bool) or v is None:
        return "-"
    if isinstance(v, (int, float)):
        return str(int(v)) if float(v).is_integer() else f"{v:g}"
    return "-"


def compile_ms_total(v) -> float | None:
    if isinstance(v, dict):
        v = v.get("total")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return None


def fmt_ms(v) -> str:
    total = compile_ms_total(v)
    if total is None:
        return "-"
    return f"{total:.0f} ms" if total >= 100 else f"{total:.1f} ms"


def spills(meta: dict) -> str:
    st, ld = meta.get("spill_store_bytes"), meta.get("spill_load_bytes")
    if st is None and ld is None:
        return "-"
    return f"{num(st)}/{num(ld)}"


def signature_cell(meta: dict) -> str:
    sig = str(meta.get("signature") or "-")
    ce = meta.get("constexprs")
    if isinstance(ce, dict) and ce:
        sig += " | " + ", ".join(f"{k}={v}" for k, v in ce.items())
    return sig


def truncate(s: str, width: int) -> str:
    return s if len(s) <= width else s[: width - 3] + "..."


def table(headers: list[str], rows: list[list[str]], right: set[int]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells):
        out = []
        for i, cell in enumerate(cells):
            out.append(cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]))
        return "  ".join(out).rstrip()

    return "\n".join([line(headers)] + [line(r) for r in rows])


def cache_location(cache: DiskCache) -> str:
    if not cache.enabled:
        return f"{cache.root} (disabled by TYLO_CACHE=0: memory only)"
    return str(cache.root)


def shared_memory(meta: dict) -> tuple[int, int]:
    """(static, dynamic) shared bytes of an entry: what a launch uses is their sum."""
    def as_int(v):
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0
    return as_int(meta.get("shared_bytes")), as_int(meta.get("dynamic_shared_bytes"))


def constexprs_cell(meta: dict) -> str:
    ce = meta.get("constexprs")
    if isinstance(ce, dict) and ce:
        return ", ".join(f"{k}={v}" for k, v in ce.items())
    return "-"


def block_cell(meta: dict) -> str:
    b = meta.get("maxntid")
    if isinstance(b, list) and b:
        while len(b) > 1 and b[-1] == 1:
            b = b[:-1]
        return "x".join(str(v) for v in b)
    return "-"


def checked_cache(cache: DiskCache) -> DiskCache:
    """``cache``, or a CLIError when its folder cannot hold entries (TYLO_CACHE_DIR=/etc/passwd)."""
    from .errors import CLIError

    problem = cache.root_problem()
    if problem:
        raise CLIError(f"cache folder {problem}; set TYLO_CACHE_DIR to a folder")
    return cache
