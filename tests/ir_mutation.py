"""Mutants of a kernel's IR for the hazard checker's mutation tests (tests/interpreter and tests/blackwell):
one synchronisation op removed or weakened, addressed as ``(op name, occurrence)`` in program order
(``sync_sites``).

Kinds (``mutate``):
* ``remove``: the op is deleted; ops that pass values through (``wgmma.fence`` and ``wgmma.wait_group``
  their accumulators, ``tcgen05.wait::ld`` its loaded registers) forward their operands to their
  results' users.
* ``flip_parity``: an ``mbarrier.wait`` waits on the other parity (``parity ^ 1``).
* ``drop_tx``: an ``mbarrier.arrive_expect_tx`` becomes a plain ``mbarrier.arrive`` (no transaction
  bytes expected: the phase can complete before the TMA's bytes land).
* ``half_tx``: an ``mbarrier.arrive_expect_tx`` expects half of its bytes.
* ``early``: an ``mbarrier.arrive`` (with the ``if`` that guards it, up to the block that holds the
  nearest ``wgmma.wait_group`` before it) moves to just before that wait: a stage or tile is released
  while the WGMMA reading it may still run.
* ``early_tma``: the same before the nearest ``cp.async.bulk.wait_group[.read]``: a buffer is released
  while a TMA store may still read it.
* ``pending+1`` / ``pending-1``: a ``wgmma.wait_group n`` waits with ``n + 1`` (too early: one more group
  left in flight) or ``n - 1`` (too late: one more group completed).
"""
import copy

from tylo.ir.core import Op

__all__ = ["KINDS", "sync_sites", "find", "mutate"]

KINDS = ("remove", "flip_parity", "drop_tx", "half_tx", "early", "early_tma", "pending+1", "pending-1")


def _positions(block):
    """``(block, index, op)`` of every op under ``block``, in program order (``Op.walk``'s order)."""
    for i, op in enumerate(block.ops):
        yield block, i, op
        for b in op.blocks:
            yield from _positions(b)


def sync_sites(kernel, names):
    """``(name, occurrence)`` of every op named in ``names``, in program order."""
    seen = {}
    out = []
    for op in kernel.body.walk():
        if op.name in names:
            k = seen.get(op.name, 0)
            seen[op.name] = k + 1
            out.append((op.name, k))
    return out


def find(kernel, name, occurrence):
    """``(block, index, op)`` of occurrence ``occurrence`` of op ``name`` (numbered as ``sync_sites`` does)."""
    k = 0
    for block, i, op in _positions(kernel.body):
        if op.name == name:
            if k == occurrence:
                return block, i, op
            k += 1
    raise LookupError((name, occurrence))


def _path(block, target):
    """``[(block, index, op), ...]`` from ``block`` down to ``target``, or None."""
    for i, op in enumerate(block.ops):
        if op is target:
            return [(block, i, op)]
        for b in op.blocks:
            rest = _path(b, target)
            if rest is not None:
                return [(block, i, op)] + rest
    return None


def _hoist_before_wait(kernel, op, wait="nv.wgmma.wait_group"):
    """Move ``op``'s outermost enclosing op that shares a block with an earlier ``wait`` op to just before
    the nearest such wait."""
    for block, i, outer in reversed(_path(kernel.body, op)):
        waits = [j for j in range(i) if block.ops[j].name == wait]
        if waits:
            del block.ops[i]
            block.ops.insert(waits[-1], outer)
            return
    raise LookupError(f"no {wait} before {op.name} at {op.loc}")


def _forward(kernel, mapping):
    for op in kernel.body.walk():
        op.operands = [mapping.get(id(v), v) for v in op.operands]


def _constant(value, ty, loc):
    return Op("arith.constant", [], [ty], {"value": value}, loc=loc)


def mutate(kernel, kind, name, occurrence):
    """A deep copy of ``kernel`` with one op changed (module docstring)."""
    k = copy.deepcopy(kernel)
    block, i, op = find(k, name, occurrence)
    if kind == "remove":
        del block.ops[i]
        n = len(op.results)
        _forward(k, {id(r): v for r, v in zip(op.results, op.operands[len(op.operands) - n:])})
    elif kind == "flip_parity":
        assert name == "nv.mbarrier.wait", name
        ty = op.operands[1].type
        one = _constant(1, ty, op.loc)
        flipped = Op("arith.xor", [op.operands[1], one.results[0]], [ty], loc=op.loc)
        block.ops[i:i] = [one, flipped]
        op.operands[1] = flipped.results[0]
    elif kind == "drop_tx":
        assert name == "nv.mbarrier.arrive_expect_tx", name
        arrive = Op("nv.mbarrier.arrive", [op.operands[0]], [r.type for r in op.results], loc=op.loc)
        block.ops[i] = arrive
        _forward(k, {id(r): v for r, v in zip(op.results, arrive.results)})
    elif kind == "half_tx":
        assert name == "nv.mbarrier.arrive_expect_tx", name
        two = _constant(2, op.operands[1].type, op.loc)
        half = Op("arith.idiv", [op.operands[1], two.results[0]], [op.operands[1].type], loc=op.loc)
        block.ops[i:i] = [two, half]
        op.operands[1] = half.results[0]
    elif kind == "early":
        assert name == "nv.mbarrier.arrive", name
        _hoist_before_wait(k, op)
    elif kind == "early_tma":
        assert name == "nv.mbarrier.arrive", name
        _hoist_before_wait(k, op, "nv.tma.wait")
    elif kind in ("pending+1", "pending-1"):
        assert name == "nv.wgmma.wait_group", name
        n = op.attrs["n"] + (1 if kind == "pending+1" else -1)
        assert n >= 0, (kind, name, occurrence)
        op.attrs = {**op.attrs, "n": n}
    else:
        raise ValueError(f"unknown mutation kind {kind!r}")
    return k
