"""Compile errors with a source location, the offending line and a caret."""
from __future__ import annotations

__all__ = ["CompileError"]


class CompileError(Exception):
    """A kernel cannot be compiled. Names ``file:line:col``, shows the line, says what to do.

    Attributes: ``filename``, ``lineno`` (1-based), ``col_offset`` (0-based),
    ``reason`` (the sentence without the location), ``source_line``.
    """

    def __init__(self, reason: str, filename: str = "<unknown>", lineno: int = 0, col_offset: int = 0,
                 source_line: str | None = None, end_col_offset: int | None = None):
        self.reason = reason
        self.filename = filename
        self.lineno = lineno
        self.col_offset = col_offset
        self.source_line = source_line
        self.end_col_offset = end_col_offset
        super().__init__(self._format())

    def extend_reason(self, text: str) -> None:
        """Append ``text`` to the reason (an inlined helper's error adds where it was inlined from)."""
        self.reason += text
        self.args = (self._format(),)

    def _format(self) -> str:
        head = f"{self.filename}:{self.lineno}:{self.col_offset + 1}: error: {self.reason}"
        if not self.source_line:
            return head
        line = self.source_line.rstrip("\n")
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        width = 1
        if self.end_col_offset is not None and self.end_col_offset > self.col_offset:
            width = self.end_col_offset - self.col_offset
        caret = " " * max(0, self.col_offset - indent) + "^" + "~" * max(0, min(width, len(line) - self.col_offset) - 1)
        return f"{head}\n    {stripped}\n    {caret}"

    def __reduce__(self):
        return (CompileError, (self.reason, self.filename, self.lineno, self.col_offset, self.source_line,
                               self.end_col_offset))
