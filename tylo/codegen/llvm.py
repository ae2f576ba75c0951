"""IR -> LLVM IR text for NVPTX.

Lowers the structured IR to basic blocks with phi nodes. Scalars map to
LLVM types (bool -> i1 in registers, i8 in memory; bf16 -> bfloat; fp8 ->
i8 storage); hardware ops become NVVM intrinsics or inline PTX from
``codegen/ptx/<feature>.py``. The text is parsed by llvmlite in
``codegen.compile``.
"""
from __future__ import annotations

import struct

from ..ir import types as T
from ..ir.core import Block, Kernel, Op, Value
from ..ir.scalars import round_float
from ..ir.types import PointerType, ScalarType
from .lineinfo import LineTable
from .ptx import core as ptx_core  # the feature modules of codegen/ptx register their lowerings on import
from .registry import LOWERINGS, lowering
from .targets import Target

__all__ = ["lower_kernel", "llvm_type", "lowering", "LOWERINGS", "LoweringError", "has_lowering"]


class LoweringError(RuntimeError):
    """An op could not be lowered (a tylo bug or an unsupported combination); ``loc`` is the op's source."""

    def __init__(self, message: str, loc):
        super().__init__(message)
        self.message = message
        self.loc = loc


_LINE_MD_FIRST = 1000  # line-info metadata is numbered from here; lower numbers are the emitter's (loop_md)

_SCALAR = {
    "bool": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "u8": "i8", "u16": "i16",
    "u32": "i32", "u64": "i64", "f16": "half", "bf16": "bfloat", "f32": "float", "f64": "double",
    "f8e4m3": "i8", "f8e5m2": "i8",
}
_ADDRSPACE = {"global": 1, "shared": 3, "generic": 0}


def llvm_type(t, memory: bool = False) -> str:
    if isinstance(t, ScalarType):
        if memory and t.is_bool:
            return "i8"
        return _SCALAR[t.name]
    if isinstance(t, PointerType):
        space = _ADDRSPACE[t.space]
        return f"ptr addrspace({space})" if space else "ptr"
    if isinstance(t, T.ParamBlobType):
        return "ptr"
    raise TypeError(f"no LLVM type for {t}")


def _float_literal(value: float, t: ScalarType) -> str:
    """An LLVM literal of float type ``t`` for ``value`` rounded once to ``t`` (out of range: inf,
    as IEEE rounding gives; docs/language.md), so LLVM's parser never sees an invalid constant:
    f16/bf16 as their bits, f32/f64 as the hex of the (exactly representable) double."""
    value = round_float(value, t)
    if t.name in ("f16", "bf16"):
        import numpy as np
        dtype = np.float16
        if t.name == "bf16":
            import ml_dtypes
            dtype = ml_dtypes.bfloat16
        bits = int(np.array(value, dtype=dtype).view(np.uint16))  # exact: value is a t already
        return f"0x{'H' if t.name == 'f16' else 'R'}{bits:04X}"
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]


class _Lowering:
    def __init__(self, kernel: Kernel, target: Target, lineinfo: bool = False):
        self.kernel = kernel
        self.target = target
        self.names: dict[int, str] = {}
        self.counter = 0
        self.lines: list[str] = []
        self.block_label = "entry"
        self.declares: set[str] = set()
        self.declared: dict[str, str] = {}  # function name -> its declaration
        self.globals: list[str] = []
        self.loop_md: list[int] = []
        # line info: the !dbg node of the op being lowered, attached to each instruction it emits
        self.line_table = LineTable(kernel.name, kernel.loc, first=_LINE_MD_FIRST) if lineinfo else None
        self.dbg: str | None = None

    llvm_type = staticmethod(llvm_type)  # for the feature lowerings, which do not import the emitter

    # -- naming ---------------------------------------------------------------------
    def fresh(self, prefix="t") -> str:
        self.counter += 1
        return f"%{prefix}{self.counter}"

    def label(self) -> str:
        self.counter += 1
        return f"L{self.counter}"

    def ref(self, v: Value) -> str:
        return self.names[id(v)]

    def bind(self, v: Value, name: str):
        self.names[id(v)] = name

    def emit(self, line: str):
        if self.dbg is not None:
            line += ", !dbg " + self.dbg
        self.lines.append("  " + line)

    def address(self, ptr: Value, bits: int = 32) -> str:
        """The integer address of a pointer value for inline PTX: ``bits`` 32 for a shared
        pointer (the shared-window address, constraint ``r``), 64 for a global one (``l``)."""
        name = self.fresh()
        self.emit(f"{name} = ptrtoint {llvm_type(ptr.type)} {self.ref(ptr)} to i{bits}")
        return name

    def start_block(self, label: str):
        self.lines.append(f"{label}:")
        self.block_label = label

    def define(self, text: str):
        """Add a helper function's definition (an internal, always-inlined function) once."""
        self.declare(text)

    def declare(self, text: str):
        """Declare a function once; the same name with another signature is a tylo bug that LLVM's
        parser would report as a redefinition without a source line, so it is caught here."""
        name = text[text.index("@"):text.index("(", text.index("@"))]
        prior = self.declared.setdefault(name, text)
        if prior != text:
            raise ValueError(f"two declarations of {name}: '{prior}' and '{text}'")
        self.declares.add(text)

    def asm(self, template: str, constraints: str, out_types=(), args=(), side_effects: bool = False,
            convergent: bool = False):
        """Emit inline PTX. ``out_types``: LLVM types of the outputs (in constraint order);
        ``args``: ``(llvm_type, operand)`` pairs. Returns the names of the outputs.

        Several outputs come back as a literal struct and are extracted one by one, so the
        caller sees plain SSA names (a 128-register accumulator stays in registers).
        """
        text = template.replace("\\", "\\\\").replace('"', '\\22')
        argtext = ", ".join(f"{t} {v}" for t, v in args)
        effect = " sideeffect" if side_effects else ""
        conv = " #1" if convergent else ""  # collective instructions: never duplicated into branches
        out_types = list(out_types)
        if not out_types:
            self.emit(f'call void asm{effect} "{text}", "{constraints}"({argtext}){conv}')
            return []
        if len(out_types) == 1:
            name = self.fresh()
            self.emit(f'{name} = call {out_types[0]} asm{effect} "{text}", "{constraints}"({argtext}){conv}')
            return [name]
        struct_t = "{ " + ", ".join(out_types) + " }"
        agg = self.fresh()
        self.emit(f'{agg} = call {struct_t} asm{effect} "{text}", "{constraints}"({argtext}){conv}')
        names = []
        for i in range(len(out_types)):
            name = self.fresh()
            self.emit(f"{name} = extractvalue {struct_t} {agg}, {i}")
            names.append(name)
        return names

    # -- kernel -----------------------------------------------------------------------
    def run(self) -> str:
        k = self.kernel
        params = []
        prologue = []
        align = k.attrs.get("param_align", {})
        for p in k.params:
            t = p.value.type
            pname = f"%arg.{p.name}"
            if isinstance(t, T.ParamBlobType):
                # by value in the parameter space; its address (cvta.param) is what TMA takes
                params.append(f'ptr byval([{t.nbytes} x i8]) align {t.align} "nvvm.grid_constant" {pname}')
                self.bind(p.value, pname)
            elif isinstance(t, PointerType):
                a = align.get(p.name)
                params.append(f"{llvm_type(t)}{' align ' + str(a) if a else ''} {pname}")
                self.bind(p.value, pname)
            elif t == T.bool_:
                params.append(f"i8 {pname}")
                name = self.fresh()
                prologue.append(f"{name} = trunc i8 {pname} to i1")
                self.bind(p.value, name)
            else:
                params.append(f"{llvm_type(t)} {pname}")
                self.bind(p.value, pname)
        for line in prologue:
            self.emit(line)
        for pname in k.attrs.get("divisible_by_16", []):
            v = next(p.value for p in k.params if p.name == pname)
            lt = llvm_type(v.type)
            r, c = self.fresh(), self.fresh()
            self.emit(f"{r} = and {lt} {self.ref(v)}, 15")
            self.emit(f"{c} = icmp eq {lt} {r}, 0")
            self.emit(f"call void @llvm.assume(i1 {c})")
            self.declare("declare void @llvm.assume(i1)")
        self.lower_block(k.body)
        self.emit("ret void")
        offsets, total = shared_memory_plan(k)
        if total:
            align = max(al for _, _, _, al in k.attrs["shared"])
            self.globals.append(f"@{_SMEM} = external addrspace(3) global [0 x i8], align {max(align, 16)}")
        attrs = []
        if k.attrs.get("maxntid"):
            attrs.append('"nvvm.maxntid"="' + ",".join(str(x) for x in k.attrs["maxntid"]) + '"')
        out = ['target triple = "nvptx64-nvidia-cuda"', ""]
        out += sorted(self.declares)
        out += self.globals
        subprogram = f" !dbg {self.line_table.subprogram}" if self.line_table else ""
        out.append(f"define ptx_kernel void @{k.name}({', '.join(params)}){' #0' if attrs else ''}{subprogram} {{")
        out.append("entry:")
        out += self.lines
        out.append("}")
        if attrs:
            out.append(f"attributes #0 = {{ {' '.join(attrs)} }}")
        out.append("attributes #1 = { convergent }")
        for _i, md in enumerate(self.loop_md):
            out.append(f"!{md} = distinct !{{!{md}, !{md + 1}}}")
            out.append(f'!{md + 1} = !{{!"llvm.loop.unroll.disable"}}')
        if self.line_table:
            out += self.line_table.metadata()
        return "\n".join(out) + "\n"

    # -- blocks and ops -------------------------------------------------------------
    def lower_block(self, block: Block):
        for op in block.ops:
            if op.name in ("scf.yield", "scf.condition"):
                continue  # consumed by the parent op
            outer = self.dbg
            if self.line_table is not None:
                self.dbg = self.line_table.location(op.loc)
            try:
                self.lower_op(op)
            except LoweringError:
                raise
            except Exception as exc:  # keep the op's source location for the user's error
                raise LoweringError(f"cannot generate code for {op.name} on {self.target.name}: {exc}", op.loc) \
                    from exc
            finally:
                self.dbg = outer

    def lower_op(self, op: Op):
        handler = getattr(self, "op_" + op.name.replace(".", "_"), None)
        if handler is None and op.name in LOWERINGS:
            LOWERINGS[op.name](self, op)
        elif handler is None and op.name.startswith("math."):
            self._math(op, op.name[5:])
        elif handler is None:
            raise NotImplementedError(f"no lowering for IR op {op.name}")
        else:
            handler(op)

    def _result(self, op: Op, expr: str):
        name = self.fresh()
        self.emit(f"{name} = {expr}")
        self.bind(op.results[0], name)
        return name

    def op_arith_constant(self, op: Op):
        t = op.results[0].type
        v = op.attrs["value"]
        if t.is_bool:
            lit = "true" if v else "false"
        elif t.is_int:
            lit = str(int(v) if t.is_signed else (int(v) if int(v) < 2 ** (t.bits - 1) else int(v) - 2 ** t.bits))
        else:
            lit = _float_literal(float(v), t)
        # constants are materialised with a no-op so every value has a register name
        lt = llvm_type(t)
        if t.is_float:
            self._result(op, f"fadd {lt} {lit}, {_float_literal(-0.0, t)}")
        elif t.is_bool:
            self._result(op, f"and i1 {lit}, true")
        else:
            self._result(op, f"add {lt} {lit}, 0")

    def _binary(self, op: Op, int_op: str, float_op: str | None, unsigned_op: str | None = None):
        t = op.results[0].type
        a, b = (self.ref(v) for v in op.operands)
        if t.is_float:
            instr = float_op
        elif not t.is_signed and unsigned_op:
            instr = unsigned_op
        else:
            instr = int_op
        self._result(op, f"{instr} {llvm_type(t)} {a}, {b}")

    def op_arith_add(self, op):
        self._binary(op, "add", "fadd")

    def op_arith_sub(self, op):
        self._binary(op, "sub", "fsub")

    def op_arith_mul(self, op):
        self._binary(op, "mul", "fmul")

    def op_arith_div(self, op):
        if not op.attrs.get("fast"):
            self._binary(op, "fdiv", "fdiv")
            return
        # div.full.ftz: 2 ulp over the full range, no IEEE slow path (which ptxas compiles to a
        # subroutine call that serialises every wgmma of the kernel, C7509); f16/bf16 in f32
        t = op.results[0].type
        a, b = (self.convert(self.ref(v), t, T.f32) for v in op.operands)
        q = self.fresh()
        self.emit(f"{q} = {ptx_core.fast_div_f32(a, b)}")
        self.bind(op.results[0], self.convert(q, T.f32, t))

    def op_arith_frem(self, op):
        """C's ``fmod``, exactly: NVPTX expands LLVM's ``frem`` as ``x - trunc(x / y) * y``, which is
        wrong once the quotient is not exact (1e10 % 3 gave 256). f32 and f64 call an exact
        shift-and-subtract routine (inlined); f16/bf16 run it in f32, whose result is exact in the type.
        No ``frem`` reaches LLVM, which also keeps LLVM 22's InstCombine from narrowing
        ``fptrunc(frem(fpext half, fpext bfloat))`` with an invalid bfloat <-> half cast (an assertion
        that aborted the process)."""
        t = op.results[0].type
        if t.bits < 32:
            a, b = (self.convert(self.ref(v), t, T.f32) for v in op.operands)
            self.bind(op.results[0], self.convert(self._fmod(a, b, T.f32), T.f32, t))
            return
        a, b = (self.ref(v) for v in op.operands)
        self.bind(op.results[0], self._fmod(a, b, t))

    def _fmod(self, a: str, b: str, t: ScalarType) -> str:
        name, text = fmod_function(t.bits)
        self.define(text)
        self.declare(f"declare i{t.bits} @llvm.ctlz.i{t.bits}(i{t.bits}, i1)")
        r = self.fresh()
        lt = llvm_type(t)
        self.emit(f"{r} = call {lt} @{name}({lt} {a}, {lt} {b})")
        return r

    def op_arith_idiv(self, op):
        self._binary(op, "sdiv", None, "udiv")

    def op_arith_irem(self, op):
        self._binary(op, "srem", None, "urem")

    def op_arith_and(self, op):
        self._binary(op, "and", None)

    def op_arith_or(self, op):
        self._binary(op, "or", None)

    def op_arith_xor(self, op):
        self._binary(op, "xor", None)

    def op_arith_shl(self, op):
        self._binary(op, "shl", None)

    def op_arith_shr(self, op):
        self._binary(op, "ashr", None, "lshr")

    def _minmax(self, op, kind):
        t = op.results[0].type
        lt = llvm_type(t)
        a, b = (self.ref(v) for v in op.operands)
        if t.is_float:
            fn = f"llvm.{kind}num.{_intrinsic_suffix(t)}"
        else:
            fn = f"llvm.{'s' if t.is_signed else 'u'}{kind}.{lt}"
        self.declare(f"declare {lt} @{fn}({lt}, {lt})")
        self._result(op, f"call {lt} @{fn}({lt} {a}, {lt} {b})")

    def op_arith_min(self, op):
        self._minmax(op, "min")

    def op_arith_max(self, op):
        self._minmax(op, "max")

    def op_arith_neg(self, op):
        t = op.results[0].type
        x = self.ref(op.operands[0])
        if t.is_float:
            self._result(op, f"fneg {llvm_type(t)} {x}")
        else:
            self._result(op, f"sub {llvm_type(t)} 0, {x}")

    def op_arith_not(self, op):
        t = op.results[0].type
        x = self.ref(op.operands[0])
        self._result(op, f"xor {llvm_type(t)} {x}, {'true' if t.is_bool else -1}")

    _ICMP = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}

    def op_arith_cmp(self, op):
        a, b = op.operands
        t = a.type
        pred = op.attrs["pred"]
        if t.is_float:
            p = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}[pred]
            self._result(op, f"fcmp {p} {llvm_type(t)} {self.ref(a)}, {self.ref(b)}")
        else:
            if pred in ("eq", "ne"):
                p = pred
            else:
                p = ("s" if t.is_signed else "u") + self._ICMP[pred]
            self._result(op, f"icmp {p} {llvm_type(t)} {self.ref(a)}, {self.ref(b)}")

    def op_arith_select(self, op):
        c, a, b = op.operands
        lt = llvm_type(a.type)
        self._result(op, f"select i1 {self.ref(c)}, {lt} {self.ref(a)}, {lt} {self.ref(b)}")

    def op_arith_bitcast(self, op):
        src = op.operands[0]
        self._result(op, f"bitcast {llvm_type(src.type)} {self.ref(src)} to {llvm_type(op.results[0].type)}")

    def op_arith_cast(self, op):
        src = op.operands[0]
        self.bind(op.results[0], self.convert(self.ref(src), src.type, op.results[0].type))

    def convert(self, x: str, s: ScalarType, d: ScalarType) -> str:
        """Emit the conversion of ``x`` from ``s`` to ``d`` and return the new name."""
        if s == d:
            return x
        ls, ld = llvm_type(s), llvm_type(d)
        name = self.fresh()
        if s.is_fp8:
            h16 = self.fresh()
            self.emit(f"{h16} = zext i8 {x} to i16")
            pair = self.fresh()
            self.emit(f"{pair} = {ptx_core.fp8_to_f16(s.name, h16)}")
            lo = self.fresh()
            self.emit(f"{lo} = trunc i32 {pair} to i16")
            half = self.fresh()
            self.emit(f"{half} = bitcast i16 {lo} to half")
            return self.convert(half, T.f16, d)
        if d.is_fp8:
            # f64 -> f32 -> fp8 would round twice: round to odd in f32 first (exact otherwise)
            f = self._f32_round_to_odd(x, s) if s == T.f64 else self.convert(x, s, T.f32) if s != T.f32 else x
            r16 = self.fresh()
            self.emit(f"{r16} = {ptx_core.f32_to_fp8(d.name, f)}")
            self.emit(f"{name} = trunc i16 {r16} to i8")
            return name
        if s.is_int and d.is_bool:  # C: non-zero is true (not the low bit)
            self.emit(f"{name} = icmp ne {ls} {x}, 0")
            return name
        if (s.is_int or s.is_bool) and (d.is_int or d.is_bool):
            if d.bits == s.bits:
                return x
            if d.bits < s.bits:
                self.emit(f"{name} = trunc {ls} {x} to {ld}")
            else:
                ext = "sext" if s.is_signed else "zext"
                self.emit(f"{name} = {ext} {ls} {x} to {ld}")
            return name
        if s.is_float and d.is_bool:  # C: non-zero (and NaN) is true
            self.emit(f"{name} = fcmp une {ls} {x}, {_float_literal(0.0, s)}")
            return name
        if s.is_int and s.bits > 24 and d == T.bf16 and self.target.sm < 90:
            # before sm_90 there is no cvt.rn.bf16.s32/s64 and LLVM goes through an f32 rounded
            # to nearest (two roundings): round to odd in f32, then once to bf16
            return self.convert(self._f32_round_to_odd(x, s), T.f32, d)
        if (s.is_int or s.is_bool) and d.is_float:
            self.emit(f"{name} = {'sitofp' if s.is_signed else 'uitofp'} {ls} {x} to {ld}")
            return name
        if s.is_float and d.is_int:
            fn = f"llvm.fpto{'s' if d.is_signed else 'u'}i.sat.{ld}.{_intrinsic_suffix(s)}"
            self.declare(f"declare {ld} @{fn}({ls})")
            self.emit(f"{name} = call {ld} @{fn}({ls} {x})")
            return name
        if s.is_float and d.is_float:
            if s.bits == d.bits:  # f16 <-> bf16 through f32
                return self.convert(self.convert(x, s, T.f32), T.f32, d)
            self.emit(f"{name} = {'fpext' if d.bits > s.bits else 'fptrunc'} {ls} {x} to {ld}")
            return name
        raise NotImplementedError(f"conversion {s} -> {d}")

    def _f32_round_to_odd(self, x: str, s: ScalarType) -> str:
        """``x`` (an integer of 32 or 64 bits, or an f64) rounded to f32 toward zero, with the last
        bit set when that was inexact ("round to odd"): rounding this f32 once more to a format
        of at most 22 bits (bf16, fp8) gives the correctly rounded result of ``x``."""
        ls = llvm_type(s)
        if s.is_int:
            kind = ("s" if s.is_signed else "u") + str(s.bits)
            (f,) = self.asm(f"cvt.rz.f32.{kind} $0, $1;", "=f," + ("l" if s.bits == 64 else "r"), ["float"],
                            [(ls, x)])
            back, inexact = self.fresh(), self.fresh()
            # |f| <= |x|: converting back cannot overflow
            self.emit(f"{back} = {'fptosi' if s.is_signed else 'fptoui'} float {f} to {ls}")
            self.emit(f"{inexact} = icmp ne {ls} {back}, {x}")
        else:
            (f,) = self.asm("cvt.rz.f32.f64 $0, $1;", "=f,d", ["float"], [("double", x)])
            back, inexact = self.fresh(), self.fresh()
            self.emit(f"{back} = fpext float {f} to double")
            self.emit(f"{inexact} = fcmp une double {back}, {x}")  # NaN: stays NaN with the bit set
        bits, sticky, odd, out = self.fresh(), self.fresh(), self.fresh(), self.fresh()
        self.emit(f"{bits} = bitcast float {f} to i32")
        self.emit(f"{sticky} = zext i1 {inexact} to i32")
        self.emit(f"{odd} = or i32 {bits}, {sticky}")
        self.emit(f"{out} = bitcast i32 {odd} to float")
        return out

    # -- math -----------------------------------------------------------------------
    def _math(self, op, fn):
        t = op.results[0].type
        x = self.ref(op.operands[0])
        if t.is_int:
            if fn != "abs":
                raise NotImplementedError(f"{fn} on {t}")
            # llvm.abs with INT_MIN not poison: abs(INT_MIN) wraps to INT_MIN, as on the GPU (abs.s32)
            lt = llvm_type(t)
            self.declare(f"declare {lt} @llvm.abs.{lt}({lt}, i1)")
            self._result(op, f"call {lt} @llvm.abs.{lt}({lt} {x}, i1 false)")
            return
        if op.attrs.get("fast"):
            fn += "_fast"
        if t in (T.f16, T.bf16):
            # compute in f32, round once
            xf = self.convert(x, t, T.f32)
            r = self._math_f32(fn, xf)
            self.bind(op.results[0], self.convert(r, T.f32, t))
            return
        if t == T.f32:
            self.bind(op.results[0], self._math_f32(fn, x))
            return
        if fn == "rcp":
            self._result(op, f"fdiv double 1.0, {x}")
            return
        if fn in ("sqrt", "abs", "floor", "ceil"):
            lt = llvm_type(t)
            name = {"abs": "fabs"}.get(fn, fn)
            self.declare(f"declare {lt} @llvm.{name}.f64({lt})")
            self._result(op, f"call {lt} @llvm.{name}.f64({lt} {x})")
            return
        raise NotImplementedError(f"{fn} on {t} (tylo supports it on f16, bf16 and f32)")

    _LOG2E = 1.4426950408889634
    _LN2 = 0.6931471805599453

    def _math_f32(self, fn: str, x: str) -> str:
        name = self.fresh()
        if fn in ("sqrt", "abs", "floor", "ceil"):
            intr = {"abs": "fabs"}.get(fn, fn)
            self.declare(f"declare float @llvm.{intr}.f32(float)")
            self.emit(f"{name} = call float @llvm.{intr}.f32(float {x})")
        elif fn in ("exp2", "log2", "sin", "cos", "rsqrt", "tanh", "exp2_fast", "rcp_fast"):
            self.emit(f"{name} = {ptx_core.approx_f32(fn, x)}")
        elif fn == "rcp":
            self.emit(f"{name} = fdiv float 1.0, {x}")  # IEEE (rcp.rn.f32)
        elif fn == "exp":
            # exp(x) = 2^(x*log2e): split x*log2e into its rounded value t and the rounding error e
            # (an fma recovers it) so large |x| keeps ~2 ulp: 2^t * (1 + e*ln2).
            self.declare("declare float @llvm.fma.f32(float, float, float)")
            hi = _float_literal(self._LOG2E, T.f32)
            lo = _float_literal(self._LOG2E - struct.unpack("f", struct.pack("f", self._LOG2E))[0], T.f32)
            t, nt, e0, e1, p, c = (self.fresh() for _ in range(6))
            self.emit(f"{t} = fmul float {x}, {hi}")
            self.emit(f"{nt} = fneg float {t}")
            self.emit(f"{e0} = call float @llvm.fma.f32(float {x}, float {hi}, float {nt})")
            self.emit(f"{e1} = call float @llvm.fma.f32(float {x}, float {lo}, float {e0})")
            self.emit(f"{p} = {ptx_core.approx_f32('exp2', t)}")
            at, fin, e2 = self.fresh(), self.fresh(), self.fresh()
            self.declare("declare float @llvm.fabs.f32(float)")
            self.emit(f"{at} = call float @llvm.fabs.f32(float {t})")
            self.emit(f"{fin} = fcmp olt float {at}, 0x7FF0000000000000")  # the correction only for finite t
            self.emit(f"{e2} = select i1 {fin}, float {e1}, float 0.0")
            self.emit(f"{c} = fmul float {e2}, {_float_literal(self._LN2, T.f32)}")
            self.emit(f"{name} = call float @llvm.fma.f32(float {p}, float {c}, float {p})")
        elif fn == "log":
            l2 = self.fresh()
            self.emit(f"{l2} = {ptx_core.approx_f32('log2', x)}")
            self.emit(f"{name} = fmul float {l2}, {_float_literal(self._LN2, T.f32)}")
        else:
            raise NotImplementedError(fn)
        return name

    def op_math_fma(self, op):
        t = op.results[0].type
        lt = llvm_type(t)
        a, b, c = (self.ref(v) for v in op.operands)
        fn = f"llvm.fma.{_intrinsic_suffix(t)}"
        self.declare(f"declare {lt} @{fn}({lt}, {lt}, {lt})")
        self._result(op, f"call {lt} @{fn}({lt} {a}, {lt} {b}, {lt} {c})")

    # -- pointers and memory ------------------------------------------------------------
    def op_ptr_offset(self, op):
        p, i = op.operands
        idx = self.ref(i)
        it = i.type
        if not it.is_signed and it.bits < 64:
            wide = self.fresh()
            self.emit(f"{wide} = zext {llvm_type(it)} {idx} to i64")
            idx, lt = wide, "i64"
        else:
            lt = llvm_type(it)
        elem = llvm_type(p.type.elem, memory=True)
        self._result(op, f"getelementptr inbounds {elem}, {llvm_type(p.type)} {self.ref(p)}, {lt} {idx}")

    def op_ptr_cast(self, op):
        self.bind(op.results[0], self.ref(op.operands[0]))  # opaque pointers: same address, new pointee

    def op_ptr_to_int(self, op):
        p = op.operands[0]
        self._result(op, f"ptrtoint {llvm_type(p.type)} {self.ref(p)} to {llvm_type(op.results[0].type)}")

    def op_mem_load(self, op):
        p = op.operands[0]
        t = op.results[0].type
        mt = llvm_type(t, memory=True)
        name = self.fresh()
        self.emit(f"{name} = load {mt}, {llvm_type(p.type)} {self.ref(p)}, align {t.itemsize}")
        if t.is_bool:
            b = self.fresh()
            self.emit(f"{b} = trunc i8 {name} to i1")
            name = b
        self.bind(op.results[0], name)

    def op_mem_store(self, op):
        p, v = op.operands
        t = v.type
        x = self.ref(v)
        if t.is_bool:
            w = self.fresh()
            self.emit(f"{w} = zext i1 {x} to i8")
            x = w
        self.emit(f"store {llvm_type(t, memory=True)} {x}, {llvm_type(p.type)} {self.ref(p)}, align {t.itemsize}")

    def op_mem_vload(self, op):
        p = op.operands[0]
        t = op.results[0].type
        n = len(op.results)
        vt = f"<{n} x {llvm_type(t, memory=True)}>"
        vec = self.fresh()
        self.emit(f"{vec} = load {vt}, {llvm_type(p.type)} {self.ref(p)}, align {op.attrs['align']}")
        for i, r in enumerate(op.results):
            self._result_of(r, f"extractelement {vt} {vec}, i32 {i}")

    def op_mem_vstore(self, op):
        p, *vals = op.operands
        t = vals[0].type
        et = llvm_type(t, memory=True)
        vt = f"<{len(vals)} x {et}>"
        vec = "undef"
        for i, v in enumerate(vals):
            nxt = self.fresh()
            self.emit(f"{nxt} = insertelement {vt} {vec}, {et} {self.ref(v)}, i32 {i}")
            vec = nxt
        self.emit(f"store {vt} {vec}, {llvm_type(p.type)} {self.ref(p)}, align {op.attrs['align']}")

    def _result_of(self, value, expr):
        name = self.fresh()
        self.emit(f"{name} = {expr}")
        self.bind(value, name)

    def op_nv_pack2(self, op):
        lo, hi = (self.convert(self.ref(v), v.type, T.f32) for v in op.operands)
        kind = {"bf16": "bf16x2", "f16": "f16x2"}[op.attrs["dtype"]]
        (word,) = self.asm(f"cvt.rn.{kind}.f32 $0, $1, $2;", "=r,f,f", ["i32"], [("float", hi), ("float", lo)])
        self.bind(op.results[0], word)

    def op_nv_unpack2(self, op):
        lo, hi = self.asm("mov.b32 {$0, $1}, $2;", "=h,=h,r", ["i16", "i16"], [("i32", self.ref(op.operands[0]))])
        for r, bits in zip(op.results, (lo, hi)):
            self._result_of(r, f"bitcast i16 {bits} to {llvm_type(r.type)}")

    def op_mem_shared_alloc(self, op):
        offsets, _ = shared_memory_plan(self.kernel)
        self.bind(op.results[0], f"getelementptr (i8, ptr addrspace(3) @{_SMEM}, i32 {offsets[op.attrs['symbol']]})")

    # -- hardware -----------------------------------------------------------------------
    def op_nv_sreg(self, op):
        reg = op.attrs["reg"]
        fn = f"llvm.nvvm.read.ptx.sreg.{reg}"
        self.declare(f"declare i32 @{fn}()")
        self._result(op, f"call i32 @{fn}()")

    def op_nv_barrier(self, op):
        # convergent: LLVM must not duplicate or sink a CTA barrier into divergent branches
        self.emit('call void asm sideeffect "bar.sync 0;", "~{memory}"() #1')

    def op_nv_assume(self, op):
        self.declare("declare void @llvm.assume(i1)")
        self.emit(f"call void @llvm.assume(i1 {self.ref(op.operands[0])})")

    def op_nv_shfl(self, op):
        value, lane = op.operands
        t = value.type
        mode = op.attrs["mode"]
        width = op.attrs["width"]
        clamp = ((32 - width) << 8) | (0 if mode == "up" else 0x1F)
        fn = f"llvm.nvvm.shfl.sync.{mode}.i32"
        self.declare(f"declare i32 @{fn}(i32, i32, i32, i32)")

        def shfl32(x):
            r = self.fresh()
            self.emit(f"{r} = call i32 @{fn}(i32 -1, i32 {x}, i32 {self.ref(lane)}, i32 {clamp})")
            return r

        if t.bits == 64:
            lt = llvm_type(t)
            bits = self.fresh()
            self.emit(f"{bits} = bitcast {lt} {self.ref(value)} to i64" if t.is_float
                      else f"{bits} = add i64 {self.ref(value)}, 0")
            lo, hi = self.fresh(), self.fresh()
            self.emit(f"{lo} = trunc i64 {bits} to i32")
            sh = self.fresh()
            self.emit(f"{sh} = lshr i64 {bits}, 32")
            self.emit(f"{hi} = trunc i64 {sh} to i32")
            rlo, rhi = shfl32(lo), shfl32(hi)
            wlo, whi, shi, out = self.fresh(), self.fresh(), self.fresh(), self.fresh()
            self.emit(f"{wlo} = zext i32 {rlo} to i64")
            self.emit(f"{whi} = zext i32 {rhi} to i64")
            self.emit(f"{shi} = shl i64 {whi}, 32")
            self.emit(f"{out} = or i64 {shi}, {wlo}")
            if t.is_float:
                self._result(op, f"bitcast i64 {out} to {lt}")
            else:
                self.bind(op.results[0], out)
            return
        # 32 bits or narrower: move through an i32
        x = self.ref(value)
        lt = llvm_type(t)
        if t.is_float:
            ib = self.fresh()
            self.emit(f"{ib} = bitcast {lt} {x} to i{t.bits}")
            x, it = ib, f"i{t.bits}"
        else:
            it = lt
        if t.bits < 32:
            w = self.fresh()
            self.emit(f"{w} = zext {it} {x} to i32")
            x = w
        r = shfl32(x)
        if t.bits < 32:
            n = self.fresh()
            self.emit(f"{n} = trunc i32 {r} to {it}")
            r = n
        if t.is_float:
            self._result(op, f"bitcast {it} {r} to {lt}")
        else:
            self.bind(op.results[0], r)

    def op_nv_atomic(self, op):
        p = op.operands[0]
        t = p.type.elem
        lt = llvm_type(t)
        pt = llvm_type(p.type)
        kind = op.attrs["op"]
        if kind == "cas":
            cmp, new = op.operands[1:]
            pair = self.fresh()
            self.emit(f"{pair} = cmpxchg {pt} {self.ref(p)}, {lt} {self.ref(cmp)}, {lt} {self.ref(new)} "
                      "monotonic monotonic")
            self._result(op, f"extractvalue {{ {lt}, i1 }} {pair}, 0")
            return
        v = op.operands[1]
        rmw = {"add": "fadd" if t.is_float else "add", "exch": "xchg",
               "max": "max" if t.is_signed else "umax", "min": "min" if t.is_signed else "umin"}[kind]
        self._result(op, f"atomicrmw {rmw} {pt} {self.ref(p)}, {lt} {self.ref(v)} monotonic")

    def op_nv_printf(self, op):
        self.vprintf(op.attrs["format"], [(llvm_type(v.type), self.ref(v)) for v in op.operands])

    def vprintf(self, fmt: str, args):
        """Call ``vprintf`` with the format ``fmt`` and ``args``, ``(llvm type, operand)`` pairs
        already promoted as C varargs are (doubles, 32/64-bit integers)."""
        fmt = fmt.encode() + b"\0"
        sym = f"@.fmt{len(self.globals)}"
        esc = "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else f"\\{c:02X}" for c in fmt)
        self.globals.append(f'{sym} = private unnamed_addr constant [{len(fmt)} x i8] c"{esc}", align 1')
        self.declare("declare i32 @vprintf(ptr, ptr)")
        if args:
            fields = ", ".join(t for t, _ in args)
            buf = self.fresh()
            self.emit(f"{buf} = alloca {{ {fields} }}, align 8")
            for i, (t, v) in enumerate(args):
                slot = self.fresh()
                self.emit(f"{slot} = getelementptr {{ {fields} }}, ptr {buf}, i32 0, i32 {i}")
                self.emit(f"store {t} {v}, ptr {slot}")
            args = buf
        else:
            args = "null"
        r = self.fresh()
        self.emit(f"{r} = call i32 @vprintf(ptr {sym}, ptr {args})")

    # -- structured control flow --------------------------------------------------------
    def _yielded(self, block: Block):
        term = block.ops[-1]
        return [self.ref(v) for v in term.operands]

    def op_scf_if(self, op):
        cond = self.ref(op.operands[0])
        then_l, else_l, merge_l = self.label(), self.label(), self.label()
        self.emit(f"br i1 {cond}, label %{then_l}, label %{else_l}")
        incoming = []
        for label, block in zip((then_l, else_l), op.blocks):
            self.start_block(label)
            self.lower_block(block)
            incoming.append((self._yielded(block), self.block_label))
            self.emit(f"br label %{merge_l}")
        self.start_block(merge_l)
        for i, r in enumerate(op.results):
            lt = llvm_type(r.type)
            name = self.fresh()
            srcs = ", ".join(f"[ {vals[i]}, %{lbl} ]" for vals, lbl in incoming)
            self.emit(f"{name} = phi {lt} {srcs}")
            self.bind(r, name)

    def op_scf_for(self, op):
        lb, ub, step, *inits = op.operands
        (body,) = op.blocks
        it = lb.type
        lt = llvm_type(it)
        pre = self.block_label
        header, body_l, exit_l = self.label(), self.label(), self.label()
        self.emit(f"br label %{header}")
        self.start_block(header)
        phi_at = len(self.lines)
        iv = self.fresh("iv")
        self.bind(body.args[0], iv)
        carried = []
        for arg in body.args[1:]:
            name = self.fresh("c")
            self.bind(arg, name)
            carried.append(name)
        step_is_constant = isinstance(step.owner, Op) and step.owner.name == "arith.constant"
        step_c = step.owner.attrs["value"] if step_is_constant else None
        cmp = self.fresh()
        pred = ("s" if it.is_signed else "u") + "lt"
        if step_c is not None and step_c < 0:
            pred = "sgt" if it.is_signed else "ugt"
        if step_c is None and it.is_signed:
            up, down, pos = self.fresh(), self.fresh(), self.fresh()
            self.emit(f"{up} = icmp slt {lt} {iv}, {self.ref(ub)}")
            self.emit(f"{down} = icmp sgt {lt} {iv}, {self.ref(ub)}")
            self.emit(f"{pos} = icmp sgt {lt} {self.ref(step)}, 0")
            self.emit(f"{cmp} = select i1 {pos}, i1 {up}, i1 {down}")
        else:
            self.emit(f"{cmp} = icmp {pred} {lt} {iv}, {self.ref(ub)}")
        self.emit(f"br i1 {cmp}, label %{body_l}, label %{exit_l}")
        self.start_block(body_l)
        self.lower_block(body)
        yielded = self._yielded(body)
        nxt = self.fresh()
        self.emit(f"{nxt} = add {lt} {iv}, {self.ref(step)}")
        latch = self.block_label
        self.emit(f"br label %{header}")
        phis = [f"  {iv} = phi {lt} [ {self.ref(lb)}, %{pre} ], [ {nxt}, %{latch} ]"]
        for name, init, y, arg in zip(carried, inits, yielded, body.args[1:]):
            phis.append(f"  {name} = phi {llvm_type(arg.type)} [ {self.ref(init)}, %{pre} ], [ {y}, %{latch} ]")
        self.lines[phi_at:phi_at] = phis
        self.start_block(exit_l)
        for r, name in zip(op.results, carried):
            self.bind(r, name)

    def op_scf_while(self, op):
        before, after = op.blocks
        pre = self.block_label
        head, body_l, exit_l = self.label(), self.label(), self.label()
        self.emit(f"br label %{head}")
        self.start_block(head)
        phi_at = len(self.lines)
        names = []
        for arg in before.args:
            name = self.fresh("w")
            self.bind(arg, name)
            names.append(name)
        self.lower_block(before)
        cond_op = before.ops[-1]
        self.emit(f"br i1 {self.ref(cond_op.operands[0])}, label %{body_l}, label %{exit_l}")
        forwarded = [self.ref(v) for v in cond_op.operands[1:]]
        self.start_block(body_l)
        for arg, name in zip(after.args, forwarded):
            self.bind(arg, name)
        self.lower_block(after)
        yielded = self._yielded(after)
        latch = self.block_label
        self.emit(f"br label %{head}")
        phis = []
        for name, init, y, arg in zip(names, op.operands, yielded, before.args):
            phis.append(f"  {name} = phi {llvm_type(arg.type)} [ {self.ref(init)}, %{pre} ], [ {y}, %{latch} ]")
        self.lines[phi_at:phi_at] = phis
        self.start_block(exit_l)
        for r, name in zip(op.results, forwarded):
            self.bind(r, name)


_SMEM = "__tylo_shared"


def shared_memory_plan(kernel: Kernel) -> tuple[dict, int]:
    """Byte offsets of the kernel's shared arrays in its dynamic shared memory, and the total.

    All ``shared_array`` allocations live in one dynamic shared buffer so that
    more than 48 KB works; the launcher passes the total on every launch.
    """
    offsets = {}
    total = 0
    for sym, dtype, count, align in kernel.attrs.get("shared", []):
        total = -(-total // align) * align
        offsets[sym] = total
        total += count * dtype.itemsize
    return offsets, total


def fmod_function(bits: int) -> tuple[str, str]:
    """An exact C ``fmod`` for the IEEE format of ``bits`` (32 or 64) as LLVM IR: the name and the
    definition. Integer shift-and-subtract on the significands (each step exact), one step per
    binade between the operands, subnormals normalised with ctlz; NaN for y = 0, NaN y, inf/NaN x."""
    m = {32: 23, 64: 52}[bits]           # stored significand bits
    e_bits = bits - 1 - m
    i = f"i{bits}"
    f = {32: "float", 64: "double"}[bits]
    name = f"__tylo_fmod_f{bits}"
    sign = -(1 << (bits - 1))
    absmask = (1 << (bits - 1)) - 1
    inf = ((1 << e_bits) - 1) << m
    mmask = (1 << m) - 1
    hidden = 1 << m
    lead = bits - 1 - m                  # ctlz of a normalised significand

    def normalise(v):
        return f"""  %m{v}0 = and {i} %a{v}, {mmask}
  %e{v}0 = lshr {i} %a{v}, {m}
  %sub{v} = icmp eq {i} %e{v}0, 0
  %lz{v} = call {i} @llvm.ctlz.{i}({i} %m{v}0, i1 false)
  %sh{v} = sub {i} %lz{v}, {lead}
  %ms{v} = shl {i} %m{v}0, %sh{v}
  %es{v} = sub {i} 1, %sh{v}
  %mn{v} = or {i} %m{v}0, {hidden}
  %m{v} = select i1 %sub{v}, {i} %ms{v}, {i} %mn{v}
  %e{v} = select i1 %sub{v}, {i} %es{v}, {i} %e{v}0
"""

    text = f"""define internal {f} @{name}({f} %x, {f} %y) alwaysinline {{
entry:
  %ux = bitcast {f} %x to {i}
  %uy = bitcast {f} %y to {i}
  %ax = and {i} %ux, {absmask}
  %ay = and {i} %uy, {absmask}
  %sx = and {i} %ux, {sign}
  %yzero = icmp eq {i} %ay, 0
  %ynan = icmp ugt {i} %ay, {inf}
  %xinf = icmp uge {i} %ax, {inf}
  %bad0 = or i1 %yzero, %ynan
  %bad = or i1 %bad0, %xinf
  br i1 %bad, label %nan, label %check
nan:
  ret {f} 0x7FF8000000000000
check:
  %le = icmp ule {i} %ax, %ay
  br i1 %le, label %small, label %norm
small:
  %eq = icmp eq {i} %ax, %ay
  %sz = bitcast {i} %sx to {f}
  %r0 = select i1 %eq, {f} %sz, {f} %x
  ret {f} %r0
norm:
{normalise("x")}{normalise("y")}  br label %loop
loop:
  %mm = phi {i} [ %mx, %norm ], [ %mnext, %step ]
  %ee = phi {i} [ %ex, %norm ], [ %enext, %step ]
  %more = icmp sgt {i} %ee, %ey
  br i1 %more, label %body, label %tail
body:
  %d = sub {i} %mm, %my
  %dz = icmp eq {i} %d, 0
  br i1 %dz, label %zero, label %step
step:
  %dneg = icmp slt {i} %d, 0
  %m1 = select i1 %dneg, {i} %mm, {i} %d
  %mnext = shl {i} %m1, 1
  %enext = sub {i} %ee, 1
  br label %loop
zero:
  %zs = bitcast {i} %sx to {f}
  ret {f} %zs
tail:
  %d2 = sub {i} %mm, %my
  %d2z = icmp eq {i} %d2, 0
  br i1 %d2z, label %zero, label %fin
fin:
  %d2neg = icmp slt {i} %d2, 0
  %m2 = select i1 %d2neg, {i} %mm, {i} %d2
  %lz = call {i} @llvm.ctlz.{i}({i} %m2, i1 false)
  %sh = sub {i} %lz, {lead}
  %m3 = shl {i} %m2, %sh
  %e3 = sub {i} %ee, %sh
  %isnorm = icmp sgt {i} %e3, 0
  %mn = sub {i} %m3, {hidden}
  %eb = shl {i} %e3, {m}
  %rn = or {i} %mn, %eb
  %subsh = sub {i} 1, %e3
  %rs = lshr {i} %m3, %subsh
  %r = select i1 %isnorm, {i} %rn, {i} %rs
  %rsg = or {i} %r, %sx
  %res = bitcast {i} %rsg to {f}
  ret {f} %res
}}"""
    return name, text


def _intrinsic_suffix(t: ScalarType) -> str:
    return {"f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64"}[t.name]


def lower_kernel(kernel: Kernel, target: Target, lineinfo: bool = False) -> str:
    """The LLVM IR module text for one kernel; ``lineinfo`` adds the debug metadata that makes
    LLVM write ``.file``/``.loc`` for the kernel's Python lines (``codegen/lineinfo.py``)."""
    return _Lowering(kernel, target, lineinfo).run()


def has_lowering(op_name: str) -> bool:
    """Whether the emitter lowers IR op ``op_name``: a method of the emitter (core ops), a
    registered lowering (hardware ops), the math fallback, or a terminator its parent consumes."""
    if op_name in ("scf.yield", "scf.condition") or op_name in LOWERINGS:
        return True
    if hasattr(_Lowering, "op_" + op_name.replace(".", "_")):
        return True
    return op_name.startswith("math.")
