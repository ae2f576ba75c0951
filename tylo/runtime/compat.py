"""Does the toolchain's output load on this driver? Pure functions of version numbers.

A cubin from nvJitLink (or ptxas) of CUDA major version M loads only on a driver for CUDA M.x or
newer; within one major version a newer toolchain minor is fine (CUDA's minor version
compatibility: tylo loads cubins, never PTX, so no driver JIT is involved). ``tylo info`` reports
the verdict; a failed module load quotes it in the ``CudaError``. Imports nothing of tylo.
"""
from __future__ import annotations

__all__ = ["MIN_DRIVER", "toolchain_problems", "load_failure_hint", "cuda_version", "driver_needed"]

# The first driver branch of each CUDA major version (CUDA release notes, "toolkit driver version").
MIN_DRIVER = {11: 450, 12: 525, 13: 580}

# module load failures that a toolchain newer than the driver causes (an image from a newer CUDA
# major is "unsupported", "not for this GPU" or "invalid" to an older driver, depending on its age)
_TOO_NEW = ("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_NO_BINARY_FOR_GPU", "CUDA_ERROR_INVALID_IMAGE")


def cuda_version(driver_version: int | None) -> tuple[int, int] | None:
    """``cuDriverGetVersion``'s int (13000) as (major, minor) = (13, 0); None stays None."""
    if driver_version is None:
        return None
    return driver_version // 1000, (driver_version % 1000) // 10


def _fmt(v) -> str:
    return f"{v[0]}.{v[1]}"


def driver_needed(major: int) -> str:
    """The driver a cubin of CUDA major version ``major`` needs, in words."""
    return _driver_for(major)


def _driver_for(major: int) -> str:
    branch = MIN_DRIVER.get(major)
    return f"a driver for CUDA {major}.x" + (f" (version {branch} or newer)" if branch else "")


def toolchain_problems(driver: tuple[int, int] | None, nvjitlink: tuple[int, int] | None,
                       ptxas: tuple[int, int] | None = None) -> list[str]:
    """What stops this toolchain's cubins from loading on a driver of CUDA version ``driver``, one
    sentence each saying which to upgrade; [] when they load or the driver is unknown (None)."""
    out = []
    for tool, version, fix in (("nvJitLink", nvjitlink, "pip install 'nvidia-nvjitlink=={major}.*'"),
                               ("ptxas", ptxas, "put the ptxas of CUDA {major}.x first on the PATH")):
        if version is None or driver is None:
            continue
        if version[0] > driver[0]:
            out.append(f"{tool} {_fmt(version)} builds cubins this driver (CUDA {_fmt(driver)}) cannot load: "
                       f"upgrade the NVIDIA driver to {_driver_for(version[0])}, or "
                       + fix.format(major=driver[0]))
    return out


def load_failure_hint(error_name: str, driver: tuple[int, int] | None) -> str | None:
    """The hint for a module load that failed with ``error_name``, or None when it has another cause."""
    if error_name not in _TOO_NEW:
        return None
    where = f"this driver supports CUDA {_fmt(driver)}" if driver else "the driver's CUDA version is unknown"
    return (f"the kernel image was built for another GPU, or by a toolchain newer than the driver ({where}): "
            f"upgrade the NVIDIA driver, or install the nvJitLink of the driver's CUDA major version "
            f"(pip install 'nvidia-nvjitlink=={driver[0] if driver else 'MAJOR'}.*'); `tylo info` compares "
            f"the versions")
