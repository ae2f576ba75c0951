"""The interpreter's core: a thread (``Thread``, a generator per thread over the IR) and the semantics of
the scalar IR: integer ops wrap at their width and divide like C; float ops round as IEEE binary32/64
(numpy); the special functions are exact (numpy), not the GPU's approximations, so compare them with a
tolerance. A thread yields a request when it reaches a collective or must wait (``Suspend``); the
machine that serves the requests (CTAs, clusters, the scheduler, asynchronous units) is
``machine.py``, the hazard checker ``hazards.py``.

It checks the frontend and the IR passes without a GPU; it says nothing about
codegen (tests on a GPU do).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..ir import types as T
from ..ir.core import Block, Op
from ..ir.scalars import c_div as _cdiv
from ..ir.scalars import convert as _convert_value
from ..ir.scalars import round_float
from ..ir.scalars import wrap_int as _wrap
from ..ir.types import ScalarType
from .errors import HazardError, InterpreterError
from .registry import NOT_MODELLED, THREAD_SEMANTICS, WARP_SEMANTICS, WARPGROUP_SEMANTICS

__all__ = ["InterpreterError", "HazardError", "Pointer", "WARP_OPS", "HANDLERS", "load_bits", "store_bits",
           "numpy_dtype", "STRUCTURAL_OPS", "has_semantics", "Suspend", "Thread", "to_type", "element_view",
           "PendingValue", "SharedBytes", "Blob"]


@dataclass(frozen=True)
class Pointer:
    """A typed pointer into a numpy buffer (``offset`` in elements of ``elem``)."""

    buffer: np.ndarray
    offset: int
    elem: ScalarType

    def __add__(self, n: int) -> "Pointer":
        return Pointer(self.buffer, self.offset + int(n), self.elem)


def _np_dtype(t: ScalarType):
    import ml_dtypes

    return {
        "bool": np.uint8, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
        "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
        "f32": np.float32, "f64": np.float64, "f8e4m3": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2,
    }[t.name]


class SharedBytes(np.ndarray):
    """A CTA's shared memory: one byte array, so that shared pointers have addresses (byte offsets).
    ``cta`` is the CTA whose memory it is (the hazard checker watches its accesses)."""

    def __array_finalize__(self, obj):
        self.cta = getattr(obj, "cta", None)


class Blob:
    """A by-value kernel parameter (a TMA binding): the host object and its generic address."""

    __slots__ = ("obj", "address")

    def __init__(self, obj, address):
        self.obj, self.address = obj, address


class Suspend:
    """What a thread handler returns when the thread must wait for the scheduler: ``request`` is
    ``("wait", ready, op)`` (resume when ``ready()`` returns a value other than None, which becomes
    the op's result; ``("wait", ready, op, answer)``: or with ``answer`` when every thread is blocked, a
    wait that may give up), ``("named", id, count, op)`` (bar.sync) or ``("cluster", op)``."""

    __slots__ = ("request",)

    def __init__(self, request):
        self.request = request


class PendingValue:
    """A register an asynchronous unit has not delivered yet (a WGMMA accumulator before its
    ``wait_group``): using it in any op but the unit's own is a hazard."""

    __slots__ = ("token", "thread", "index")

    def __init__(self, token, thread, index):
        self.token, self.thread, self.index = token, thread, index


def _view(ptr: Pointer) -> np.ndarray:
    flat = ptr.buffer.reshape(-1)
    want = np.dtype(_np_dtype(ptr.elem))
    if isinstance(flat, SharedBytes):
        return flat.view(np.ndarray).view(want)
    if flat.dtype.itemsize != want.itemsize:
        raise InterpreterError(f"a *{ptr.elem} pointer into a {flat.dtype} buffer")
    return flat.view(want)


def _float(t: ScalarType, x):
    return _np_dtype(t)(x)


def _to_type(x, t: ScalarType):
    """A Python/numpy value as a value of IR type ``t`` (a float is rounded once to ``t``)."""
    if t.is_bool:
        return bool(x)
    if t.is_int:
        return _wrap(int(x), t)
    if isinstance(x, (int, float)) or t.name in ("bf16", "f8e4m3", "f8e5m2"):
        # numpy/ml_dtypes convert a Python int through float64 and a float64 to bf16 through
        # float32: both round twice. Round exactly (ir/scalars.py), then store the exact value.
        return _float(t, round_float(x if isinstance(x, int) else float(x), t))
    return _float(t, x)


def _convert(x, s: ScalarType, d: ScalarType):
    """``arith.cast``: C conversions (ir/scalars.py); float -> int truncates and saturates
    (NaN -> 0); int -> float and float narrowing round once; to fp8 saturates."""
    if s == d:
        return x
    value = _convert_value(x, s, d)
    return value if not (d.is_float or d.is_fp8) else _float(d, value)


def _fma(th, op, ins, t):
    """``math.fma``: the exact a*b+c, rounded once."""
    a, b, c = (float(v) for v in ins)
    if not all(math.isfinite(v) for v in (a, b, c)):
        with np.errstate(all="ignore"):
            return _float(t, np.float64(a) * np.float64(b) + np.float64(c))
    return _float(t, round_float(Fraction(a) * Fraction(b) + Fraction(c), t))


def _math(name: str, x, t: ScalarType, fast: bool = False):
    """``math.*``: exact integer ``abs`` (wrapping INT_MIN like the GPU); floats through numpy,
    f16/bf16 in f32 rounded once to the result type. ``fast`` (the ``.approx.ftz`` forms) flushes a
    subnormal f32 input and result to zero; the value is the exact one (the GPU's is within 2 ulp)."""
    if t.is_int:
        if name != "abs":
            raise InterpreterError(f"math.{name} on {t}")
        return _wrap(abs(int(x)), t)
    with np.errstate(all="ignore"):
        if fast:
            return _float(t, _ftz(_MATH[name](_ftz(np.float32(x)))))
        return _float(t, _MATH[name](np.float64(x) if t == T.f64 else np.float32(x)))


_F32_TINY = float(np.finfo(np.float32).tiny)


def _ftz(x):
    """An f32 subnormal flushed to zero of the same sign (PTX ``.ftz``)."""
    x = np.float32(x)
    return np.float32(np.copysign(0.0, x)) if x != 0 and abs(float(x)) < _F32_TINY else x


def _div(th, op, ins, t):
    """``arith.div``: IEEE; ``fast`` (``div.full.ftz.f32``, f16/bf16 through f32) flushes subnormal
    operands and result to zero."""
    if not op.attrs.get("fast"):
        return _IEEE_DIV(th, op, ins, t)
    with np.errstate(all="ignore"):
        return _float(t, _ftz(_ftz(np.float32(ins[0])) / _ftz(np.float32(ins[1]))))


_CMP = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
        "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}

_MATH = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
         "rsqrt": lambda x: 1 / np.sqrt(x), "abs": np.abs, "sin": np.sin, "cos": np.cos, "floor": np.floor,
         "ceil": np.ceil, "tanh": np.tanh, "rcp": lambda x: np.float32(1) / x if x.dtype == np.float32 else 1 / x}


class Thread:
    """One thread: its registers (``env``), its CTA, and what the hazard checker knows it has
    synchronised with (``seen``: the asynchronous writes it has observed through a barrier,
    ``clock``: a vector clock over the cluster's threads, ``fenced``: the clock of its last proxy fence)."""

    def __init__(self, machine, tid, ctaid, cta=None, index=0):
        self.m = machine
        self.tid = tid          # (x, y, z)
        self.ctaid = ctaid
        self.cta = cta
        self.index = index      # position among the cluster's threads (vector-clock slot)
        self.env: dict[int, object] = {}
        self.linear = tid[0] + machine.block[0] * (tid[1] + machine.block[1] * tid[2])
        self.seen: set = set()
        self.clock = None
        self.fenced = -1              # epoch of the last fence.proxy.async
        self.init_fenced = -1         # epoch of the last fence ordering mbarrier.init for the async proxy
        self.init_release = None      # (clock, seen) a fence.mbarrier_init released, until a cluster arrival
        self.bulk_groups: list = []   # committed TMA store groups, oldest first
        self.bulk_open: list = []     # TMA stores issued since the last commit
        self.observed: dict = {}      # id(mbarrier) -> the last phase this thread's wait observed
        self.grid_waited = False      # it ran griddepcontrol.wait (machine.check_grid_waited)
        # tcgen05 ordering (tmem.py): the clock and observed writes as of the last
        # tcgen05.fence::after_thread_sync, and the epochs of its tcgen05.fence::before_thread_sync
        self.tc_clock = None
        self.tc_seen: set = set()
        self.tc_fences: list = []

    def get(self, v):
        try:
            return self.env[id(v)]
        except KeyError:
            raise InterpreterError(f"value {v!r} used before it is defined") from None

    def set(self, v, x):
        self.env[id(v)] = x

    # generators: yield ("barrier",) or ("shfl", mode, value, lane, width) and receive the shuffle result
    def block(self, block: Block, args=()):
        for a, x in zip(block.args, args):
            self.set(a, x)
        for op in block.ops:
            if op.name in ("scf.yield", "scf.condition"):
                return [self.get(v) for v in op.operands]
            yield from self.op(op)
        return []

    def op(self, op: Op):
        name = op.name
        ins = [self.get(v) for v in op.operands]
        t = op.results[0].type if op.results else None
        if name == "scf.if":
            results = yield from self.block(op.blocks[0 if ins[0] else 1])
            for r, x in zip(op.results, results):
                self.set(r, x)
            return
        if name == "scf.for":
            lb, ub, step, *carried = ins
            iv = lb
            while (iv < ub) if step > 0 else (iv > ub):
                carried = yield from self.block(op.blocks[0], [iv] + carried)
                iv = _wrap(iv + step, op.operands[0].type)
            for r, x in zip(op.results, carried):
                self.set(r, x)
            return
        if name == "scf.while":
            before, after = op.blocks
            vals = ins
            while True:
                out = yield from self.block(before, vals)
                cond, fwd = out[0], out[1:]
                if not cond:
                    break
                vals = yield from self.block(after, fwd)
            for r, x in zip(op.results, fwd):
                self.set(r, x)
            return
        if name == "nv.barrier":
            yield ("barrier", op)
            return
        if name in WARP_OPS:  # a warp collective: the scheduler runs it when every live lane arrives
            results = yield ("warp", op, ins)
            for r, x in zip(op.results, results):
                self.set(r, x)
            return
        if name in WARPGROUP_SEMANTICS:  # a warpgroup collective: every live thread of the 4 warps
            results = yield ("wg", op, ins)
            for r, x in zip(op.results, results):
                self.set(r, x)
            return
        if self.m.pending_values and any(type(x) is PendingValue for x in ins):
            x = next(x for x in ins if type(x) is PendingValue)
            # PTX ISA 9.7.15.7 (wgmma.wait_group), 9.7.16.8.5 (tcgen05.wait::ld): the destination registers of
            # an asynchronous wgmma.mma_async / tcgen05.ld must not be accessed before the wait that covers it
            what = "accumulator" if x.token.kind == "WGMMA" else "register"
            raise HazardError(f"{what} read before its wait",
                              f"{name} reads a destination register of a {x.token.kind} that no wait has completed",
                              [(f"the {x.token.kind}", x.token.op.loc), ("the read", op.loc)])
        self.m.current_op = op
        if name == "mem.vload":
            base = ins[0]
            for i, r in enumerate(op.results):
                self.set(r, self.m.load(base + i))
            return
        if name == "mem.vstore":
            base, *vals = ins
            for i, v in enumerate(vals):
                self.m.store(base + i, v)
            return
        if name == "nv.unpack2":
            word = int(ins[0]) & 0xFFFFFFFF
            for r, bits in zip(op.results, (word & 0xFFFF, word >> 16)):
                self.set(r, np.array([bits], np.uint16).view(_np_dtype(r.type))[0])
            return
        handler = HANDLERS.get(name)
        if handler is None:
            if name.startswith("math."):
                self.set(op.results[0], _math(name[5:], ins[0], t, op.attrs.get("fast", False)))
                return
            if name in NOT_MODELLED:
                raise InterpreterError(f"the interpreter does not model {name} yet: {NOT_MODELLED[name]}")
            raise InterpreterError(f"the interpreter has no semantics for {name}")
        value = handler(self, op, ins, t)
        if type(value) is Suspend:
            value = yield value.request
        if op.results:
            if len(op.results) == 1:
                self.set(op.results[0], value)
            else:
                for r, x in zip(op.results, value):
                    self.set(r, x)


def _arith(fn_int, fn_float=None):
    def h(th, op, ins, t):
        a, b = ins
        if t.is_int or t.is_bool:
            return _to_type(fn_int(a, b, t), t)
        with np.errstate(all="ignore"):  # IEEE: x/0 is inf with the signs' product, 0/0 NaN
            return _float(t, (fn_float or fn_int)(np.float64(a) if t == T.f64 else _float(t, a),
                                                  np.float64(b) if t == T.f64 else _float(t, b), t))
    return h


def _idiv(a, b, t):
    if b == 0:
        raise InterpreterError("integer division by zero (undefined in a kernel)")
    return _cdiv(a, b)


def _irem(a, b, t):
    if b == 0:
        raise InterpreterError("integer remainder by zero (undefined in a kernel)")
    return a - _cdiv(a, b) * b


def _shr(a, b, t):
    if not 0 <= b < t.bits:
        raise InterpreterError(f"shift by {b} of a {t} (undefined in a kernel)")
    return a >> b if t.is_signed else (a & ((1 << t.bits) - 1)) >> b


def _shl(a, b, t):
    if not 0 <= b < t.bits:
        raise InterpreterError(f"shift by {b} of a {t} (undefined in a kernel)")
    return a << b


def _fmin(a, b, t):
    return b if np.isnan(a) else a if np.isnan(b) else min(a, b)


def _fmax(a, b, t):
    return b if np.isnan(a) else a if np.isnan(b) else max(a, b)


def _sreg(th, op, ins, t):
    reg = op.attrs["reg"]
    if reg == "laneid":
        return th.linear % 32
    if reg == "cluster.ctarank":
        return th.cta.rank
    if reg == "cluster.nctarank":
        return len(th.m.cluster_ctas(th.cta))
    kind, axis = reg.split(".")
    i = "xyz".index(axis)
    return {"tid": th.tid, "ctaid": th.ctaid, "ntid": th.m.block, "nctaid": th.m.grid}[kind][i]


def _atomic(th, op, ins, t):
    ptr, *vals = ins
    old = th.m.load(ptr)
    kind = op.attrs["op"]
    if kind == "cas":
        new = vals[1] if old == vals[0] else old
    elif kind == "add":
        new = _to_type(old + vals[0], t) if t.is_int else _float(t, old + vals[0])
    else:
        new = {"max": max, "min": min, "exch": lambda a, b: b}[kind](old, vals[0])
    th.m.store(ptr, new)
    return old


def _pack2(th, op, ins, t):
    dt = T.bf16 if op.attrs["dtype"] == "bf16" else T.f16
    lo, hi = (int(np.array([_float(dt, np.float32(v))]).view(np.uint16)[0]) for v in ins)
    return lo | (hi << 16)


def _ptr_to_int(th, op, ins, t):
    """A generic address: a blob parameter's (a TMA binding), or a buffer's synthetic base plus the offset."""
    x = ins[0]
    if isinstance(x, Blob):
        return x.address
    return _wrap(th.m.address_of(x.buffer) + x.offset * x.elem.itemsize, t)


_IEEE_DIV = _arith(None, lambda a, b, t: a / b)

_HANDLERS = {
    "ptr.to_int": _ptr_to_int,
    "arith.constant": lambda th, op, ins, t: _to_type(op.attrs["value"], t),
    "arith.add": _arith(lambda a, b, t: a + b),
    "arith.sub": _arith(lambda a, b, t: a - b),
    "arith.mul": _arith(lambda a, b, t: a * b),
    "arith.div": _div,
    "arith.frem": _arith(None, lambda a, b, t: np.fmod(a, b)),
    "arith.idiv": _arith(_idiv),
    "arith.irem": _arith(_irem),
    "arith.and": _arith(lambda a, b, t: a & b if not t.is_bool else a and b),
    "arith.or": _arith(lambda a, b, t: a | b if not t.is_bool else a or b),
    "arith.xor": _arith(lambda a, b, t: a ^ b if not t.is_bool else a != b),
    "arith.shl": _arith(_shl),
    "arith.shr": _arith(_shr),
    "arith.min": _arith(lambda a, b, t: min(a, b), _fmin),
    "arith.max": _arith(lambda a, b, t: max(a, b), _fmax),
    "arith.neg": lambda th, op, ins, t: _to_type(-ins[0], t) if t.is_int else _float(t, -ins[0]),
    "arith.not": lambda th, op, ins, t: (not ins[0]) if t.is_bool else _wrap(~ins[0], t),
    "arith.cmp": lambda th, op, ins, t: bool(_CMP[op.attrs["pred"]](ins[0], ins[1])),
    "arith.select": lambda th, op, ins, t: ins[1] if ins[0] else ins[2],
    "arith.cast": lambda th, op, ins, t: _convert(ins[0], op.operands[0].type, t),
    "arith.bitcast": lambda th, op, ins, t: _bitcast(ins[0], op.operands[0].type, t),
    "math.fma": _fma,
    "ptr.offset": lambda th, op, ins, t: ins[0] + ins[1],
    "ptr.cast": lambda th, op, ins, t: Pointer(ins[0].buffer, ins[0].offset * ins[0].elem.itemsize // t.elem.itemsize,
                                               t.elem),
    "mem.load": lambda th, op, ins, t: th.m.load(ins[0]),
    "mem.store": lambda th, op, ins, t: th.m.store(ins[0], ins[1]),
    "mem.shared_alloc": lambda th, op, ins, t: th.cta.symbol_pointer(op.attrs["symbol"], t.elem),
    "nv.sreg": _sreg,
    "nv.atomic": _atomic,
    "nv.assume": lambda th, op, ins, t: None,
    "nv.pack2": _pack2,
    "nv.printf": lambda th, op, ins, t: print(op.attrs["format"] % tuple(ins), end=""),
}


def _bitcast(x, s: ScalarType, d: ScalarType):
    arr = np.array([x], dtype=_np_dtype(s)).view(_np_dtype(d))
    return _to_type(arr[0], d) if not d.is_float else arr[0]


def _shfl(machine, op, lanes):
    """``nv.shfl`` for the live lanes of a warp: {lane: (value, lane_or_delta)} -> {lane: (result,)}."""
    mode, width = op.attrs["mode"], op.attrs["width"]
    out = {}
    for lane, (value, arg) in lanes.items():
        base = lane & ~(width - 1)
        src = {"idx": base + (arg & (width - 1)), "bfly": lane ^ arg,
               "up": lane - arg if lane - arg >= base else lane,
               "down": lane + arg if lane + arg < base + width else lane}[mode]
        out[lane] = (lanes[src][0] if src in lanes else value,)
    return out


# Warp-collective ops: name -> fn(machine, op, {lane: inputs}) -> {lane: results}; feature modules add theirs.
WARP_OPS = WARP_SEMANTICS
WARP_OPS.add("nv.shfl", _shfl)
HANDLERS = THREAD_SEMANTICS  # thread-local ops: name -> fn(thread, op, inputs, result type) -> value
for _name, _fn in _HANDLERS.items():
    HANDLERS.add(_name, _fn)
numpy_dtype = _np_dtype  # the numpy dtype of an IR scalar type, for the feature modules

# Ops ``Thread.op`` executes itself (control flow, the CTA barrier, vector memory, unpack2, math.*)
STRUCTURAL_OPS = frozenset({"scf.if", "scf.for", "scf.while", "scf.yield", "scf.condition", "nv.barrier",
                            "mem.vload", "mem.vstore", "nv.unpack2"} | {f"math.{fn}" for fn in _MATH})


def has_semantics(op_name: str) -> bool:
    """Whether the interpreter executes IR op ``op_name``."""
    return op_name in STRUCTURAL_OPS or op_name in HANDLERS or op_name in WARP_OPS or op_name in WARPGROUP_SEMANTICS


def load_bits(ptr: Pointer, nbytes: int) -> bytes:
    """Raw bytes at ``ptr`` (for copies and matrix loads)."""
    raw = ptr.buffer.reshape(-1).view(np.uint8)
    start = ptr.offset * ptr.elem.itemsize
    if isinstance(ptr.buffer, SharedBytes) and ptr.buffer.cta is not None:
        ptr.buffer.cta.thread_access(start, nbytes, False)
    if not 0 <= start and start + nbytes <= raw.size:
        raise InterpreterError(f"out-of-bounds access of {nbytes} bytes at byte {start} of a {raw.size}-byte buffer")
    return raw[start:start + nbytes].tobytes()


def store_bits(ptr: Pointer, data: bytes) -> None:
    raw = ptr.buffer.reshape(-1).view(np.uint8)
    start = ptr.offset * ptr.elem.itemsize
    if isinstance(ptr.buffer, SharedBytes) and ptr.buffer.cta is not None:
        ptr.buffer.cta.thread_access(start, len(data), True)
    if not 0 <= start and start + len(data) <= raw.size:
        raise InterpreterError(f"out-of-bounds access of {len(data)} bytes at byte {start} of a {raw.size}-byte buffer")
    raw[start:start + len(data)] = np.frombuffer(data, np.uint8)

to_type = _to_type  # a Python/numpy value as a value of an IR scalar type
element_view = _view  # the typed element view of a pointer's buffer
