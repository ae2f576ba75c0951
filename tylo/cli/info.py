"""``tylo info``: versions of tylo and its toolchain, the driver and GPUs, the cache folder."""

from __future__ import annotations

import json
import platform
import sys

from tylo.cache.disk import default_cache

from . import disasm
from .formatting import cache_location, fmt_bytes

__all__ = ["cmd_info"]


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
        from tylo.codegen import nvjitlink

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
    dis = disasm.find_disassembler()
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
