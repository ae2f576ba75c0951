"""Hopper WGMMA (sm_90a), in three layers:

* ``plan``: ``WGMMA64`` plans, their rules, the matrix descriptor and the instruction (pure, host side);
* ``raw``: one builtin per IR op (``wgmma_fence``, ``wgmma_mma_async``, ...);
* ``api``: the seed's API (``wgmma_operand``, ``mma_async``, ``wait_mma``, ``finish_mma``).

Operand roles (``OperandA``/``OperandB``) are shared with tcgen05 (``tylo.lang.operands``);
``shared_address`` lives in ``tylo.lang.address``. Everything is importable from ``tylo.lang.wgmma``.
"""
from ..address import shared_address
from ..operands import OperandA, OperandB
from .api import (
                  PartialAccumulator,
                  PendingAccumulator,
                  WGMMAOperand,
                  a_register_ownership,
                  finish_mma,
                  mma_async,
                  mma_async_interleaved,
                  wait_mma,
                  wgmma_operand,
)
from .api import operand_encoding as operand_encoding  # helpers re-exported outside __all__
from .plan import (
                  DESCRIPTOR_FIELDS,
                  SWIZZLE_MODE,
                  WGMMA64,
                  WGMMAInstruction,
                  accumulator_ownership,
                  accumulator_registers,
                  decode_fields,
                  encode_fields,
                  smem_descriptor,
                  validate_wgmma,
                  wgmma_instruction,
)
from .plan import MAX_ACC_REGISTERS as MAX_ACC_REGISTERS
from .plan import operand_shape as operand_shape
from .raw import require_sm90a as require_sm90a
from .raw import wgmma_commit_group, wgmma_fence, wgmma_mma_async, wgmma_wait_group, zero_accumulators

__all__ = [
    "WGMMA64",
    "validate_wgmma",
    "OperandA",
    "OperandB",
    "DESCRIPTOR_FIELDS",
    "SWIZZLE_MODE",
    "encode_fields",
    "decode_fields",
    "smem_descriptor",
    "WGMMAInstruction",
    "wgmma_instruction",
    "accumulator_ownership",
    "accumulator_registers",
    "wgmma_fence",
    "wgmma_mma_async",
    "wgmma_commit_group",
    "wgmma_wait_group",
    "zero_accumulators",
    "shared_address",
    "a_register_ownership",
    "WGMMAOperand",
    "PendingAccumulator",
    "PartialAccumulator",
    "wgmma_operand",
    "mma_async",
    "mma_async_interleaved",
    "wait_mma",
    "finish_mma",
]
