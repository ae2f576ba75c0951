"""Names in a kernel: what a scope maps, the markers it holds, and what statements bind.

A scope is a plain dict from a variable name to its value: a Python object (compile-time),
an IR ``Value`` (runtime) or a structured value. Names starting with ``%`` are the
frontend's own: the jump flags ``%ret``/``%brk<n>``/``%cont<n>`` (True/False at compile
time, a runtime bool after a runtime branch), the helper's return value and the induction
variables ``%iv<n>`` of range loops that can break. Lookup order: the scope, the function's
closure, its module globals, Python's builtins. A nested region (a branch, a loop's
condition or body) is visited in its own scope, a copy of the enclosing one
(``VisitorCore.region``); what it leaves is joined back by ``frontend.control_flow``.
"""
from __future__ import annotations

import ast
import builtins

__all__ = ["Undefined", "MISSING", "RET", "RETVAL", "PY_BUILTINS", "is_jump_flag", "jumps", "assigned_names"]

MISSING = object()
RET = "%ret"
RETVAL = "%retval"

PY_BUILTINS = {name: getattr(builtins, name) for name in dir(builtins) if not name.startswith("_")}


class Undefined:
    """A name that is not usable here (assigned in only one branch, or loop-local)."""

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:  # never shown as an object address if it reaches a message
        return f"an undefined name ({self.reason})"


def is_jump_flag(name: str) -> bool:
    """``%ret``, ``%brk<n>``, ``%cont<n>``: missing on one side of a join means False there."""
    return name == RET or name.startswith("%brk") or name.startswith("%cont")


def jumps(stmt, kinds) -> bool:
    """Does ``stmt`` contain a jump of ``kinds`` that leaves it (not inside an inner loop for break/continue)?"""
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, kinds):
            return True
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.For, ast.While)) and kinds != (ast.Return,):
                # break/continue inside an inner loop belong to it; returns still leave
                if ast.Return in kinds:
                    stack.extend(n for n in ast.walk(child) if isinstance(n, ast.Return))
                continue
            if isinstance(child, (ast.FunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            stack.append(child)
    return False


def assigned_names(stmts) -> list[str]:
    """Names bound anywhere in ``stmts`` (assignment targets, for targets), in first-seen order."""
    names: dict[str, None] = {}

    def targets(t):
        if isinstance(t, ast.Name):
            names[t.id] = None
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                targets(e)
        elif isinstance(t, ast.Starred):
            targets(t.value)

    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    targets(t)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets(node.target)
            elif isinstance(node, ast.For):
                targets(node.target)
    return list(names)
