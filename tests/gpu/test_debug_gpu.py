"""Debugging aids on a real GPU, each in a subprocess (a trapped or faulting kernel leaves the CUDA
context unusable): compute-sanitizer finds the Python line of an out-of-bounds store through the
line info, and a failing device_assert prints file:line and the message and fails the launch."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

OUT_OF_BOUNDS = '''
import numpy as np
import tylo


@tylo.jit
def poke(out, n):
    i = tylo.thread_idx.x
    out[i + n] = 1.0  # LINE


out = tylo.to_device(np.zeros(32, np.float32))
poke[1, 32](out, 1 << 26)
tylo.runtime.driver.synchronize()
'''

ASSERTING = '''
import numpy as np
import tylo


@tylo.jit(debug=True)
def guarded(out, n):
    i = tylo.thread_idx.x
    tylo.device_assert(i < n, "i must stay below n")  # LINE
    out[i] = 1.0


out = tylo.to_device(np.zeros(32, np.float32))
guarded[1, 32](out, 32)
tylo.runtime.driver.synchronize()
print("FIRST LAUNCH OK", flush=True)
try:
    guarded[1, 32](out, 16)
    tylo.runtime.driver.synchronize()
except tylo.CudaError as exc:
    print("CAUGHT", type(exc).__name__, exc, flush=True)
'''


def script(tmp_path, text):
    """Write ``text`` to a file: its path, and the number of the line marked ``# LINE``."""
    body = textwrap.dedent(text).lstrip("\n")
    path = tmp_path / "kernel_script.py"
    path.write_text(body)
    line = next(n for n, ln in enumerate(body.splitlines(), 1) if ln.endswith("# LINE"))
    return str(path), line


def run(argv):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)


def test_compute_sanitizer_names_the_python_line(tmp_path):
    sanitizer = shutil.which("compute-sanitizer")
    if sanitizer is None:
        pytest.skip("compute-sanitizer is not on the PATH (an environment condition)")
    path, line = script(tmp_path, OUT_OF_BOUNDS)
    proc = run([sanitizer, "--tool", "memcheck", sys.executable, path])
    report = proc.stdout + proc.stderr
    assert "Invalid __global__ write" in report, report[-4000:]
    # the report names the kernel's Python file (by its base name, as compute-sanitizer prints files) and line
    assert f" in {os.path.basename(path)}:{line}" in report, report[-4000:]


def test_failing_device_assert_prints_and_fails_the_launch(tmp_path):
    path, line = script(tmp_path, ASSERTING)
    proc = run([sys.executable, path])
    out = proc.stdout + proc.stderr
    assert "FIRST LAUNCH OK" in out, out[-4000:]
    assert f"{path}:{line}: block [0,0,0], thread [16,0,0]: device assertion failed: i must stay below n" in out, \
        out[-4000:]
    assert "CAUGHT CudaError" in out, out[-4000:]
