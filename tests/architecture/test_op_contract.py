"""The op contract: every IR op is defined in tylo/ir, lowered by codegen, and either executed by the
interpreter or listed as not modelled yet (with a reason); each hardware feature has its module in
every layer, and those modules are where its definitions, lowerings and semantics live."""
import importlib
import importlib.util

import pytest

import tylo.interpreter as interp
from tylo.codegen import llvm
from tylo.codegen.registry import LOWERINGS
from tylo.interpreter.registry import NOT_MODELLED, THREAD_SEMANTICS, WARP_SEMANTICS, WARPGROUP_SEMANTICS, not_modelled
from tylo.ir import OPS, Builder, Kernel, OpDef, verify
from tylo.ir.nv import FEATURES, SHARED_MODULES
from tylo.ir.opdef import MEMORY_EFFECTS
from tylo.ir.registry import Registry
from tylo.ir.verifier import VerificationError

LAYERS = ("tylo.lang.{}", "tylo.ir.nv.{}", "tylo.codegen.ptx.{}", "tylo.interpreter.{}")


def _definitions_by_module():
    out = {}
    for name in FEATURES + SHARED_MODULES:
        module = importlib.import_module(f"tylo.ir.nv.{name}")
        out[name] = module.DEFINITIONS
    return out


def test_every_op_is_a_typed_definition():
    assert len(OPS) >= 95
    for name, d in OPS.items():
        assert isinstance(d, OpDef) and d.name == name
        assert d.memory in MEMORY_EFFECTS
        assert not (d.pure and d.memory != "none"), name
        assert len(set(d.attr_names)) == len(d.attr_names), name


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_has_a_lowering(name):
    assert llvm.has_lowering(name), f"{name} has no LLVM lowering (add one in tylo/codegen/ptx/<feature>.py)"


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_has_semantics_or_a_listed_reason(name):
    listed = name in NOT_MODELLED
    assert interp.has_semantics(name) != listed, (
        f"{name}: give it semantics in tylo/interpreter/<feature>.py or list it in NOT_MODELLED with a reason"
        if not listed else f"{name} has semantics but is also listed as not modelled")
    if listed:
        assert len(NOT_MODELLED[name].reason) > 20


def test_hardware_ops_are_all_defined_in_ir_nv():
    defined = {d.name for defs in _definitions_by_module().values() for d in defs}
    core = {n for n in OPS if n not in defined}
    # the core ops (ir/ops.py) are scalar, memory, control flow and the few thread-level nv ops
    assert all(n.split(".")[0] in ("arith", "math", "ptr", "mem", "scf", "nv") for n in core)
    assert {n for n in core if n.startswith("nv.")} == {
        "nv.sreg", "nv.barrier", "nv.shfl", "nv.atomic", "nv.assume", "nv.printf", "nv.pack2", "nv.unpack2"}


@pytest.mark.parametrize("feature", FEATURES)
def test_each_feature_has_its_module_in_every_layer(feature):
    for pattern in LAYERS:
        module = pattern.format(feature)
        assert importlib.util.find_spec(module) is not None, f"feature {feature}: {module} is missing"


@pytest.mark.parametrize("feature", FEATURES + SHARED_MODULES)
def test_feature_ops_are_lowered_and_interpreted_by_their_namesakes(feature):
    defs = _definitions_by_module()[feature]
    assert defs, f"tylo.ir.nv.{feature} defines no op"
    for d in defs:
        assert LOWERINGS[d.name].__module__ == f"tylo.codegen.ptx.{feature}", d.name
        if d.name in NOT_MODELLED:
            where = NOT_MODELLED[d.name].module
        else:
            impl = THREAD_SEMANTICS.get(d.name) or WARP_SEMANTICS.get(d.name) or WARPGROUP_SEMANTICS.get(d.name)
            where = impl.__module__
        assert where == f"tylo.interpreter.{feature}", d.name


def test_registries_accept_only_defined_ops_once():
    reg = Registry("test registry")
    with pytest.raises(ValueError, match="not a defined IR op"):
        reg.add("nv.no_such_op", object())
    with pytest.raises(ValueError, match="not a defined IR op"):
        reg.register("nv.wgmma.mma_sync")(lambda lw, op: None)
    reg.add("nv.tma.commit", 1)
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("nv.tma.commit", 2)
    with pytest.raises(ValueError, match="registered twice"):
        LOWERINGS.add("nv.mma.sync", lambda lw, op: None)


def test_running_a_not_modelled_op_says_why(monkeypatch):
    # every op has semantics now; an op listed as not modelled must still fail with its reason
    k = Kernel("k", [])
    Builder(k.body).create("nv.tma.commit", [], [])
    monkeypatch.delitem(THREAD_SEMANTICS._entries, "nv.tma.commit")
    not_modelled("bulk async-groups are not modelled", "nv.tma.commit", module="tylo.interpreter.tma")
    try:
        with pytest.raises(interp.InterpreterError, match="does not model nv.tma.commit yet: bulk async-groups"):
            interp.run(k, [])
    finally:
        del NOT_MODELLED._entries["nv.tma.commit"]


def _one_op_kernel(name, attrs):
    k = Kernel("k", [])
    Builder(k.body).create(name, [], [], attrs)
    return k


def test_verifier_checks_the_attribute_schema():
    verify(_one_op_kernel("nv.cp_async.wait", {"n": 2}))
    with pytest.raises(VerificationError, match="needs attribute 'n'"):
        verify(_one_op_kernel("nv.cp_async.wait", {}))
    with pytest.raises(VerificationError, match="attribute 'n' must be int"):
        verify(_one_op_kernel("nv.cp_async.wait", {"n": "2"}))
    with pytest.raises(VerificationError, match="attribute 'n' must be int"):
        verify(_one_op_kernel("nv.cp_async.wait", {"n": True}))
    with pytest.raises(VerificationError, match="unexpected attribute 'm'"):
        verify(_one_op_kernel("nv.cp_async.wait", {"n": 2, "m": 1}))
    with pytest.raises(VerificationError, match="must be one of"):
        verify(_one_op_kernel("nv.fence", {"kind": "proxy_sync"}))


def test_opdef_rejects_contradictory_effects():
    with pytest.raises(ValueError, match="pure op has no memory effect"):
        OpDef("x.y", 0, 0, True, memory="write")
    with pytest.raises(ValueError, match="memory effect must be one of"):
        OpDef("x.y", 0, 0, False, memory="sometimes")


def test_effects_of_some_ops():
    assert OPS["nv.wgmma.mma_async"].convergent and not OPS["nv.wgmma.mma_async"].pure
    assert OPS["mem.load"].memory == "read" and OPS["mem.store"].memory == "write"
    assert OPS["arith.add"].pure and OPS["nv.shared_address"].pure
    assert OPS["nv.barrier"].convergent and OPS["nv.barrier"].memory == "read_write"
