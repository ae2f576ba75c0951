"""setmaxnreg survives a pip-only install: ptxas comes from the nvidia-cuda-nvcc wheel (issue 11)."""
import os
import sys

from tylo.codegen import ptxas as ptxas_module
from tylo.codegen.compile import ptx_to_cubin
from tylo.codegen.targets import get_target

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_ptxas_is_found_without_the_path(monkeypatch):
    """The wheel's ptxas, not one that happens to be on this machine's PATH."""
    monkeypatch.setenv("PATH", "")
    ptxas_module.ptxas_path.cache_clear()
    try:
        path = ptxas_module.ptxas_path()
        assert path is not None and os.sep + "nvidia" + os.sep in path and os.access(path, os.X_OK)
    finally:
        ptxas_module.ptxas_path.cache_clear()


def test_the_gemm_keeps_setmaxnreg_on_a_pip_only_machine(monkeypatch):
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import hopper_gemm

    kernel, signature, constexprs, block = hopper_gemm.AOT[0]
    ptx = kernel.compile(signature=signature, arch="sm_90a", constexprs=constexprs, block=block).ptx
    assert "setmaxnreg.dec" in ptx and "setmaxnreg.inc" in ptx
    monkeypatch.setenv("PATH", "")
    ptxas_module.ptxas_path.cache_clear()
    try:
        _cubin, resources, log = ptx_to_cubin(ptx, get_target("sm_90a"), "hopper_gemm")
    finally:
        ptxas_module.ptxas_path.cache_clear()
    assert "C7504" not in log, log        # nvJitLink's "setmaxnreg ignored" would say so
    assert resources.spill_store_bytes == 0 and resources.registers > 0


def test_nvjitlink_alone_drops_setmaxnreg():
    """Why ptxas is needed at all: if this starts failing, nvJitLink keeps setmaxnreg and the detour can go."""
    from tylo.codegen import nvjitlink

    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import hopper_gemm

    kernel, signature, constexprs, block = hopper_gemm.AOT[0]
    ptx = kernel.compile(signature=signature, arch="sm_90a", constexprs=constexprs, block=block).ptx
    _cubin, log = nvjitlink.link_ptx(ptx, "sm_90a", "hopper_gemm")
    assert "C7504" in log
