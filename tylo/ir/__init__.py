"""tylo's typed SSA IR: types, ops, builder, printer, verifier, passes."""
from . import nv  # noqa: F401 - defines the hardware ops, so OPS is complete
from .builder import Builder
from .core import Block, Kernel, Location, Op, Param, Value
from .opdef import Attr, OpDef
from .ops import OPS, OpInfo, define_ops, op_info, register_op
from .passes import DEFAULT_PIPELINE, cse, dce, fold_constants, run_passes
from .printer import print_kernel
from .types import *  # noqa: F401,F403
from .types import __all__ as _types_all
from .verifier import VerificationError, verify

__all__ = [
    "Builder", "Block", "Kernel", "Location", "Op", "Param", "Value", "OPS", "OpInfo", "OpDef", "Attr",
    "op_info", "define_ops", "register_op", "DEFAULT_PIPELINE", "cse", "dce", "fold_constants", "run_passes",
    "print_kernel",
    "VerificationError", "verify", *_types_all,
]
