"""The effects an op definition declares match what its lowering emits: an op whose lowering marks its
inline asm ``convergent`` is declared ``convergent`` and vice versa, and an op's asm is ``sideeffect``
exactly when the op is not declared pure."""
import pytest
from nv_kernels import NV_KERNELS

from tylo.codegen import get_target, llvm
from tylo.codegen.registry import LOWERINGS
from tylo.ir import OPS


def _lowered_flags(monkeypatch):
    """Lower every nv kernel, recording for each registered op the flags of the asm it emitted."""
    seen, current = {}, []
    real_lower_op, real_asm = llvm._Lowering.lower_op, llvm._Lowering.asm

    def lower_op(self, op):
        current.append(op.name)
        try:
            return real_lower_op(self, op)
        finally:
            current.pop()

    def asm(self, template, constraints, out_types=(), args=(), side_effects=False, convergent=False):
        if current and current[-1] in LOWERINGS:
            flags = seen.setdefault(current[-1], set())
            flags.add((convergent, side_effects))
        return real_asm(self, template, constraints, out_types, args, side_effects, convergent)

    monkeypatch.setattr(llvm._Lowering, "lower_op", lower_op)
    monkeypatch.setattr(llvm._Lowering, "asm", asm)
    for kernel, signature, arch in NV_KERNELS.values():
        llvm.lower_kernel(kernel.lower(signature=signature, arch=arch), get_target(arch))
    return seen


def test_declared_effects_match_the_lowerings(monkeypatch):
    seen = _lowered_flags(monkeypatch)
    # the nv kernels reach every registered lowering that emits asm (shared_address only names a value)
    assert sorted(set(LOWERINGS) - set(seen)) == ["nv.shared_address"]
    wrong = []
    for name, flags in sorted(seen.items()):
        d = OPS[name]
        if {c for c, _ in flags} != {d.convergent}:
            wrong.append(f"{name}: declared convergent={d.convergent}, lowering emits {sorted(flags)}")
        if {s for _, s in flags} != {not d.pure}:
            wrong.append(f"{name}: declared memory={d.memory!r} pure={d.pure}, lowering emits {sorted(flags)}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("name", sorted(n for n in OPS if OPS[n].pure))
def test_pure_ops_have_no_effects(name):
    d = OPS[name]
    assert d.memory == "none"
