"""Semantics of Hopper warpgroup MMA (``nv.wgmma.*``), PTX ISA 9.7.15 (wgmma).

All ops are warpgroup collectives (the 128 threads of 4 warps meet, ``machine.py``), computed
with numpy for the whole warpgroup at once.

* ``mma_async``: the operands are decoded from the shared-memory matrix descriptors' bits
  (ISA 9.7.15.5.1.2.2, ``WGMMA_DESCRIPTOR_FIELDS``): start address, LBO, SBO and swizzle mode give
  each element's byte address in the canonical K-major or MN-major layout (the inverse of
  ``tylo.layouts.recognise``), swizzled on the absolute address bits like the hardware; so a wrong
  descriptor reads the wrong bytes, as on the GPU. ``mma_async_rs`` takes A from registers
  (the m64kK A fragment: warp ``w`` rows ``16w..``, register ``j`` of lane ``l`` at row
  ``l//4 + 8 (j % 2)``, columns ``e (l % 4) + (j // 2) K/2 ..`` with ``e`` elements per register).
* The product is asynchronous (``machine.AsyncOp``, in order per warpgroup): the operands are read
  when it completes, at a point the scheduler picks or at the ``wait_group`` that covers it, and
  its results are ``PendingValue``s until that wait. D = A B^T (+ C), products and sums in float64,
  rounded once to fp32 per instruction: the hardware accumulates in fp32 in an unspecified order,
  so compare with a tolerance (tests use 1e-5 relative to the norm for K <= 256, bf16 inputs).
* ``commit_group`` closes the warpgroup's open group; ``wait_group n`` completes all but the
  newest ``n`` groups, retires their shared reads and delivers their accumulators through the
  accumulator fragment (``Ownership.wgmma_accumulator``).
"""
from __future__ import annotations

import functools

import numpy as np

from ..ir import types as T
from ..ir.nv.bitfields import unpack_fields
from ..ir.nv.wgmma import WGMMA_DESCRIPTOR_FIELDS
from ..layouts import Ownership
from .core import PendingValue, numpy_dtype
from .errors import InterpreterError
from .hazards import SharedRead
from .machine import AsyncOp
from .operand_layout import operand_addresses
from .registry import WARPGROUP_SEMANTICS

__all__ = ["decode_operand_addresses", "accumulator_coords"]

_SWIZZLE_BYTES = {0: 0, 1: 128, 2: 64, 3: 32}
_DTYPES = {"bf16": T.bf16, "f16": T.f16, "f8e4m3": T.f8e4m3, "f8e5m2": T.f8e5m2}


def decode_operand_addresses(desc: int, rows: int, k: int, elem_bytes: int, mn_major: bool) -> np.ndarray:
    """Byte address of element ``[mn, k]`` of a ``rows x k`` operand described by ``desc``."""
    f = unpack_fields(WGMMA_DESCRIPTOR_FIELDS, int(desc))
    if f["base_offset"]:
        raise InterpreterError("wgmma descriptor: a non-zero base offset is not modelled")
    return operand_addresses(f["start_address"] << 4, f["leading_byte_offset"] << 4, f["stride_byte_offset"] << 4,
                             _SWIZZLE_BYTES[f["swizzle"]], rows, k, elem_bytes, mn_major)


@functools.lru_cache(maxsize=None)
def accumulator_coords(n: int):
    """``(rows, cols)``: the (thread, register) -> (row, column) of the m64nN accumulator."""
    own = Ownership.wgmma_accumulator(n)
    idx = np.array([[own.index(t, v) for v in range(n // 2)] for t in range(128)])
    return idx % 64, idx // 64


def _gather_elements(cta, addr, dtype):
    eb = dtype.itemsize
    raw = cta.smem.view(np.ndarray)
    data = raw[addr[..., None] + np.arange(eb)]
    if addr.max() + eb > raw.size or addr.min() < 0:
        raise InterpreterError("wgmma: an operand descriptor addresses past the CTA's shared memory")
    return np.ascontiguousarray(data).view(numpy_dtype(dtype))[..., 0].astype(np.float64)


def _unit(machine, threads):
    th = threads[0]
    key = (th.cta.rank, th.linear // 128)
    units = th.cta.state.setdefault("wgmma", {})
    return units.setdefault(key, {"open": [], "groups": [], "last": None, "fenced": False})


def _check_threads(op, lanes):
    if len(lanes) != 128:
        raise InterpreterError(f"{op.loc}: {op.name} is .sync.aligned over a warpgroup: all 128 threads must "
                               f"execute it, {len(lanes)} do")


def _accumulator_input(machine, op, lanes, first, n):
    """The C operand: a pending token's result (a chain of mma_async), or the registers gathered."""
    x = lanes[0][first]
    if type(x) is PendingValue:
        return x.token
    rows, cols = accumulator_coords(n)
    vals = np.array([[float(v) for v in lanes[i][first:first + n // 2]] for i in range(128)], np.float64)
    c = np.zeros((64, n))
    c[rows, cols] = vals
    return c


def _a_from_registers(lanes, na, dtype, k):
    eb = dtype.itemsize
    per = 4 // eb
    a = np.zeros((64, k))
    for i in range(128):
        w, lane = divmod(i, 32)
        g, c = divmod(lane, 4)
        for j, word in enumerate(lanes[i][:na]):
            vals = np.array([int(word) & 0xFFFFFFFF], np.uint32).view(numpy_dtype(dtype)).astype(np.float64)
            row = 16 * w + g + 8 * (j % 2)
            col = per * c + (j // 2) * (k // 2)
            a[row, col:col + per] = vals
    return a


def _mma(machine, op, lanes, threads, register_a=False):
    _check_threads(op, lanes)
    m_, n, k = op.attrs["shape"]
    dtype = _DTYPES.get(op.attrs["dtype"])
    if dtype is None:
        raise InterpreterError(f"{op.loc}: wgmma with {op.attrs['dtype']} inputs is not modelled")
    imms = tuple(op.attrs["immediates"])
    scale_a, scale_b = imms[0], imms[1]
    cta = threads[0].cta
    unit = _unit(machine, threads)
    first = lanes[0]
    if register_a:
        na = op.attrs["a_regs"]
        a_vals = _a_from_registers(lanes, na, dtype, k)
        desc_b, scale_d = first[na], first[na + 1]
        tb = imms[2] if len(imms) > 2 else 0
        acc_first = na + 2
        a_addr = None
    else:
        desc_a, desc_b, scale_d = first[0], first[1], first[2]
        ta, tb = (imms[2], imms[3]) if len(imms) > 3 else (0, 0)
        a_addr = decode_operand_addresses(desc_a, 64, k, dtype.itemsize, bool(ta))
        acc_first = 3
    b_addr = decode_operand_addresses(desc_b, n, k, dtype.itemsize, bool(tb))
    c = _accumulator_input(machine, op, lanes, acc_first, n) if int(scale_d) else None
    if not unit["fenced"] and type(first[acc_first]) is not PendingValue:
        # PTX ISA 9.7.15.6.1 (wgmma.fence): required before the first wgmma.mma_async and whenever the
        # warpgroup's registers (accumulators, A fragments) were written by other instructions
        machine.hazard("wgmma without wgmma.fence",
                       "a wgmma.mma_async reads accumulator registers written by other instructions with no "
                       "wgmma.fence in between", [("the wgmma.mma_async", op.loc)])
    unit["fenced"] = True

    token = AsyncOp("WGMMA", op, cta, None, after=unit["last"])
    reads = [SharedRead("WGMMA", op, int(x.min()), int(x.max()) + dtype.itemsize) for x in (a_addr, b_addr)
             if x is not None]

    def effect():
        a = a_vals if register_a else _gather_elements(cta, a_addr, dtype)
        b = _gather_elements(cta, b_addr, dtype)
        d = (scale_a * a) @ (scale_b * b).T
        if c is not None:
            d = d + (c.result if isinstance(c, AsyncOp) else c)
        token.result = d.astype(np.float32).astype(np.float64)

    token.effect = effect
    token.reads = reads
    for r in reads:
        cta.shadow.async_read(machine, r, threads)
    unit["last"] = token
    unit["open"].append(token)
    machine.issue(token)
    machine.pending_values += 1
    return {i: tuple(PendingValue(token, i, r) for r in range(n // 2)) for i in lanes}


def _mma_rs(machine, op, lanes, threads):
    return _mma(machine, op, lanes, threads, register_a=True)


def _fence(machine, op, lanes, threads):
    _check_threads(op, lanes)
    _unit(machine, threads)["fenced"] = True
    return {i: tuple(v) for i, v in lanes.items()}


def _commit(machine, op, lanes, threads):
    _check_threads(op, lanes)
    unit = _unit(machine, threads)
    if unit["open"]:
        unit["groups"].append(unit["open"])
    unit["open"] = []
    return {i: () for i in lanes}


def _wait(machine, op, lanes, threads):
    _check_threads(op, lanes)
    unit = _unit(machine, threads)
    cta = threads[0].cta
    unit["fenced"] = False      # the delivered accumulators become ordinary registers again
    while len(unit["groups"]) > op.attrs["n"]:
        for token in unit["groups"].pop(0):
            machine.complete(token)
            token.retired = True
            machine.pending_values -= 1
            for r in token.reads:
                cta.shadow.retire_read(r, threads)
    out = {}
    first = lanes[0]
    if first and all(type(x) is PendingValue and x.token is first[0].token for x in first):
        token = first[0].token
        if token.retired:
            rows, cols = accumulator_coords(2 * len(first))
            vals = token.result[rows, cols].astype(np.float32)
            return {i: tuple(vals[i]) for i in lanes}
    for i, vals in lanes.items():
        out[i] = tuple(_deliver(x, i) for x in vals)
    return out


def _deliver(x, i):
    if type(x) is not PendingValue or not x.token.retired:
        return x
    rows, cols = accumulator_coords(x.token.result.shape[1])
    return np.float32(x.token.result[rows[x.thread, x.index], cols[x.thread, x.index]])


def _order_before_wait(machine, op, lanes, threads):
    return {i: () for i in lanes}       # a scheduling constraint for ptxas: no effect on any value


WARPGROUP_SEMANTICS.add("nv.wgmma.order_before_wait", _order_before_wait)
WARPGROUP_SEMANTICS.add("nv.wgmma.fence", _fence)
WARPGROUP_SEMANTICS.add("nv.wgmma.mma_async", _mma)
WARPGROUP_SEMANTICS.add("nv.wgmma.mma_async_rs", _mma_rs)
WARPGROUP_SEMANTICS.add("nv.wgmma.commit_group", _commit)
WARPGROUP_SEMANTICS.add("nv.wgmma.wait_group", _wait)
