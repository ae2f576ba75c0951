"""The host half of a TMA plan: ``prepare_tma(plan, array)`` encodes a tensor map into a ``TMABinding``.

Needs the driver (``tylo.runtime.tma.encode_tiled``); the plan and its pure geometry are in
``tylo.ir.nv.tma`` (re-exported by ``tylo.lang.tma``). Importable as ``tylo.prepare_tma``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir.nv.tma import TMATile, tma_geometry
from . import tma as rt_tma
from .arrays import describe_array, dtype_name

__all__ = ["TMABinding", "prepare_tma"]


@dataclass(frozen=True, eq=False)
class TMABinding:
    """A tensor map for ``plan`` over a device ``array`` (kept alive by this object).

    ``descriptor``: the 128-byte CUtensorMap; ``rank``: 2, or 3 for a batch;
    ``bounds``: the logical extents (origin order) the map covers.  Passed to a
    kernel as a 128-byte grid-constant parameter (``__tylo_param__``).
    """

    # the native launcher may remember what __tylo_param__ returned per object: it never changes
    __tylo_param_frozen__ = True

    plan: TMATile
    array: Any = field(repr=False)
    descriptor: bytes = field(repr=False)
    rank: int
    bounds: tuple

    def __tylo_param__(self):
        if self.descriptor is None:
            raise TypeError("this TMA binding is of a host (numpy) array: it runs only in the interpreter "
                            "(TYLO_INTERPRET=1 or tylo.jit(interpret=True))")
        return ("tma", self.plan, self.rank, self.descriptor)


def prepare_tma(plan: TMATile, array, bounds=None) -> TMABinding:
    """Encode a tensor map of ``plan`` tiles over a 2-D array (3-D: a batch of matrices).

    ``bounds``: logical extents smaller than the array (padded data); TMA
    zero-fills loads past them and drops stores past them.
    """
    if not isinstance(plan, TMATile):
        raise TypeError(f"prepare_tma: expected a TMATile plan, got {plan!r}")
    if _is_host_array(array):
        return _host_binding(plan, array, bounds)
    info = describe_array(array)
    if info.dtype_name != plan.dtype.name:
        raise ValueError(f"prepare_tma: the array holds {info.dtype_name}, the plan {plan.dtype}")
    bounds, dims, gstrides, box = tma_geometry(plan, tuple(info.shape), tuple(info.strides), bounds)
    desc = rt_tma.encode_tiled(info.ptr, info.dtype_name, dims, gstrides, box, plan.swizzle)
    return TMABinding(plan, array, desc, len(dims), bounds)


def _is_host_array(array) -> bool:
    return type(array).__module__ == "numpy" and hasattr(array, "__array_interface__")


def _host_binding(plan: TMATile, array, bounds) -> TMABinding:
    """A binding of a host numpy array for the interpreter: no tensor map is encoded (no driver);
    the interpreter reads the plan, the array and the bounds."""
    try:
        name = dtype_name(array.dtype)
    except (TypeError, KeyError, ValueError):
        name = str(array.dtype)
    if name != plan.dtype.name:
        raise ValueError(f"prepare_tma: the array holds {array.dtype}, the plan {plan.dtype}")
    item = array.itemsize
    if any(s % item for s in array.strides):
        raise ValueError(f"prepare_tma: strides {array.strides} are not whole elements")
    strides = tuple(s // item for s in array.strides)
    bounds, dims, _, _ = tma_geometry(plan, tuple(array.shape), strides, bounds)
    if strides[-2] * item % 16:
        raise ValueError(f"prepare_tma: TMA needs 16-byte aligned rows; the row stride is {strides[-2] * item} bytes")
    return TMABinding(plan, array, None, len(dims), bounds)
