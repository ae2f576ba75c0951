"""tylo: a Python JIT compiler for explicit, layout-typed NVIDIA GPU kernels.

Kernels are Python functions decorated with ``@tylo.jit``; see README.md and
docs/language.md. Everything a kernel can call is importable from here.
"""
from ._version import __version__  # noqa: F401 - tylo.__version__

from .frontend.errors import CompileError
from .ir.types import (Ptr, bf16, bool_, constexpr, f8e4m3, f8e5m2, f16, f32, f64, i8, i16, i32, i64, u8, u16,
                       u32, u64)
from .lang.core import (SharedArray, abs, atomic_add, atomic_cas, atomic_exch, atomic_max, atomic_min, bitcast,
                        block_dim, block_idx, cast, ceil, cos, exp, exp2, fdiv, fma, floor, grid_dim, lane_id, log,
                        log2, maximum, minimum, printf, rcp, rsqrt, shared_array, shfl_down, shfl_sync, shfl_up,
                        shfl_xor, sin, sqrt, static_assert, static_range, sync_threads, tanh, thread_idx, warp_id,
                        where)
from .lang.fragment import Fragment, PackedFragment, fragment, full, pack, relayout, unpack
from .lang.softmax import (log_sum_exp, online_softmax_finish_exp2, online_softmax_merge, online_softmax_normalize,
                           online_softmax_normalize_fast, online_softmax_start, online_softmax_update,
                           online_softmax_update_exp2, row_softmax)
from .lang.tiles import GlobalTile, SharedTile, Tile, load, permutedims, store, window
from .layouts import (ComposedLayout, Layout, Ownership, Swizzle, broadcast_plan, reduction_plan,
                      swizzled_structure, vector_access_plan)
from .lang.mma import MMAAtom, TiledMMA, mma, mma_sync, tf32, zero_accumulator
from .lang.debug import device_assert
from .lang.copy import commit_copies, cp_async, ldmatrix, stmatrix, wait_copies
from .lang.tiles import copy_async, fragment_coords, slot_offsets, store_bounded, store_remote
from .lang.tmem import TmemTile, TmemTransfer, partition, reinterpret_tile, tmem_location
from .lang.tcgen05 import (Tcgen05MMA, accumulator, commit_mma, fence_after_thread_sync, fence_before_thread_sync,
                           load_async, store_async, tcgen05_operand, tmem_alloc, tmem_dealloc,
                           tmem_relinquish_alloc_permit, wait_load, wait_stores)
from .lang import mbarrier as _mbarrier, tma as _tma, wgmma as _wgmma
from .lang.mbarrier import *  # noqa: F401,F403 - mbarriers, fences, named barriers, elect, setmaxnreg
from .lang.tma import *  # noqa: F401,F403 - TMA plans, prepare_tma and the copy builtins
from .lang.wgmma import *  # noqa: F401,F403 - WGMMA plans, descriptors and builtins
from .codegen.diagnostics import WGMMASerializationWarning
from .jit import CompiledKernel, JITFunction, func, jit
from .runtime.errors import CudaError
from .runtime.arrays import DeviceArray, empty, to_device, zeros
from .runtime.tma_binding import TMABinding, prepare_tma
from .autotuner import Config, autotune, tune_launches
from . import testing

min = minimum  # noqa: A001 - tylo.min / tylo.max inside kernels
max = maximum  # noqa: A001
bool = bool_  # noqa: A001 - the dtype, as tylo.bool

__all__ = [
    "CompileError", "CudaError", "jit", "func", "JITFunction", "CompiledKernel", "DeviceArray", "to_device", "empty",
    "zeros", "Config", "autotune", "tune_launches", "testing",
    "Ptr", "constexpr", "bool_", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64",
    "f8e4m3", "f8e5m2", "thread_idx", "block_idx", "block_dim", "grid_dim", "lane_id", "warp_id", "sync_threads",
    "shared_array", "SharedArray", "shfl_sync", "shfl_xor", "shfl_up", "shfl_down", "atomic_add", "atomic_max",
    "atomic_min", "atomic_cas", "atomic_exch", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh",
    "floor", "ceil", "fma", "abs", "rcp", "fdiv", "fragment_coords", "slot_offsets", "WGMMASerializationWarning",
    "min", "max", "minimum", "maximum", "where", "cast", "bitcast", "static_assert",
    "static_range", "printf", "device_assert", "Fragment", "PackedFragment", "fragment", "full", "pack", "unpack",
    "relayout", "GlobalTile", "SharedTile",
    "Tile", "load", "store", "window", "permutedims", "Layout", "ComposedLayout", "Swizzle", "Ownership",
    "reduction_plan", "broadcast_plan", "vector_access_plan", "online_softmax_update", "online_softmax_merge",
    "online_softmax_normalize", "log_sum_exp", "row_softmax", "online_softmax_start", "online_softmax_update_exp2",
    "online_softmax_finish_exp2", "online_softmax_normalize_fast", "MMAAtom", "TiledMMA", "mma", "mma_sync", "tf32",
    "zero_accumulator", "commit_copies", "cp_async", "ldmatrix", "stmatrix", "wait_copies", "copy_async",
    "store_remote", "store_bounded", "TmemTile", "TmemTransfer", "partition", "reinterpret_tile", "tmem_location",
    "Tcgen05MMA",
    "fence_after_thread_sync", "fence_before_thread_sync", "load_async", "store_async", "tmem_alloc",
    "tmem_dealloc", "tmem_relinquish_alloc_permit", "wait_load", "wait_stores", "tcgen05_operand", "accumulator",
    "commit_mma", "swizzled_structure", "TMABinding", "prepare_tma",
    *_mbarrier.__all__, *_tma.__all__, *_wgmma.__all__,
]
