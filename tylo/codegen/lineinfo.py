"""LLVM debug metadata that carries the kernel's Python lines into the PTX (``.file``/``.loc``).

The compile unit uses ``emissionKind: DebugDirectivesOnly``: LLVM's NVPTX backend then writes
``.file``/``.loc`` directives and no DWARF sections, and leaves the ``.target`` without ``, debug``
(ptxas refuses optimized code with full debug information). The assembler's ``-lineinfo``
keeps the lines in the cubin, which is what compute-sanitizer and Nsight Compute read.

Each instruction lowered from an IR op gets a ``DILocation`` of the op's ``loc``. Ops inlined from
a helper in another file are scoped by a ``DILexicalBlockFile`` naming that file, so their lines
point into the helper's source.
"""
from __future__ import annotations

import os

from ..ir.core import Location

__all__ = ["LineTable"]


def _string(text: str) -> str:
    """An LLVM metadata string literal."""
    return '"' + "".join(ch if 32 <= ord(ch) < 127 and ch not in '"\\' else
                         "".join(f"\\{b:02X}" for b in ch.encode()) for ch in text) + '"'


class LineTable:
    """Metadata for one kernel: ``location(loc)`` names the ``!dbg`` node of a source location,
    ``subprogram`` the kernel's ``DISubprogram``, and ``metadata()`` lists every node."""

    def __init__(self, kernel_name: str, kernel_loc: Location, first: int = 0):
        self.first = first  # metadata numbers from here on (the emitter keeps lower ones for itself)
        self.nodes: list[str] = []
        self.files: dict[str, str] = {}
        self.scopes: dict[str, str] = {}  # file name -> scope of the ops from that file
        self.locations: dict[tuple, str] = {}
        self.kernel_file = kernel_loc.filename
        file = self._file(kernel_loc.filename)
        self.unit = self._node(f"distinct !DICompileUnit(language: DW_LANG_Python, file: {file}, producer: \"tylo\", "
                               f"isOptimized: true, runtimeVersion: 0, emissionKind: DebugDirectivesOnly)")
        types = self._node("!DISubroutineType(types: !{})")
        line = max(kernel_loc.lineno, 0)
        self.subprogram = self._node(
            f"distinct !DISubprogram(name: {_string(kernel_name)}, scope: {file}, file: {file}, line: {line}, "
            f"type: {types}, scopeLine: {line}, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: {self.unit})")
        self.scopes[kernel_loc.filename] = self.subprogram

    def _node(self, text: str) -> str:
        name = f"!{self.first + len(self.nodes)}"
        self.nodes.append(f"{name} = {text}")
        return name

    def _file(self, filename: str) -> str:
        node = self.files.get(filename)
        if node is None:
            directory, base = os.path.split(filename)
            node = self.files[filename] = self._node(f"!DIFile(filename: {_string(base)}, "
                                                     f"directory: {_string(directory)})")
        return node

    def _scope(self, filename: str) -> str:
        scope = self.scopes.get(filename)
        if scope is None:
            scope = self.scopes[filename] = self._node(
                f"!DILexicalBlockFile(scope: {self.subprogram}, file: {self._file(filename)}, discriminator: 0)")
        return scope

    def location(self, loc: Location) -> str | None:
        """The ``!dbg`` node for ``loc``; None for an unknown location (no attachment)."""
        if loc.lineno <= 0:
            return None
        key = (loc.filename, loc.lineno, loc.col)
        node = self.locations.get(key)
        if node is None:
            node = self.locations[key] = self._node(
                f"!DILocation(line: {loc.lineno}, column: {loc.col + 1}, scope: {self._scope(loc.filename)})")
        return node

    def metadata(self) -> list[str]:
        """The module-level lines: the compile unit list, the module flags and every node."""
        version = self._node('!{i32 2, !"Debug Info Version", i32 3}')
        dwarf = self._node('!{i32 2, !"Dwarf Version", i32 4}')
        return ["!llvm.dbg.cu = !{" + self.unit + "}", f"!llvm.module.flags = !{{{version}, {dwarf}}}", *self.nodes]
