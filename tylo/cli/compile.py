"""``tylo compile FILE.py:KERNEL``: ahead-of-time compilation into the cache."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import sys
import threading
import time
import traceback
from pathlib import Path

from .errors import CLIError, UsageError
from .formatting import compile_ms_total, num

__all__ = ["cmd_compile", "parse_block"]


_CLI_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


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
              if not f.filename.startswith(_CLI_DIR) and not f.filename.startswith("<frozen ")]
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

        digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
        name = f"_tylo_cli_{stem if stem.isidentifier() else 'm'}_" + digest
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
    progress = _Progress(f"compiling {kernel_name} for {kwargs.get('arch') or 'its default arch'}")
    try:
        with progress:
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

    _print_compiled(compiled, args.block)
    return 0


def _print_compiled(c, block=None) -> None:
    res = getattr(c, "resources", None)

    def r(name):
        return getattr(res, name, None) if res is not None else None

    name = getattr(c, "name", "?")
    arch = getattr(c, "arch", "?")
    sig = getattr(c, "signature", "")
    print(f"compiled {name} for {arch}")
    rows = [
        ("signature", str(sig)),
        ("block", "x".join(map(str, block)) if block else
         "none (launches always give a block: pass --block for a launch to hit this entry)"),
        ("registers", num(r("registers"))),
        ("spills", f"{num(r('spill_store_bytes'))} bytes stored, {num(r('spill_load_bytes'))} bytes loaded"),
        ("stack", f"{num(r('stack_bytes'))} bytes"),
        ("shared memory", _shared_text(c)),
    ]
    cubin = getattr(c, "cubin", None)
    if isinstance(cubin, (bytes, bytearray)):
        rows.append(("cubin", f"{len(cubin)} bytes"))
    ms = getattr(c, "compile_ms", None)
    if compile_ms_total(ms) is not None:
        rows.append(("compile time", f"{compile_ms_total(ms):.1f} ms"))
    rows.append(("cache key", f"{getattr(c, 'key', '?')}{_stored_note(c)}"))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k.ljust(width)}  {v}")


class _Progress:
    """Says on stderr that a compile is running once it has taken PROGRESS_AFTER_S seconds, then
    every PROGRESS_EVERY_S with the time so far (WGMMA kernels can take minutes in nvJitLink)."""

    def __init__(self, what: str):
        self.what = what
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        start = time.monotonic()
        wait = PROGRESS_AFTER_S
        while not self.done.wait(wait):
            print(f"{self.what}... {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
            wait = PROGRESS_EVERY_S

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()
        return False


PROGRESS_AFTER_S = 2.0
PROGRESS_EVERY_S = 10.0


def _shared_text(c) -> str:
    """Static + dynamic: what a launch uses (nvJitLink reports only the static part)."""
    static = getattr(getattr(c, "resources", None), "shared_bytes", 0) or 0
    dynamic = getattr(c, "shared_bytes", 0) or 0
    if not isinstance(static, int) or not isinstance(dynamic, int):
        return "-"
    return f"{static + dynamic} bytes (static {static} + dynamic {dynamic})"


def _stored_note(c) -> str:
    """Say where the entry is, or that it is not stored (TYLO_CACHE=0, an unusable folder)."""
    from tylo.cache.disk import default_cache

    cache = default_cache()
    if getattr(c, "from_cache", False):
        return " (loaded from the cache)"
    if not cache.enabled:
        return " (not stored: the disk cache is disabled by TYLO_CACHE=0)"
    if cache.fallback_reason:
        return f" (not stored: {cache.fallback_reason})"
    return ""


def parse_block(text: str) -> tuple:
    try:
        dims = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected X[,Y[,Z]] positive ints, got {text!r}") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(f"expected 1 to 3 positive ints, got {text!r}")
    return dims
