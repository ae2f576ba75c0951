"""The environment knobs: each one this package reads does what docs/knobs.md says, and the
table there lists exactly the knobs of tylo.knobs."""
import os
import re

import pytest

import tylo
from tylo import knobs
from tylo.cache import default_cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIG = "*f32, i32"


def kernel():
    @tylo.jit
    def fill(out, n):
        i = tylo.thread_idx.x
        if i < n:
            out[i] = 2.0
    return fill


def test_always_compile_skips_hits_and_still_stores(monkeypatch):
    first = kernel().compile(SIG, arch="sm_80")
    assert not first.from_cache
    assert kernel().compile(SIG, arch="sm_80").from_cache  # a fresh JITFunction: a disk hit
    monkeypatch.setenv("TYLO_ALWAYS_COMPILE", "1")
    again = kernel().compile(SIG, arch="sm_80")
    assert not again.from_cache and again.key == first.key and again.ptx == first.ptx
    # still stores: an entry removed from the cache is written again by the forced compile
    assert default_cache().remove(first.key) and first.key not in default_cache()
    kernel().compile(SIG, arch="sm_80")
    assert first.key in default_cache()
    monkeypatch.setenv("TYLO_ALWAYS_COMPILE", "0")
    assert kernel().compile(SIG, arch="sm_80").from_cache


def test_dump_writes_ir_llvm_and_ptx(monkeypatch, tmp_path):
    monkeypatch.setenv("TYLO_DUMP", str(tmp_path / "dump"))
    ck = kernel().compile(SIG, arch="sm_80")
    names = sorted(os.listdir(tmp_path / "dump"))
    assert [n.rsplit(".", 1)[1] for n in names] == ["ll", "ptx", "tyir"]
    assert all(n.startswith("fill.sm_80.") for n in names)
    ptx = next(n for n in names if n.endswith(".ptx"))
    assert (tmp_path / "dump" / ptx).read_text() == ck.ptx


@pytest.mark.parametrize("value,expected", [("1", True), ("TRUE", True), ("on", True), ("0", False),
                                            ("no", False), ("", None)])
def test_flag_values(monkeypatch, value, expected):
    monkeypatch.setenv("TYLO_DEBUG", value)
    assert knobs.debug_enabled() is (False if expected is None else expected)
    assert knobs.debug_enabled(True) is True and knobs.debug_enabled(False) is False  # the option wins


def test_a_typo_is_an_error_naming_the_knob(monkeypatch):
    monkeypatch.setenv("TYLO_ALWAYS_COMPILE", "yes please")
    with pytest.raises(ValueError, match="TYLO_ALWAYS_COMPILE='yes please'"):
        kernel().compile(SIG, arch="sm_80")


def test_the_table_lists_every_knob():
    with open(os.path.join(ROOT, "docs", "knobs.md")) as f:
        text = f.read()
    documented = set(re.findall(r"^\|\s*`(TYLO_[A-Z_]+)`", text, re.M))
    assert documented == set(knobs.KNOBS)
    for doc in ("README.md", "docs/cache.md", "docs/first_kernel.md"):
        with open(os.path.join(ROOT, doc)) as f:
            assert "knobs.md" in f.read(), doc
