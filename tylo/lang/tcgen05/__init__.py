"""Blackwell tcgen05 (sm_100a), in three layers:

* ``plan``: ``Tcgen05MMA`` plans, descriptors, ``tmem_columns`` (pure, host side);
* ``raw``: one builtin per ``nv.tcgen05.*`` op (``tmem_alloc``, ``tcgen05_ld``, ``tcgen05_mma``, ...);
* ``api``: the seed's API (``load_async``, ``wait_load``, ``tcgen05_operand``, ``mma_tcgen05``, ...).

Operand roles (``OperandA``/``OperandB``) are shared with WGMMA (``tylo.lang.operands``). Everything is
importable from ``tylo.lang.tcgen05``.
"""
from ..operands import OperandA, OperandB
from .api import (
                  SmemOperand,
                  Tcgen05Operand,
                  TmemLoad,
                  accumulator,
                  commit_mma,
                  load_async,
                  mma_tcgen05,
                  operand_shape,
                  smem_operand,
                  store_async,
                  tcgen05_operand,
                  tmem_operand_address,
                  wait_load,
                  wait_stores,
)
from .api import offsets_table_of as offsets_table_of  # helpers re-exported outside __all__
from .plan import (
                  IDESC_FIELDS,
                  SMEM_DESC_FIELDS,
                  SWIZZLE_CODES,
                  Tcgen05MMA,
                  decode_fields,
                  encode_fields,
                  smem_descriptor,
                  smem_descriptor_encode,
                  tmem_columns,
)
from .plan import dtype_name as dtype_name
from .raw import checked_cta_group as checked_cta_group
from .raw import (
                  fence_after_thread_sync,
                  fence_before_thread_sync,
                  tcgen05_commit,
                  tcgen05_ld,
                  tcgen05_mma,
                  tcgen05_st,
                  tcgen05_wait_ld,
                  tcgen05_wait_st,
                  tmem_alloc,
                  tmem_dealloc,
                  tmem_relinquish_alloc_permit,
)
from .raw import register_type as register_type
from .raw import require_sm100a as require_sm100a
from .raw import shared_pointer_operand as shared_pointer_operand
from .raw import u32_operand as u32_operand

__all__ = [
    "IDESC_FIELDS",
    "SMEM_DESC_FIELDS",
    "SWIZZLE_CODES",
    "encode_fields",
    "decode_fields",
    "Tcgen05MMA",
    "smem_descriptor",
    "smem_descriptor_encode",
    "tmem_columns",
    "tmem_alloc",
    "tmem_dealloc",
    "tmem_relinquish_alloc_permit",
    "tcgen05_ld",
    "tcgen05_st",
    "tcgen05_wait_ld",
    "tcgen05_wait_st",
    "fence_before_thread_sync",
    "fence_after_thread_sync",
    "tcgen05_mma",
    "tcgen05_commit",
    "load_async",
    "wait_load",
    "store_async",
    "wait_stores",
    "TmemLoad",
    "OperandA",
    "OperandB",
    "operand_shape",
    "SmemOperand",
    "smem_operand",
    "tmem_operand_address",
    "accumulator",
    "Tcgen05Operand",
    "tcgen05_operand",
    "mma_tcgen05",
    "commit_mma",
]
