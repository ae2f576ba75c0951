"""The ``tylo`` command: cache inspection, ahead-of-time compilation, versions.

    tylo cache list | show KEY | dump KEY --stage ir|llvm|ptx|sass
    tylo cache clear KEY | --all | --older-than DAYS
    tylo cache path [KEY]
    tylo compile FILE.py:KERNEL --signature SIG [--arch sm_90a] [--constexpr NAME=VALUE ...]
    tylo info

``main(argv)`` returns the exit status: 0 on success, 1 for errors (unknown key,
compile error, missing tool), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from tylo.cache.disk import STAGE_FILES, CacheEntry, DiskCache, default_cache

NVDISASM_MISSING = (
    "nvdisasm not found; it ships in the pip package nvidia-cuda-nvdisasm "
    "(pip install nvidia-cuda-nvdisasm) or the CUDA toolkit"
)


class CLIError(Exception):
    """An error reported as ``error: message`` with exit status 1 (``raw``: the
    message alone, for compile errors that already say ``file:line:col: error:``)."""

    def __init__(self, message: str, raw: bool = False):
        super().__init__(message)
        self.raw = raw


class UsageError(Exception):
    """Bad usage found after parsing; reported like argparse's errors (exit 2)."""


# ---------------------------------------------------------------------------
# formatting helpers


def _fmt_bytes(n) -> str:
    if not isinstance(n, (int, float)) or isinstance(n, bool):
        return "-"
    if n < 1024:
        return f"{int(n)} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024.0
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"
    return f"{n:.1f} GiB"  # pragma: no cover


def _fmt_ago(t: float, now: float | None = None) -> str:
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


def _num(v) -> str:
    if isinstance(v, bool) or v is None:
        return "-"
    if isinstance(v, (int, float)):
        return str(int(v)) if float(v).is_integer() else f"{v:g}"
    return "-"


def _compile_ms_total(v) -> float | None:
    if isinstance(v, dict):
        v = v.get("total")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return None


def _fmt_ms(v) -> str:
    total = _compile_ms_total(v)
    if total is None:
        return "-"
    return f"{total:.0f} ms" if total >= 100 else f"{total:.1f} ms"


def _spills(meta: dict) -> str:
    st, ld = meta.get("spill_store_bytes"), meta.get("spill_load_bytes")
    if st is None and ld is None:
        return "-"
    return f"{_num(st)}/{_num(ld)}"


def _signature_cell(meta: dict) -> str:
    sig = str(meta.get("signature") or "-")
    ce = meta.get("constexprs")
    if isinstance(ce, dict) and ce:
        sig += " | " + ", ".join(f"{k}={v}" for k, v in ce.items())
    return sig


def _truncate(s: str, width: int) -> str:
    return s if len(s) <= width else s[: width - 3] + "..."


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> str:
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


def _cache_location(cache: DiskCache) -> str:
    if not cache.enabled:
        return f"{cache.root} (disabled by TYLO_CACHE=0: memory only)"
    return str(cache.root)


# ---------------------------------------------------------------------------
# tylo cache ...


def _resolve(cache: DiskCache, prefix: str) -> CacheEntry:
    try:
        return cache.resolve(prefix)
    except KeyError as e:
        raise CLIError(str(e)) from None


def cmd_cache_list(args) -> int:
    cache = default_cache()
    entries = cache.entries()
    if not entries:
        print(f"cache is empty ({_cache_location(cache)})")
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
            _truncate(_signature_cell(m), 56),
            _num(m.get("registers")),
            _spills(m),
            _fmt_bytes(m.get("shared_bytes")),
            _fmt_bytes(cubin) if cubin is not None else "-",
            _fmt_ms(m.get("compile_ms")),
            _fmt_ago(e.last_used, now),
        ])
    print(_table(headers, rows, right={4, 5, 6, 7, 8}))
    n = len(entries)
    print(f"\n{n} entr{'y' if n == 1 else 'ies'}, {_fmt_bytes(total)} in {_cache_location(cache)}")
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


def find_disassembler() -> list[str] | None:
    """The command that prints SASS for a cubin path appended to it, or None.

    Looks for nvdisasm on PATH, then inside the pip package
    nvidia-cuda-nvdisasm, then for ``cuobjdump -sass`` on PATH.
    """
    exe = shutil.which("nvdisasm")
    if exe:
        return [exe, "-c"]
    exe = _nvdisasm_from_pip()
    if exe:
        return [exe, "-c"]
    exe = shutil.which("cuobjdump")
    if exe:
        return [exe, "-sass"]
    return None


def _nvdisasm_from_pip() -> str | None:
    try:
        from importlib import metadata

        files = metadata.files("nvidia-cuda-nvdisasm") or []
    except Exception:
        return None
    for f in files:
        if f.name == "nvdisasm" and f.parent.name == "bin":
            try:
                path = Path(f.locate())
            except Exception:
                continue
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
    return None


def _sass(entry: CacheEntry) -> str:
    cmd = find_disassembler()
    if cmd is None:
        raise CLIError(NVDISASM_MISSING)
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
    print(f"removed {n} entr{'y' if n == 1 else 'ies'} from {_cache_location(cache)}")
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


# ---------------------------------------------------------------------------
# tylo info


def _tylo_version() -> str:
    try:
        import tylo

        v = getattr(tylo, "__version__", None)
        if v:
            return str(v)
    except Exception:
        pass
    try:
        from importlib import metadata

        return metadata.version("tylo") + " (installed metadata)"
    except Exception:
        return "unknown"


def _fmt_driver_version(v) -> str:
    if isinstance(v, int) and not isinstance(v, bool) and v >= 1000:
        return f"{v // 1000}.{(v % 1000) // 10} ({v})"
    if isinstance(v, (tuple, list)):
        return ".".join(str(x) for x in v)
    return str(v)


def _fmt_device(d) -> str:
    if isinstance(d, dict):
        get = d.get
    else:
        def get(name, default=None):
            return getattr(d, name, default)
    name = get("name")
    if name is None:
        return str(d)
    parts = []
    arch = get("arch")
    cc = get("compute_capability") or get("cc")
    if arch:
        parts.append(str(arch))
    elif isinstance(cc, (tuple, list)) and len(cc) == 2:
        parts.append(f"sm_{cc[0]}{cc[1]}")
    elif cc:
        parts.append(str(cc))
    mem = get("total_memory") or get("memory") or get("total_mem")
    if isinstance(mem, int) and not isinstance(mem, bool):
        parts.append(_fmt_bytes(mem))
    sms = get("multiprocessors") or get("sm_count")
    if isinstance(sms, int):
        parts.append(f"{sms} SMs")
    smem = get("max_shared_memory_per_block_optin")
    if isinstance(smem, int) and smem:
        parts.append(f"{_fmt_bytes(smem)} shared/block")
    return f"{name}" + (f" ({', '.join(parts)})" if parts else "")


def cmd_info(args) -> int:
    rows: list[tuple[str, str]] = []
    rows.append(("tylo", _tylo_version()))
    rows.append(("python", f"{platform.python_version()} ({sys.executable})"))
    try:
        import llvmlite
        import llvmlite.binding as llvm

        llvm_v = ".".join(str(x) for x in llvm.llvm_version_info)
        rows.append(("llvmlite", f"{llvmlite.__version__} (LLVM {llvm_v})"))
    except Exception as e:
        rows.append(("llvmlite", f"unavailable ({type(e).__name__}: {e})"))
    try:
        from .codegen import nvjitlink

        if not nvjitlink.available():
            raise RuntimeError("libnvJitLink not found (pip install nvidia-nvjitlink)")
        rows.append(("nvJitLink", ".".join(str(x) for x in nvjitlink.version())))
    except Exception as e:
        rows.append(("nvJitLink", f"unavailable ({type(e).__name__}: {e})"))
    try:
        from importlib import metadata

        rows.append(("cuda-bindings", metadata.version("cuda-bindings")))
    except Exception:
        try:
            import cuda.bindings

            rows.append(("cuda-bindings", str(getattr(cuda.bindings, "__version__", "unknown"))))
        except Exception as e:
            rows.append(("cuda-bindings", f"unavailable ({type(e).__name__})"))
    dis = find_disassembler()
    rows.append(("disassembler", " ".join(dis) if dis else "not found (pip install nvidia-cuda-nvdisasm)"))

    device_lines: list[str] = []
    try:
        from tylo.runtime import driver as rt

        if rt.gpu_available():
            rows.append(("driver", _fmt_driver_version(rt.driver_version())))
            devs = list(rt.devices())
            rows.append(("devices", str(len(devs))))
            device_lines = [f"  {i}: {_fmt_device(d)}" for i, d in enumerate(devs)]
        else:
            rows.append(("driver", "no GPU available"))
    except (ImportError, AttributeError) as e:
        rows.append(("driver", f"unknown (tylo.runtime.driver not available: {e})"))
    except Exception as e:
        rows.append(("driver", f"no GPU ({type(e).__name__}: {e})"))

    cache = default_cache()
    state = ""
    if cache.enabled:
        n = len(cache.keys())
        state = f" ({n} entr{'y' if n == 1 else 'ies'})"
    rows.append(("cache", _cache_location(cache) + state))

    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
        if k == "devices":
            for line in device_lines:
                print(line)
    return 0


# ---------------------------------------------------------------------------
# tylo compile


def _parse_assignments(items: list[str] | None, flag: str) -> dict:
    out: dict = {}
    for item in items or []:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise UsageError(f"{flag} expects NAME=VALUE, got {item!r}")
        if name in out:
            raise UsageError(f"{flag} {name} given twice")
        raw = raw.strip()
        out[name] = _constexpr_value(raw)
    return out


def _constexpr_value(raw: str):
    """A Python literal; a tylo dtype name (``f16``, ``bf16``, ``f8e4m3``...) is that dtype (write
    ``'"f16"'`` for the string); any other text is kept as a string."""
    from tylo.ir.types import SCALAR_TYPES

    if raw in SCALAR_TYPES:
        return SCALAR_TYPES[raw]
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return raw


def _is_compile_error(e: BaseException) -> bool:
    try:
        from tylo.frontend.errors import CompileError  # type: ignore

        if isinstance(e, CompileError):
            return True
    except Exception:
        pass
    if any(c.__name__ == "CompileError" for c in type(e).__mro__):
        return True
    return hasattr(e, "filename") and hasattr(e, "lineno") and not isinstance(e, OSError)


def _compile_error_message(e: BaseException) -> str:
    msg = str(e)
    filename, lineno = getattr(e, "filename", None), getattr(e, "lineno", None)
    if isinstance(e, SyntaxError):
        return f"{filename}:{lineno}: error: {type(e).__name__}: {getattr(e, 'msg', msg)}"
    if filename and lineno and f"{filename}:{lineno}" not in msg:
        msg = f"{filename}:{lineno}: error: {msg}"
    elif "error" not in msg.split("\n", 1)[0]:
        msg = f"error: {msg}"
    return msg


def _user_traceback(e: BaseException) -> str:
    """The traceback of ``e`` without the frames of this module and of importlib."""
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if f.filename != __file__ and not f.filename.startswith("<frozen ")]
    lines = ["Traceback (most recent call last):\n"] if frames else []
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(e), e)
    return "".join(lines).rstrip()


def _same_file_or_free(name: str, path: Path) -> bool:
    mod = sys.modules.get(name)
    if mod is None:
        return True
    f = getattr(mod, "__file__", None)
    try:
        return f is not None and Path(f).resolve() == path
    except OSError:
        return False


def _load_module(path: Path):
    # The module name is part of what tylo hashes for the cache key, so it must be
    # the same every time the same file is compiled: the file's stem, unless that
    # names another module already imported (e.g. a file called json.py).
    stem = path.stem
    name = stem
    if not stem.isidentifier() or not _same_file_or_free(stem, path):
        import hashlib

        name = f"_tylo_cli_{stem if stem.isidentifier() else 'm'}_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CLIError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(path.parent)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:
            pass
    return module


def _option_kwargs(compile_fn, options: dict) -> dict:
    """``--option`` values as keyword arguments of ``compile_fn``: those named like
    one of its parameters go as that argument, the rest in ``options=`` when it
    takes one."""
    import inspect

    try:
        params = inspect.signature(compile_fn).parameters
    except (TypeError, ValueError):
        return {"options": options}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    reserved = {"signature", "arch", "constexprs", "options", "block"}
    out: dict = {}
    rest: dict = {}
    for name, value in options.items():
        if name in params and name not in reserved:
            out[name] = value
        else:
            rest[name] = value
    if rest:
        if "options" in params or takes_any:
            out["options"] = rest
        else:
            accepted = [n for n in params if n not in reserved and n != "self"]
            hint = f" (it accepts: {', '.join(accepted)})" if accepted else ""
            raise UsageError(f"--option {', '.join(rest)}: the kernel's compile() takes no such option{hint}")
    return out


def cmd_compile(args) -> int:
    target = args.target
    file_part, sep, kernel_name = target.rpartition(":")
    if not sep or not file_part or not kernel_name:
        raise UsageError(f"expected FILE.py:KERNEL, got {target!r}")
    constexprs = _parse_assignments(args.constexpr, "--constexpr")
    options = _parse_assignments(args.option, "--option")
    path = Path(file_part).expanduser()
    if not path.is_file():
        raise CLIError(f"no such file: {path}")
    path = path.resolve()

    try:
        module = _load_module(path)
    except SystemExit:
        raise CLIError(f"importing {path} called sys.exit()") from None
    except Exception as e:
        if _is_compile_error(e):
            raise CLIError(_compile_error_message(e), raw=True) from None
        raise CLIError(f"importing {path} failed:\n{_user_traceback(e)}") from None

    if not hasattr(module, kernel_name):
        kernels = sorted(n for n, v in vars(module).items()
                         if not n.startswith("_") and hasattr(v, "compile") and not isinstance(v, type))
        hint = f"; tylo kernels there: {', '.join(kernels)}" if kernels else ""
        raise CLIError(f"{path} has no attribute {kernel_name!r}{hint}")
    kernel = getattr(module, kernel_name)
    if not hasattr(kernel, "compile") or isinstance(kernel, type):
        raise CLIError(f"{kernel_name} in {path} is not a tylo kernel (decorate it with @tylo.jit)")

    kwargs: dict = {"signature": args.signature, "constexprs": constexprs}
    if args.arch is not None:
        kwargs["arch"] = args.arch
    if args.block is not None:
        kwargs["block"] = args.block
    if options:
        kwargs.update(_option_kwargs(kernel.compile, options))
    try:
        compiled = kernel.compile(**kwargs)
    except Exception as e:
        if _is_compile_error(e):
            raise CLIError(_compile_error_message(e), raw=True) from None
        if args.traceback:
            traceback.print_exc()
        if isinstance(e, (ValueError, TypeError, KeyError)):
            # tylo reports wrong arguments (signature, arch, constexprs) this way
            raise CLIError(e.args[0] if isinstance(e, KeyError) and e.args else str(e)) from None
        if not args.traceback:
            traceback.print_exc()
        raise CLIError(f"internal error while compiling {kernel_name}: {type(e).__name__}: {e}") from None

    _print_compiled(compiled)
    return 0


def _print_compiled(c) -> None:
    res = getattr(c, "resources", None)

    def r(name):
        return getattr(res, name, None) if res is not None else None

    name = getattr(c, "name", "?")
    arch = getattr(c, "arch", "?")
    sig = getattr(c, "signature", "")
    print(f"compiled {name} for {arch}")
    rows = [
        ("signature", str(sig)),
        ("registers", _num(r("registers"))),
        ("spills", f"{_num(r('spill_store_bytes'))} bytes stored, {_num(r('spill_load_bytes'))} bytes loaded"),
        ("stack", f"{_num(r('stack_bytes'))} bytes"),
        ("shared memory", f"{_num(r('shared_bytes'))} bytes"),
    ]
    cubin = getattr(c, "cubin", None)
    if isinstance(cubin, (bytes, bytearray)):
        rows.append(("cubin", f"{len(cubin)} bytes"))
    ms = getattr(c, "compile_ms", None)
    if _compile_ms_total(ms) is not None:
        rows.append(("compile time", f"{_compile_ms_total(ms):.1f} ms"))
    rows.append(("cache key", str(getattr(c, "key", "?"))))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k.ljust(width)}  {v}")


# ---------------------------------------------------------------------------
# parser and entry point


def _block_arg(text: str) -> tuple:
    try:
        dims = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected X[,Y[,Z]] positive ints, got {text!r}") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(f"expected 1 to 3 positive ints, got {text!r}")
    return dims


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tylo",
        description="tylo: a JIT compiler for layout-typed NVIDIA GPU kernels.",
        epilog="environment: TYLO_CACHE_DIR (cache folder, default ~/.cache/tylo), "
               "TYLO_CACHE=0 (keep compiled kernels in memory only)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p_cache = sub.add_parser("cache", help="inspect and clear the kernel cache",
                             description="Inspect and clear the on-disk kernel cache "
                                         "($TYLO_CACHE_DIR, default ~/.cache/tylo).")
    csub = p_cache.add_subparsers(dest="cache_command", metavar="ACTION", required=True)

    p = csub.add_parser("list", help="one row per cached kernel")
    p.set_defaults(func=cmd_cache_list, _parser=p)

    p = csub.add_parser("show", help="print an entry's meta.json")
    p.add_argument("key", metavar="KEY", help="cache key or a unique prefix of it")
    p.set_defaults(func=cmd_cache_show, _parser=p)

    p = csub.add_parser("dump", help="print an entry's IR, LLVM IR, PTX or SASS")
    p.add_argument("key", metavar="KEY", help="cache key or a unique prefix of it")
    p.add_argument("--stage", choices=["ir", "llvm", "ptx", "sass"], default="ptx",
                   help="what to print (default: ptx); sass needs nvdisasm or cuobjdump")
    p.set_defaults(func=cmd_cache_dump, _parser=p)

    p = csub.add_parser("clear", help="remove one entry, all entries, or old ones")
    p.add_argument("key", metavar="KEY", nargs="?", help="remove this entry (key or unique prefix)")
    p.add_argument("--all", action="store_true", help="remove every entry")
    p.add_argument("--older-than", type=float, metavar="DAYS",
                   help="remove entries last used more than DAYS days ago")
    p.set_defaults(func=cmd_cache_clear, _parser=p)

    p = csub.add_parser("path", help="print the cache folder (or an entry's folder)")
    p.add_argument("key", metavar="KEY", nargs="?", help="print this entry's folder instead")
    p.set_defaults(func=cmd_cache_path, _parser=p)

    p = sub.add_parser("compile", help="compile a kernel ahead of time into the cache",
                       description="Compile FILE.py:KERNEL for one signature and print its "
                                   "resource usage and cache key.")
    p.add_argument("target", metavar="FILE.py:KERNEL")
    p.add_argument("--signature", required=True, metavar="SIG",
                   help='runtime argument types, e.g. "*f32:16, *f32:16, i32:16, f32" (*T:16: 16-byte '
                        'aligned pointer; i32:16: divisible by 16; i32=1: equal to 1)')
    p.add_argument("--arch", metavar="ARCH", help="target, e.g. sm_80, sm_90a, sm_100a")
    p.add_argument("--block", type=_block_arg, metavar="X[,Y[,Z]]",
                   help="the launch's block shape; a launch kernel[grid, block] hits this entry only "
                        "when it is the same (default: none, entry for compile() without block)")
    p.add_argument("--constexpr", action="append", metavar="NAME=VALUE",
                   help="value of a tylo.constexpr parameter: a Python literal or a dtype name "
                        "(OUT=f16); repeatable")
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="compiler option (Python literal); repeatable")
    p.add_argument("--traceback", action="store_true", help="show tracebacks of errors")
    p.set_defaults(func=cmd_compile, _parser=p)

    p = sub.add_parser("info", help="versions of tylo and its toolchain, GPUs, cache folder")
    p.set_defaults(func=cmd_info, _parser=p)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    try:
        return int(args.func(args) or 0)
    except UsageError as e:
        # Report it as argparse would: usage line, then "PROG: error: ...".
        p = getattr(args, "_parser", parser)
        p.print_usage(sys.stderr)
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return 2
    except CLIError as e:
        print(str(e) if e.raw else f"error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
