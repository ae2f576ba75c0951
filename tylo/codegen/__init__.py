"""IR -> LLVM -> PTX -> cubin, with the target table and per-feature PTX templates."""
from .compile import AssemblerError, Resources, llvm_to_ptx, parse_resources, ptx_to_cubin, toolchain_versions
from .llvm import llvm_type, lower_kernel
from .targets import TARGETS, Target, get_target

__all__ = ["AssemblerError", "Resources", "llvm_to_ptx", "parse_resources", "ptx_to_cubin", "toolchain_versions",
           "llvm_type", "lower_kernel", "TARGETS", "Target", "get_target"]
