"""Stable text form of the IR (golden tests and ``tylo cache dump --stage ir``).

Generic syntax, one op per line:
``%3 = arith.add %1, %2 : i32`` and, for ops with blocks,
``%5 = scf.for %lb, %ub, %step, %init : f32 {`` then ``^(%iv: i32, %acc: f32):``.
Values are numbered in program order, so equal IR prints equal text.
"""
from __future__ import annotations

from .core import Block, Kernel, Op, Value

__all__ = ["print_kernel"]


def _attr(v) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(_attr(x) for x in v) + ")"
    return str(v)


class _Printer:
    def __init__(self, with_locs: bool):
        self.names: dict[int, str] = {}
        self.lines: list[str] = []
        self.with_locs = with_locs

    def name(self, v: Value) -> str:
        key = id(v)
        if key not in self.names:
            self.names[key] = f"%{len(self.names)}"
        return self.names[key]

    def ref(self, v: Value) -> str:
        return self.names.get(id(v), "%<undefined>")

    def block(self, block: Block, indent: int):
        pad = "  " * indent
        if block.args:
            args = ", ".join(f"{self.name(a)}: {a.type}" for a in block.args)
            self.lines.append(f"{pad[:-2] if indent else ''}^({args}):")
        for op in block.ops:
            self.op(op, indent)

    def op(self, op: Op, indent: int):
        pad = "  " * indent
        text = ""
        if op.results:
            text = ", ".join(self.name(r) for r in op.results) + " = "
        text += op.name
        if op.operands:
            text += " " + ", ".join(self.ref(v) for v in op.operands)
        if op.attrs:
            text += " {" + ", ".join(f"{k} = {_attr(op.attrs[k])}" for k in sorted(op.attrs)) + "}"
        if op.results:
            text += " : " + ", ".join(str(r.type) for r in op.results)
        if self.with_locs:
            text += f"  loc({op.loc})"
        if op.blocks:
            self.lines.append(pad + text + " {")
            for i, blk in enumerate(op.blocks):
                if i:
                    self.lines.append(pad + "} {")
                self.block(blk, indent + 1)
            self.lines.append(pad + "}")
        else:
            self.lines.append(pad + text)


def print_kernel(kernel: Kernel, with_locs: bool = False) -> str:
    p = _Printer(with_locs)
    params = ", ".join(f"{p.name(prm.value)}: {prm.value.type}" for prm in kernel.params)
    header = f"kernel @{kernel.name}({params})"
    attrs = []
    if kernel.attrs.get("maxntid"):
        attrs.append(f"maxntid = {_attr(kernel.attrs['maxntid'])}")
    if kernel.attrs.get("param_align"):
        aligns = ", ".join(f"{k}: {v}" for k, v in sorted(kernel.attrs["param_align"].items()))
        attrs.append("param_align = {" + aligns + "}")
    if kernel.attrs.get("divisible_by_16"):
        attrs.append(f"divisible_by_16 = {_attr(tuple(kernel.attrs['divisible_by_16']))}")
    if attrs:
        header += " attributes {" + ", ".join(attrs) + "}"
    p.lines.append(header + " {")
    names = "  // params: " + ", ".join(f"{p.ref(prm.value)}={prm.name}" for prm in kernel.params)
    if kernel.params:
        p.lines.append(names)
    for op in kernel.body.ops:
        p.op(op, 1)
    p.lines.append("}")
    return "\n".join(p.lines) + "\n"
