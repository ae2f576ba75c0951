"""Errors of the ``tylo`` command and how they exit."""

from __future__ import annotations

__all__ = ["CLIError", "UsageError"]


class CLIError(Exception):
    """An error reported as ``error: message`` with exit status 1 (``raw``: the
    message alone, for compile errors that already say ``file:line:col: error:``)."""

    def __init__(self, message: str, raw: bool = False):
        super().__init__(message)
        self.raw = raw


class UsageError(Exception):
    """Bad usage found after parsing; reported like argparse's errors (exit 2)."""
