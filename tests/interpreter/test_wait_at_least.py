"""``wait_at_least``: one thread's wait on a counter that other CTAs raise (a grid-wide flag), in the interpreter
(which runs every CTA of such a grid at once) and as PTX."""
import numpy as np
import pytest

import tylo
import tylo.lang.mbarrier as mb
from tylo.interpreter.errors import InterpreterError
from tylo.lang.sync import wait_at_least


@tylo.jit(interpret=True)
def gather_after_all(out, parts, counter, n_ctas):
    """Every CTA stores its part, counts its arrival, waits for all, then sums every CTA's part."""
    cta = tylo.block_idx.x
    parts[cta] = (cta + 1) * 10
    tylo.fence_acq_rel("gpu")
    if tylo.thread_idx.x == 0:
        tylo.atomic_add(counter, 1)
        wait_at_least(counter, n_ctas)
    tylo.sync_threads()
    tylo.fence_acq_rel("gpu")
    total = 0
    for i in range(n_ctas):
        total += parts[i]
    out[cta] = total


def test_ctas_that_wait_for_each_other_all_see_every_part():
    n = 5
    parts = np.full(n, -1, np.int32)
    out = np.full(n, -1, np.int32)
    counter = np.zeros(1, np.int32)
    gather_after_all[(n,), (32,)](out, parts, counter, n)
    assert out.tolist() == [10 * n * (n + 1) // 2] * n
    assert counter[0] == n


def test_a_wait_no_cta_can_end_is_a_deadlock():
    out, parts = np.zeros(3, np.int32), np.zeros(3, np.int32)
    counter = np.zeros(1, np.int32)
    with pytest.raises(InterpreterError, match="deadlock"):
        gather_after_all[(3,), (32,)](out, parts, counter, 4)     # waits for a fourth CTA that does not exist


def test_the_wait_is_a_relaxed_gpu_scope_spin_in_ptx():
    ptx = gather_after_all.compile("*i32, *i32, *i32, i32", arch="sm_90a").ptx
    # the wrapping difference against zero: serial-number order
    assert "ld.relaxed.gpu.global.s32" in ptx and "sub.s32 v, v," in ptx and "setp.ge.s32 p, v, 0;" in ptx


def test_wait_at_least_takes_only_a_global_i32_pointer():
    @tylo.jit(interpret=True)
    def bad(x):
        wait_at_least(x, 1)

    with pytest.raises(tylo.CompileError, match=r"wait_at_least waits on a global \*i32"):
        bad[1, 32](np.zeros(2, np.float32))


@tylo.jit(interpret=True)
def next_generation(word, ready, out):
    """CTA 1 reads the word, says so on ``ready`` and waits for the next value; CTA 0 advances the word once CTA 1
    has read it."""
    if tylo.block_idx.x == 1:
        seen = tylo.atomic_add(word, 0)
        out[0] = seen
        tylo.atomic_add(ready, 1)
        wait_at_least(word, seen + 1)
        out[1] = tylo.atomic_add(word, 0)
    else:
        wait_at_least(ready, 1)
        tylo.atomic_add(word, 1)


@pytest.mark.parametrize("start", [5, 2 ** 31 - 1, -1])
def test_the_wait_compares_in_serial_number_order_across_the_wrap(start):
    word, ready = np.array([start], np.int32), np.zeros(1, np.int32)
    out = np.zeros(2, np.int32)
    next_generation[(2,), (1,)](word, ready, out)     # one thread per CTA
    # int32 max + 1 wraps to int32 min, which is "at least" int32 max + 1 in serial-number order
    assert out[0] == start and out[1] == np.int32(start + 1 if start < 2 ** 31 - 1 else -2 ** 31)


@tylo.jit
def bounded(word, out):
    """CTA 0 waits (bounded) for CTA 1's increment and records whether it came."""
    if tylo.block_idx.x == 0:
        out[0] = tylo.where(wait_at_least(word, 1, 64), 1, 2)
    else:
        tylo.atomic_add(word, 1)


@pytest.mark.parametrize("whole_grid", [True, False])
def test_a_bounded_wait_gives_up_when_nothing_else_can_move(whole_grid):
    from tylo.interpreter import run

    kernel = bounded.lower("*i32, *i32", arch="sm_90a")
    word, out = np.zeros(1, np.int32), np.zeros(1, np.int32)
    # CTAs one after another (as on a GPU busy with other work): CTA 0's wait cannot end, so it gives up
    run(kernel, [word, out], grid=(2,), block=(1,), whole_grid=whole_grid)
    assert out[0] == (1 if whole_grid else 2) and word[0] == 1


def test_a_bounded_wait_counts_its_loads_in_ptx():
    ptx = bounded.compile("*i32, *i32", arch="sm_90a").ptx
    assert "mov.s32 n, 64;" in ptx and "ld.relaxed.gpu.global.s32" in ptx


@tylo.jit
def barrier_and_counter(counter, n):
    mb.cluster_sync()
    if tylo.thread_idx.x == 0:
        tylo.atomic_add(counter, 1)
        wait_at_least(counter, n)


def test_a_cluster_barrier_in_a_grid_run_whole_is_refused_not_misread():
    from tylo.interpreter import run

    kernel = barrier_and_counter.lower("*i32, i32", arch="sm_90a")
    # two clusters of one CTA running at once: the interpreter's cluster barrier would span both
    with pytest.raises(InterpreterError, match="cluster barrier in a grid run whole"):
        run(kernel, [np.zeros(1, np.int32), 2], grid=(2,), block=(32,))
    counter = np.zeros(1, np.int32)
    run(kernel, [counter, 1], grid=(1,), block=(32,))       # one CTA: its cluster is everything running
    assert counter[0] == 1
