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


@tylo.jit
def reads_before_waiting(src, dst, n):
    """Reads ``src`` before its wait: on the GPU the read may see the previous kernel's output half written."""
    i = tylo.thread_idx.x
    x = src[i]
    grid_dependency_wait()
    if i < n:
        dst[i] = x + 1.0


@tylo.jit
def stores_before_waiting_in_one_thread(dst, n):
    i = tylo.thread_idx.x
    if i == 5:
        dst[i] = 7.0
    grid_dependency_wait()
    if i < n:
        dst[i] = 2.0


def test_the_interpreter_reports_global_access_before_the_wait():
    # a kernel that waits may start while the kernel before it still runs: a thread's global loads and stores
    # before its own grid_dependency_wait() race with it; the interpreter reports them with the line
    n = 64
    src, dst = np.ones(n, np.float32), np.full(n, np.nan, np.float32)
    for kernel, args, line in ((reads_before_waiting, (src, dst, n), "x = src[i]"),
                               (stores_before_waiting_in_one_thread, (dst, n), "dst[i] = 7.0")):
        interp = tylo.jit(kernel.fn, interpret=True, arch="sm_90a")
        with pytest.raises(tylo.interpreter.HazardError, match="global access before grid_dependency_wait") as e:
            interp[1, 64](*args)
        lineno = next(k for k, text in enumerate(open(__file__).read().splitlines(), 1) if text.strip() == line)
        assert f"test_grid_dependency.py:{lineno}:" in str(e.value)
    # the same accesses after the wait, and a kernel that does not wait, run clean
    interp = tylo.jit(only_triggers.fn, interpret=True, arch="sm_90a")
    interp[1, 64](dst, n)
    assert (dst == 2.0).all()


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


@tylo.jit
def one_thread_waits(src, dst, n):
    """Only thread 0 waits; the barrier after it orders every thread's accesses after the wait (legal)."""
    i = tylo.thread_idx.x
    if i == 0:
        grid_dependency_wait()
    tylo.sync_threads()
    if i < n:
        dst[i] = src[i] + 1.0


@tylo.jit
def one_thread_waits_unordered(src, dst, n):
    i = tylo.thread_idx.x
    if i == 0:
        grid_dependency_wait()
    if i < n:
        dst[i] = src[i] + 1.0


def test_a_barrier_after_one_threads_wait_orders_the_others():
    n = 64
    src, dst = np.arange(n, dtype=np.float32), np.full(n, np.nan, np.float32)
    tylo.jit(one_thread_waits.fn, interpret=True, arch="sm_90a")[1, 64](src, dst, n)
    np.testing.assert_array_equal(dst, src + 1)
    # without the barrier the other threads' loads are not ordered after thread 0's wait
    with pytest.raises(tylo.interpreter.HazardError, match="global access before grid_dependency_wait"):
        tylo.jit(one_thread_waits_unordered.fn, interpret=True, arch="sm_90a")[1, 64](src, dst, n)
