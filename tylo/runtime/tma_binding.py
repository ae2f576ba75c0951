"""The host half of a TMA plan: ``prepare_tma(plan, array)`` encodes a tensor map into a ``TMABinding``.

Needs the driver (``tylo.runtime.tma.encode_tiled``); the plan and its pure geometry are in
``tylo.ir.nv.tma`` (re-exported by ``tylo.lang.tma``). Importable as ``tylo.prepare_tma``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir.nv.tma import TMATile, tma_geometry
from . import tma as rt_tma
from .arrays import describe_array

__all__ = ["TMABinding", "prepare_tma"]


@dataclass(frozen=True, eq=False)
class TMABinding:
    """A tensor map for ``plan`` over a device ``array`` (kept alive by this object).

    ``descriptor``: the 128-byte CUtensorMap; ``rank``: 2, or 3 for a batch;
    ``bounds``: the logical extents (origin order) the map covers.  Passed to a
    kernel as a 128-byte grid-constant parameter (``__tylo_param__``).
    """

    plan: TMATile
    array: Any = field(repr=False)
    descriptor: bytes = field(repr=False)
    rank: int
    bounds: tuple

    def __tylo_param__(self):
        return ("tma", self.plan, self.rank, self.descriptor)


def prepare_tma(plan: TMATile, array, bounds=None) -> TMABinding:
    """Encode a tensor map of ``plan`` tiles over a 2-D array (3-D: a batch of matrices).

    ``bounds``: logical extents smaller than the array (padded data); TMA
    zero-fills loads past them and drops stores past them.
    """
    if not isinstance(plan, TMATile):
        raise TypeError(f"prepare_tma: expected a TMATile plan, got {plan!r}")
    info = describe_array(array)
    if info.dtype_name != plan.dtype.name:
        raise ValueError(f"prepare_tma: the array holds {info.dtype_name}, the plan {plan.dtype}")
    bounds, dims, gstrides, box = tma_geometry(plan, tuple(info.shape), tuple(info.strides), bounds)
    desc = rt_tma.encode_tiled(info.ptr, info.dtype_name, dims, gstrides, box, plan.swizzle)
    return TMABinding(plan, array, desc, len(dims), bounds)
