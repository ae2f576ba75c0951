"""Exceptions of the CUDA runtime layer.

``CudaError`` carries the driver's result code, its name as ``cuGetErrorName``
spells it, and the API call that failed. ``NoGPUError`` is the subclass raised
when there is no CUDA driver library or no device at all; code that can run
without a GPU (compiling, host-side checks) catches exactly that one.
"""

from __future__ import annotations

__all__ = ["CudaError", "NoGPUError", "DRIVER_NOT_FOUND"]

#: tylo's own code for "libcuda could not be loaded" (not a CUresult value).
DRIVER_NOT_FOUND = -1


def _enum_name(code: int) -> str:
    """The CUresult name of ``code`` without calling the driver (the enum is
    pure Python in cuda.bindings, so this works on machines without libcuda)."""
    try:
        from cuda.bindings import driver as _d

        return _d.CUresult(code).name
    except Exception:  # unknown code or cuda.bindings missing
        return f"CUDA_ERROR_{code}"


class CudaError(RuntimeError):
    """A CUDA driver call failed.

    Attributes: ``code`` (int CUresult), ``name`` (e.g.
    ``'CUDA_ERROR_INVALID_VALUE'``), ``call`` (e.g. ``'cuLaunchKernel'``),
    ``description`` (the driver's text, or None).
    """

    def __init__(self, code: int, name: str | None = None, call: str = "",
                 description: str | None = None, hint: str | None = None):
        self.code = int(code)
        self.name = name if name else _enum_name(self.code)
        self.call = call
        self.description = description
        self.hint = hint
        msg = f"{call or 'CUDA call'} failed: {self.name}"
        if description:
            msg += f" ({description})"
        if hint:
            msg += f". {hint}"
        super().__init__(msg)

    def __reduce__(self):
        return (type(self), (self.code, self.name, self.call, self.description, self.hint))


class NoGPUError(CudaError):
    """No usable CUDA driver or GPU on this machine.

    Raised by every runtime function that needs the device (loading modules,
    allocating, launching). Compiling kernels to PTX/cubin does not need a
    GPU and never raises this.
    """

    def __init__(self, code: int = 100, name: str | None = None, call: str = "",
                 description: str | None = None, hint: str | None = None):
        if hint is None:
            hint = ("tylo needs an NVIDIA GPU and its driver (libcuda.so.1) to load and "
                    "launch kernels; compiling to PTX/cubin works without one. "
                    "Check `nvidia-smi` on this machine")
        if name is None and code == DRIVER_NOT_FOUND:
            name = "CUDA_DRIVER_NOT_FOUND"
        super().__init__(code, name, call, description, hint)
