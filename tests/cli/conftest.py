import pytest


@pytest.fixture(autouse=True)
def _isolated_cache_env(tmp_path, monkeypatch):
    """Every test gets its own cache folder and the disk level enabled."""
    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path / "tylo-cache"))
    monkeypatch.delenv("TYLO_CACHE", raising=False)
