"""Host-side layout algebra and ownership maps (CuTe conventions).

Pure Python + numpy; imports nothing else from tylo.  See docs/layouts.md.
"""

from .algebra import (
    blocked_product,
    coalesce,
    coalesce_modes,
    complement,
    compose,
    flat_divide,
    left_inverse,
    logical_divide,
    logical_product,
    raked_product,
    right_inverse,
    tile,
    tiled_divide,
    zipped_divide,
)
from .layout import ComposedLayout, Layout, Swizzle, make_layout, same_map
from .ownership import (
    Ownership,
    fit_tv_layout,
    index_table,
    is_complete,
    is_injective,
    ownership_table,
    replication,
    same_distribution,
)
from .plans import (
    BroadcastPlan,
    ReductionPlan,
    RegisterWindow,
    RelayoutPlan,
    VectorAccess,
    VectorAccessPlan,
    broadcast_plan,
    reduction_plan,
    register_window,
    relayout_plan,
    vector_access_plan,
)
from .recognise import (
    SwizzledStructure,
    TmemBand,
    affine_reason,
    axis_strides,
    contiguity,
    is_affine,
    offsets_table,
    swizzled_structure,
    swizzled_structure_reason,
    tmem_band,
    tmem_band_reason,
)
from .window import View, permutedims, window

__all__ = [
    # layouts
    "Layout", "Swizzle", "ComposedLayout", "make_layout", "same_map",
    # algebra
    "coalesce", "coalesce_modes", "compose", "complement", "right_inverse", "left_inverse",
    "logical_divide", "zipped_divide", "tiled_divide", "flat_divide",
    "logical_product", "blocked_product", "raked_product", "tile",
    # windows
    "View", "window", "permutedims",
    # recognisers
    "axis_strides", "is_affine", "affine_reason", "contiguity", "offsets_table",
    "SwizzledStructure", "swizzled_structure", "swizzled_structure_reason",
    "TmemBand", "tmem_band", "tmem_band_reason",
    # ownership
    "Ownership", "ownership_table", "index_table", "is_complete", "is_injective",
    "replication", "same_distribution", "fit_tv_layout",
    # plans
    "ReductionPlan", "BroadcastPlan", "RegisterWindow", "RelayoutPlan",
    "VectorAccess", "VectorAccessPlan", "reduction_plan", "broadcast_plan",
    "register_window", "relayout_plan", "vector_access_plan",
]
