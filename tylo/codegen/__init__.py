"""IR -> LLVM -> PTX -> cubin, with the target table and per-feature PTX templates.

Submodules load on first use: a warm cache hit needs only the target table and the
toolchain fingerprint, not LLVM or the lowerings.
"""
import importlib

_EXPORTS = {
    "AssemblerError": "compile", "Resources": "compile", "llvm_to_ptx": "compile", "parse_resources": "compile",
    "ptx_to_cubin": "compile", "toolchain_versions": "compile", "llvm_type": "llvm", "lower_kernel": "llvm",
    "TARGETS": "targets", "Target": "targets", "get_target": "targets",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tylo.codegen' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
