"""Loading (and, when needed, building) the native launcher, ``tylo.runtime._native_launch``.

The extension (``native_launch.c``, CPython stable ABI: one build serves Python 3.10+) takes a
cached launch from ``kernel[grid, block](*args)`` to ``cuLaunchKernel`` without running Python
bytecode; the ctypes ``Launcher`` of ``launch.py`` stays the reference and the fallback.

Where the module comes from, first found wins:

1. ``tylo/runtime/_native_launch.abi3.so`` next to this file: built by ``pip install`` (setup.py's
   optional extension) or in place by ``python scripts/build_native.py``;
2. the same file of an installed tylo elsewhere on ``sys.path`` when it was built from this very
   source (tests run from a source tree after ``pip install .``, as CI does);
3. a copy built on first use into ``<build_dir>/<digest of the C source>/`` with the C compiler and
   Python headers of this machine (``build()``; the JIT passes ``$TYLO_CACHE_DIR/native``), as
   Triton builds its launchers. A source tree run with PYTHONPATH and no install gets it this way.

A module built from another version of ``native_launch.c`` (its ``SOURCE_DIGEST``) is not used.
When neither works, launches go through ctypes and one warning says why. ``TYLO_NATIVE_LAUNCH=0``
turns the native launcher off (no warning).
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import warnings
from pathlib import Path

__all__ = ["load", "load_file", "build", "status", "default_build_dir", "compile_macros", "compiler_command",
           "source_path", "source_digest", "MODULE_NAME", "KNOB"]

MODULE_NAME = "tylo.runtime._native_launch"
KNOB = "TYLO_NATIVE_LAUNCH"
_SUFFIX = ".abi3.so"
_LIMITED_API = "0x030A0000"

_lock = threading.Lock()
_state: dict = {}


def source_path() -> Path:
    return Path(__file__).with_name("native_launch.c")


def source_digest() -> str:
    """sha256 of native_launch.c (a built module carries the digest of its source)."""
    return hashlib.sha256(source_path().read_bytes()).hexdigest()


def _enabled() -> bool:
    value = os.environ.get(KNOB, "").strip().lower()
    if value in ("0", "false", "no", "off"):
        return False
    if value in ("", "1", "true", "yes", "on"):
        return True
    raise ValueError(f"{KNOB}={os.environ[KNOB]!r}: expected 1 or 0 (true/false, yes/no, on/off)")


_DEFAULT = object()


def load(build_dir=_DEFAULT):
    """The native module, or None (knob off, or it cannot be loaded: one warning per process).
    The first call decides for the process; ``build_dir`` is where a missing module is built
    (default ``$TYLO_CACHE_DIR/native``, else ``~/.cache/tylo/native``; None: never build)."""
    if "module" in _state:
        return _state["module"]
    with _lock:
        if "module" in _state:
            return _state["module"]
        module, why = None, None
        if not _enabled():
            why = f"{KNOB}=0"
        else:
            module, why = _find(default_build_dir() if build_dir is _DEFAULT else build_dir)
            if module is None:
                warnings.warn(f"tylo: the native launcher is not available ({why}); kernels launch through "
                              f"ctypes, a few microseconds slower per launch. Build it with "
                              f"`python scripts/build_native.py` or `pip install .`; {KNOB}=0 silences this.",
                              RuntimeWarning, stacklevel=3)
        _state["why"] = why
        _state["module"] = module
        return module


def status() -> str:
    """One line for ``tylo info``: loaded (from where) or why not; loads it if not tried yet."""
    if "module" not in _state:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            load()
    module = _state["module"]
    if module is None:
        return f"not loaded ({_state['why']}); launches use ctypes"
    return f"loaded ({module.__file__})"


def default_build_dir() -> Path:
    """``$TYLO_CACHE_DIR/native`` (default ``~/.cache/tylo/native``; the cache's root, read as
    tylo.cache.disk reads it: runtime/ does not import the cache)."""
    env = os.environ.get("TYLO_CACHE_DIR")
    return Path(env).expanduser() / "native" if env else Path.home() / ".cache" / "tylo" / "native"


def _find(build_dir):
    digest = source_digest() if source_path().exists() else None
    module, why = _in_tree(digest)
    if module is not None:
        return module, None
    reasons = [why]
    if digest is None:
        return None, "; ".join(reasons)
    installed = _installed_copy(digest)
    if installed is not None:
        return installed, None
    if build_dir is None:
        return None, "; ".join(reasons)
    folders = [Path(build_dir) / digest[:16], None]   # None: a fresh temporary folder
    for folder in folders:
        try:
            path = build(folder if folder is not None else tempfile.mkdtemp(prefix="tylo-native-"))
            return load_file(path, digest), None
        except OSError as exc:  # a folder that cannot be written: once more in a temporary one
            reasons.append(f"building it in {folder} failed: {exc}")
        except Exception as exc:  # no compiler, no Python headers: fall back
            reasons.append(f"building it failed: {str(exc).strip()[:300]}")
            break
    return None, "; ".join(reasons)


def _in_tree(digest):
    """(the module next to this file, None), or (None, why not)."""
    try:  # built by pip or scripts/build_native.py (by name: this module imports nothing of the package)
        module = importlib.import_module(MODULE_NAME)
    except ImportError as exc:
        return None, f"no built module ({exc})"
    if digest is None or module.SOURCE_DIGEST == digest:
        return module, None
    return None, "the in-place build is of an older native_launch.c"


def _installed_copy(digest):
    """The module of an installed tylo elsewhere on sys.path, built from this very source: CI runs
    the tests from the source tree after ``pip install .``, whose build is in site-packages."""
    here = Path(__file__).resolve().parent
    for entry in sys.path:
        candidate = Path(entry or ".", "tylo", "runtime", f"_native_launch{_SUFFIX}")
        try:
            if candidate.resolve().parent == here or not candidate.is_file():
                continue
            return load_file(candidate, digest)
        except (ImportError, OSError):
            continue
    return None


def load_file(path, digest=None):
    """The native module built at ``path`` (``build()``), checked to be of this source."""
    digest = digest or source_digest()
    spec = importlib.util.spec_from_file_location(MODULE_NAME, str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if module.SOURCE_DIGEST != digest:
        raise ImportError(f"{path} was built from another native_launch.c")
    sys.modules.setdefault(MODULE_NAME, module)
    return module


def compile_macros() -> list[str]:
    """-D flags of every build (setup.py passes the same): the stable ABI and the source digest."""
    return [f"-DPy_LIMITED_API={_LIMITED_API}", f'-DTYLO_NATIVE_SOURCE_DIGEST="{source_digest()}"']


def compiler_command() -> list[str]:
    """The C compiler, as an argument list: ``$CC``, else the one this Python was built with when
    it is on this machine (a conda or manylinux Python names a compiler that may not be), else
    ``cc`` or ``gcc``."""
    if os.environ.get("CC"):
        return os.environ["CC"].split()
    configured = (sysconfig.get_config_var("CC") or "").split()
    for cmd in (configured, ["cc"], ["gcc"]):
        if cmd and shutil.which(cmd[0]):
            return cmd
    return configured or ["cc"]


def build(folder) -> Path:
    """Compile native_launch.c into ``folder/<name>.abi3.so`` (an existing build of the same source
    is reused) and return its path. Raises RuntimeError with the compiler's message on failure."""
    if _SUFFIX not in importlib.machinery.EXTENSION_SUFFIXES:
        raise RuntimeError(f"this Python does not load stable-ABI modules ({_SUFFIX})")
    folder = Path(folder)
    target = folder / f"_native_launch{_SUFFIX}"
    if target.exists():
        return target
    include = sysconfig.get_paths()["include"]
    if not Path(include, "Python.h").exists():
        raise RuntimeError(f"no Python.h in {include} (install the Python development headers)")
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=_SUFFIX, dir=folder)
    os.close(fd)
    cmd = [*compiler_command(), "-O2", "-shared", "-fPIC", *compile_macros(), f"-I{include}", str(source_path()),
           "-o", tmp]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        os.unlink(tmp)
        raise RuntimeError(f"no C compiler ({cmd[0]}: {exc.strerror})") from None
    if out.returncode != 0:
        os.unlink(tmp)
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    os.replace(tmp, target)  # atomic: a concurrent process sees the old file or the whole new one
    return target
