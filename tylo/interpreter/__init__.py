"""Reference semantics of the IR on the CPU (see ``core``): ``run(kernel.lower(...), args, grid, block)``."""
from .core import InterpreterError, Pointer, run

__all__ = ["run", "InterpreterError", "Pointer"]
