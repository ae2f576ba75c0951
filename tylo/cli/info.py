"""``tylo info``: versions of tylo and its toolchain, the driver and GPUs, the cache folder."""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
import sys

from tylo.cache.disk import default_cache
from tylo.runtime.compat import cuda_version, driver_needed, toolchain_problems

from . import disasm
from .formatting import cache_location, fmt_bytes

__all__ = ["cmd_info", "toolchain_verdict"]


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
        parts.append(fmt_bytes(mem))
    sms = get("multiprocessors") or get("sm_count")
    if isinstance(sms, int):
        parts.append(f"{sms} SMs")
    smem = get("max_shared_memory_per_block_optin")
    if isinstance(smem, int) and smem:
        parts.append(f"{fmt_bytes(smem)} shared/block")
    return f"{name}" + (f" ({', '.join(parts)})" if parts else "")


_PTXAS_VERSION = re.compile(r"release (\d+)\.(\d+)")


def _ptxas() -> tuple[str | None, tuple[int, int] | None]:
    """The ptxas on the PATH and its CUDA version (``ptxas --version``: "... release 12.4, V12.4.131")."""
    path = shutil.which("ptxas")
    if path is None:
        return None, None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return path, None
    m = _PTXAS_VERSION.search(out)
    return path, ((int(m.group(1)), int(m.group(2))) if m else None)


def toolchain_verdict(driver, nvjitlink, ptxas=None) -> str:
    """One line for ``tylo info``: whether the assemblers' cubins load on the driver, and if not,
    which to upgrade. ``driver``, ``nvjitlink``, ``ptxas``: (major, minor) or None."""
    if nvjitlink is None and ptxas is None:
        return "no PTX assembler: pip install nvidia-nvjitlink"
    problems = toolchain_problems(driver, nvjitlink, ptxas)
    if problems:
        return "; ".join(problems)
    tools = " and ".join(f"{name} {v[0]}.{v[1]}" for name, v in (("nvJitLink", nvjitlink), ("ptxas", ptxas)) if v)
    if driver is None:
        newest = max(v[0] for v in (nvjitlink, ptxas) if v)
        return f"no driver to check against: cubins from {tools} need {driver_needed(newest)}"
    return f"ok: cubins from {tools} load on this driver (CUDA {driver[0]}.{driver[1]})"


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
    nvjitlink_version = None
    try:
        from tylo.codegen import nvjitlink

        if not nvjitlink.available():
            raise RuntimeError("libnvJitLink not found (pip install nvidia-nvjitlink)")
        nvjitlink_version = nvjitlink.version()
        rows.append(("nvJitLink", ".".join(str(x) for x in nvjitlink_version)))
    except Exception as e:
        rows.append(("nvJitLink", f"unavailable ({type(e).__name__}: {e})"))
    ptxas_path, ptxas_version = _ptxas()
    if ptxas_path:
        shown = ".".join(map(str, ptxas_version)) if ptxas_version else "version unknown"
        rows.append(("ptxas", f"{shown} ({ptxas_path}; used for setmaxnreg kernels)"))
    try:
        from importlib import metadata

        rows.append(("cuda-bindings", metadata.version("cuda-bindings")))
    except Exception:
        try:
            import cuda.bindings

            rows.append(("cuda-bindings", str(getattr(cuda.bindings, "__version__", "unknown"))))
        except Exception as e:
            rows.append(("cuda-bindings", f"unavailable ({type(e).__name__})"))
    dis = disasm.find_disassembler()
    rows.append(("disassembler", " ".join(dis) if dis else "not found (pip install nvidia-cuda-nvdisasm)"))

    device_lines: list[str] = []
    driver_cuda = None
    try:
        from tylo.runtime import driver as rt

        if rt.gpu_available():
            driver_cuda = cuda_version(rt.driver_version())
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

    rows.append(("toolchain", toolchain_verdict(driver_cuda, nvjitlink_version, ptxas_version)))
    try:
        from tylo.runtime import native

        rows.append(("native launcher", native.status()))
    except Exception as e:
        rows.append(("native launcher", f"unknown ({type(e).__name__}: {e})"))

    cache = default_cache()
    state = ""
    problem = cache.root_problem()
    if problem:
        state = f" (unusable: {problem})"
    elif cache.enabled:
        n = len(cache.keys())
        state = f" ({n} entr{'y' if n == 1 else 'ies'})"
    rows.append(("cache", cache_location(cache) + state))

    if getattr(args, "json", False):
        out = dict(rows)
        out["devices"] = [line.split(": ", 1)[1] for line in device_lines]
        print(json.dumps(out, indent=2))
        return 0
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
        if k == "devices":
            for line in device_lines:
                print(line)
    return 0
