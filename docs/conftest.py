"""The doctests of docs/*.md compile into a fresh cache, not the user's ~/.cache/tylo."""
import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path / "tylo-cache"))
    for knob in ("TYLO_CACHE", "TYLO_DEBUG", "TYLO_LINEINFO", "TYLO_ALWAYS_COMPILE"):
        monkeypatch.delenv(knob, raising=False)
