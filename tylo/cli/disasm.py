"""Finding a SASS disassembler (nvdisasm, or cuobjdump) for ``tylo cache dump --stage sass``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["NVDISASM_MISSING", "find_disassembler"]

NVDISASM_MISSING = (
    "nvdisasm not found; it ships in the pip package nvidia-cuda-nvdisasm "
    "(pip install nvidia-cuda-nvdisasm) or the CUDA toolkit"
)


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
