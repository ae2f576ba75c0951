"""`tylo info` compares the assemblers' CUDA versions with the driver's and says which to upgrade;
a module load that fails because the toolchain is newer than the driver says so in its CudaError."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tylo.cli.info import toolchain_verdict
from tylo.runtime.compat import cuda_version, load_failure_hint, toolchain_problems

ROOT = Path(__file__).resolve().parents[2]


def test_newer_major_than_the_driver_is_a_problem_naming_both_fixes():
    (problem,) = toolchain_problems((12, 4), (13, 5))
    assert "nvJitLink 13.5 builds cubins this driver (CUDA 12.4) cannot load" in problem
    assert "upgrade the NVIDIA driver to a driver for CUDA 13.x (version 580 or newer)" in problem
    assert "pip install 'nvidia-nvjitlink==12.*'" in problem
    (problem,) = toolchain_problems((12, 8), (12, 8), ptxas=(13, 0))
    assert problem.startswith("ptxas 13.0") and "ptxas of CUDA 12.x" in problem


@pytest.mark.parametrize("driver,tool", [((13, 0), (13, 5)), ((13, 0), (12, 9)), ((12, 2), (12, 8))])
def test_same_or_older_major_loads(driver, tool):
    # within a major version a newer toolchain is fine (minor version compatibility: cubins, no JIT)
    assert toolchain_problems(driver, tool, tool) == []
    assert toolchain_verdict(driver, tool).startswith(f"ok: cubins from nvJitLink {tool[0]}.{tool[1]} load")


def test_verdict_without_a_driver_or_an_assembler():
    assert toolchain_verdict(None, (13, 5), (13, 0)) == (
        "no driver to check against: cubins from nvJitLink 13.5 and ptxas 13.0 need a driver for CUDA 13.x "
        "(version 580 or newer)")
    assert "pip install nvidia-nvjitlink" in toolchain_verdict((13, 0), None, None)
    assert toolchain_verdict((12, 4), (13, 5)).startswith("nvJitLink 13.5 builds cubins this driver")


def test_cuda_version_and_load_hint():
    assert cuda_version(12080) == (12, 8) and cuda_version(13000) == (13, 0) and cuda_version(None) is None
    hint = load_failure_hint("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", (12, 4))
    assert "newer than the driver (this driver supports CUDA 12.4)" in hint
    assert "pip install 'nvidia-nvjitlink==12.*'" in hint
    assert load_failure_hint("CUDA_ERROR_OUT_OF_MEMORY", (12, 4)) is None


def test_info_prints_the_verdict():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "tylo", "info"], capture_output=True, text=True, env=env,
                         timeout=120).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("toolchain"))
    # whichever machine runs this: the verdict is one of the three, and names the driver
    assert "driver" in line and ("ok: cubins from" in line or "no driver to check against" in line
                                 or "upgrade the NVIDIA driver" in line), line


def test_load_failure_from_a_newer_toolchain_says_what_to_do(fake_libcuda):
    code = textwrap.dedent("""
        from tylo.runtime import driver
        from tylo.runtime.errors import CudaError
        driver.ensure_context(0)
        try:
            driver.load_module(b"\\x7fELF cuda13 cubin")
        except CudaError as exc:
            print("CAUGHT", exc.name, "|", exc)
        driver.load_module(b"\\x7fELF fake cubin")  # a loadable image still loads
        print("OK")
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT),
               LD_LIBRARY_PATH=fake_libcuda + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "OK" in r.stdout, r.stdout + r.stderr
    assert "CAUGHT CUDA_ERROR_NO_BINARY_FOR_GPU | cuModuleLoadData failed: CUDA_ERROR_NO_BINARY_FOR_GPU" in r.stdout
    assert "newer than the driver (this driver supports CUDA 12.8)" in r.stdout
    assert "pip install 'nvidia-nvjitlink==12.*'" in r.stdout
