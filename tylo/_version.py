"""tylo's version, and a digest of its own sources for cache keys.

Kept apart from ``tylo/__init__`` so that glue modules (the JIT, the CLI) can
read the version without importing the package from below.
"""
from __future__ import annotations

import hashlib
import os

__all__ = ["__version__", "source_digest"]

__version__ = "0.1.0"

_digest: str | None = None


def source_digest() -> str:
    """sha256 over the path and contents of every ``.py`` file of this tylo package.

    The version string alone does not name the compiler: a copy of tylo with a
    wrong-code fix must not load cubins built by the copy without it. Computed
    once per process, on first use (about 10 ms for ~150 files).
    """
    global _digest
    if _digest is None:
        root = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.sha256()
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                h.update(os.path.relpath(path, root).encode() + b"\0")
                with open(path, "rb") as f:
                    h.update(f.read())
                h.update(b"\0")
        _digest = h.hexdigest()
    return _digest
