"""A kernel's PTX does not depend on what the process compiled before it (the NVPTX backend's
call-sequence counter lives in its target machine, so each module gets a fresh one)."""
import re

import tylo


def printing():
    @tylo.jit
    def hello(x, n):
        i = tylo.thread_idx.x
        if i < n:
            tylo.printf("thread %d sees %f\n", i, x[i])
    return hello


def test_same_kernel_same_ptx_after_other_calls(monkeypatch):
    monkeypatch.setenv("TYLO_ALWAYS_COMPILE", "1")
    first = printing().compile("*f32, i32", arch="sm_90a").ptx
    for _ in range(2):  # more vprintf calls in this process
        again = printing().compile("*f32, i32", arch="sm_90a").ptx
        assert again == first
    assert re.findall(r"callseq (\d+), 0", first) == ["0"]
