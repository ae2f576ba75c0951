"""LLVM IR -> PTX (llvmlite's NVPTX backend) -> cubin (nvJitLink in process; ptxas fallback).

Also parses the assembler's resource report (registers, spills, stack,
shared memory) and reports the toolchain versions that enter the cache key.
"""
from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile
import threading
from dataclasses import asdict, dataclass

from . import nvjitlink
from .diagnostics import WGMMASerializationWarning, wgmma_serialization
from .ptxas import ptxas_path
from .targets import Target

__all__ = ["Resources", "llvm_to_ptx", "ptx_to_cubin", "toolchain_versions", "AssemblerError", "AssemblerWarning",
           "LLVMFailure"]


class AssemblerError(RuntimeError):
    """ptxas/nvJitLink rejected the PTX (a tylo bug or an unsupported target feature)."""


class LLVMFailure(RuntimeError):
    """llvmlite rejected or could not compile tylo's LLVM IR: a tylo bug (the frontend validates
    what the user wrote before LLVM sees it)."""


@dataclass(frozen=True)
class Resources:
    registers: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    stack_bytes: int = 0
    shared_bytes: int = 0  # static shared memory of the kernel
    const_bytes: int = 0

    @property
    def spill_bytes(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return (f"{self.registers} registers, {self.spill_store_bytes} bytes spill stores, "
                f"{self.spill_load_bytes} bytes spill loads, {self.stack_bytes} bytes stack, "
                f"{self.shared_bytes} bytes shared")


_lock = threading.Lock()


@functools.lru_cache(maxsize=None)
def _nvptx_target():
    import llvmlite.binding as llvm

    with _lock:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
    return llvm.Target.from_triple("nvptx64-nvidia-cuda")


def _target_machine(name: str, features: str):
    """A new target machine for each module (0.1-0.3 ms): the NVPTX backend numbers call
    sequences with a counter that lives as long as its target machine, so a shared one would make
    a kernel's PTX text depend on what the process compiled before it."""
    return _nvptx_target().create_target_machine(cpu=name, features=features, opt=3)


def llvm_to_ptx(llvm_ir: str, target: Target) -> str:
    """PTX for an LLVM module. The module is parsed and verified before any pass runs, so
    malformed IR raises ``LLVMFailure`` here instead of tripping an assertion (llvmlite's LLVM is
    built with assertions, which abort the process) in the optimizer."""
    import llvmlite.binding as llvm

    tm = _target_machine(target.name, target.llvm_features)
    try:
        module = llvm.parse_assembly(llvm_ir)
        module.triple = "nvptx64-nvidia-cuda"
        module.data_layout = str(tm.target_data)
        module.verify()
    except RuntimeError as exc:
        raise LLVMFailure(f"LLVM rejected the generated IR for {target.name}: {exc}") from None
    try:
        return _optimize_and_emit(llvm, module, tm)
    except RuntimeError as exc:
        raise LLVMFailure(f"LLVM failed to compile the kernel for {target.name}: {exc}") from None


def _optimize_and_emit(llvm, module, tm) -> str:
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(module, pb)
    return tm.emit_assembly(module)


_REG = re.compile(r"[Uu]sed (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")
_STACK = re.compile(r"(\d+) (?:bytes )?stack")
_LMEM = re.compile(r"(\d+) bytes lmem")


def parse_resources(log: str) -> Resources:
    regs = _REG.search(log)
    spill = _SPILL.search(log)
    smem = _SMEM.search(log)
    cmem = _CMEM.search(log)
    stack = int(spill.group(1)) if spill else 0
    if not spill:
        m = _STACK.search(log)
        stack = int(m.group(1)) if m else 0
    return Resources(
        registers=int(regs.group(1)) if regs else 0,
        spill_store_bytes=int(spill.group(2)) if spill else 0,
        spill_load_bytes=int(spill.group(3)) if spill else 0,
        stack_bytes=stack,
        shared_bytes=int(smem.group(1)) if smem else 0,
        const_bytes=int(cmem.group(1)) if cmem else 0,
    )


class AssemblerWarning(UserWarning):
    """The assembler accepted the PTX but reported something the kernel's author should know."""


def ptx_to_cubin(ptx: str, target: Target, name: str = "kernel",
                 lineinfo: bool = False) -> tuple[bytes, Resources, str]:
    """Assemble PTX for ``target``: (cubin, resources, assembler log).

    ``lineinfo`` keeps the PTX's ``.loc`` lines in the cubin (``-lineinfo``: no effect on the code,
    read by compute-sanitizer and Nsight Compute).

    nvJitLink in process by default. A kernel with ``setmaxnreg`` goes to ``ptxas`` (the one of the
    ``nvidia-cuda-nvcc`` wheel, else the PATH's; see ``codegen/ptxas.py``): nvJitLink drops
    ``setmaxnreg`` (info C7504), and tylo never silently emits less than the kernel asked for.
    Assembler warnings become ``AssemblerWarning``s; serialised WGMMAs (info C7509/C7510) a
    ``WGMMASerializationWarning`` naming the kernel and the likely cause (``codegen/diagnostics.py``).
    """
    ptxas = ptxas_path()
    if nvjitlink.available() and not ("setmaxnreg" in ptx and ptxas):
        try:
            cubin, log = nvjitlink.link_ptx(ptx, target.name, name, ("-O3", "-lineinfo") if lineinfo else ("-O3",))
        except nvjitlink.NvJitLinkError as exc:
            raise AssemblerError(str(exc)) from None
        _warn(log, name, "nvJitLink", ptx)
        return cubin, parse_resources(log), log
    if ptxas is None:
        raise AssemblerError("no PTX assembler: install the pip packages nvidia-nvjitlink and nvidia-cuda-nvcc "
                             "(tylo dependencies) or put ptxas on the PATH")
    with tempfile.TemporaryDirectory(prefix="tylo-") as tmp:
        src = os.path.join(tmp, "k.ptx")
        out = os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        flags = ["-lineinfo"] if lineinfo else []
        proc = subprocess.run([ptxas, f"-arch={target.name}", "-v", "-O3", *flags, src, "-o", out],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise AssemblerError(f"ptxas failed for {target.name}:\n{proc.stderr}")
        with open(out, "rb") as f:
            cubin = f.read()
        log = proc.stderr + proc.stdout
        _warn(log, name, "ptxas", ptx)
        return cubin, parse_resources(log), log


def _warn(log: str, name: str, tool: str, ptx: str = "") -> None:
    import warnings

    serialised = wgmma_serialization(log, ptx, name)
    if serialised:
        warnings.warn(f"{tool}: {serialised}", WGMMASerializationWarning, stacklevel=3)
    lines = [ln.strip() for ln in log.splitlines() if "warning" in ln.lower()]
    if lines:
        warnings.warn(f"{tool} on kernel {name}: " + "; ".join(lines), AssemblerWarning, stacklevel=3)


@functools.lru_cache(maxsize=None)
def toolchain_versions() -> dict:
    """Fingerprints of the toolchain for the cache key: llvmlite (which fixes LLVM) and the assembler.

    Cheap on purpose (a warm cache hit computes it): llvmlite's version string and the
    assembler library's file name and size, without loading either.
    """
    import llvmlite

    out = {"llvmlite": llvmlite.__version__}
    path = nvjitlink.library_path()
    out["assembler"] = f"{os.path.basename(path)}:{os.path.getsize(path)}" if path is not None else "none"
    ptxas = ptxas_path()  # used for setmaxnreg kernels, and when nvJitLink is missing
    out["ptxas"] = f"{os.path.realpath(ptxas)}:{os.path.getsize(ptxas)}" if ptxas else "none"
    return out
