"""Programmatic dependent launch: ``grid_dependency_wait`` / ``launch_dependents`` (``griddepcontrol``) in PTX, in the
interpreter, the rules, and the launch attribute a waiting kernel gets (no GPU needed)."""
import numpy as np
import pytest

import tylo
from tylo.lang.sync import grid_dependency_wait, launch_dependents


@tylo.jit
def step(src, dst, n):
    """``dst = src + 1`` in a chain of launches: the next launch may start at once, the memory waits."""
    launch_dependents()
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    grid_dependency_wait()
    if i < n:
        dst[i] = src[i] + 1.0


@tylo.jit
def only_triggers(dst, n):
    launch_dependents()
    i = tylo.thread_idx.x
    if i < n:
        dst[i] = 2.0


def test_the_wait_comes_before_every_memory_access_in_ptx():
    ck = step.compile("*f32, *f32, i32", arch="sm_90")
    ptx = ck.ptx
    trigger, wait = ptx.index("griddepcontrol.launch_dependents;"), ptx.index("griddepcontrol.wait;")
    assert trigger < wait < ptx.index("ld.global") and wait < ptx.index("st.global")
    assert len(ck.cubin) > 0            # nvJitLink assembled it


def test_a_kernel_that_waits_launches_programmatically_and_one_that_only_triggers_does_not():
    assert step.compile("*f32, *f32, i32", arch="sm_90").waits_on_prior_grids
    assert not only_triggers.compile("*f32, i32", arch="sm_90").waits_on_prior_grids


def test_the_interpreter_runs_a_chain_of_launches():
    n = 300
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    bufs = [x.copy(), np.full(n, np.nan, np.float32)]
    interp = tylo.jit(step.fn, interpret=True, arch="sm_90a")
    want = x.copy()
    for k in range(4):
        interp[(n + 127) // 128, 128](bufs[k % 2], bufs[(k + 1) % 2], n)
        want = want + np.float32(1.0)
    np.testing.assert_array_equal(bufs[0], want)


def test_griddepcontrol_needs_sm_90():
    with pytest.raises(tylo.CompileError, match=r"test_grid_dependency.py:\d+:\d+: error: launch_dependents needs sm_90"):
        step.compile("*f32, *f32, i32", arch="sm_80")


CACHED_DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import test_grid_dependency as t
ck = t.step.compile("*f32, *f32, i32", arch="sm_90")
print(json.dumps({"from_cache": ck.from_cache, "waits": ck.waits_on_prior_grids}))
'''


def test_a_kernel_served_from_the_cache_still_launches_programmatically(tmp_path):
    import json
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, TYLO_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=root)
    runs = [json.loads(subprocess.run([sys.executable, "-c", CACHED_DRIVER, os.path.dirname(__file__)], env=env,
                                      capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
            for _ in range(2)]
    assert runs == [{"from_cache": False, "waits": True}, {"from_cache": True, "waits": True}]
