"""Where ``ptxas`` is: the ``nvidia-cuda-nvcc`` wheel (a tylo dependency) first, then the PATH.

tylo assembles in process with nvJitLink, except kernels that use ``setmaxnreg``: nvJitLink
compiles every module as a separate compilation unit and drops ``setmaxnreg`` there (info C7504,
"ignored to maintain compatibility across compilation units"; none of its options turns whole-program
mode on), which costs the warp-specialised kernels their register split. ``ptxas`` compiles a
whole program and keeps it. The wheel's ptxas has the same version as the pip nvJitLink, so a
pip-only machine needs nothing else.
"""
from __future__ import annotations

import functools
import glob
import importlib.util
import os
import shutil

__all__ = ["ptxas_path"]


@functools.lru_cache(maxsize=None)
def ptxas_path() -> str | None:
    """The ptxas executable to run, or None when there is none."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else []
    for root in roots:
        for path in sorted(glob.glob(os.path.join(root, "cu*", "bin", "ptxas")), reverse=True):
            if os.access(path, os.X_OK):
                return path
    return shutil.which("ptxas")
